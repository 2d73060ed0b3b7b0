// fp64 serial O(N) Hines solver: the oracle every Hines executor is checked against.
//
// Factor + solve of notes section 2 on a post-order system (children before parents), with separate
// upper (A[i][P[i]]) and lower (A[P[i]][i]) values, so row-scaled (non-symmetric) systems work too:
//   factor: for i = 0 .. N-1 with p = P[i] >= 0:  f[i] = lower[i] / d[i];  d[p] -= f[i] * upper[i]
//   solve:  forward  b[p] -= f[i] * b[i];  backward  x[i] = (b[i] - upper[i] * x[P[i]]) / d[i]
// Many right-hand sides share one factorisation; B is N x R row-major (the R values of node i are
// contiguous at b[i*R .. i*R + R)), the layout of interleaved GPU executors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sparsecc/matrix/dense.hpp"
#include "sparsecc/neuron/hines.hpp"

namespace sparsecc {

struct HinesFactorization {
  std::vector<std::int32_t> parent;
  std::vector<double> pivot;   // d'[i]
  std::vector<double> upper;   // A[i][P[i]]
  std::vector<double> factor;  // f[i] = lower[i] / d'[i]

  std::int32_t size() const { return static_cast<std::int32_t>(parent.size()); }
};

// Throws UsageError when the sizes or the post-order structure are invalid, or a pivot is zero or not
// finite (singular system).
HinesFactorization hines_factor(const HinesSystem& system);
void hines_solve_in_place(const HinesFactorization& f, std::span<double> b);  // b := x
void hines_solve_many_in_place(const HinesFactorization& f, std::span<double> b, std::size_t nrhs);
std::vector<double> hines_solve(const HinesSystem& system, std::span<const double> b);
std::vector<double> hines_solve_many(const HinesSystem& system, std::span<const double> b, std::size_t nrhs);

DenseMatrix hines_to_dense(const HinesSystem& system);  // for tests; N x N

}  // namespace sparsecc
