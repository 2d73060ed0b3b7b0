// The example MLP: three pruned fully connected layers (PyTorch layout, weight[out][in]), made
// deterministically from a fixed seed so the model writer (make_mlp_model) and the example's fp64
// check (sparse_mlp) build the same numbers independently. Plain C++: no sparsecc dependency.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace mlp_example {

struct Layer {
  std::string name;  // tensors "<name>.weight" and "<name>.bias"
  int out = 0, in = 0;
  bool relu = false;
  std::vector<float> weight;  // out x in, row-major, about 90 % zeros
  std::vector<float> bias;    // out
};

inline std::uint64_t splitmix64(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
// Uniform in [-1, 1), exactly representable in float.
inline float uniform(std::uint64_t& s) {
  return static_cast<float>(static_cast<double>(splitmix64(s) >> 40) / 8388608.0 - 1.0);
}

// Magnitude pruning: keeps the `keep` fraction of largest |w| (ties broken by position).
inline void prune(std::vector<float>& w, double keep) {
  std::vector<std::size_t> order(w.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  const std::size_t kept = static_cast<std::size_t>(std::llround(keep * static_cast<double>(w.size())));
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return std::fabs(w[a]) > std::fabs(w[b]); });
  for (std::size_t i = kept; i < order.size(); ++i) w[order[i]] = 0.0f;
}

// 256 -> 512 -> 512 -> 128, 90 % sparse, ReLU after the hidden layers.
inline std::vector<Layer> make_model() {
  const int dims[] = {256, 512, 512, 128};
  std::vector<Layer> layers;
  std::uint64_t seed = 20261122;
  for (int i = 0; i < 3; ++i) {
    Layer l;
    l.name = "fc" + std::to_string(i + 1);
    l.in = dims[i];
    l.out = dims[i + 1];
    l.relu = i < 2;
    l.weight.resize(static_cast<std::size_t>(l.out) * l.in);
    const float scale = 1.0f / std::sqrt(0.1f * static_cast<float>(l.in));
    for (float& w : l.weight) w = uniform(seed) * scale;
    prune(l.weight, 0.1);
    l.bias.resize(l.out);
    for (float& b : l.bias) b = 0.1f * uniform(seed);
    layers.push_back(std::move(l));
  }
  return layers;
}

// out = W·in + bias (ReLU), fp64; W is out x in, in and out are features x n: the examples' oracle.
inline std::vector<double> layer_fp64(const Layer& l, const std::vector<double>& in, int n) {
  std::vector<double> out(static_cast<std::size_t>(l.out) * n);
  for (int r = 0; r < l.out; ++r)
    for (int j = 0; j < n; ++j) {
      double s = l.bias[r];
      for (int k = 0; k < l.in; ++k) {
        const double w = l.weight[static_cast<std::size_t>(r) * l.in + k];
        if (w != 0.0) s += w * in[static_cast<std::size_t>(k) * n + j];
      }
      out[static_cast<std::size_t>(r) * n + j] = l.relu && s < 0 ? 0.0 : s;
    }
  return out;
}

// max |got - ref| / max |ref| over the written outputs, and how many were left unwritten (not finite).
struct Compared {
  double rel = 0;
  std::size_t unwritten = 0;
};
inline Compared compare(const std::vector<float>& got, const std::vector<double>& ref) {
  double max_ref = 0, max_diff = 0;
  Compared c;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(ref[i]));
    if (!std::isfinite(got[i])) {
      ++c.unwritten;
      continue;
    }
    max_diff = std::max(max_diff, std::fabs(got[i] - ref[i]));
  }
  c.rel = max_ref > 0 ? max_diff / max_ref : max_diff;
  return c;
}

}  // namespace mlp_example
