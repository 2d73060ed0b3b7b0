// The LLM-layer suite of sparsecc_llm_bench (issue 47), CPU side: the layer shapes, pruned weight
// matrices made fast enough for 28672 x 8192 at 50 % (117 M nonzeros; rows in parallel, each row from
// its own seeded generator so the matrix does not depend on the thread count), and the fp64 reference
// on a sample of rows, which is what makes checking such layers affordable.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sparsecc/matrix/csr.hpp"

namespace sparsecc::bench {

struct LlmShape {
  std::int64_t m = 0, k = 0;  // the weight is M x K; C = A B with B K x N
  std::string name() const;   // "4096x11008"
};

// 4096x4096, 4096x11008, 11008x4096, 4096x14336, 14336x4096, 8192x8192, 8192x28672, 28672x8192.
const std::vector<LlmShape>& llm_shapes();

// "MxK" (both at least 1); UsageError otherwise.
LlmShape parse_llm_shape(std::string_view text);

enum class LlmPattern {
  random,     // every row keeps exactly round((1 - s) K) nonzeros at uniformly random columns (Wanda-style)
  magnitude,  // i.i.d. N(0, 1) weights, kept where |w| exceeds the global threshold of sparsity s
};
std::string_view llm_pattern_name(LlmPattern p);      // "random", "magnitude"
LlmPattern parse_llm_pattern(std::string_view name);  // UsageError for another word

// The pruned M x K weight matrix. Values are float32-representable (source_dtype f32):
// - random: N(0, 1) values at the kept positions, magnitudes below 2^-8 raised to 2^-8 (no value
//   rounds to zero or to a subnormal in fp16);
// - magnitude: the threshold is the (1 + s) / 2 quantile of N(0, 1), so each weight is kept with
//   probability 1 - s and the sparsity of the matrix is s up to sampling noise (binomial per row);
//   the kept magnitudes are distributed as |N(0, 1)| above the threshold.
// Deterministic in (m, k, sparsity, seed) whatever `threads` (0: one per hardware thread).
// UsageError unless 0 <= sparsity < 1 and 1 <= m, k with k < 2^31.
CsrMatrix make_llm_matrix(std::int64_t m, std::int64_t k, double sparsity, LlmPattern pattern,
                          std::uint64_t seed, unsigned threads = 0);

// The standard normal quantile: x with P(N(0, 1) <= x) = p, for 0 < p < 1 (relative error ~1e-9).
double inverse_normal_cdf(double p);

// `count` rows spread over 0..m-1, ascending and distinct: one in each of `count` equal bands, at an
// offset that varies from band to band (so the sample does not sit at one position of every tile),
// the first and last rows included. All rows when count <= 0 or count >= m.
std::vector<std::int64_t> sample_rows(std::int64_t m, std::int64_t count);

// The fp64 rows `rows` of A B, B K x N row-major: rows.size() x N, row-major.
std::vector<double> reference_rows(const CsrMatrix& a, const std::vector<double>& b, std::int64_t n,
                                   const std::vector<std::int64_t>& rows);

// The rows `rows` of a row-major matrix with `cols` columns. When any entry of `full` (sampled or not)
// is not finite the first entry of the result is NaN, so that a NaN left anywhere in a poisoned output
// fails the check.
std::vector<double> pick_rows(const std::vector<double>& full, std::int64_t cols,
                              const std::vector<std::int64_t>& rows);

}  // namespace sparsecc::bench
