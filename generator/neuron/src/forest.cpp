#include "sparsecc/neuron/forest.hpp"

#include <fmt/format.h>

#include <random>

#include "sparsecc/common/error.hpp"
#include "sparsecc/neuron/morphology.hpp"

namespace sparsecc {

HinesSystem load_hines_forest(const std::vector<std::string>& swc_files, int copies, int resolution) {
  if (swc_files.empty()) throw UsageError("load_hines_forest: no SWC files");
  if (copies < 1) throw UsageError("load_hines_forest: copies must be at least 1");
  CompartmentOptions co;
  co.resolution = resolution;
  // The forest's size is checked against the limit as the files are read, before any copy is made.
  std::vector<HinesSystem> files;
  std::int64_t rows = 0;
  for (const auto& f : swc_files) {
    files.push_back(assemble_hines(load_neuron(f), CableParams{}, co));
    rows += files.back().size();
    if (rows * copies > kMaxCompartments)
      throw UsageError(
          fmt::format("{} copies of a forest of {}{} compartments are more than the limit of {} "
                      "compartments",
                      copies, rows, files.size() < swc_files.size() ? " or more" : "", kMaxCompartments));
  }
  std::vector<HinesSystem> parts;
  parts.reserve(files.size() * static_cast<std::size_t>(copies));
  for (int c = 0; c < copies; ++c) parts.insert(parts.end(), files.begin(), files.end());
  return concatenate_hines(parts);
}

std::vector<double> random_step_rhs(const HinesSystem& s, std::size_t r, std::uint64_t seed) {
  if (s.cap_over_dt.size() != static_cast<std::size_t>(s.size()))
    throw UsageError(
        "random_step_rhs: the system has no passive-step terms (not assembled from a morphology)");
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> v_old(-80, -50), i_ext(-0.1, 0.1);
  const auto n = static_cast<std::size_t>(s.size());
  std::vector<double> b(n * r), v(n), i(n);
  for (std::size_t c = 0; c < r; ++c) {
    for (std::size_t j = 0; j < n; ++j) {
      v[j] = v_old(rng);
      i[j] = i_ext(rng);
    }
    const std::vector<double> col = hines_rhs(s, v, i);
    for (std::size_t j = 0; j < n; ++j) b[j * r + c] = col[j];
  }
  return b;
}

}  // namespace sparsecc
