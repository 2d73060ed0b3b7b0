// The SparseRT Table 1 and DLMC problem suites, and loading a problem's matrix.
#include "bench/suites.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string_view>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "sparsecc/io/load.hpp"
#include "sparsecc/matrix/prune.hpp"
#include "sparsecc/matrix/stats.hpp"

namespace sparsecc::bench {
namespace fs = std::filesystem;

namespace {

// One row of SparseRT's Table 1 and the matrix that stands for it here: a DLMC file stem for
// rn50/transformer, a tensor of mobilenet_v1_sparse90.npz, or nothing (synthetic).
struct TableRow {
  int id;
  std::int64_t M, K, N;
  std::string_view model;
  int count;
  std::string_view source;
};

constexpr std::array<TableRow, 20> kSparsertTable{{
    {1, 64, 256, 3136, "rn50", 2, "bottleneck_1_block_group1_1_1"},
    {2, 256, 64, 3136, "rn50", 2, "bottleneck_3_block_group1_1_1"},
    {3, 128, 512, 784, "rn50", 3, "bottleneck_1_block_group2_1_1"},
    {4, 512, 128, 784, "rn50", 3, "bottleneck_3_block_group2_1_1"},
    {5, 256, 1024, 196, "rn50", 5, "bottleneck_1_block_group3_1_1"},
    {6, 1024, 256, 196, "rn50", 5, "bottleneck_3_block_group3_1_1"},
    {7, 512, 2048, 49, "rn50", 3, "bottleneck_1_block_group4_1_1"},
    {8, 2048, 512, 49, "rn50", 3, "bottleneck_3_block_group4_1_1"},
    {9, 2048, 512, 256, "transformer", 12, "body_encoder_layer_0_ffn_conv1_fully_connected"},
    {10, 512, 2048, 256, "transformer", 12, "body_encoder_layer_0_ffn_conv2_fully_connected"},
    {11, 512, 512, 256, "transformer", 72,
     "body_encoder_layer_0_self_attention_multihead_attention_q_fully_connected"},
    {12, 64, 32, 12544, "mobilenet", 1, "contraction_1x1_0"},
    {13, 128, 64, 3136, "mobilenet", 1, "contraction_1x1_1"},
    {14, 128, 128, 3136, "mobilenet", 1, "contraction_1x1_2"},
    {15, 256, 128, 784, "mobilenet", 1, "contraction_1x1_3"},
    {16, 256, 256, 784, "mobilenet", 1, "contraction_1x1_4"},
    {17, 512, 256, 196, "mobilenet", 1, "contraction_1x1_5"},
    {18, 512, 512, 196, "mobilenet", 5, "contraction_1x1_6"},
    {19, 1024, 512, 49, "mobilenet", 1, "contraction_1x1_11"},
    {20, 1024, 1024, 49, "mobilenet", 1, ""},
}};

constexpr std::uint64_t kValueSeed = 1;
constexpr std::int64_t kTransformerN = 256;

void require_file(const fs::path& path) {
  if (!fs::is_regular_file(path)) throw_in_file(path.string(), "not found in the data folder");
}

fs::path dlmc_folder(const fs::path& data_dir, std::string_view model, std::string_view sparsity) {
  return data_dir / "dlmc" / model / "magnitude_pruning" / sparsity;
}

// Rows and columns from the header line "nrows, ncols, nnz" of a DLMC .smtx(.gz) file.
std::pair<std::int64_t, std::int64_t> smtx_shape(const fs::path& path) {
  require_file(path);
  Bytes bytes = read_input(path.string());
  LineCursor cursor(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  std::string_view line;
  std::int64_t rows = 0, cols = 0, nnz = 0;
  if (!cursor.next(line)) throw_at_line(path.string(), 1, "empty file, expected 'nrows, ncols, nnz'");
  auto fields = split_fields(line, true);
  if (fields.size() != 3 || !parse_int(fields[0], rows) || !parse_int(fields[1], cols) ||
      !parse_int(fields[2], nnz) || rows < 1 || cols < 1)
    throw_at_line(path.string(), 1, fmt::format("expected 'nrows, ncols, nnz', got '{}'", line));
  return {rows, cols};
}

// The .smtx(.gz) files of a folder as (stem, path), sorted by stem.
std::vector<std::pair<std::string, fs::path>> smtx_files(const fs::path& folder) {
  if (!fs::is_directory(folder)) throw_in_file(folder.string(), "folder not found in the data folder");
  std::vector<std::pair<std::string, fs::path>> files;
  for (const auto& entry : fs::directory_iterator(folder)) {
    std::string name = entry.path().filename().string();
    for (std::string_view suffix : {".smtx.gz", ".smtx"}) {
      if (name.size() > suffix.size() && name.ends_with(suffix)) {
        files.emplace_back(name.substr(0, name.size() - suffix.size()), entry.path());
        break;
      }
    }
  }
  if (files.empty()) throw_in_file(folder.string(), "holds no .smtx files");
  std::sort(files.begin(), files.end());
  return files;
}

std::string dlmc_values(std::string_view model, std::string_view sparsity) {
  return fmt::format("DLMC {} magnitude-pruning {} pattern; values uniform in [-1, 1) (SplitMix64 seed {})",
                     model, sparsity, kValueSeed);
}

}  // namespace

std::map<std::string, std::int64_t> read_batch_sizes(const fs::path& path) {
  require_file(path);
  Bytes bytes = read_input(path.string());
  LineCursor cursor(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  std::map<std::string, std::int64_t> sizes;
  std::string_view line;
  while (cursor.next(line)) {
    auto fields = split_fields(line, true);
    if (fields.empty()) continue;
    std::int64_t n = 0;
    if (fields.size() != 2 || !parse_int(fields[1], n) || n < 1)
      throw_at_line(path.string(), cursor.line_number(),
                    fmt::format("expected 'layer_name,N' with N >= 1, got '{}'", line));
    if (!sizes.emplace(std::string(fields[0]), n).second)
      throw_at_line(path.string(), cursor.line_number(), fmt::format("layer '{}' listed twice", fields[0]));
  }
  return sizes;
}

std::vector<BenchProblem> sparsert_suite(const fs::path& data_dir, double sparsity, int batch) {
  if (sparsity != 0.9 && sparsity != 0.95)
    throw UsageError(fmt::format("SparseRT suite: sparsity must be 0.9 or 0.95 (got {})", sparsity));
  if (batch < 1) throw UsageError(fmt::format("SparseRT suite: batch must be at least 1 (got {})", batch));
  const std::string level = sparsity == 0.9 ? "0.9" : "0.95";
  const fs::path npz = data_dir / "sparsert" / "mobilenet_v1_sparse90.npz";

  std::vector<BenchProblem> suite;
  for (const TableRow& row : kSparsertTable) {
    BenchProblem p;
    p.name = fmt::format("p{:02}_{}_{}x{}x{}", row.id, row.model, row.M, row.K, row.N * batch);
    p.M = row.M;
    p.K = row.K;
    p.N = row.N * batch;
    p.count = row.count;
    p.network = row.model;
    p.seed = kValueSeed;
    if (row.model != "mobilenet") {
      fs::path file = dlmc_folder(data_dir, row.model, level) / (std::string(row.source) + ".smtx.gz");
      auto [rows, cols] = smtx_shape(file);
      if (rows != row.M || cols != row.K)
        throw_in_file(file.string(), fmt::format("is {}x{}, SparseRT problem {} needs {}x{}", rows, cols,
                                                 row.id, row.M, row.K));
      p.matrix = file.string();
      p.values = dlmc_values(row.model, level);
    } else if (!row.source.empty()) {
      require_file(npz);
      auto names = list_tensors(npz.string());
      if (std::find(names.begin(), names.end(), row.source) == names.end())
        throw_in_file(npz.string(), fmt::format("has no tensor '{}'", row.source));
      p.matrix = fmt::format("{}:{}", npz.string(), row.source);
      p.values = fmt::format("MobileNet-v1 weights {} (SparseRT, 90 %)", row.source);
      if (sparsity != 0.9) {
        p.prune_to = sparsity;
        p.values += fmt::format(", magnitude-pruned further to {:g} %", sparsity * 100);
      }
    } else {
      p.prune_to = sparsity;
      p.values = fmt::format(
          "synthetic: uniform [-1, 1) (SplitMix64 seed {}) magnitude-pruned to {:g} % (the 1024x1024 layer "
          "contraction_1x1_12 is absent from mobilenet_v1_sparse90.npz)",
          kValueSeed, sparsity * 100);
    }
    suite.push_back(std::move(p));
  }
  return suite;
}

std::vector<BenchProblem> dlmc_suite(const fs::path& data_dir) {
  const std::string level = "0.9";
  auto batch_sizes = read_batch_sizes(data_dir / "dlmc" / "rn50_batchsizes.txt");
  std::vector<BenchProblem> suite;
  for (std::string_view model : {"rn50", "transformer"}) {
    for (const auto& [stem, file] : smtx_files(dlmc_folder(data_dir, model, level))) {
      BenchProblem p;
      p.name = fmt::format("{}/{}", model, stem);
      p.network = model;
      p.matrix = file.string();
      std::tie(p.M, p.K) = smtx_shape(file);
      if (model == "rn50") {
        auto it = batch_sizes.find(stem);
        if (it == batch_sizes.end())
          throw_in_file((data_dir / "dlmc" / "rn50_batchsizes.txt").string(),
                        fmt::format("no batch size for layer '{}'", stem));
        p.N = it->second;
      } else {
        p.N = kTransformerN;
      }
      p.seed = kValueSeed;
      p.values = dlmc_values(model, level);
      suite.push_back(std::move(p));
    }
  }
  return suite;
}

CsrMatrix load_problem_matrix(const BenchProblem& problem) {
  CsrMatrix a;
  if (problem.matrix.empty()) {
    if (problem.prune_to <= 0)
      throw UsageError(fmt::format("problem {}: a synthetic matrix needs prune_to > 0", problem.name));
    a = magnitude_prune(random_dense(problem.M, problem.K, problem.seed), problem.prune_to, DType::f32);
  } else {
    LoadOptions options;
    options.seed = problem.seed;
    a = load_matrix(problem.matrix, options);
    if (problem.prune_to > 0) a = magnitude_prune(dense_from_csr(a), problem.prune_to, a.source_dtype);
  }
  if (a.rows != problem.M || a.cols != problem.K)
    throw_in_file(problem.matrix.empty() ? problem.name : problem.matrix,
                  fmt::format("is {}x{}, problem {} expects {}x{}", a.rows, a.cols, problem.name, problem.M,
                              problem.K));
  return a;
}

std::string default_data_dir() {
  const char* env = std::getenv("SPARSECC_DATA_DIR");
  return env && *env ? env : "../shared/data";
}

TrafficBytes traffic_bytes(const CsrMatrix& a, std::int64_t n) {
  const auto columns = static_cast<std::size_t>(a.cols - nnz_stats(col_counts(a)).empty);  // B's rows read
  return {(columns * static_cast<std::size_t>(n) + static_cast<std::size_t>(a.nnz())) * sizeof(float),
          static_cast<std::size_t>(a.rows * n) * sizeof(float)};
}

PlanTraffic plan_traffic(std::int64_t m, std::int64_t k, std::int64_t n, std::int64_t b_loads,
                         std::size_t representation_bytes, std::int64_t column_tiles) {
  const auto f = sizeof(float);
  PlanTraffic t;
  t.read = static_cast<std::size_t>(b_loads * n) * f +
           representation_bytes * static_cast<std::size_t>(column_tiles);
  t.unique_read = std::min(t.read, static_cast<std::size_t>(k * n) * f + representation_bytes);
  t.write = static_cast<std::size_t>(m * n) * f;
  return t;
}

double geomean(const std::vector<double>& ratios) {
  if (ratios.empty()) return NAN;
  double s = 0;
  for (const double x : ratios) s += std::log(x);
  return std::exp(s / static_cast<double>(ratios.size()));
}

}  // namespace sparsecc::bench
