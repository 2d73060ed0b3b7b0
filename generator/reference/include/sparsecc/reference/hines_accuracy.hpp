// The accuracy yardstick of one Hines step, shared by `sparsecc verify`, `sparsecc hines --check`, the
// tests and the bench: every executor, baseline and interpreter is held to the same bound.
//
// Reference: the serial solve of hines_solve_many in extended precision (long double, at least 64
// significant bits), rounded to fp64. Bound of a precision: its floor (1e-12 f64, 1e-4 f32), raised to
// kToleranceFactor times the error of the serial solve in that precision against the reference. On
// well-conditioned systems (ordinary cells) the floors hold; on very fine discretisations (strongly
// coupled compartments) every ordering loses digits, the serial one included, and the bound follows
// the serial solver's own error instead.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "sparsecc/neuron/hines.hpp"

namespace sparsecc {

// The serial solve of hines_solve_many in the arithmetic T (inputs rounded to T), as fp64 values:
// float gives the accuracy the conditioning of the system allows in single precision, long double
// (at least 64 significant bits) the accuracy yardstick's reference.
template <typename T>
std::vector<double> serial_hines_solve_as(const HinesSystem& s, std::span<const double> b, int rhs);
extern template std::vector<double> serial_hines_solve_as<float>(const HinesSystem&, std::span<const double>,
                                                                 int);
extern template std::vector<double> serial_hines_solve_as<long double>(const HinesSystem&,
                                                                       std::span<const double>, int);

inline constexpr double kF64ToleranceFloor = 1e-12;
inline constexpr double kF32ToleranceFloor = 1e-4;
inline constexpr double kToleranceFactor = 16;
struct HinesAccuracy {
  std::vector<double> ref;      // N x R, extended-precision serial solve
  double serial_f64_error = 0;  // of the fp64 serial solve against ref
  double serial_f32_error = 0;  // of the fp32 serial solve against ref
  double tolerance(const std::string& dtype) const;
  // Empty when the floor holds, else why the bound is raised.
  std::string note(const std::string& dtype) const;
};
HinesAccuracy hines_accuracy(const HinesSystem& s, std::span<const double> b, int rhs);

// max |x - ref| / max |ref| (absolute when ref is all zero); infinity when x holds a non-finite
// value or the sizes differ.
double hines_max_rel_error(std::span<const double> x, std::span<const double> ref);

}  // namespace sparsecc
