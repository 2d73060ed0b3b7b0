#include "sparsecc/reference/hines_solve.hpp"

#include <fmt/format.h>

#include <cmath>

#include "sparsecc/common/error.hpp"

namespace sparsecc {

HinesFactorization hines_factor(const HinesSystem& s) {
  const auto n = static_cast<std::size_t>(s.size());
  if (s.diag.size() != n || s.upper.size() != n || s.lower.size() != n)
    throw UsageError("hines_factor: parent, diag, upper and lower sizes differ");
  HinesFactorization f;
  f.parent = s.parent;
  f.upper = s.upper;
  f.pivot = s.diag;
  f.factor.assign(n, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    const double d = f.pivot[i];
    if (d == 0 || !std::isfinite(d))
      throw UsageError(fmt::format("hines_factor: pivot {} at node {} (singular system)", d, i));
    const std::int32_t p = s.parent[i];
    if (p == -1) continue;
    if (p <= static_cast<std::int32_t>(i) || static_cast<std::size_t>(p) >= n)
      throw UsageError(fmt::format("hines_factor: parent {} of node {} is not after it", p, i));
    f.factor[i] = s.lower[i] / d;
    f.pivot[p] -= f.factor[i] * s.upper[i];
  }
  return f;
}

void hines_solve_in_place(const HinesFactorization& f, std::span<double> b) {
  hines_solve_many_in_place(f, b, 1);
}

void hines_solve_many_in_place(const HinesFactorization& f, std::span<double> b, std::size_t nrhs) {
  const auto n = static_cast<std::size_t>(f.size());
  if (b.size() != n * nrhs)
    throw UsageError(
        fmt::format("hines_solve: {} values for {} nodes x {} right-hand sides", b.size(), n, nrhs));
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t p = f.parent[i];
    if (p < 0) continue;
    const double fi = f.factor[i];
    double* bp = b.data() + static_cast<std::size_t>(p) * nrhs;
    const double* bi = b.data() + i * nrhs;
    for (std::size_t r = 0; r < nrhs; ++r) bp[r] -= fi * bi[r];
  }
  for (std::size_t i = n; i-- > 0;) {
    const std::int32_t p = f.parent[i];
    double* bi = b.data() + i * nrhs;
    const double inv = 1.0 / f.pivot[i];
    if (p < 0) {
      for (std::size_t r = 0; r < nrhs; ++r) bi[r] *= inv;
    } else {
      const double u = f.upper[i];
      const double* xp = b.data() + static_cast<std::size_t>(p) * nrhs;
      for (std::size_t r = 0; r < nrhs; ++r) bi[r] = (bi[r] - u * xp[r]) * inv;
    }
  }
}

std::vector<double> hines_solve(const HinesSystem& s, std::span<const double> b) {
  return hines_solve_many(s, b, 1);
}

std::vector<double> hines_solve_many(const HinesSystem& s, std::span<const double> b, std::size_t nrhs) {
  const HinesFactorization f = hines_factor(s);
  std::vector<double> x(b.begin(), b.end());
  hines_solve_many_in_place(f, x, nrhs);
  return x;
}

DenseMatrix hines_to_dense(const HinesSystem& s) {
  DenseMatrix a(s.size(), s.size());
  for (std::int32_t i = 0; i < s.size(); ++i) {
    a(i, i) = s.diag[i];
    const std::int32_t p = s.parent[i];
    if (p < 0) continue;
    a(i, p) = s.upper[i];
    a(p, i) = s.lower[i];
  }
  return a;
}

}  // namespace sparsecc
