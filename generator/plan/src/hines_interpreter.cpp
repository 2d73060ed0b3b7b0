#include "sparsecc/plan/hines_interpreter.hpp"

#include <fmt/format.h>

#include "sparsecc/common/error.hpp"

namespace sparsecc {

namespace {

using Index = std::int32_t;

// One level's matrix: values by row, b as rows x R.
template <typename Real>
struct LevelSystem {
  std::vector<Real> d, u, l, b;
};

// Serial Hines elimination over `parent` (post-order), R right-hand sides; returns x. Like the
// executors, it divides once a row: d[i] becomes the reciprocal of row i's pivot once that is final
// (its children come before it), and every other quotient is a product with it.
template <typename Real>
std::vector<Real> solve_base(const std::vector<Index>& parent, LevelSystem<Real> s, std::size_t r) {
  const std::size_t n = parent.size();
  for (std::size_t i = 0; i < n; ++i) {
    const Real inv = Real(1) / s.d[i];
    s.d[i] = inv;
    const Index p = parent[i];
    if (p < 0) continue;
    const Real f = s.l[i] * inv;
    s.d[static_cast<std::size_t>(p)] -= f * s.u[i];
    for (std::size_t c = 0; c < r; ++c) s.b[static_cast<std::size_t>(p) * r + c] -= f * s.b[i * r + c];
  }
  for (std::size_t i = n; i-- > 0;) {
    const Index p = parent[i];
    for (std::size_t c = 0; c < r; ++c) {
      Real v = s.b[i * r + c];
      if (p >= 0) v -= s.u[i] * s.b[static_cast<std::size_t>(p) * r + c];
      s.b[i * r + c] = v * s.d[i];
    }
  }
  return std::move(s.b);
}

// Solves the level's matrix through plan.levels[li] and the levels below it (the base after the last).
template <typename Real>
std::vector<Real> solve_level(const HinesPlan& plan, std::size_t li, const LevelSystem<Real>& s,
                              std::size_t r, std::vector<HinesDomainTrace>* trace) {
  if (li == plan.levels.size()) return solve_base(plan.base_parent, s, r);
  const HinesLevel& L = plan.levels[li];
  const std::size_t n = static_cast<std::size_t>(L.size), nj = L.junctions.size();
  // Stage 1: per chain, one factorisation of T for R right-hand sides and the P and Q columns. piv
  // holds the pivots' reciprocals: one division a row, every quotient a product with it.
  std::vector<Real> rv(n * r), pv(n, Real(0)), qv(n, Real(0)), piv(n), w(n);
  for (const HinesChain& c : L.chains) {
    const auto b = static_cast<std::size_t>(c.begin), e = static_cast<std::size_t>(c.end);
    for (std::size_t i = b; i <= e; ++i) {
      piv[i] = Real(1) / (i == b ? s.d[i] : s.d[i] - s.l[i - 1] * w[i - 1]);
      if (i < e) w[i] = s.u[i] * piv[i];
    }
    // Forward: y_i = (rhs_i - l[i-1] y_{i-1}) / pivot_i; back: x_i = y_i - w_i x_{i+1}.
    for (std::size_t col = 0; col < r; ++col) {
      for (std::size_t i = b; i <= e; ++i) {
        Real y = s.b[i * r + col];
        if (i > b) y -= s.l[i - 1] * rv[(i - 1) * r + col];
        rv[i * r + col] = y * piv[i];
      }
      for (std::size_t i = e; i-- > b;) rv[i * r + col] -= w[i] * rv[(i + 1) * r + col];
    }
    if (c.parent_junction >= 0) {  // T^-1 (upper[e] e_last): forward leaves only the last row
      pv[e] = s.u[e] * piv[e];
      for (std::size_t i = e; i-- > b;) pv[i] = -w[i] * pv[i + 1];
    }
    if (c.child_junction >= 0) {  // T^-1 (lower[b-1] e_first)
      for (std::size_t i = b; i <= e; ++i) qv[i] = (i == b ? s.l[b - 1] : -s.l[i - 1] * qv[i - 1]) * piv[i];
      for (std::size_t i = e; i-- > b;) qv[i] -= w[i] * qv[i + 1];
    }
  }
  // Stage 2: the domain matrix (negated Schur complement), one gather per junction.
  LevelSystem<Real> m;
  m.d.resize(nj);
  m.u.assign(nj, Real(0));
  m.l.assign(nj, Real(0));
  m.b.resize(nj * r);
  for (std::size_t k = 0; k < nj; ++k) {
    const auto j = static_cast<std::size_t>(L.junctions[k]);
    m.d[k] = -s.d[j];
    for (std::size_t col = 0; col < r; ++col) m.b[k * r + col] = -s.b[j * r + col];
    if (L.direct[k]) {
      m.u[k] = -s.u[j];
      m.l[k] = -s.l[j];
    }
    for (Index g = L.gather_offsets[k]; g < L.gather_offsets[k + 1]; ++g) {
      const HinesChain& c = L.chains[static_cast<std::size_t>(L.gather[static_cast<std::size_t>(g)])];
      const auto b = static_cast<std::size_t>(c.begin), e = static_cast<std::size_t>(c.end);
      if (c.parent_junction == static_cast<Index>(k)) {  // the chain below: its last row
        m.d[k] += s.l[e] * pv[e];
        for (std::size_t col = 0; col < r; ++col) m.b[k * r + col] += s.l[e] * rv[e * r + col];
      } else {  // the chain above: its first row
        m.d[k] += s.u[b - 1] * qv[b];
        for (std::size_t col = 0; col < r; ++col) m.b[k * r + col] += s.u[b - 1] * rv[b * r + col];
        if (c.parent_junction >= 0) {
          m.u[k] = s.u[b - 1] * pv[b];
          m.l[k] = s.l[e] * qv[e];
        }
      }
    }
  }
  if (trace)
    trace->push_back({{m.d.begin(), m.d.end()},
                      {m.u.begin(), m.u.end()},
                      {m.l.begin(), m.l.end()},
                      {m.b.begin(), m.b.end()}});
  // Stage 3, then stage 4.
  const std::vector<Real> mx = solve_level(plan, li + 1, m, r, trace);
  std::vector<Real> x(n * r);
  for (std::size_t k = 0; k < nj; ++k)
    for (std::size_t col = 0; col < r; ++col)
      x[static_cast<std::size_t>(L.junctions[k]) * r + col] = mx[k * r + col];
  for (const HinesChain& c : L.chains)
    for (auto i = static_cast<std::size_t>(c.begin); i <= static_cast<std::size_t>(c.end); ++i)
      for (std::size_t col = 0; col < r; ++col) {
        Real v = rv[i * r + col];
        if (c.parent_junction >= 0) v -= mx[static_cast<std::size_t>(c.parent_junction) * r + col] * pv[i];
        if (c.child_junction >= 0) v -= mx[static_cast<std::size_t>(c.child_junction) * r + col] * qv[i];
        x[i * r + col] = v;
      }
  return x;
}

template <typename Real>
std::vector<Real> interpret(const HinesPlan& plan, std::span<const Real> diag, std::span<const Real> upper,
                            std::span<const Real> lower, std::span<const Real> b,
                            std::vector<HinesDomainTrace>* trace) {
  if (const auto errors = check_hines_plan(plan); !errors.empty())
    throw UsageError("interpret_hines: invalid plan: " + errors.front());
  const auto n = static_cast<std::size_t>(plan.problem.n), r = static_cast<std::size_t>(plan.problem.rhs);
  if (diag.size() != n || upper.size() != n || lower.size() != n || b.size() != n * r)
    throw UsageError(
        fmt::format("interpret_hines: {} diagonal, {} upper, {} lower and {} right-hand-side values "
                    "for {} rows x {} right-hand sides",
                    diag.size(), upper.size(), lower.size(), b.size(), n, r));
  LevelSystem<Real> s{{diag.begin(), diag.end()},
                      {upper.begin(), upper.end()},
                      {lower.begin(), lower.end()},
                      {b.begin(), b.end()}};
  if (trace) trace->clear();
  return solve_level(plan, 0, s, r, trace);
}

}  // namespace

std::vector<double> interpret_hines(const HinesPlan& plan, std::span<const double> diag,
                                    std::span<const double> upper, std::span<const double> lower,
                                    std::span<const double> b, std::vector<HinesDomainTrace>* trace) {
  return interpret<double>(plan, diag, upper, lower, b, trace);
}

std::vector<float> interpret_hines(const HinesPlan& plan, std::span<const float> diag,
                                   std::span<const float> upper, std::span<const float> lower,
                                   std::span<const float> b, std::vector<HinesDomainTrace>* trace) {
  return interpret<float>(plan, diag, upper, lower, b, trace);
}

}  // namespace sparsecc
