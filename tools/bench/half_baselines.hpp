// Half-precision vendor baselines for C = A·B (A M×K sparse and fixed, B K×N dense, C M×N, B and C
// row-major, fp16 or bf16 data with fp32 accumulation): cuBLAS dense GEMM on the dense form of A
// (cublasGemmEx's default and cuBLASLt's heuristic algorithms, the weight as stored and transposed),
// cuSPARSE SpMM on CSR A (every CSR algorithm) and on Blocked-ELL A (one per block size). Each output
// is checked against the fp64 CPU reference of the rounded inputs (A's values and B rounded to the
// precision, so the check measures the library's arithmetic, not the input rounding) before its time
// counts; a baseline that fails the check is reported as failed, never timed.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/baselines.hpp"
#include "bench/half_layouts.hpp"
#include "bench/timing.hpp"
#include "sparsecc/matrix/csr.hpp"

namespace sparsecc::bench {

// Relative L2 error tolerances against the fp64 reference of the rounded inputs, per output type.
inline constexpr double kTolHalf = 1e-2;  // fp16 output
inline constexpr double kTolBf16 = 2e-2;  // bf16 output
inline constexpr double half_tolerance(HalfPrecision p) {
  return p == HalfPrecision::f16 ? kTolHalf : kTolBf16;
}

// With timing.cold_l2 every launch rotates among copies of all its operands, as in run_baselines.
struct HalfBaselineOptions {
  TimingOptions timing;
  std::uint64_t seed = 7;  // B = random_half_matrix(K, N, p, seed)
  // cuBLAS: besides cublasGemmEx's default algorithm, the first this many cuBLASLt heuristic results
  // for each of the weight's two layouts (A as stored and A transposed) are checked and timed, and
  // cublas_<s> is the fastest (0: the cublasGemmEx default alone), as BaselineOptions.
  int cublas_algorithms = 4;
  std::vector<int> ell_block_sizes = {16, 32};  // one Blocked-ELL baseline each
  // CSR_ALG3 with row-major B and C produced NaN outputs and then a destroyed CUDA context on an H200
  // (cuSPARSE 12.6.3, fp32; see baselines.cpp), though it passed in fp16 and bf16 on an H100 with the
  // same cuSPARSE; it runs last so that such a failure cannot spoil the other baselines.
  bool csr_alg3 = true;
  // Blocked-ELL with column-major B and C (B transposed on the host, C read back transposed). Off:
  // row-major, falling back to column-major when the library rejects row-major (the note says so).
  bool bell_column_major = false;
  // Off: no cuBLAS results, and A's dense forms are neither made nor uploaded (a caller that has timed
  // cuBLAS at this M, K, N and precision already: its time does not depend on the values).
  bool cublas = true;
  // Rows of C checked (bench/llm_suite.hpp sample_rows; empty: every row): the fp64 reference is made
  // for these rows only, the outputs are compared there, and any non-finite value anywhere in a
  // NaN-poisoned output still fails the check.
  std::vector<std::int64_t> check_rows;
};

// Uploads A (dense, CSR and Blocked-ELL forms, values rounded to p) and B, runs, checks and times
// every baseline of precision p, and returns one result each, in this order (s = "fp16" or "bf16";
// the cuBLAS ones only with options.cublas):
//   cublas_<s>_gemmex, cublas_<s>_lt_wn<i> and cublas_<s>_lt_wt<i> (cuBLASLt's algorithm i with A as
//   stored and transposed), cublas_<s> (the fastest of them that passed; its note names it);
//   cusparse_csr_default_<s>, cusparse_csr_alg1_<s>, cusparse_csr_alg2_<s>, cusparse_csr_alg3_<s>,
//   cusparse_csr_best (the fastest CSR algorithm that passed; its note names it);
//   cusparse_bell<block>_<s> per block size, cusparse_bell_best.
// An algorithm the library rejects (NOT_SUPPORTED) is skipped with the status in its note. Errors
// inside one baseline are reported in its result; the others still run. NoDeviceError without a
// device; UsageError for sizes of 2^31 or more, N < 1, or values of A that overflow the precision.
std::vector<BaselineResult> run_half_baselines(const CsrMatrix& a, std::int64_t n, HalfPrecision p,
                                               const HalfBaselineOptions& options);

}  // namespace sparsecc::bench
