// The Hines solver's search space: the planner's options that shape the executor, declared as data
// with validity rules, and the candidates they give for one forest (sparsecc/inspector/
// hines_planner.hpp).
//
// Dimensions: K of the fine decomposition on the block-kernel levels, K on the grid-kernel levels,
// the depth D (the threshold rule's for those K, or one level fewer or more), and the threads of the per-cell
// block kernel (the execution rule's, or a fixed count). Validity: plan_hines accepts the options and
// check_hines_plan finds nothing wrong; options giving the same plan are kept once. The first
// candidate is the default plan (every option as `base` leaves it).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "sparsecc/inspector/hines_planner.hpp"
#include "sparsecc/neuron/hines.hpp"
#include "sparsecc/plan/hines_plan.hpp"

namespace sparsecc::tune {

struct HinesSpaceDims {
  std::vector<std::int32_t> k{2, 3, 4, 6, 8};
  std::vector<std::int32_t> k_large{4, 8, 16};
  std::vector<std::int32_t> depth_offset{-1, 0, 1};  // levels added to the rule's depth for that K
  std::vector<std::int32_t> block_threads{0, 128, 256, 512, 1024};  // 0: the execution rule
};

struct HinesCandidate {
  std::string label;  // "K3/KL8/D4/BT512" (the plan's depth and block threads)
  HinesOptions options;
  bool is_default = false;
  HinesPlan plan;
};

struct HinesSpace {
  std::vector<HinesCandidate> candidates;                     // the default plan first
  std::vector<std::pair<std::string, std::string>> rejected;  // (point, the rule it breaks)
  std::int64_t points = 0;
};

// The space for `system` with R = rhs right-hand sides in `dtype`, planned for `target`. Throws what
// plan_hines throws for the default plan (an invalid system, rhs or dtype).
HinesSpace hines_space(const HinesSystem& system, std::int32_t rhs, const std::string& dtype,
                       const HinesOptions& base = {}, const HinesSpaceDims& dims = {},
                       const GpuTarget& target = default_gpu_target());

// The dimensions, the candidates (label, default flag, options, depth, launches) and the rejected
// points with their rules.
nlohmann::json to_json(const HinesSpace& space, const HinesSpaceDims& dims);

}  // namespace sparsecc::tune
