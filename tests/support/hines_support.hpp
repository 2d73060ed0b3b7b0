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

}  // namespace sparsecc::test
