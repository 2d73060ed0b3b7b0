// Random Hines systems for the tests: forests of random shape, values strictly diagonally dominant.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "sparsecc/neuron/hines.hpp"

namespace sparsecc::test {

// n compartments in `cells` trees; with probability `branchiness` a node attaches anywhere above it,
// otherwise to the node created just before it (long unbranched runs). Sibling keys, numbering and
// off-diagonal signs are random; the diagonal dominates each row.
inline HinesSystem random_system(std::mt19937_64& rng, int n, int cells, double branchiness) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<std::int32_t> parent_tree(n, -1);  // in creation order: parent < child
  for (int v = cells; v < n; ++v) {
    const int lo = u(rng) < branchiness ? 0 : v - 1;
    parent_tree[v] = std::uniform_int_distribution<int>(lo, v - 1)(rng);
  }
  std::vector<std::int32_t> perm(n);
  for (int i = 0; i < n; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<std::int32_t> parent(n);
  std::vector<std::int64_t> key(n);
  for (int v = 0; v < n; ++v) {
    parent[perm[v]] = parent_tree[v] < 0 ? -1 : perm[parent_tree[v]];
    key[perm[v]] = static_cast<std::int64_t>(rng() % 1000);
  }
  HinesSystem s = number_hines(parent, key);
  s.diag.assign(n, 0.0);
  s.upper.assign(n, 0.0);
  s.lower.assign(n, 0.0);
  std::vector<double> off(n, 0.0);
  for (int i = 0; i < n; ++i) {
    if (s.parent[i] < 0) continue;
    s.upper[i] = (u(rng) < 0.8 ? -1 : 1) * (0.1 + u(rng));
    s.lower[i] = (u(rng) < 0.8 ? -1 : 1) * (0.1 + u(rng));
    off[i] += std::fabs(s.upper[i]);
    off[s.parent[i]] += std::fabs(s.lower[i]);
  }
  for (int i = 0; i < n; ++i) s.diag[i] = off[i] + 0.01 + u(rng);
  return s;
}

// The notes' 7-node tree (section 10.1): node 2 has children 0 and 1, node 5 has 2 and 4, chain 3-4,
// root 6; all couplings -1, leak and capacitance term 1.
inline HinesSystem notes_tree() {
  HinesSystem s;
  s.parent = {2, 2, 5, 4, 5, 6, -1};
  s.diag = {2, 2, 4, 2, 3, 4, 2};
  s.upper = {-1, -1, -1, -1, -1, -1, 0};
  s.lower = s.upper;
  s.cell_offsets = {0, 7};
  return s;
}

// An unbranched cell of n rows (the notes' chain of section 10.3): couplings -1, diagonal 4 inside
// and 3 at both ends.
inline HinesSystem chain_system(int n) {
  HinesSystem s;
  for (int i = 0; i < n; ++i) s.parent.push_back(i + 1 < n ? i + 1 : -1);
  s.upper.assign(n, -1.0);
  s.upper[n - 1] = 0;
  s.lower = s.upper;
  s.diag.assign(n, 4.0);
  s.diag[0] = s.diag[n - 1] = 3;
  s.cell_offsets = {0, n};
  return s;
}

// max |x - ref| / max |ref| (absolute when ref is all zero); `nans` counts non-finite x.
inline double max_rel_error(const std::vector<double>& x, const std::vector<double>& ref,
                            std::int64_t* nans = nullptr) {
  double err = 0, scale = 0;
  if (nans) *nans = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (nans && !std::isfinite(x[i])) ++*nans;
    err = std::max(err, std::fabs(x[i] - ref[i]));
    scale = std::max(scale, std::fabs(ref[i]));
  }
  return scale > 0 ? err / scale : err;
}

}  // namespace sparsecc::test
