// The fixed-recipe demo cell of `sparsecc demo` (declared in morphology.hpp).
#include <algorithm>
#include <cmath>
#include <numbers>

#include "sparsecc/neuron/morphology.hpp"

namespace sparsecc {
namespace {

struct DemoBuilder {
  SwcFile file;

  std::int64_t add(std::int32_t type, double x, double y, double z, double r, std::int64_t parent) {
    SwcSample s;
    s.id = static_cast<std::int64_t>(file.samples.size()) + 1;
    s.type = type;
    s.x = x;
    s.y = y;
    s.z = z;
    s.radius = r;
    s.parent = parent;
    s.line = s.id;
    file.samples.push_back(s);
    return s.id;
  }

  // An unbranched run of `n` samples of spacing `step` from `parent` in direction `angle` (x-y plane),
  // radius tapering linearly from r0 to r1; returns the last id.
  std::int64_t run(std::int32_t type, std::int64_t parent, double angle, int n, double step, double r0,
                   double r1) {
    const SwcSample start = file.samples[static_cast<std::size_t>(parent - 1)];
    double x = start.x, y = start.y;
    std::int64_t last = parent;
    for (int k = 1; k <= n; ++k) {
      x += step * std::cos(angle);
      y += step * std::sin(angle);
      const double r = r0 + (r1 - r0) * (k - 1) / std::max(1, n - 1);
      last = add(type, x, y, start.z, r, last);
    }
    return last;
  }

  // A binary tree of `levels` levels of branches with `n` samples each; children turn by +-0.5 rad.
  void tree(std::int32_t type, std::int64_t parent, double angle, int levels, int n, double r0) {
    const std::int64_t end = run(type, parent, angle, n, 10.0, r0, 0.8 * r0);
    if (levels <= 1) return;
    tree(type, end, angle - 0.5, levels - 1, n, 0.7 * r0);
    tree(type, end, angle + 0.5, levels - 1, n, 0.7 * r0);
  }
};

}  // namespace

NeuronModel make_demo_neuron() {
  constexpr double pi = std::numbers::pi;
  DemoBuilder b;
  b.file.name = "<demo>";
  const std::int64_t soma = b.add(kSwcSoma, 0, 0, 0, 10.0, -1);
  b.run(2, soma, -pi / 2, 60, 10.0, 0.6, 0.3);                                                   // axon: 60
  for (const double angle : {pi - 0.4, pi + 0.4, -0.4, 0.4}) b.tree(3, soma, angle, 3, 8, 1.2);  // 4 x 56
  const std::int64_t trunk = b.run(4, soma, pi / 2, 30, 10.0, 2.5, 1.2);  // apical trunk: 30
  b.tree(4, trunk, pi / 2, 3, 6, 1.0);                                    // tuft: 42
  return build_neuron_model(b.file);
}

}  // namespace sparsecc
