// SWC morphology reader: the raw samples of a file, before any tree validation.
//
// Format: one sample per line, `id type x y z radius parent`, separated by spaces or tabs.
// - `#` starts a comment (whole-line or trailing); blank lines are skipped; a UTF-8 BOM is ignored.
// - Exactly 7 fields. Extra trailing fields are rejected (not ignored): a line with more fields is
//   almost always a misaligned or merged line, and silently dropping columns would mis-read it.
// - id: integer >= 0; type: integer >= 0 (0 undefined, 1 soma, 2 axon, 3 basal, 4 apical, others
//   custom); parent: integer, -1 for a root, otherwise >= 0. Other negative values are rejected.
// - x, y, z, radius: finite decimal numbers (NaN/Inf rejected) of magnitude at most kMaxSwcCoordinate
//   (so every later length, area and conductance stays finite); radius must be >= 0. Units are taken
//   as micrometres.
// Ids, parents and ordering are not checked here (build_neuron_model in neuron/morphology.hpp does
// that). Errors are InputError naming the file and line, e.g. `cell.swc:12: radius -1 is negative`.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace sparsecc {

// Largest accepted |coordinate| and radius, in micrometres (1 km).
inline constexpr double kMaxSwcCoordinate = 1e9;

struct SwcSample {
  std::int64_t id = 0;
  std::int32_t type = 0;
  double x = 0, y = 0, z = 0;
  double radius = 0;
  std::int64_t parent = -1;  // -1 for a root
  std::int64_t line = 0;     // 1-based line in the file
};

struct SwcFile {
  std::string name;                // file name as given, for messages
  std::vector<SwcSample> samples;  // in file order
};

SwcFile parse_swc(std::span<const unsigned char> data, const std::string& name);
SwcFile read_swc(const std::string& path);  // gzip-compressed files are read transparently

// "undefined" (0), "soma" (1), "axon" (2), "basal dendrite" (3), "apical dendrite" (4), "custom" (others).
const char* swc_type_name(std::int32_t type);

}  // namespace sparsecc
