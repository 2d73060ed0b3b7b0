// The Hines accuracy yardstick: the serial solve in another arithmetic, and the bound it sets.
#include "sparsecc/reference/hines_accuracy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "sparsecc/common/error.hpp"
#include "sparsecc/reference/hines_solve.hpp"

namespace sparsecc {

template <typename T>
std::vector<double> serial_hines_solve_as(const HinesSystem& s, std::span<const double> b, int rhs) {
  const auto n = static_cast<std::size_t>(s.size()), r = static_cast<std::size_t>(rhs);
  if (rhs < 1 || b.size() != n * r) throw UsageError("serial_hines_solve_as: sizes disagree");
  std::vector<T> x(b.begin(), b.end()), piv(s.diag.begin(), s.diag.end());
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t p = s.parent[i];
    if (p < 0) continue;
    const T f = static_cast<T>(s.lower[i]) / piv[i];
    piv[static_cast<std::size_t>(p)] -= f * static_cast<T>(s.upper[i]);
    for (std::size_t c = 0; c < r; ++c) x[static_cast<std::size_t>(p) * r + c] -= f * x[i * r + c];
  }
  for (std::size_t i = n; i-- > 0;) {
    const std::int32_t p = s.parent[i];
    const T inv = T(1) / piv[i], u = static_cast<T>(s.upper[i]);
    for (std::size_t c = 0; c < r; ++c) {
      T v = x[i * r + c];
      if (p >= 0) v -= u * x[static_cast<std::size_t>(p) * r + c];
      x[i * r + c] = v * inv;
    }
  }
  std::vector<double> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = static_cast<double>(x[i]);
  return out;
}
template std::vector<double> serial_hines_solve_as<float>(const HinesSystem&, std::span<const double>, int);
template std::vector<double> serial_hines_solve_as<long double>(const HinesSystem&, std::span<const double>,
                                                                int);

double HinesAccuracy::tolerance(const std::string& dtype) const {
  return dtype == "f32" ? std::max(kF32ToleranceFloor, kToleranceFactor * serial_f32_error)
                        : std::max(kF64ToleranceFloor, kToleranceFactor * serial_f64_error);
}

std::string HinesAccuracy::note(const std::string& dtype) const {
  const bool f32 = dtype == "f32";
  const double floor = f32 ? kF32ToleranceFloor : kF64ToleranceFloor;
  const double tol = tolerance(dtype);
  if (tol <= floor) return {};
  return fmt::format("{} bound raised to {:.3g}: {:g}x the error of a serial {} solve ({:.3g})", dtype, tol,
                     kToleranceFactor, f32 ? "fp32" : "fp64", f32 ? serial_f32_error : serial_f64_error);
}

HinesAccuracy hines_accuracy(const HinesSystem& s, std::span<const double> b, int rhs) {
  HinesAccuracy a;
  a.ref = serial_hines_solve_as<long double>(s, b, rhs);
  a.serial_f64_error = hines_max_rel_error(hines_solve_many(s, b, static_cast<std::size_t>(rhs)), a.ref);
  a.serial_f32_error = hines_max_rel_error(serial_hines_solve_as<float>(s, b, rhs), a.ref);
  return a;
}

double hines_max_rel_error(std::span<const double> x, std::span<const double> ref) {
  if (x.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(x[i])) return std::numeric_limits<double>::infinity();
    err = std::max(err, std::fabs(x[i] - ref[i]));
    scale = std::max(scale, std::fabs(ref[i]));
  }
  return scale > 0 ? err / scale : err;
}

}  // namespace sparsecc
