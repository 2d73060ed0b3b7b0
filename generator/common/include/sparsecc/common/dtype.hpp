// Element types the readers understand, and exact conversions between them and double.
// Every float16/bfloat16/float32 value is exactly representable as a double, so the project's
// containers store double and remember the source type.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

namespace sparsecc {

enum class DType { f16, bf16, f32, f64 };

std::string_view dtype_name(DType t);                     // "f16", "bf16", "f32", "f64"
std::optional<DType> parse_dtype(std::string_view name);  // inverse of dtype_name
std::size_t dtype_size(DType t);                          // bytes per element
// parse_dtype for a word that must name one of `allowed` (all four when empty): throws UsageError
// "<what>: '<name>' is not f32, f16 or bf16" (the allowed names) otherwise.
DType require_dtype(std::string_view name, std::string_view what, std::initializer_list<DType> allowed = {});
std::ostream& operator<<(std::ostream& os, DType t);  // dtype_name

double half_bits_to_double(std::uint16_t bits);
double bf16_bits_to_double(std::uint16_t bits);
// Round to nearest even; overflow gives +-inf, NaN stays NaN.
std::uint16_t double_to_half_bits(double v);
std::uint16_t double_to_bf16_bits(double v);
// v rounded to nearest even in type t, as a double (f64: v itself).
double round_to(DType t, double v);

// Decode one little-endian element of type t at p.
double load_le(DType t, const unsigned char* p);
// Encode v as one little-endian element of type t at p (rounding to t).
void store_le(DType t, double v, unsigned char* p);

}  // namespace sparsecc

// fmt prints a DType as its name.
template <>
struct fmt::formatter<sparsecc::DType> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(sparsecc::DType t, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(sparsecc::dtype_name(t), ctx);
  }
};
