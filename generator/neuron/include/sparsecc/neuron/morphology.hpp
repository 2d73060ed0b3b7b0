// A validated neuron morphology: the SWC samples arranged as a forest of cells.
//
// Rules (build_neuron_model), each violation an InputError naming the file and the offending line:
// - at least one sample; ids unique (`duplicate sample id 4 (first defined at line 5)`);
// - every parent other than -1 exists (`parent 7 of sample 8 does not exist`) and differs from the
//   sample itself; no parent cycles (a cycle has no root: `samples 3 -> 4 -> 3 form a parent cycle`);
// - samples may appear in any order and ids need not be contiguous;
// - every root (parent -1) starts one cell: a file is a forest whose connected components are the
//   cells, so each cell has exactly one root by construction. Several roots, several somata as
//   separate roots, or neurites traced without a connection to the soma therefore give several cells;
//   connectivity is taken literally because it is what defines the electrical coupling;
// - within a cell the soma samples (type 1) must form the root region: a soma sample whose parent is a
//   neurite (type 2 axon, 3 basal, 4 apical) is rejected, and so is a soma that branches (a soma sample
//   with more than two soma neighbours). A soma is a single point, a 3-point soma or an unbranched
//   contour. Samples of type 0 or custom types (>= 5) carry no such rule.
// Geometry (zero lengths, zero radii) is not judged here; see compartments.hpp.
// Cells are ordered by the id of their root; each sample's children by id. Both orders are therefore
// independent of the order of the lines in the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparsecc/io/swc.hpp"

namespace sparsecc {

struct NeuronModel {
  std::string name;                         // source file, for messages
  std::vector<SwcSample> samples;           // in file order
  std::vector<std::int32_t> parent;         // per sample: index of the parent sample, -1 for roots
  std::vector<std::int32_t> child_offsets;  // CSR: children of s are children[child_offsets[s] ..
  std::vector<std::int32_t> children;       //   child_offsets[s+1]), sorted by id
  std::vector<std::int32_t> roots;          // root sample of each cell, sorted by id
  std::vector<std::int32_t> cell;           // per sample: its cell

  std::int32_t size() const { return static_cast<std::int32_t>(samples.size()); }
  std::int32_t num_cells() const { return static_cast<std::int32_t>(roots.size()); }
  std::int32_t num_children(std::int32_t s) const { return child_offsets[s + 1] - child_offsets[s]; }
};

inline constexpr std::int32_t kSwcSoma = 1;

NeuronModel build_neuron_model(const SwcFile& file);
NeuronModel load_neuron(const std::string& path);  // read_swc + build_neuron_model

// The built-in cell of `sparsecc demo`, from a fixed recipe (no randomness): a single-point soma
// (radius 10 um), an axon of 60 samples, four basal dendrites that bifurcate twice (7 branches of 8
// samples each) and an apical trunk of 30 samples ending in a twice-bifurcating tuft of 6-sample
// branches: 357 samples, one cell.
NeuronModel make_demo_neuron();

}  // namespace sparsecc
