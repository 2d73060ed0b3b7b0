#include "sparsecc/runtime/executor.hpp"

#include <cstring>
#include <stdexcept>
#include <utility>

#include "sparsecc/runtime/compressed_stream.hpp"
#include "sparsecc/runtime/device.hpp"
#include "sparsecc/runtime/driver.hpp"

namespace sparsecc::rt {

namespace {

std::span<const unsigned char> bytes_of(const std::string& s) {
  return {reinterpret_cast<const unsigned char*>(s.data()), s.size()};
}

// "sm_90a" runs where "sm_90" does; the suffix does not change the device it is for.
std::string base_arch(const std::string& arch) {
  return !arch.empty() && (arch.back() == 'a' || arch.back() == 'f') ? arch.substr(0, arch.size() - 1) : arch;
}

template <typename T>
DeviceBuffer upload(const std::vector<T>& v) {
  DeviceBuffer buf(v.size() * sizeof(T));
  buf.upload(v.data(), v.size() * sizeof(T));
  return buf;
}

}  // namespace

ChosenImage choose_image(const Bundle& bundle, const std::string& name, const Context& ctx,
                         const LoadOptions& options) {
  const BundleMetadata& md = bundle.metadata;
  const std::string device_arch = ctx.device().arch();
  if (!options.force_ptx && !bundle.cubin.empty() && base_arch(md.arch) == device_arch)
    return {bundle.cubin, "cubin", "the cubin for " + md.arch + " matches the device"};
  if (!bundle.ptx.empty())
    return {bytes_of(bundle.ptx), "ptx",
            options.force_ptx ? "PTX JIT, as requested"
            : bundle.cubin.empty()
                ? "PTX JIT: the bundle has no cubin"
                : "PTX JIT: the device is " + device_arch + ", the cubin is for " + md.arch};
  throw BundleError(name + (options.force_ptx ? ": PTX was requested but the bundle has none"
                                              : ": the cubin is for " + md.arch + " but the device is " +
                                                    device_arch + ", and the bundle has no PTX to JIT"));
}

void check_loaded_contract(const Bundle& bundle, const Module& module, const std::string& name,
                           const std::string& from) {
  const std::optional<std::vector<unsigned char>> bytes = module.global_bytes(kContractSymbol);
  if (!bytes)
    throw BundleError(name + ": the " + from + " defines no " + kContractSymbol +
                      " (the code contract that binds the metadata to the code; bundles written before it "
                      "existed have none): compile the executor again");
  if (bytes->size() % sizeof(std::uint64_t))
    throw BundleError(name + ": the " + from + "'s " + kContractSymbol + " has " +
                      std::to_string(bytes->size()) + " bytes, not whole 64-bit words");
  std::vector<std::uint64_t> words(bytes->size() / sizeof(std::uint64_t));
  if (!words.empty()) std::memcpy(words.data(), bytes->data(), bytes->size());
  check_contract(bundle, words, name, "loaded " + from);
}

SpmmExecutor SpmmExecutor::load_file(const std::string& path, const Context& ctx,
                                     const LoadOptions& options) {
  return load(read_bundle_file(path), path, ctx, options);
}

SpmmExecutor SpmmExecutor::load_bytes(std::span<const unsigned char> data, const std::string& name,
                                      const Context& ctx, const LoadOptions& options) {
  return load(parse_bundle(data, name), name, ctx, options);
}

SpmmExecutor SpmmExecutor::load(Bundle bundle, const std::string& name, const Context& ctx,
                                const LoadOptions& options) {
  validate_bundle(bundle, name);
  const BundleMetadata& md = bundle.metadata;
  if (md.op != "spmm") throw BundleError(name + ": op is \"" + md.op + "\", not an SpMM executor");
  if (bundle.metadata.target == "cpu")
    throw BundleError(
        name + ": a CPU executor (" + bundle.metadata.arch +
        "): a program links its code (sparsecc embed; sparsecc::rt::CpuSpmmExecutor / CpuHinesExecutor)");
  const bool opt_in = md.values_mode == "compressed";  // compressed kernels size their stages to the device
  if (md.shared_bytes > kDefaultSharedLimit && !opt_in)
    throw BundleError(name + ": metadata key 'shared_bytes': " + std::to_string(md.shared_bytes) +
                      " bytes of dynamic shared memory exceed the 48 KiB this runtime launches with");
  if (md.shared_bytes > ctx.device().max_shared_per_block_optin)
    throw BundleError(name + ": metadata key 'shared_bytes': " + std::to_string(md.shared_bytes) +
                      " bytes of dynamic shared memory exceed the " +
                      std::to_string(ctx.device().max_shared_per_block_optin) +
                      " this device allows a block");
  SpmmExecutor ex;
  ex.ctx_ = &ctx;
  const ChosenImage chosen = choose_image(bundle, name, ctx, options);
  ex.loaded_from_ = chosen.from;
  ex.load_reason_ = chosen.reason;
  const std::span<const unsigned char> image = chosen.image;
  ctx.make_current();
  ex.module_ = std::make_unique<Module>(image, name + " (" + ex.loaded_from_ + ")");
  check_loaded_contract(bundle, *ex.module_, name, ex.loaded_from_);
  ex.fn_ = ex.module_->function(md.kernel);
  if (md.shared_bytes > kDefaultSharedLimit)
    SPARSECC_CU(driver().cuFuncSetAttribute(ex.fn_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                            static_cast<int>(md.shared_bytes)));
  // Compressed kernels split K over a cluster of `splits` blocks; past the portable size it needs the
  // opt-in (the bundle's walk has bounded splits by kMaxClusterSplits).
  if (md.values_mode == "compressed")
    if (const auto splits = md.plan_summary.find("splits");
        splits != md.plan_summary.end() && splits->is_number_integer() &&
        splits->get<std::int64_t>() > kPortableClusterSplits)
      SPARSECC_CU(
          driver().cuFuncSetAttribute(ex.fn_, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1));
  ex.bias_ = upload(bundle.bias);
  ex.values_ = upload(bundle.values);
  ex.fragments_ = upload(bundle.fragments);
  if (md.conv) {
    ex.zeros_ = DeviceBuffer(static_cast<std::size_t>(md.conv->zero_elements()) * sizeof(float));
    ex.zeros_.fill32(0);
  }
  ex.metadata_ = std::move(bundle.metadata);
  // fp32 kernels with two adjacent columns a thread load and store them as one 64-bit word.
  const auto cols = ex.metadata_.plan_summary.find("cols_per_thread");
  if (ex.metadata_.dtype == "f32" && ex.metadata_.values_mode != "rolled" &&
      cols != ex.metadata_.plan_summary.end() && *cols == 2)
    ex.operand_alignment_ = 8;
  // Compressed kernels copy rows of B as 16-byte vectors where the compiled N is a multiple of 8; vector
  // kernels read a row of 4 as one 8-byte vector.
  if (ex.metadata_.values_mode == "compressed") {
    const bool fixed = ex.metadata_.n_mode == "fixed";
    ex.operand_alignment_ = fixed && ex.metadata_.n % 8 == 0 ? 16 : 4;
    if (fixed && ex.metadata_.n == 4 && ex.metadata_.plan_summary.value("vector", 0) == 1)
      ex.operand_alignment_ = 8;
  }
  return ex;
}

void SpmmExecutor::run(CUdeviceptr B, CUdeviceptr C, int n, CUstream stream, RunOptions options) const {
  const BundleMetadata& md = metadata_;
  if (md.conv)
    throw std::invalid_argument("SpmmExecutor::run: this executor is a convolution (" + describe(*md.conv) +
                                "): launch it with run_conv");
  if (!B || !C) throw std::invalid_argument("SpmmExecutor::run: B and C must not be null");
  if (B % operand_alignment_ != 0 || C % operand_alignment_ != 0)
    throw std::invalid_argument("SpmmExecutor::run: B and C must be aligned to " +
                                std::to_string(operand_alignment_) +
                                " bytes (the kernel's vector loads and stores)");
  if (n < 1)
    throw std::invalid_argument("SpmmExecutor::run: n = " + std::to_string(n) + " must be at least 1");
  if (md.n_mode == "fixed" && n != md.n)
    throw std::invalid_argument("SpmmExecutor::run: n = " + std::to_string(n) +
                                " but this executor was built for n = " + std::to_string(md.n) +
                                " (fixed mode)");
  // Runtime-N kernels keep the row pitch n * 4 in 32 bits.
  if (md.n_mode == "runtime" && n >= (1 << 30))
    throw std::invalid_argument("SpmmExecutor::run: n = " + std::to_string(n) + " must be below 2^30");
  // Column tiles along grid x (consecutive blocks share one block row's code in the instruction
  // cache), block rows along grid y.
  const std::int64_t tiles = (std::int64_t{n} + md.n_tile - 1) / md.n_tile;
  ctx_->make_current();
  CUdeviceptr b = B, c = C, bias = bias_.get(), values = values_.get(), fragments = fragments_.get();
  int nn = n;
  void* args[] = {&b, &c, &bias, &values, &nn, &fragments};  // fp32 kernels take the first five
  if (options.programmatic && md.programmatic_launch)
    launch_programmatic(fn_, unsigned(tiles), unsigned(md.block_rows), unsigned(md.block_x), args, stream,
                        unsigned(md.shared_bytes));
  else
    launch(fn_, unsigned(tiles), unsigned(md.block_x), args, stream, unsigned(md.shared_bytes),
           unsigned(md.block_rows));
}

void SpmmExecutor::run_conv(CUdeviceptr x, const std::array<std::int64_t, 4>& x_shape, CUdeviceptr y,
                            const std::array<std::int64_t, 4>& y_shape, CUstream stream,
                            RunOptions options) const {
  const BundleMetadata& md = metadata_;
  if (!md.conv)
    throw std::invalid_argument("SpmmExecutor::run_conv: this executor is no convolution: use run");
  if (!x || !y) throw std::invalid_argument("SpmmExecutor::run_conv: X and Y must not be null");
  const ConvGeometry& g = *md.conv;
  const std::int64_t batch = x_shape[0];
  const auto shape_text = [](const std::array<std::int64_t, 4>& s) {
    return std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]) + "x" +
           std::to_string(s[3]);
  };
  const std::string order = g.layout == ConvLayout::nhwc ? "NHWC" : "NCHW";
  if (batch < 1)
    throw std::invalid_argument("SpmmExecutor::run_conv: a batch of " + std::to_string(batch) + " images");
  if (x_shape != g.input_shape(batch))
    throw std::invalid_argument("SpmmExecutor::run_conv: X is " + shape_text(x_shape) +
                                " but this executor (" + describe(g) + ") takes " +
                                shape_text(g.input_shape(batch)) + " (" + order + ")");
  if (y_shape != g.output_shape(batch, md.m))
    throw std::invalid_argument("SpmmExecutor::run_conv: Y is " + shape_text(y_shape) +
                                " but this executor (" + describe(g) + ", " + std::to_string(md.m) +
                                " filters) writes " + shape_text(g.output_shape(batch, md.m)) + " (" + order +
                                ")");
  // The kernel's columns are the batch's pixels: n = images x pixels of an image.
  const std::int64_t n = batch * md.n;
  if (n >= (std::int64_t{1} << 30))
    throw std::invalid_argument("SpmmExecutor::run_conv: " + std::to_string(batch) + " images of " +
                                std::to_string(md.n) +
                                " pixels; an executor takes fewer than 2^30 pixels a run");
  const std::int64_t tiles = (n + md.n_tile - 1) / md.n_tile;
  ctx_->make_current();
  CUdeviceptr b = x, c = y, bias = bias_.get(), values = values_.get(), zeros = zeros_.get();
  int nn = static_cast<int>(n);
  void* args[] = {&b, &c, &bias, &values, &nn, &zeros};
  if (options.programmatic && md.programmatic_launch)
    launch_programmatic(fn_, unsigned(tiles), unsigned(md.block_rows), unsigned(md.block_x), args, stream,
                        unsigned(md.shared_bytes));
  else
    launch(fn_, unsigned(tiles), unsigned(md.block_x), args, stream, unsigned(md.shared_bytes),
           unsigned(md.block_rows));
}

}  // namespace sparsecc::rt
