// sparsecc prune FILE[:tensor] --pattern P --sparsity S -o OUT.npy: prunes a dense (or densified
// sparse) weight matrix into a pattern the kernels favour and writes it as a dense .npy, with a
// summary of what was kept. The co-design half of the compiler: prune here, retrain or inspect, then
// `compile` the result.
#include "sparsecc/matrix/prune.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/output.hpp"
#include "sparsecc/io/load.hpp"
#include "sparsecc/io/npy.hpp"

namespace sparsecc::cli {

namespace {

struct PruneArgs {
  std::string input;
  std::string pattern;
  std::optional<double> sparsity;
  std::string output;
  std::uint64_t seed = 1;
  bool json = false;
};

// A dense copy larger than this (16 GiB as doubles, twice over with the pruned copy) is refused as
// bad input rather than exhausting memory; .mtx dimensions alone allow 2^48 entries.
constexpr std::int64_t kMaxDenseElements = std::int64_t{1} << 31;

struct DenseInput {
  DenseMatrix matrix;
  DType dtype = DType::f64;         // of the values in the file
  std::vector<std::int64_t> shape;  // as stored (4-D for a convolution weight)
};

bool is_container(const std::string& spec) {
  try {
    const InputFormat f = detect_format(parse_input_spec(spec).path);
    return f == InputFormat::npy || f == InputFormat::npz || f == InputFormat::safetensors;
  } catch (const InputError&) {
    return false;  // load_matrix resolves the odd specs and names the problem
  }
}

void check_dense_size(const std::string& spec, std::int64_t rows, std::int64_t cols) {
  if (cols > 0 && rows > kMaxDenseElements / cols)
    throw InputError(SourceLocation::in_file(parse_input_spec(spec).path),
                     fmt::format("{} x {} is too large to prune densely (limit {} entries)", rows, cols,
                                 kMaxDenseElements));
}

DenseInput from_csr(const std::string& spec, const CsrMatrix& a) {
  check_dense_size(spec, a.rows, a.cols);
  return {dense_from_csr(a), a.source_dtype, {a.rows, a.cols}};
}

// The input as a dense matrix. Tensors of rank 3 or 4 (convolution weights, (Cout, Cin, KH, KW) in
// PyTorch's layout) are pruned as the (first dimension, the rest) matrix, the view sparsecc compiles;
// sparse files are densified, so the pattern applies to their stored values and zeros alike.
DenseInput load_dense(const std::string& spec, std::uint64_t seed) {
  LoadOptions opts;
  opts.seed = seed;
  if (!is_container(spec)) return from_csr(spec, load_matrix(spec, opts));
  Tensor t;
  try {
    t = load_tensor(spec);
  } catch (const InputError&) {
    // A container of several tensors without ':NAME' may still hold exactly one matrix, which
    // load_matrix picks (or it explains which names to choose from). Other errors repeat.
    if (!parse_input_spec(spec).tensor.empty()) throw;
    return from_csr(spec, load_matrix(spec, opts));
  }
  if (t.shape.size() < 2)
    throw InputError(
        SourceLocation::at_byte(parse_input_spec(spec).path, -1, t.name),
        fmt::format("shape {} is not a matrix (prune needs 2 to 4 dimensions)", shape_string(t.shape)));
  std::int64_t rest = 1;
  for (std::size_t i = 1; i < t.shape.size(); ++i) rest *= t.shape[i];  // numel checked by the reader
  check_dense_size(spec, t.shape[0], rest);
  DenseInput in;
  in.matrix.rows = t.shape[0];
  in.matrix.cols = rest;
  in.matrix.data = std::move(t.data);
  in.dtype = t.dtype;
  in.shape = t.shape;
  return in;
}

// .npy or .npy.gz (read back gzip-transparently by every sparsecc reader); where it may be written
// is check_output_file's to say.
void check_output_name(const std::string& path) {
  std::string base = std::filesystem::path(path).filename().string();
  std::transform(base.begin(), base.end(), base.begin(), [](unsigned char c) { return std::tolower(c); });
  if (base.ends_with(".gz")) base.resize(base.size() - 3);
  if (base.size() <= 4 || !base.ends_with(".npy"))
    throw UsageError(fmt::format("-o {}: the output must be a .npy file (or .npy.gz)", path));
}

// The sparsity to prune at: --sparsity, or the one an n:m pattern fixes (which --sparsity may only
// repeat; prune_dense checks that).
double target_sparsity(const PruneArgs& a, const PrunePattern& p) {
  if (a.sparsity) {
    if (!(*a.sparsity >= 0.0 && *a.sparsity <= 1.0))
      throw UsageError(fmt::format("--sparsity must be in [0, 1], got {}", *a.sparsity));
    const std::optional<double> fixed = implied_sparsity(p);
    if (fixed && std::fabs(*a.sparsity - *fixed) > 1e-6)
      throw UsageError(fmt::format("pattern {} fixes the sparsity at {:.6g}; omit --sparsity or give that",
                                   to_string(p), *fixed));
    return *a.sparsity;
  }
  if (const std::optional<double> fixed = implied_sparsity(p)) return *fixed;
  throw UsageError(fmt::format("pattern {} needs --sparsity", to_string(p)));
}

int run_prune(const PruneArgs& a) {
  // Everything about the arguments is checked before the (possibly large) input is read.
  const PrunePattern pattern = parse_prune_pattern(a.pattern);
  const double sparsity = target_sparsity(a, pattern);
  check_output_name(a.output);
  check_output_file(a.output, input_paths({a.input}));

  const DenseInput in = load_dense(a.input, a.seed);
  const DenseMatrix pruned = prune_dense(in.matrix, pattern, sparsity);
  const PruneStats st = prune_stats(in.matrix, pruned);

  // f16, bf16 and f32 values are all exact in float32, the dtype frameworks load weights as; an f64
  // input (and Matrix Market text, read as f64) keeps f64 so no value is rounded.
  Tensor out;
  out.dtype = in.dtype == DType::f64 ? DType::f64 : DType::f32;
  out.shape = {pruned.rows, pruned.cols};
  out.data = pruned.data;
  write_npy(a.output, out);  // atomic: a temporary renamed over the output

  std::optional<std::int64_t> k;
  if (pattern.kind == PruneKind::rmb) k = rmb_blocklets_per_block(pattern, in.matrix.cols, sparsity);
  if (a.json) {
    nlohmann::json j;
    j["input"] = a.input;
    j["output"] = a.output;
    j["input_shape"] = in.shape;
    j["rows"] = st.rows;
    j["cols"] = st.cols;
    j["input_dtype"] = dtype_name(in.dtype);
    j["output_dtype"] = dtype_name(out.dtype);
    j["pattern"] = to_string(pattern);
    j["target_sparsity"] = sparsity;
    if (k) j["blocklets_per_block"] = *k;
    j["sparsity"] = st.sparsity;
    j["original_nnz"] = st.original_nnz;
    j["kept_nnz"] = st.kept_nnz;
    j["magnitude_fraction"] = st.magnitude_fraction;
    j["squared_fraction"] = st.squared_fraction;
    fmt::print("{}\n", j.dump(2));
    return kExitOk;
  }
  fmt::print("{}: {} x {} ({}){}\n", a.input, st.rows, st.cols, dtype_name(in.dtype),
             in.shape.size() > 2 ? fmt::format(", pruned as a matrix from shape {}", shape_string(in.shape))
                                 : std::string());
  std::string detail;
  if (k)
    detail = fmt::format(" (K = {} of {}x{} per block row{})", *k, pattern.tile_rows, pattern.tile_cols,
                         pattern.rmb_cols > 0
                             ? fmt::format(" of every {}x{} block", pattern.rmb_rows, pattern.rmb_cols)
                             : std::string());
  fmt::print("pattern {}{}, target sparsity {:.6g}\n", to_string(pattern), detail, sparsity);
  fmt::print("kept {} nonzeros of {} ({} entries): sparsity {:.4f}%\n", st.kept_nnz, st.original_nnz,
             st.rows * st.cols, 100.0 * st.sparsity);
  fmt::print("kept magnitude fraction {:.6f}, kept squared-magnitude fraction {:.6f}\n",
             st.magnitude_fraction, st.squared_fraction);
  fmt::print("wrote {} ({} {} x {})\n", a.output, dtype_name(out.dtype), st.rows, st.cols);
  return kExitOk;
}

}  // namespace

void add_prune(CLI::App& app, std::function<int()>& run) {
  auto args = std::make_shared<PruneArgs>();
  CLI::App* cmd = app.add_subcommand(
      "prune", "Prune a weight matrix into unstructured, block, N:M or RMB blocklet sparsity (.npy out)");
  cmd->add_option("input", args->input,
                  "FILE or FILE:TENSOR (.mtx, .smtx, .npy, .npz, .safetensors; .gz accepted; 3-D and 4-D "
                  "tensors are pruned as (first dimension, rest))")
      ->required();
  cmd->add_option("--pattern", args->pattern,
                  "unstructured | block:BHxBW | N:M | rmb:BLHxBLW[@BHxBW] (default RMB block: BLH rows x "
                  "the whole row)")
      ->required();
  cmd->add_option("--sparsity", args->sparsity,
                  "Fraction of entries to drop, in [0, 1] (N:M fixes it at 1 - N/M; RMB keeps "
                  "round((1 - S) * BW / BLW) blocklets, at least 1)");
  cmd->add_option("-o,--output", args->output, "Pruned dense matrix to write (.npy or .npy.gz)")
      ->check(kOutputPath)
      ->required();
  cmd->add_option("--seed", args->seed, "Seed for the values of pattern-only .smtx files")
      ->check(kNotNegative)
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "Print the summary as JSON");
  cmd->callback([&run, args] { run = [args]() -> int { return run_prune(*args); }; });
}

}  // namespace sparsecc::cli
