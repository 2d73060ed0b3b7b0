// Magnitude pruning: turn a dense weight matrix into the sparse layer sparsecc compiles.
#pragma once

#include <cstdint>

#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/matrix/dense.hpp"

namespace sparsecc {

// Keeps the round((1 - sparsity) * rows * cols) entries of largest magnitude (ties: lower row-major
// index first, so the result is deterministic) and drops the rest. Throws UsageError unless
// 0 <= sparsity <= 1.
CsrMatrix magnitude_prune(const DenseMatrix& dense, double sparsity, DType source_dtype = DType::f32);

// A dense matrix of float32-representable values uniform in [-1, 1) from a seed (SplitMix64).
DenseMatrix random_dense(std::int64_t rows, std::int64_t cols, std::uint64_t seed);

}  // namespace sparsecc
