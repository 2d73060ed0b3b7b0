// Helpers shared by the fuzz targets of the tensor readers.
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

#include "sparsecc/matrix/dense.hpp"

namespace sparsecc::fuzz {

// Same name, dtype, shape and bit-identical values.
inline bool same_tensor(const Tensor& x, const Tensor& y) {
  if (x.name != y.name || x.dtype != y.dtype || x.shape != y.shape || x.data.size() != y.data.size())
    return false;
  for (std::size_t i = 0; i < x.data.size(); ++i)
    if (std::bit_cast<std::uint64_t>(x.data[i]) != std::bit_cast<std::uint64_t>(y.data[i])) return false;
  return true;
}

inline bool same_tensors(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t k = 0; k < a.size(); ++k)
    if (!same_tensor(a[k], b[k])) return false;
  return true;
}

}  // namespace sparsecc::fuzz
