// Compartmentalisation of a NeuronModel: the nodes and edges of the cable the Hines matrix is built on.
//
// Rules (all lengths and radii in micrometres):
// - One compartment per sample; the edge from a sample to its parent is a frustum of length
//   L = |x_s - x_p| with end radii (r_proximal, r_s). A root sample is its own compartment.
// - Zero-length segments: a sample closer than merge_length_um (1 nm) to its parent's compartment
//   node is merged into that compartment (the two points are the same node electrically; a minimum
//   length would instead put an arbitrarily large conductance into the matrix). Its children attach to
//   the surviving node, and the merged sample's radius becomes the proximal radius of their edges.
// - Zero or tiny radii: every radius is raised to at least min_radius_um (0.05 um, thinner than any
//   real neurite). Together with the merge rule this makes every edge length, radius, area and
//   conductance positive and finite, so the assembled matrix is a strictly diagonally dominant
//   M-matrix. Files without radii (all zero) therefore become thin cables rather than errors.
// - Single-point soma: a root of type soma without soma children is a sphere of area 4*pi*r^2; the
//   edges to its children are cylinders of the child's radius (the soma radius is not a cable radius)
//   unless the child was merged into the soma, whose radius then starts the edge.
// - Area: each edge gives half its lateral area pi*(r1 + r2)*sqrt(L^2 + (r1 - r2)^2) to each end node;
//   a node with no edge at all (an isolated sample) is a sphere too.
// - Resolution P >= 1: every edge is split into P equal sub-edges by P - 1 intermediate nodes with
//   linearly interpolated position and radius, giving roots + P * edges compartments.
// Compartment order: samples in file order, merged samples skipped, each sample's P - 1 intermediate
// nodes (proximal to distal) just before the sample's own node.
#pragma once

#include <cstdint>
#include <vector>

#include "sparsecc/neuron/morphology.hpp"

namespace sparsecc {

struct CompartmentOptions {
  int resolution = 1;             // P: compartments per parent -> child edge, 1 .. kMaxResolution
  double min_radius_um = 0.05;    // radii below this are raised to it (must be > 0)
  double merge_length_um = 1e-3;  // samples closer than this to their parent are merged into it
};

inline constexpr int kMaxResolution = 1000;
inline constexpr std::int64_t kMaxCompartments = std::int64_t{1} << 28;

struct Compartments {
  std::vector<std::int32_t> parent;     // compartment of the parent, -1 for cell roots
  std::vector<std::int64_t> key;        // id of the edge's distal sample: orders siblings
  std::vector<std::int32_t> sample;     // sample whose edge (or root node) this compartment is on
  std::vector<std::int32_t> type;       // SWC type of that sample
  std::vector<std::int32_t> cell;       // cell of the compartment
  std::vector<double> x, y, z, radius;  // node position and radius (after the minimum)
  std::vector<double> length;           // length of the edge to the parent (0 for roots)
  std::vector<double> proximal_radius;  // radius of that edge at the parent end
  std::vector<double> area;             // membrane area, um^2
  std::vector<std::int32_t> of_sample;  // per sample: compartment of its node (merged: the survivor)
  std::int32_t num_cells = 0;
  std::int32_t merged_samples = 0;

  std::int32_t size() const { return static_cast<std::int32_t>(parent.size()); }
};

// Throws UsageError for resolution outside [1, kMaxResolution], min_radius_um <= 0, or more than
// kMaxCompartments compartments.
Compartments compartmentalize(const NeuronModel& model, const CompartmentOptions& options = {});

}  // namespace sparsecc
