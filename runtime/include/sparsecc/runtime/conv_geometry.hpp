// The geometry of a sparse convolution executor: one type for the generator (the plan's problem) and
// the runtime (a bundle's metadata key "conv"). Plain C++ and nlohmann_json only (the CUDA-free format
// library, sparsecc_bundle_format).
//
// A convolution executor computes, for every image b of a batch given at run time,
//   Y[b, o, oy, ox] = sum over (i, dy, dx) of W[o, i, dy, dx] * X[b, i, oy * sh + dy - pt, ox * sw + dx - pl]
// (+ bias[o]) (ReLU), with X zero outside its H x W image (the padding). W is the filter bank as the
// sparse matrix A = O x (I * kh * kw), column k = (i * kh + dy) * kw + dx (ONNX's OIHW weight flattened,
// the im2col form); so an executor is an SpMM of A with the implicit im2col matrix of one image
// (N = OH * OW output pixels), reading X itself. X and Y are NCHW or NHWC (both the same layout);
// dilation 1.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sparsecc::rt {

enum class ConvLayout { nchw, nhwc };
const char* to_string(ConvLayout layout);  // "nchw", "nhwc"
// Throws std::invalid_argument naming `what` for another word.
ConvLayout parse_conv_layout(const std::string& word, const std::string& what = "layout");

// The most taps (kh * kw) a filter may have: a thread's validity mask of the taps is one 64-bit word.
inline constexpr std::int64_t kConvMaxTaps = 64;
// The largest extent of one dimension (channels, height, width, kernel, stride, padding): every index
// an executor forms fits its 64-bit arithmetic, and a tensor's element count fits in int64.
inline constexpr std::int64_t kConvMaxExtent = 1 << 20;

struct ConvGeometry {
  ConvLayout layout = ConvLayout::nchw;
  std::int64_t in_channels = 0, height = 0, width = 0;  // I, H, W of one input image
  std::int64_t kernel_h = 0, kernel_w = 0;
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;

  std::int64_t taps() const { return kernel_h * kernel_w; }
  std::int64_t k() const { return in_channels * taps(); }  // columns of A
  std::int64_t out_height() const { return (height + pad_top + pad_bottom - kernel_h) / stride_h + 1; }
  std::int64_t out_width() const { return (width + pad_left + pad_right - kernel_w) / stride_w + 1; }
  std::int64_t pixels() const { return out_height() * out_width(); }  // N: output pixels of an image
  // The shapes of X and Y for `batch` images and `out_channels` filters, in the layout's order
  // (N, C, H, W or N, H, W, C), and their element counts.
  std::array<std::int64_t, 4> input_shape(std::int64_t batch) const;
  std::array<std::int64_t, 4> output_shape(std::int64_t batch, std::int64_t out_channels) const;
  std::int64_t input_elements(std::int64_t batch) const { return batch * in_channels * height * width; }
  std::int64_t output_elements(std::int64_t batch, std::int64_t out_channels) const {
    return batch * out_channels * pixels();
  }
  // Element strides of X and Y: an image, a channel, a row, a column (in elements).
  struct Strides {
    std::int64_t image = 0, channel = 0, row = 0, col = 0;
  };
  Strides input_strides() const;
  // Column k of the filter bank: channel k / taps, tap t = k % taps = dy * kw + dx.
  struct Tap {
    std::int64_t channel = 0, tap = 0, dy = 0, dx = 0;
  };
  Tap tap_of(std::int64_t k) const {
    const std::int64_t t = k % taps();
    return {k / taps(), t, t / kernel_w, t % kernel_w};
  }
  // Elements of X from a pixel's window corner to tap t of channel 0 (channel i: add i times
  // input_strides().channel).
  std::int64_t tap_offset(std::int64_t t) const {
    const Strides s = input_strides();
    return t / kernel_w * s.row + t % kernel_w * s.col;
  }
  // Floats of the zero buffer a convolution kernel reads where a tap falls in the padding: the
  // channels' reach in X (an image in NCHW, a pixel's channels in NHWC).
  std::int64_t zero_elements() const { return (in_channels - 1) * input_strides().channel + 1; }
  Strides output_strides(std::int64_t out_channels) const;

  bool operator==(const ConvGeometry&) const = default;
};

// Every broken rule, as a sentence (empty when valid): extents in 1..kConvMaxExtent (paddings and
// strides in 0.. / 1..), taps at most kConvMaxTaps, paddings smaller than the kernel, and at least one
// output pixel.
std::vector<std::string> check_conv_geometry(const ConvGeometry& g);

// {"layout", "in_channels", "height", "width", "kernel": [kh, kw], "stride": [sh, sw],
//  "pads": [top, left, bottom, right], "out_height", "out_width"}; from_json throws
// std::invalid_argument naming `what` and the key for a missing, mistyped or invalid field (the out
// sizes, written for readers, must agree with the rest).
nlohmann::json to_json(const ConvGeometry& g);
ConvGeometry conv_geometry_from_json(const nlohmann::json& j, const std::string& what);

// "3x3 s1 p1 64x56x56 nchw": the geometry in a line.
std::string describe(const ConvGeometry& g);

}  // namespace sparsecc::rt
