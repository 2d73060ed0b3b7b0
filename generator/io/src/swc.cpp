#include "sparsecc/io/swc.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <string_view>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"

namespace sparsecc {
namespace {

std::string shorten(std::string_view s) {
  constexpr std::size_t kMax = 40;
  std::string out(s.substr(0, kMax));
  if (s.size() > kMax) out += "...";
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  return out;
}

std::int64_t field_int(std::string_view f, const char* what, const std::string& name, std::int64_t line) {
  std::int64_t v = 0;
  if (!parse_int(f, v)) throw_at_line(name, line, fmt::format("{} '{}' is not an integer", what, shorten(f)));
  return v;
}

double field_double(std::string_view f, const char* what, const std::string& name, std::int64_t line) {
  double v = 0;
  if (!parse_double(f, v))
    throw_at_line(name, line, fmt::format("{} '{}' is not a number", what, shorten(f)));
  if (!std::isfinite(v)) throw_at_line(name, line, fmt::format("{} '{}' is not finite", what, shorten(f)));
  if (std::fabs(v) > kMaxSwcCoordinate)
    throw_at_line(name, line, fmt::format("{} {} exceeds the limit of {:g} um", what, v, kMaxSwcCoordinate));
  return v;
}

}  // namespace

SwcFile parse_swc(std::span<const unsigned char> data, const std::string& name) {
  SwcFile out;
  out.name = name;
  std::string_view text(reinterpret_cast<const char*>(data.data()), data.size());
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  LineCursor cursor(text);
  std::string_view line;
  while (cursor.next(line)) {
    const std::int64_t ln = cursor.line_number();
    if (const auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    const auto f = split_fields(line);
    if (f.empty()) continue;
    if (f.size() != 7)
      throw_at_line(name, ln,
                    fmt::format("expected 7 fields (id type x y z radius parent), got {}", f.size()));
    SwcSample s;
    s.line = ln;
    s.id = field_int(f[0], "id", name, ln);
    if (s.id < 0) throw_at_line(name, ln, fmt::format("sample id {} is negative", s.id));
    const std::int64_t type = field_int(f[1], "type", name, ln);
    if (type < 0 || type > std::numeric_limits<std::int32_t>::max())
      throw_at_line(name, ln, fmt::format("type {} of sample {} is out of range", type, s.id));
    s.type = static_cast<std::int32_t>(type);
    s.x = field_double(f[2], "x", name, ln);
    s.y = field_double(f[3], "y", name, ln);
    s.z = field_double(f[4], "z", name, ln);
    s.radius = field_double(f[5], "radius", name, ln);
    if (s.radius < 0)
      throw_at_line(name, ln, fmt::format("radius {} of sample {} is negative", s.radius, s.id));
    s.parent = field_int(f[6], "parent", name, ln);
    if (s.parent < -1)
      throw_at_line(name, ln,
                    fmt::format("parent {} of sample {} is negative (only -1 marks a root)", s.parent, s.id));
    out.samples.push_back(s);
  }
  return out;
}

SwcFile read_swc(const std::string& path) {
  const Bytes bytes = read_input(path);
  return parse_swc(bytes, path);
}

const char* swc_type_name(std::int32_t type) {
  switch (type) {
    case 0:
      return "undefined";
    case 1:
      return "soma";
    case 2:
      return "axon";
    case 3:
      return "basal dendrite";
    case 4:
      return "apical dendrite";
    default:
      return "custom";
  }
}

}  // namespace sparsecc
