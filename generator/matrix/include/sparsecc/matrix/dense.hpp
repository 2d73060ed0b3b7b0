// Dense row-major matrices and n-dimensional tensors as the readers return them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparsecc/common/dtype.hpp"

namespace sparsecc {

// Row-major dense matrix with fp64 storage.
struct DenseMatrix {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<double> data;  // rows * cols, row-major

  DenseMatrix() = default;
  DenseMatrix(std::int64_t r, std::int64_t c, double fill = 0.0)
      : rows(r), cols(c), data(static_cast<std::size_t>(r * c), fill) {}
  double& operator()(std::int64_t r, std::int64_t c) { return data[static_cast<std::size_t>(r * cols + c)]; }
  double operator()(std::int64_t r, std::int64_t c) const {
    return data[static_cast<std::size_t>(r * cols + c)];
  }
};

// An n-dimensional tensor read from a container (npy, npz, safetensors). Data is always in C
// (row-major) order, whatever order the file used; `dtype` is the element type in the file.
struct Tensor {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::vector<double> data;
  // Set only by container readers asked to keep tensors of dtypes they do not read (integers,
  // booleans, complex, strings): the dtype as the file names it ("<i8", "I64"); `shape` is set (and
  // its byte size checked), `data` is empty.
  std::string unread_dtype;

  // Number of elements; -1 when a dimension is negative or the product overflows int64.
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto s : shape)
      if (s < 0 || __builtin_mul_overflow(n, s, &n)) return -1;
    return n;
  }
};

}  // namespace sparsecc
