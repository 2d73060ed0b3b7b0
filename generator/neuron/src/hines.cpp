#include "sparsecc/neuron/hines.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <utility>

#include "sparsecc/common/error.hpp"

namespace sparsecc {
namespace {

void check_size(const HinesSystem& s, std::size_t got, const char* what) {
  if (got != static_cast<std::size_t>(s.size()))
    throw UsageError(fmt::format("{} has {} values, the Hines system {}", what, got, s.size()));
}

void check_cells(const HinesSystem& s) {
  if (s.cell_offsets.empty() || s.cell_offsets.front() != 0 || s.cell_offsets.back() != s.size())
    throw UsageError("Hines system: cell_offsets do not cover the system");
}

void check_params(const CableParams& p) {
  const auto positive = [](double v) { return v > 0 && std::isfinite(v); };
  if (!positive(p.axial_resistivity_ohm_cm) || !positive(p.capacitance_uf_per_cm2) || !positive(p.dt_ms) ||
      !(p.leak_s_per_cm2 >= 0) || !std::isfinite(p.leak_s_per_cm2) || !std::isfinite(p.leak_reversal_mv))
    throw UsageError("cable parameters: Ra, cm and dt must be positive, g_leak >= 0, all finite");
}

}  // namespace

HinesSystem number_hines(std::span<const std::int32_t> parent, std::span<const std::int64_t> key) {
  if (key.size() != parent.size()) throw UsageError("number_hines: parent and key sizes differ");
  if (parent.size() >= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    throw UsageError("number_hines: too many nodes");
  const auto n = static_cast<std::int32_t>(parent.size());
  std::vector<std::int32_t> off(n + 1, 0), roots;
  for (std::int32_t v = 0; v < n; ++v) {
    const std::int32_t p = parent[v];
    if (p == -1) {
      roots.push_back(v);
    } else if (p < 0 || p >= n || p == v) {
      throw UsageError(fmt::format("number_hines: node {} has invalid parent {}", v, p));
    } else {
      ++off[p + 1];
    }
  }
  for (std::int32_t v = 0; v < n; ++v) off[v + 1] += off[v];
  std::vector<std::int32_t> children(off[n]);
  {
    std::vector<std::int32_t> fill(off.begin(), off.end() - 1);
    for (std::int32_t v = 0; v < n; ++v)
      if (parent[v] >= 0) children[fill[parent[v]]++] = v;
  }
  const auto by_key = [&](std::int32_t a, std::int32_t b) {
    return std::pair(key[a], a) < std::pair(key[b], b);
  };
  for (std::int32_t v = 0; v < n; ++v)
    std::sort(children.begin() + off[v], children.begin() + off[v + 1], by_key);
  std::sort(roots.begin(), roots.end(), by_key);

  HinesSystem s;
  s.compartment_of.reserve(n);
  s.cell_offsets.push_back(0);
  std::vector<std::pair<std::int32_t, std::int32_t>> stack;  // (node, next child position)
  for (const std::int32_t root : roots) {
    stack.emplace_back(root, off[root]);
    while (!stack.empty()) {
      const auto [v, k] = stack.back();
      if (k < off[v + 1]) {
        stack.back().second = k + 1;
        stack.emplace_back(children[k], off[children[k]]);
      } else {
        s.compartment_of.push_back(v);
        stack.pop_back();
      }
    }
    s.cell_offsets.push_back(static_cast<std::int32_t>(s.compartment_of.size()));
  }
  if (static_cast<std::int32_t>(s.compartment_of.size()) != n)
    throw UsageError("number_hines: the parent array has a cycle (not a forest)");
  s.hines_of.assign(n, 0);
  for (std::int32_t h = 0; h < n; ++h) s.hines_of[s.compartment_of[h]] = h;
  s.parent.assign(n, -1);
  for (std::int32_t h = 0; h < n; ++h) {
    const std::int32_t p = parent[s.compartment_of[h]];
    s.parent[h] = p < 0 ? -1 : s.hines_of[p];
  }
  return s;
}

HinesSystem assemble_hines(const Compartments& c, const CableParams& params) {
  check_params(params);
  HinesSystem s = number_hines(c.parent, c.key);
  const auto n = static_cast<std::size_t>(s.size());
  s.diag.assign(n, 0.0);
  s.upper.assign(n, 0.0);
  s.lower.assign(n, 0.0);
  s.cap_over_dt.assign(n, 0.0);
  s.leak.assign(n, 0.0);
  s.leak_reversal_mv = params.leak_reversal_mv;
  for (std::int32_t i = 0; i < c.size(); ++i) {
    const std::int32_t h = s.hines_of[i];
    s.cap_over_dt[h] = params.capacitance_uf_per_cm2 * c.area[i] * 1e-5 / params.dt_ms;
    s.leak[h] = params.leak_s_per_cm2 * c.area[i] * 1e-2;
    s.diag[h] += s.cap_over_dt[h] + s.leak[h];
  }
  for (std::int32_t i = 0; i < c.size(); ++i) {
    if (c.parent[i] < 0) continue;
    const std::int32_t h = s.hines_of[i], p = s.parent[h];
    const double margin = std::min(s.cap_over_dt[h] + s.leak[h], s.cap_over_dt[p] + s.leak[p]);
    const double ga =
        std::min(kMaxCouplingRatio * margin, 100.0 * std::numbers::pi * c.proximal_radius[i] * c.radius[i] /
                                                 (params.axial_resistivity_ohm_cm * c.length[i]));
    s.upper[h] = s.lower[h] = -ga;
    s.diag[h] += ga;
    s.diag[p] += ga;
  }
  return s;
}

HinesSystem assemble_hines(const NeuronModel& model, const CableParams& params,
                           const CompartmentOptions& options) {
  return assemble_hines(compartmentalize(model, options), params);
}

std::vector<double> hines_rhs(const HinesSystem& s, std::span<const double> v_old_mv,
                              std::span<const double> i_ext_na) {
  check_size(s, v_old_mv.size(), "V_old");
  check_size(s, i_ext_na.size(), "I_ext");
  check_size(s, s.cap_over_dt.size(), "C/dt (not an assembled system)");
  check_size(s, s.leak.size(), "leak");
  std::vector<double> b(v_old_mv.size());
  for (std::size_t i = 0; i < b.size(); ++i)
    b[i] = s.cap_over_dt[i] * v_old_mv[i] + s.leak[i] * s.leak_reversal_mv + i_ext_na[i];
  return b;
}

std::vector<double> to_hines_order(const HinesSystem& s, std::span<const double> by_compartment) {
  check_size(s, by_compartment.size(), "vector");
  check_size(s, s.hines_of.size(), "permutation");
  std::vector<double> out(by_compartment.size());
  for (std::size_t c = 0; c < out.size(); ++c) out[s.hines_of[c]] = by_compartment[c];
  return out;
}

std::vector<double> from_hines_order(const HinesSystem& s, std::span<const double> by_hines) {
  check_size(s, by_hines.size(), "vector");
  check_size(s, s.hines_of.size(), "permutation");
  std::vector<double> out(by_hines.size());
  for (std::size_t c = 0; c < out.size(); ++c) out[c] = by_hines[s.hines_of[c]];
  return out;
}

std::int32_t parent_first_index(const HinesSystem& s, std::int32_t i) {
  check_cells(s);
  if (i < 0 || i >= s.size()) throw UsageError(fmt::format("Hines index {} out of range", i));
  const auto it = std::upper_bound(s.cell_offsets.begin(), s.cell_offsets.end(), i);
  return *(it - 1) + *it - 1 - i;
}

std::vector<std::int32_t> parent_first_parents(const HinesSystem& s) {
  std::vector<std::int32_t> out(s.parent.size(), -1);
  for (std::int32_t i = 0; i < s.size(); ++i)
    if (s.parent[i] >= 0) out[parent_first_index(s, i)] = parent_first_index(s, s.parent[i]);
  return out;
}

std::vector<double> hines_to_parent_first(const HinesSystem& s, std::span<const double> by_hines) {
  check_size(s, by_hines.size(), "vector");
  check_cells(s);
  std::vector<double> out(by_hines.size());
  for (std::int32_t c = 0; c < s.num_cells(); ++c) {
    const std::int32_t b = s.cell_offsets[c], e = s.cell_offsets[c + 1];
    std::reverse_copy(by_hines.begin() + b, by_hines.begin() + e, out.begin() + b);
  }
  return out;
}

HinesSystem concatenate_hines(const std::vector<HinesSystem>& parts) {
  if (parts.empty()) throw UsageError("concatenate_hines: no systems");
  std::int64_t rows = 0;
  for (const HinesSystem& p : parts) rows += p.size();
  if (rows > kMaxCompartments)
    throw UsageError(
        fmt::format("concatenate_hines: {} rows exceed the {} a system may have", rows, kMaxCompartments));
  const bool passive = !parts.front().cap_over_dt.empty();
  HinesSystem out;
  out.cell_offsets = {0};
  out.leak_reversal_mv = parts.front().leak_reversal_mv;
  for (const HinesSystem& p : parts) {
    if (passive != !p.cap_over_dt.empty() || (passive && p.leak_reversal_mv != out.leak_reversal_mv))
      throw UsageError("concatenate_hines: the systems differ in their passive-step terms");
    const std::int32_t base = out.size();
    for (const std::int32_t q : p.parent) out.parent.push_back(q < 0 ? q : q + base);
    out.diag.insert(out.diag.end(), p.diag.begin(), p.diag.end());
    out.upper.insert(out.upper.end(), p.upper.begin(), p.upper.end());
    out.lower.insert(out.lower.end(), p.lower.begin(), p.lower.end());
    for (std::size_t c = 1; c < p.cell_offsets.size(); ++c)
      out.cell_offsets.push_back(p.cell_offsets[c] + base);
    for (const std::int32_t h : p.hines_of) out.hines_of.push_back(h + base);
    for (const std::int32_t c : p.compartment_of) out.compartment_of.push_back(c + base);
    out.cap_over_dt.insert(out.cap_over_dt.end(), p.cap_over_dt.begin(), p.cap_over_dt.end());
    out.leak.insert(out.leak.end(), p.leak.begin(), p.leak.end());
  }
  return out;
}

std::vector<double> parent_first_to_hines(const HinesSystem& s, std::span<const double> by_parent_first) {
  return hines_to_parent_first(s, by_parent_first);  // reversing each block is its own inverse
}

}  // namespace sparsecc
