#include "sparsecc/reference/conv.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "sparsecc/common/error.hpp"

namespace sparsecc {

std::vector<double> conv3x3(const CsrMatrix& W, const std::vector<double>& input_nchw, const Conv3x3Shape& s,
                            const std::vector<double>* bias, bool relu) {
  validate(W);
  if (s.batch < 0 || s.in_channels < 0 || s.height < 0 || s.width < 0 || s.out_channels < 0)
    throw UsageError("conv3x3: negative shape");
  if (s.pad < 0 || s.stride < 1) throw UsageError(fmt::format("conv3x3: pad {} stride {}", s.pad, s.stride));
  if (s.height + 2 * s.pad < 3 || s.width + 2 * s.pad < 3)
    throw UsageError(fmt::format("conv3x3: {}x{} input with pad {} is smaller than the 3x3 window", s.height,
                                 s.width, s.pad));
  if (W.rows != s.out_channels || W.cols != s.in_channels * 9)
    throw UsageError(fmt::format("conv3x3: W is {}x{}, expected {}x{} (out_channels x in_channels*9)", W.rows,
                                 W.cols, s.out_channels, s.in_channels * 9));
  const std::int64_t plane = s.height * s.width;
  if (static_cast<std::int64_t>(input_nchw.size()) != s.batch * s.in_channels * plane)
    throw UsageError(fmt::format("conv3x3: input has {} values, expected {}x{}x{}x{}", input_nchw.size(),
                                 s.batch, s.in_channels, s.height, s.width));
  if (bias && static_cast<std::int64_t>(bias->size()) != s.out_channels)
    throw UsageError(
        fmt::format("conv3x3: bias has {} entries for {} output channels", bias->size(), s.out_channels));
  const std::int64_t oh = s.out_height(), ow = s.out_width();
  std::vector<double> out(static_cast<std::size_t>(s.batch * s.out_channels * oh * ow));
  std::size_t o = 0;
  for (std::int64_t n = 0; n < s.batch; ++n) {
    const double* image = input_nchw.data() + n * s.in_channels * plane;
    for (std::int64_t oc = 0; oc < s.out_channels; ++oc) {
      for (std::int64_t oy = 0; oy < oh; ++oy) {
        for (std::int64_t ox = 0; ox < ow; ++ox) {
          double acc = 0.0;
          for (std::int64_t k = W.row_ptr[oc]; k < W.row_ptr[oc + 1]; ++k) {
            const std::int64_t c = W.col_idx[k] / 9, ky = W.col_idx[k] % 9 / 3, kx = W.col_idx[k] % 3;
            const std::int64_t iy = oy * s.stride - s.pad + ky, ix = ox * s.stride - s.pad + kx;
            if (iy < 0 || iy >= s.height || ix < 0 || ix >= s.width) continue;  // zero padding
            acc += W.values[k] * image[c * plane + iy * s.width + ix];
          }
          if (bias) acc += (*bias)[oc];
          out[o++] = relu ? std::max(0.0, acc) : acc;
        }
      }
    }
  }
  return out;
}

}  // namespace sparsecc
