// Convolution geometries given on the command line (`sparsecc compile --conv SPEC`, compile-model's
// --layer-conv, the CMake function's CONV) and their check against the weight they are for.
//
// SPEC is a comma-separated list of fields, the first the input image and the others in any order:
//   [I x]H x W   the input image: channels I (optional: the weight gives it), height H, width W
//   kK | kKHxKW  the kernel (optional where the weight is 4-D: O, I, kh, kw; a 2-D weight needs it)
//   sS | sSHxSW  the stride (default 1)
//   pP | pPHxPW | pT:L:B:R   the zero padding: P on every side; PH above and below and PW left and
//                right; or top, left, bottom and right (ONNX's pads order x1_begin, x2_begin, x1_end,
//                x2_end) (default 0)
// e.g. "64x56x56,k3,s1,p1", "56x56,s2,p0:0:1:1", "3x224x224,k7x7,s2,p3". Dilation is 1; the layout
// (nchw or nhwc) is a separate option.
//
// The weight is the filter bank A = O x (I * kh * kw) (column (i * kh + dy) * kw + dx, ONNX's OIHW
// flattened), given either as that matrix or as the 4-D OIHW tensor.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sparsecc/runtime/conv_geometry.hpp"

namespace sparsecc {

struct ConvSpec {
  std::int64_t in_channels = 0;  // 0: from the weight
  std::int64_t height = 0, width = 0;
  std::int64_t kernel_h = 0, kernel_w = 0;  // 0: from the weight (4-D)
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  bool operator==(const ConvSpec&) const = default;
};

// Parses SPEC (above). A malformed field, a repeated one or a number outside 0..rt::kConvMaxExtent
// (1.. for extents and strides) is a UsageError naming `what` (the option) and the field.
ConvSpec parse_conv_spec(std::string_view text, const std::string& what = "--conv");

// The SPEC that parse_conv_spec reads back as `g` (layout aside): "IxHxW,kKHxKW,sSHxSW,pT:L:B:R".
std::string conv_spec_string(const rt::ConvGeometry& g);

// The geometry of a filter bank A of `rows` x `cols` (O x I*kh*kw) with `spec`, in `layout`:
// `stored_shape` is the weight as stored (4-D OIHW: I and the kernel come from it where the spec leaves
// them out, and must agree where it gives them; else the matrix's shape). A weight that disagrees with
// the geometry (rows, cols = I * kh * kw, a 4-D shape) is an InputError naming `file` and `tensor`; a
// geometry that breaks rt::check_conv_geometry's rules or a 2-D weight without a kernel in the spec is
// a UsageError naming `what`.
rt::ConvGeometry conv_geometry_for(const ConvSpec& spec, rt::ConvLayout layout, std::int64_t rows,
                                   std::int64_t cols, const std::vector<std::int64_t>& stored_shape,
                                   const std::string& file, const std::string& tensor = {},
                                   const std::string& what = "--conv");

}  // namespace sparsecc
