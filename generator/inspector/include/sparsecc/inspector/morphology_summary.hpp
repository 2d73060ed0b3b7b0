// Morphology statistics for `sparsecc inspect cell.swc`.
// Counts come from the compartment tree at the given resolution (compartments.hpp): branch points are
// compartments with >= 2 children, terminals those with none (an isolated root included), max_depth
// the largest number of edges from a cell's root to a compartment, total length the sum of edge
// lengths in um. samples_per_type counts the file's samples by SWC type.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "sparsecc/neuron/compartments.hpp"

namespace sparsecc {

struct MorphologySummary {
  std::string name;
  int resolution = 1;
  std::int64_t cells = 0;
  std::int64_t samples = 0;
  std::int64_t merged_samples = 0;  // zero-length segments merged into their parent
  std::int64_t compartments = 0;
  std::int64_t branch_points = 0;
  std::int64_t terminals = 0;
  std::int64_t max_depth = 0;
  double total_length_um = 0;
  std::map<std::int32_t, std::int64_t> samples_per_type;
};

// Throws UsageError for a resolution outside [1, kMaxResolution].
MorphologySummary summarize_morphology(const NeuronModel& model, int resolution = 1);

// Keys: name, resolution, cells, samples, merged_samples, compartments, branch_points, terminals,
// max_depth, total_length_um, samples_per_type (object keyed by the type number as a string).
nlohmann::json to_json(const MorphologySummary& summary);
std::string to_text(const MorphologySummary& summary);  // a few aligned lines, newline-terminated

}  // namespace sparsecc
