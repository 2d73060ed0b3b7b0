// fp64 CPU reference for sparse 3x3 convolution (NCHW, batched, zero padding, stride), by direct
// loops over the output; the oracle for generated convolution kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "sparsecc/matrix/csr.hpp"

namespace sparsecc {

struct Conv3x3Shape {
  std::int64_t batch = 1;
  std::int64_t in_channels = 0;
  std::int64_t height = 0;
  std::int64_t width = 0;
  std::int64_t out_channels = 0;
  std::int64_t pad = 0;  // zero padding on every side
  std::int64_t stride = 1;

  std::int64_t out_height() const { return (height + 2 * pad - 3) / stride + 1; }
  std::int64_t out_width() const { return (width + 2 * pad - 3) / stride + 1; }
};

// W is the filter in im2col layout: out_channels rows, in_channels * 9 columns, column index
// c * 9 + ky * 3 + kx. input_nchw has batch * in_channels * height * width values. Returns
// batch x out_channels x out_height x out_width values (NCHW), with (*bias)[oc] added when given
// (out_channels entries) and max(0, .) applied when relu. Throws UsageError on inconsistent shapes,
// pad < 0, stride < 1, or an input smaller than the 3x3 window after padding.
std::vector<double> conv3x3(const CsrMatrix& W, const std::vector<double>& input_nchw,
                            const Conv3x3Shape& shape, const std::vector<double>* bias = nullptr,
                            bool relu = false);

}  // namespace sparsecc
