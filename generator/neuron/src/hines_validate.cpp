// validate_hines (declared in hines.hpp).
#include <fmt/format.h>

#include <cmath>

#include "sparsecc/neuron/hines.hpp"

namespace sparsecc {
namespace {

struct Issues {
  std::vector<std::string> list;
  std::size_t max;
  bool full() const { return list.size() >= max; }
  template <typename... A>
  void add(fmt::format_string<A...> f, A&&... a) {
    if (!full()) list.push_back(fmt::format(f, std::forward<A>(a)...));
  }
};

void check_structure(const HinesSystem& s, Issues& out) {
  const std::int32_t n = s.size();
  const auto& off = s.cell_offsets;
  if (off.empty() || off.front() != 0 || off.back() != n) {
    out.add("cell_offsets must run from 0 to {}", n);
    return;
  }
  for (std::size_t c = 0; c + 1 < off.size() && !out.full(); ++c) {
    const std::int32_t b = off[c], e = off[c + 1];
    if (e <= b) {
      out.add("cell {} is empty or its offsets decrease", c);
      continue;
    }
    for (std::int32_t i = b; i < e && !out.full(); ++i) {
      const std::int32_t p = s.parent[i];
      if (i == e - 1 && p != -1) out.add("node {}, the last of cell {}, is not a root (parent {})", i, c, p);
      if (i < e - 1 && (p <= i || p >= e))
        out.add("node {}: parent {} is not after it within cell {} [{}, {})", i, p, c, b, e);
    }
  }
}

void check_values(const HinesSystem& s, Issues& out) {
  const std::int32_t n = s.size();
  std::vector<double> off_sum(n, 0.0);
  for (std::int32_t i = 0; i < n && !out.full(); ++i) {
    if (!std::isfinite(s.diag[i]) || !std::isfinite(s.upper[i]) || !std::isfinite(s.lower[i]))
      out.add("node {}: non-finite value (diag {}, upper {}, lower {})", i, s.diag[i], s.upper[i],
              s.lower[i]);
    const std::int32_t p = s.parent[i];
    if (p < 0) {
      if (s.upper[i] != 0 || s.lower[i] != 0) out.add("root {}: upper/lower must be 0", i);
    } else if (p < n) {
      off_sum[i] += std::fabs(s.upper[i]);
      off_sum[p] += std::fabs(s.lower[i]);
    }
  }
  for (std::int32_t i = 0; i < n && !out.full(); ++i) {
    if (!(s.diag[i] > 0))
      out.add("node {}: diagonal {} is not positive", i, s.diag[i]);
    else if (off_sum[i] > s.diag[i] * (1 + 1e-12))
      out.add("node {}: not diagonally dominant (diag {}, off-diagonal sum {})", i, s.diag[i], off_sum[i]);
  }
}

void check_permutation(const HinesSystem& s, Issues& out) {
  if (s.hines_of.empty() && s.compartment_of.empty()) return;
  const auto n = static_cast<std::size_t>(s.size());
  if (s.hines_of.size() != n || s.compartment_of.size() != n) {
    out.add("permutations have {} and {} entries, expected {}", s.hines_of.size(), s.compartment_of.size(),
            n);
    return;
  }
  for (std::size_t c = 0; c < n && !out.full(); ++c) {
    const std::int32_t h = s.hines_of[c];
    if (h < 0 || static_cast<std::size_t>(h) >= n || s.compartment_of[h] != static_cast<std::int32_t>(c))
      out.add("hines_of and compartment_of are not inverse permutations at compartment {}", c);
  }
}

}  // namespace

std::vector<std::string> validate_hines(const HinesSystem& s, std::size_t max_issues) {
  Issues out{{}, max_issues == 0 ? 1 : max_issues};
  const auto n = s.parent.size();
  if (s.diag.size() != n || s.upper.size() != n || s.lower.size() != n) {
    out.add("sizes differ: parent {}, diag {}, upper {}, lower {}", n, s.diag.size(), s.upper.size(),
            s.lower.size());
    return out.list;
  }
  for (const auto* v : {&s.cap_over_dt, &s.leak})
    if (!v->empty() && v->size() != n) out.add("C/dt or leak has {} entries, expected {}", v->size(), n);
  check_structure(s, out);
  if (out.list.empty()) check_values(s, out);
  check_permutation(s, out);
  return out.list;
}

}  // namespace sparsecc
