#include "sparsecc/neuron/compartments.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "sparsecc/common/error.hpp"

namespace sparsecc {
namespace {

double distance(const SwcSample& a, const SwcSample& b) {
  return std::hypot(a.x - b.x, a.y - b.y, a.z - b.z);
}

double half_lateral_area(double r1, double r2, double length) {
  return 0.5 * std::numbers::pi * (r1 + r2) * std::hypot(length, r1 - r2);
}

bool is_point_soma(const NeuronModel& m, std::int32_t s) {
  if (m.parent[s] >= 0 || m.samples[s].type != kSwcSoma) return false;
  for (std::int32_t k = m.child_offsets[s]; k < m.child_offsets[s + 1]; ++k)
    if (m.samples[m.children[k]].type == kSwcSoma) return false;
  return true;
}

// Samples in breadth-first order from the roots: every parent before its children.
std::vector<std::int32_t> parents_first(const NeuronModel& m) {
  std::vector<std::int32_t> order(m.roots.begin(), m.roots.end());
  order.reserve(m.samples.size());
  for (std::size_t head = 0; head < order.size(); ++head) {
    const std::int32_t v = order[head];
    for (std::int32_t k = m.child_offsets[v]; k < m.child_offsets[v + 1]; ++k) order.push_back(m.children[k]);
  }
  return order;
}

}  // namespace

Compartments compartmentalize(const NeuronModel& m, const CompartmentOptions& opt) {
  const int P = opt.resolution;
  if (P < 1 || P > kMaxResolution)
    throw UsageError(fmt::format("resolution {} is outside 1..{}", P, kMaxResolution));
  if (!(opt.min_radius_um > 0) || !std::isfinite(opt.min_radius_um))
    throw UsageError("min_radius_um must be positive and finite");
  if (!(opt.merge_length_um >= 0) || !std::isfinite(opt.merge_length_um))
    throw UsageError("merge_length_um must be non-negative and finite");
  const std::int32_t n = m.size();
  const auto clamp_r = [&](double r) { return std::max(r, opt.min_radius_um); };

  // Pass 1: merge decisions, parents first. survivor[s] is the sample whose node holds s.
  std::vector<std::int32_t> survivor(n);
  std::int64_t edges = 0, roots = 0;
  for (const std::int32_t s : parents_first(m)) {
    const std::int32_t p = m.parent[s];
    if (p < 0) {
      survivor[s] = s;
      ++roots;
      continue;
    }
    const std::int32_t q = survivor[p];
    const bool merged = !(distance(m.samples[s], m.samples[q]) >= opt.merge_length_um);
    survivor[s] = merged ? q : s;
    edges += !merged;
  }
  const std::int64_t total = roots + edges * P;
  if (total > kMaxCompartments)
    throw UsageError(fmt::format("{} compartments (resolution {}) is more than the limit of {}", total, P,
                                 kMaxCompartments));

  // Pass 2: indices in file order; the sample's node comes after its P - 1 intermediates.
  Compartments c;
  c.num_cells = m.num_cells();
  c.of_sample.assign(n, -1);
  std::int32_t next = 0;
  for (std::int32_t s = 0; s < n; ++s) {
    if (survivor[s] != s) continue;
    next += m.parent[s] < 0 ? 1 : P;
    c.of_sample[s] = next - 1;
  }
  for (std::int32_t s = 0; s < n; ++s) c.of_sample[s] = c.of_sample[survivor[s]];
  c.merged_samples = static_cast<std::int32_t>(n - roots - edges);

  const auto N = static_cast<std::size_t>(total);
  for (auto* v : {&c.parent, &c.sample, &c.type, &c.cell}) v->assign(N, 0);
  c.key.assign(N, 0);
  for (auto* v : {&c.x, &c.y, &c.z, &c.radius, &c.length, &c.proximal_radius, &c.area}) v->assign(N, 0.0);
  std::vector<char> has_edge(N, 0);

  for (std::int32_t s = 0; s < n; ++s) {
    if (survivor[s] != s) continue;
    const SwcSample& a = m.samples[s];
    const std::int32_t self = c.of_sample[s];
    const auto set_node = [&](std::int32_t i, double x, double y, double z, double r) {
      c.sample[i] = s;
      c.type[i] = a.type;
      c.cell[i] = m.cell[s];
      c.key[i] = a.id;
      c.x[i] = x;
      c.y[i] = y;
      c.z[i] = z;
      c.radius[i] = r;
    };
    set_node(self, a.x, a.y, a.z, clamp_r(a.radius));
    const std::int32_t p = m.parent[s];
    if (p < 0) {
      c.parent[self] = -1;
      if (is_point_soma(m, s)) c.area[self] += 4 * std::numbers::pi * c.radius[self] * c.radius[self];
      continue;
    }
    const std::int32_t q = survivor[p];
    const SwcSample& b = m.samples[q];
    const double r_prox = clamp_r(p != q ? m.samples[p].radius : is_point_soma(m, q) ? a.radius : b.radius);
    const double r_dist = c.radius[self];
    const double sub = distance(a, b) / P;
    std::int32_t up = c.of_sample[q];
    for (int k = 1; k <= P; ++k) {
      const std::int32_t i = self - (P - k);
      const double t = static_cast<double>(k) / P;
      if (k < P)
        set_node(i, b.x + t * (a.x - b.x), b.y + t * (a.y - b.y), b.z + t * (a.z - b.z),
                 r_prox + t * (r_dist - r_prox));
      const double r_up = k == 1 ? r_prox : c.radius[up];
      c.parent[i] = up;
      c.length[i] = sub;
      c.proximal_radius[i] = r_up;
      const double half = half_lateral_area(r_up, c.radius[i], sub);
      c.area[i] += half;
      c.area[up] += half;
      has_edge[static_cast<std::size_t>(i)] = has_edge[static_cast<std::size_t>(up)] = 1;
      up = i;
    }
  }
  for (std::size_t i = 0; i < N; ++i)
    if (!has_edge[i] && c.area[i] == 0) c.area[i] = 4 * std::numbers::pi * c.radius[i] * c.radius[i];
  return c;
}

}  // namespace sparsecc
