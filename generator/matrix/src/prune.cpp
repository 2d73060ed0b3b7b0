#include "sparsecc/matrix/prune.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/random.hpp"

namespace sparsecc {

CsrMatrix magnitude_prune(const DenseMatrix& dense, double sparsity, DType source_dtype) {
  if (!(sparsity >= 0.0 && sparsity <= 1.0))
    throw UsageError(fmt::format("magnitude_prune: sparsity must be in [0, 1], got {}", sparsity));
  const std::size_t total = dense.data.size();
  const auto keep = static_cast<std::size_t>(std::llround((1.0 - sparsity) * static_cast<double>(total)));
  std::vector<std::size_t> order(total);
  std::iota(order.begin(), order.end(), std::size_t{0});
  auto larger = [&](std::size_t a, std::size_t b) {
    const double ma = std::fabs(dense.data[a]), mb = std::fabs(dense.data[b]);
    return ma != mb ? ma > mb : a < b;
  };
  if (keep < total)
    std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(), larger);
  DenseMatrix kept(dense.rows, dense.cols, 0.0);
  for (std::size_t i = 0; i < keep; ++i) kept.data[order[i]] = dense.data[order[i]];
  return csr_from_dense(kept, source_dtype);
}

DenseMatrix random_dense(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  DenseMatrix d(rows, cols);
  SplitMix64 rng(seed);
  for (auto& v : d.data) v = rng.uniform_pm1();
  return d;
}

}  // namespace sparsecc
