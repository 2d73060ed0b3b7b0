// fp64 CPU reference for sparse 3x3 convolution (NCHW, batched, zero padding, stride), by direct
// loops over the output; the oracle for generated convolution kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/matrix/dense.hpp"
#include "sparsecc/runtime/conv_geometry.hpp"

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

// The convolution of a sparse filter bank W (O x I*kh*kw, column (i * kh + dy) * kw + dx: the
// im2col form, rt::ConvGeometry) with `batch` images X in g.layout, by direct loops over the output in
// fp64: Y (batch x O x OH x OW, in g.layout), with (*bias)[o] added when given and max(0, .) when relu.
// Throws UsageError on an invalid geometry or sizes that disagree with it.
std::vector<double> conv2d(const CsrMatrix& W, const std::vector<double>& x, const rt::ConvGeometry& g,
                           std::int64_t batch, const std::vector<double>* bias = nullptr, bool relu = false);

// The im2col matrix of image `image` of X (g.layout): K x (OH * OW), K = I * kh * kw in W's column
// order, zero where a tap falls in the padding. What an SpMM executor multiplies when the convolution
// is lowered explicitly (the convolution executors read X instead).
DenseMatrix im2col(const rt::ConvGeometry& g, const std::vector<double>& x, std::int64_t image);

}  // namespace sparsecc
