#include "sparsecc/common/dtype.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <ostream>

#include "sparsecc/common/error.hpp"

namespace sparsecc {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  if (name == "f16") return DType::f16;
  if (name == "bf16") return DType::bf16;
  if (name == "f32") return DType::f32;
  if (name == "f64") return DType::f64;
  return std::nullopt;
}

DType require_dtype(std::string_view name, std::string_view what, std::initializer_list<DType> allowed) {
  const std::optional<DType> t = parse_dtype(name);
  if (t && (allowed.size() == 0 || std::find(allowed.begin(), allowed.end(), *t) != allowed.end())) return *t;
  std::string names;
  const std::initializer_list<DType> all = {DType::f16, DType::bf16, DType::f32, DType::f64};
  const auto& list = allowed.size() ? allowed : all;
  std::size_t i = 0;
  for (const DType d : list) {
    names += i == 0 ? "" : i + 1 == list.size() ? " or " : ", ";
    names += dtype_name(d);
    ++i;
  }
  throw UsageError(fmt::format("{}: '{}' is not {}", what, name, names));
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
  }
  return 0;
}

double half_bits_to_double(std::uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  double v;
  if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), -24);  // subnormal (or zero)
  } else if (exp == 31) {
    v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(static_cast<double>(mant | 0x400), exp - 25);
  }
  return sign ? -v : v;
}

double bf16_bits_to_double(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  return static_cast<double>(std::bit_cast<float>(u));
}

std::uint16_t double_to_half_bits(double v) {
  // Round the double directly (not through float) to avoid double rounding.
  const std::uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  if (std::isnan(v)) return 0x7e00;
  double a = std::fabs(v);
  if (std::isinf(a)) return sign | 0x7c00;
  if (a == 0.0) return sign;
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1;    // a = 1.f * 2^exp
  if (exp < -14) {
    // Subnormal: units of 2^-24.
    const double q = std::nearbyint(std::ldexp(a, 24));  // round-half-even under default mode
    return sign | static_cast<std::uint16_t>(q);         // q == 1024 rolls into the smallest normal
  }
  double m = std::ldexp(a, -exp) - 1.0;   // fraction in [0, 1)
  double q = std::nearbyint(m * 1024.0);  // 10 fraction bits
  if (q == 1024.0) {
    q = 0;
    ++exp;
  }
  if (exp > 15) return sign | 0x7c00;
  return sign | static_cast<std::uint16_t>(((exp + 15) << 10) | static_cast<int>(q));
}

std::uint16_t double_to_bf16_bits(double v) {
  if (std::isnan(v)) return std::signbit(v) ? 0xffc0 : 0x7fc0;
  const std::uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  double a = std::fabs(v);
  if (std::isinf(a)) return sign | 0x7f80;
  if (a == 0.0) return sign;
  int e;
  std::frexp(a, &e);
  int exp = e - 1;
  if (exp < -126) {
    const double q = std::nearbyint(std::ldexp(a, 133));  // units of 2^-133
    return sign | static_cast<std::uint16_t>(q);
  }
  double m = std::ldexp(a, -exp) - 1.0;
  double q = std::nearbyint(m * 128.0);  // 7 fraction bits
  if (q == 128.0) {
    q = 0;
    ++exp;
  }
  if (exp > 127) return sign | 0x7f80;
  return sign | static_cast<std::uint16_t>(((exp + 127) << 7) | static_cast<int>(q));
}

double round_to(DType t, double v) {
  switch (t) {
    case DType::f16:
      return half_bits_to_double(double_to_half_bits(v));
    case DType::bf16:
      return bf16_bits_to_double(double_to_bf16_bits(v));
    case DType::f32:
      return static_cast<double>(static_cast<float>(v));
    case DType::f64:
      break;
  }
  return v;
}

double load_le(DType t, const unsigned char* p) {
  switch (t) {
    case DType::f16:
      return half_bits_to_double(static_cast<std::uint16_t>(p[0] | (p[1] << 8)));
    case DType::bf16:
      return bf16_bits_to_double(static_cast<std::uint16_t>(p[0] | (p[1] << 8)));
    case DType::f32: {
      std::uint32_t u = 0;
      for (int i = 3; i >= 0; --i) u = (u << 8) | p[i];
      return static_cast<double>(std::bit_cast<float>(u));
    }
    case DType::f64: {
      std::uint64_t u = 0;
      for (int i = 7; i >= 0; --i) u = (u << 8) | p[i];
      return std::bit_cast<double>(u);
    }
  }
  return 0.0;
}

void store_le(DType t, double v, unsigned char* p) {
  std::uint64_t u = 0;
  std::size_t n = dtype_size(t);
  switch (t) {
    case DType::f16:
      u = double_to_half_bits(v);
      break;
    case DType::bf16:
      u = double_to_bf16_bits(v);
      break;
    case DType::f32:
      u = std::bit_cast<std::uint32_t>(static_cast<float>(v));
      break;
    case DType::f64:
      u = std::bit_cast<std::uint64_t>(v);
      break;
  }
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<unsigned char>(u >> (8 * i));
}

}  // namespace sparsecc
