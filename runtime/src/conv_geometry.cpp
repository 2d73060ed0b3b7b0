#include "sparsecc/runtime/conv_geometry.hpp"

#include <stdexcept>

namespace sparsecc::rt {

const char* to_string(ConvLayout layout) { return layout == ConvLayout::nhwc ? "nhwc" : "nchw"; }

ConvLayout parse_conv_layout(const std::string& word, const std::string& what) {
  if (word == "nchw" || word == "NCHW") return ConvLayout::nchw;
  if (word == "nhwc" || word == "NHWC") return ConvLayout::nhwc;
  throw std::invalid_argument(what + ": '" + word + "' is no layout (nchw or nhwc)");
}

std::array<std::int64_t, 4> ConvGeometry::input_shape(std::int64_t batch) const {
  if (layout == ConvLayout::nhwc) return {batch, height, width, in_channels};
  return {batch, in_channels, height, width};
}

std::array<std::int64_t, 4> ConvGeometry::output_shape(std::int64_t batch, std::int64_t out_channels) const {
  if (layout == ConvLayout::nhwc) return {batch, out_height(), out_width(), out_channels};
  return {batch, out_channels, out_height(), out_width()};
}

ConvGeometry::Strides ConvGeometry::input_strides() const {
  if (layout == ConvLayout::nhwc) return {height * width * in_channels, 1, width * in_channels, in_channels};
  return {in_channels * height * width, height * width, width, 1};
}

ConvGeometry::Strides ConvGeometry::output_strides(std::int64_t out_channels) const {
  const std::int64_t oh = out_height(), ow = out_width();
  if (layout == ConvLayout::nhwc) return {oh * ow * out_channels, 1, ow * out_channels, out_channels};
  return {out_channels * oh * ow, oh * ow, ow, 1};
}

std::vector<std::string> check_conv_geometry(const ConvGeometry& g) {
  std::vector<std::string> e;
  const auto extent = [&](const char* name, std::int64_t v, std::int64_t lo) {
    if (v < lo || v > kConvMaxExtent)
      e.push_back(std::string(name) + " is " + std::to_string(v) + ", outside " + std::to_string(lo) + ".." +
                  std::to_string(kConvMaxExtent));
  };
  extent("in_channels", g.in_channels, 1);
  extent("height", g.height, 1);
  extent("width", g.width, 1);
  extent("kernel height", g.kernel_h, 1);
  extent("kernel width", g.kernel_w, 1);
  extent("stride height", g.stride_h, 1);
  extent("stride width", g.stride_w, 1);
  extent("pad top", g.pad_top, 0);
  extent("pad left", g.pad_left, 0);
  extent("pad bottom", g.pad_bottom, 0);
  extent("pad right", g.pad_right, 0);
  if (!e.empty()) return e;
  if (g.taps() > kConvMaxTaps)
    e.push_back("the kernel has " + std::to_string(g.taps()) + " taps; an executor takes at most " +
                std::to_string(kConvMaxTaps));
  if (g.pad_top >= g.kernel_h || g.pad_bottom >= g.kernel_h || g.pad_left >= g.kernel_w ||
      g.pad_right >= g.kernel_w)
    e.push_back("a padding is not smaller than the kernel (an output row or column would see only zeros)");
  if (g.height + g.pad_top + g.pad_bottom < g.kernel_h || g.width + g.pad_left + g.pad_right < g.kernel_w)
    e.push_back("the padded input is smaller than the kernel: no output pixel");
  return e;
}

nlohmann::json to_json(const ConvGeometry& g) {
  return {{"layout", to_string(g.layout)},
          {"in_channels", g.in_channels},
          {"height", g.height},
          {"width", g.width},
          {"kernel", {g.kernel_h, g.kernel_w}},
          {"stride", {g.stride_h, g.stride_w}},
          {"pads", {g.pad_top, g.pad_left, g.pad_bottom, g.pad_right}},
          {"out_height", g.out_height()},
          {"out_width", g.out_width()}};
}

ConvGeometry conv_geometry_from_json(const nlohmann::json& j, const std::string& what) {
  const auto fail = [&](const std::string& why) { throw std::invalid_argument(what + ": " + why); };
  if (!j.is_object()) fail("the convolution geometry is not an object");
  const auto integer = [&](const nlohmann::json& v, const std::string& key) {
    if (!v.is_number_integer()) fail("conv." + key + " is missing or not an integer");
    return v.get<std::int64_t>();
  };
  const auto field = [&](const char* key) {
    const auto it = j.find(key);
    return integer(it == j.end() ? nlohmann::json() : *it, key);
  };
  const auto list = [&](const char* key, std::size_t size) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_array() || it->size() != size)
      fail(std::string("conv.") + key + " is missing or not a list of " + std::to_string(size) + " integers");
    std::vector<std::int64_t> v;
    for (const auto& x : *it) v.push_back(integer(x, key));
    return v;
  };
  ConvGeometry g;
  const auto layout = j.find("layout");
  if (layout == j.end() || !layout->is_string()) fail("conv.layout is missing or not a string");
  try {
    g.layout = parse_conv_layout(layout->get<std::string>(), "conv.layout");
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
  g.in_channels = field("in_channels");
  g.height = field("height");
  g.width = field("width");
  const auto kernel = list("kernel", 2), stride = list("stride", 2), pads = list("pads", 4);
  g.kernel_h = kernel[0], g.kernel_w = kernel[1];
  g.stride_h = stride[0], g.stride_w = stride[1];
  g.pad_top = pads[0], g.pad_left = pads[1], g.pad_bottom = pads[2], g.pad_right = pads[3];
  if (const auto errors = check_conv_geometry(g); !errors.empty()) fail("conv: " + errors.front());
  if (field("out_height") != g.out_height() || field("out_width") != g.out_width())
    fail("conv.out_height / out_width disagree with the input, kernel, stride and pads");
  return g;
}

std::string describe(const ConvGeometry& g) {
  const auto pair = [](std::int64_t a, std::int64_t b) {
    return a == b ? std::to_string(a) : std::to_string(a) + "x" + std::to_string(b);
  };
  const bool even = g.pad_top == g.pad_bottom && g.pad_left == g.pad_right;
  return std::to_string(g.kernel_h) + "x" + std::to_string(g.kernel_w) + " s" + pair(g.stride_h, g.stride_w) +
         " p" +
         (even ? pair(g.pad_top, g.pad_left)
               : std::to_string(g.pad_top) + "," + std::to_string(g.pad_left) + "," +
                     std::to_string(g.pad_bottom) + "," + std::to_string(g.pad_right)) +
         " " + std::to_string(g.in_channels) + "x" + std::to_string(g.height) + "x" +
         std::to_string(g.width) + " " + to_string(g.layout);
}

}  // namespace sparsecc::rt
