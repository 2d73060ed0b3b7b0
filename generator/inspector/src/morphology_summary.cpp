#include "sparsecc/inspector/morphology_summary.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace sparsecc {

MorphologySummary summarize_morphology(const NeuronModel& model, int resolution) {
  CompartmentOptions options;
  options.resolution = resolution;
  const Compartments c = compartmentalize(model, options);
  MorphologySummary s;
  s.name = model.name;
  s.resolution = resolution;
  s.cells = model.num_cells();
  s.samples = model.size();
  s.merged_samples = c.merged_samples;
  s.compartments = c.size();
  for (const SwcSample& a : model.samples) ++s.samples_per_type[a.type];

  std::vector<std::int32_t> children(c.parent.size(), 0);
  for (std::int32_t i = 0; i < c.size(); ++i) {
    s.total_length_um += c.length[i];
    if (c.parent[i] >= 0) ++children[c.parent[i]];
  }
  for (const std::int32_t k : children) {
    s.branch_points += k >= 2;
    s.terminals += k == 0;
  }
  // Depth: walk up to the nearest compartment of known depth, then assign down the path (O(N) total).
  std::vector<std::int64_t> depth(c.parent.size(), -1);
  std::vector<std::int32_t> path;
  for (std::int32_t i = 0; i < c.size(); ++i) {
    std::int32_t v = i;
    while (v >= 0 && depth[v] < 0) {
      path.push_back(v);
      v = c.parent[v];
    }
    std::int64_t d = v >= 0 ? depth[v] : -1;
    for (auto it = path.rbegin(); it != path.rend(); ++it) depth[*it] = ++d;
    path.clear();
  }
  for (const std::int64_t d : depth) s.max_depth = std::max(s.max_depth, d);
  return s;
}

nlohmann::json to_json(const MorphologySummary& s) {
  nlohmann::json types = nlohmann::json::object();
  for (const auto& [t, n] : s.samples_per_type) types[std::to_string(t)] = n;
  return {{"name", s.name},
          {"resolution", s.resolution},
          {"cells", s.cells},
          {"samples", s.samples},
          {"merged_samples", s.merged_samples},
          {"compartments", s.compartments},
          {"branch_points", s.branch_points},
          {"terminals", s.terminals},
          {"max_depth", s.max_depth},
          {"total_length_um", s.total_length_um},
          {"samples_per_type", types}};
}

std::string to_text(const MorphologySummary& s) {
  std::string out = fmt::format("morphology     {}\n", s.name);
  out += fmt::format("cells          {}\n", s.cells);
  out += fmt::format("samples        {} ({} merged as zero-length)\n", s.samples, s.merged_samples);
  out += fmt::format("compartments   {} (resolution {})\n", s.compartments, s.resolution);
  out += fmt::format("branch points  {}\n", s.branch_points);
  out += fmt::format("terminals      {}\n", s.terminals);
  out += fmt::format("max depth      {}\n", s.max_depth);
  out += fmt::format("total length   {:.6g} um\n", s.total_length_um);
  for (const auto& [t, n] : s.samples_per_type)
    out += fmt::format("type {:<9} {} ({})\n", t, n, swc_type_name(t));
  return out;
}

}  // namespace sparsecc
