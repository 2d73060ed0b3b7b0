// Benchmark problem suites over the shared data folder (see /work/shared/data/README.md): the 20
// SpMM problems of SparseRT's Table 1 and the DLMC ResNet-50 and Transformer matrices at 90 %.
// CPU only: listing a suite reads file names and headers, never a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "sparsecc/matrix/csr.hpp"

namespace sparsecc::bench {

// C = A·B with A (M×K) sparse and fixed, B (K×N) dense.
struct BenchProblem {
  std::string name;    // unique within a suite, e.g. "p03_rn50_128x512x784"
  std::string matrix;  // load_matrix spec (file or file.npz:tensor); empty for a synthetic matrix
  std::int64_t M = 0;
  std::int64_t K = 0;
  std::int64_t N = 0;
  std::string values;      // how the values were made, in words
  double prune_to = 0;     // > 0: magnitude-prune the loaded (or synthetic) matrix to this sparsity
  std::uint64_t seed = 1;  // values of a pattern-only .smtx file and of a synthetic matrix
  int count = 1;           // instances of this shape in the network (SparseRT Table 1 "Count")
  std::string network;     // the model the layer belongs to: "rn50", "transformer" or "mobilenet"
};

// SparseRT (PACT 2020) Table 1, problems 1-20, at sparsity 0.9 or 0.95 with N multiplied by
// `batch`. ResNet-50 (1-8) and Transformer (9-11) use the DLMC magnitude-pruning matrix of the same
// shape at that sparsity (values uniform in [-1, 1) from the seed); MobileNet-v1 (12-19) uses the
// real SparseRT weights (90 % only: at 95 % they are magnitude-pruned further). Problem 20's
// 1024×1024 layer is absent from the weights file: a synthetic random matrix, magnitude-pruned.
// Throws UsageError for another sparsity or batch < 1, InputError naming a missing or wrong file.
// The data folder: $SPARSECC_DATA_DIR when set, else ../shared/data.
std::string default_data_dir();

std::vector<BenchProblem> sparsert_suite(const std::filesystem::path& data_dir, double sparsity, int batch);

// Every DLMC rn50 and transformer matrix at 90 % (magnitude pruning), sorted by name: ResNet-50 with
// N from dlmc/rn50_batchsizes.txt (one image), Transformer with N = 256. InputError for a missing
// folder or file, a malformed batch-size line, or a matrix without a batch size.
std::vector<BenchProblem> dlmc_suite(const std::filesystem::path& data_dir);

// dlmc/rn50_batchsizes.txt (or a file like it): one "layer_name,N" a line, N >= 1 (N for one
// image). InputError naming the file and line for a malformed or repeated line.
std::map<std::string, std::int64_t> read_batch_sizes(const std::filesystem::path& path);

// The geometric mean of positive ratios; NaN for none.
double geomean(const std::vector<double>& ratios);

// The problem's matrix A: loaded (or generated), pruned when prune_to > 0, checked to be M×K
// (InputError otherwise).
CsrMatrix load_problem_matrix(const BenchProblem& problem);

// The bytes every executor of C = A*B at N must move (the data-movement bound, bench/traffic_bound.hpp):
// reads of the rows of B that A uses (its distinct columns) and of A's weights (4 bytes a nonzero,
// whether values or immediates in code), and the writes of all of C, in fp32.
struct TrafficBytes {
  std::size_t read = 0;   // (distinct columns of A) x N x 4 + nnz x 4
  std::size_t write = 0;  // M x N x 4
};
TrafficBytes traffic_bytes(const CsrMatrix& a, std::int64_t n);

// What an executor of one plan streams from L2 (warm): B as the plan loads it (every step of every
// block row loads B[k] for its columns, so a row of B is read once for each block row that uses it:
// loads x N x 4 bytes), A's representation once per column tile (the cubin, and the values or step
// table where the kernel reads them), and C. The traffic probe (bench/traffic_bound.hpp) moving these
// bytes bounds that plan's design rather than every executor: a row-split executor cannot beat it
// without fewer loads of B.
struct PlanTraffic {
  std::size_t read = 0;         // as above
  std::size_t unique_read = 0;  // the distinct bytes among them: all of B and A's representation once
  std::size_t write = 0;        // M x N x 4
};
// b_loads: spmm_plan_loads of the plan; representation_bytes: the cubin, plus the values array where
// the kernel reads it; column_tiles: the grid's x at N.
PlanTraffic plan_traffic(std::int64_t m, std::int64_t k, std::int64_t n, std::int64_t b_loads,
                         std::size_t representation_bytes, std::int64_t column_tiles);

}  // namespace sparsecc::bench
