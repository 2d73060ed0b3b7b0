#include "sparsecc/model/conv_spec.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "sparsecc/io/npy.hpp"

namespace sparsecc {

namespace {

// Splits `text` at `sep` (empty parts kept, so that "3x" is refused).
std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

}  // namespace

ConvSpec parse_conv_spec(std::string_view text, const std::string& what) {
  const auto fail = [&](const std::string& why) {
    throw UsageError(fmt::format(
        "{} '{}': {} (expected [IxHxW or HxW],kK[xK],sS[xS],pP[xP] or pT:L:B:R, e.g. 64x56x56,k3,s1,p1)",
        what, text, why));
  };
  // Numbers of a field separated by `sep`: `counts` says how many may be given; each in lo..max.
  const auto numbers = [&](std::string_view field, std::string_view body, char sep,
                           std::initializer_list<std::size_t> counts, std::int64_t lo) {
    std::vector<std::int64_t> v;
    for (std::string_view part : split(body, sep)) {
      std::int64_t x = 0;
      if (part.empty() || !parse_int(part, x) || part.front() == '+' || part.front() == '-')
        fail(fmt::format("field '{}' holds '{}', not a number", field, part));
      if (x < lo || x > rt::kConvMaxExtent)
        fail(fmt::format("field '{}': {} is outside {}..{}", field, x, lo, rt::kConvMaxExtent));
      v.push_back(x);
    }
    if (std::find(counts.begin(), counts.end(), v.size()) == counts.end())
      fail(fmt::format("field '{}' has {} number(s)", field, v.size()));
    return v;
  };
  if (text.empty()) fail("empty");
  ConvSpec spec;
  const std::vector<std::string_view> fields = split(text, ',');
  std::set<char> seen;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const std::string_view f = fields[i];
    if (f.empty()) fail("an empty field");
    if (i == 0) {
      const auto v = numbers(f, f, 'x', {2, 3}, 1);
      if (v.size() == 3) spec.in_channels = v[0];
      spec.height = v[v.size() - 2];
      spec.width = v.back();
      continue;
    }
    const char key = f.front();
    const std::string_view body = f.substr(1);
    if (key != 'k' && key != 's' && key != 'p')
      fail(fmt::format("field '{}' is none of kK (kernel), sS (stride), pP (padding){}", f,
                       f.find('x') != std::string_view::npos ? "; the input image IxHxW comes first" : ""));
    if (!seen.insert(key).second) fail(fmt::format("field '{}' repeats '{}'", f, key));
    if (key == 'k') {
      const auto v = numbers(f, body, 'x', {1, 2}, 1);
      spec.kernel_h = v[0];
      spec.kernel_w = v.back();
    } else if (key == 's') {
      const auto v = numbers(f, body, 'x', {1, 2}, 1);
      spec.stride_h = v[0];
      spec.stride_w = v.back();
    } else if (body.find(':') != std::string_view::npos) {
      const auto v = numbers(f, body, ':', {4}, 0);
      spec.pad_top = v[0], spec.pad_left = v[1], spec.pad_bottom = v[2], spec.pad_right = v[3];
    } else {
      const auto v = numbers(f, body, 'x', {1, 2}, 0);
      spec.pad_top = spec.pad_bottom = v[0];
      spec.pad_left = spec.pad_right = v.back();
    }
  }
  return spec;
}

std::string conv_spec_string(const rt::ConvGeometry& g) {
  return fmt::format("{}x{}x{},k{}x{},s{}x{},p{}:{}:{}:{}", g.in_channels, g.height, g.width, g.kernel_h,
                     g.kernel_w, g.stride_h, g.stride_w, g.pad_top, g.pad_left, g.pad_bottom, g.pad_right);
}

rt::ConvGeometry conv_geometry_for(const ConvSpec& spec, rt::ConvLayout layout, std::int64_t rows,
                                   std::int64_t cols, const std::vector<std::int64_t>& stored_shape,
                                   const std::string& file, const std::string& tensor,
                                   const std::string& what) {
  const auto bad_weight = [&](const std::string& why) {
    SourceLocation where = SourceLocation::in_file(file);
    where.tensor = tensor;
    throw InputError(where, why);
  };
  rt::ConvGeometry g;
  g.layout = layout;
  g.height = spec.height;
  g.width = spec.width;
  g.stride_h = spec.stride_h;
  g.stride_w = spec.stride_w;
  g.pad_top = spec.pad_top;
  g.pad_left = spec.pad_left;
  g.pad_bottom = spec.pad_bottom;
  g.pad_right = spec.pad_right;
  g.in_channels = spec.in_channels;
  g.kernel_h = spec.kernel_h;
  g.kernel_w = spec.kernel_w;
  if (stored_shape.size() == 4) {
    // O, I, kh, kw: what the spec leaves out, and a check of what it gives.
    const auto take = [&](std::int64_t& v, std::int64_t stored, const char* name) {
      if (v == 0)
        v = stored;
      else if (v != stored)
        bad_weight(fmt::format("the weight of shape {} (O, I, kh, kw) has {} {}, but {} gives {}",
                               shape_string(stored_shape), stored, name, what, v));
    };
    take(g.in_channels, stored_shape[1], "input channels");
    take(g.kernel_h, stored_shape[2], "kernel rows");
    take(g.kernel_w, stored_shape[3], "kernel columns");
  } else {
    if (g.kernel_h == 0)
      throw UsageError(
          fmt::format("{}: the weight is a {}x{} matrix; give the kernel (kK or kKHxKW) in the "
                      "geometry (a 4-D OIHW weight gives it)",
                      what, rows, cols));
    const std::int64_t taps = g.kernel_h * g.kernel_w;
    if (g.in_channels == 0) {
      if (cols % taps != 0)
        bad_weight(
            fmt::format("the weight's {} columns are not a multiple of the kernel's {}x{} = {} taps "
                        "(columns = input channels x kh x kw)",
                        cols, g.kernel_h, g.kernel_w, taps));
      g.in_channels = cols / taps;
    }
  }
  if (const auto errors = rt::check_conv_geometry(g); !errors.empty())
    throw UsageError(fmt::format("{}: the geometry {} is invalid: {}", what, conv_spec_string(g),
                                 fmt::join(errors, "; ")));
  if (cols != g.k())
    bad_weight(
        fmt::format("the weight has {} columns, but the geometry's {} input channels x {}x{} kernel "
                    "need {} (columns = I x kh x kw)",
                    cols, g.in_channels, g.kernel_h, g.kernel_w, g.k()));
  if (rows < 1) bad_weight("the weight has no rows (output channels)");
  return g;
}

}  // namespace sparsecc
