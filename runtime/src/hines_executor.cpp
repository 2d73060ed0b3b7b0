#include "sparsecc/runtime/hines_executor.hpp"

#include <cstring>
#include <utility>

#include "sparsecc/runtime/device.hpp"
#include "sparsecc/runtime/driver.hpp"

namespace sparsecc::rt {

HinesExecutor HinesExecutor::load_file(const std::string& path, const Context& ctx,
                                       const LoadOptions& options) {
  return load(read_bundle_file(path), path, ctx, options);
}

HinesExecutor HinesExecutor::load_bytes(std::span<const unsigned char> data, const std::string& name,
                                        const Context& ctx, const LoadOptions& options) {
  return load(parse_bundle(data, name), name, ctx, options);
}

HinesExecutor HinesExecutor::load(Bundle bundle, const std::string& name, const Context& ctx,
                                  const LoadOptions& options) {
  validate_bundle(bundle, name);
  if (bundle.metadata.op != "hines")
    throw BundleError(name + ": op is \"" + bundle.metadata.op + "\", not a Hines executor");
  if (bundle.metadata.target == "cpu")
    throw BundleError(
        name + ": a CPU executor (" + bundle.metadata.arch +
        "): a program links its code (sparsecc embed; sparsecc::rt::CpuSpmmExecutor / CpuHinesExecutor)");
  HinesExecutor ex;
  ex.ctx_ = &ctx;
  const ChosenImage chosen = choose_image(bundle, name, ctx, options);
  ex.loaded_from_ = chosen.from;
  ex.load_reason_ = chosen.reason;
  ctx.make_current();
  ex.module_ = std::make_unique<Module>(chosen.image, name + " (" + ex.loaded_from_ + ")");
  check_loaded_contract(bundle, *ex.module_, name, ex.loaded_from_);
  for (const KernelLaunch& l : bundle.metadata.hines.launches) {
    Launch launch;
    launch.fn = ex.module_->function(l.kernel);
    launch.grid = static_cast<unsigned>(l.grid);
    launch.block = static_cast<unsigned>(l.block);
    launch.shared_bytes = static_cast<unsigned>(l.shared_bytes);
    // A block's static and dynamic shared memory together above 48 KiB need the kernel's dynamic
    // limit raised first (cuLaunchKernel refuses otherwise); a device that has less than the launch
    // asks for fails here, naming the bundle and the kernel.
    if (l.shared_bytes > 0) {
      int static_bytes = 0;
      SPARSECC_CU(driver().cuFuncGetAttribute(&static_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, launch.fn));
      const std::int64_t total = static_bytes + l.shared_bytes;
      const std::int64_t allowed = ctx.device().max_shared_per_block_optin;
      if (total > allowed)
        throw BundleError(name + ": kernel " + l.kernel + " needs " + std::to_string(total) +
                          " bytes of shared memory a block (" + std::to_string(static_bytes) + " static, " +
                          std::to_string(l.shared_bytes) + " dynamic); this device allows " +
                          std::to_string(allowed));
      if (total > kDefaultSharedLimit) {
        try {
          SPARSECC_CU(driver().cuFuncSetAttribute(launch.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                  static_cast<int>(l.shared_bytes)));
        } catch (const DriverError& e) {
          throw BundleError(name + ": kernel " + l.kernel + " needs " + std::to_string(l.shared_bytes) +
                            " bytes of dynamic shared memory, which this device does not allow: " + e.what());
        }
      }
    }
    for (const LaunchArg& a : l.args) {
      launch.buffers.push_back(a.buffer);
      launch.values.push_back(a.value);
    }
    ex.launches_.push_back(std::move(launch));
  }
  ex.tables_ = DeviceBuffer(bundle.tables.size() * sizeof(std::int32_t));
  ex.tables_.upload(bundle.tables.data(), bundle.tables.size() * sizeof(std::int32_t));
  ex.workspace_ = DeviceBuffer(static_cast<std::size_t>(bundle.metadata.hines.workspace_bytes));
  ex.permutation_ = std::move(bundle.permutation);
  ex.metadata_ = std::move(bundle.metadata);
  return ex;
}

void HinesExecutor::run(CUdeviceptr d, CUdeviceptr u, CUdeviceptr l, CUdeviceptr b, CUdeviceptr x,
                        CUstream stream) const {
  if (!d || !u || !l || !b || !x)
    throw std::invalid_argument("HinesExecutor::run: d, u, l, b and x must not be null");
  ctx_->make_current();
  std::vector<std::uint64_t> storage;
  std::vector<void*> args;
  for (const Launch& launch : launches_) {
    const std::size_t n = launch.buffers.size();
    storage.assign(n, 0);
    args.assign(n, nullptr);
    for (std::size_t i = 0; i < n; ++i) {
      const std::string& buf = launch.buffers[i];
      const std::int64_t v = launch.values[i];
      if (buf == "i32") {
        const auto value = static_cast<std::int32_t>(v);
        static_assert(sizeof value <= sizeof storage[i]);
        std::memcpy(&storage[i], &value, sizeof value);
      } else {
        CUdeviceptr base = buf == "d"           ? d
                           : buf == "u"         ? u
                           : buf == "l"         ? l
                           : buf == "b"         ? b
                           : buf == "x"         ? x
                           : buf == "workspace" ? workspace_.get()
                                                : tables_.get();
        storage[i] = base + static_cast<std::uint64_t>(v);
      }
      args[i] = &storage[i];
    }
    rt::launch(launch.fn, launch.grid, launch.block, args.data(), stream, launch.shared_bytes);
  }
}

}  // namespace sparsecc::rt
