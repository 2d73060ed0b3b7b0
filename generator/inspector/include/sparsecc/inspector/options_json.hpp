// The planners' options as JSON and back: one codec for every place that stores or reads them (the
// tuning database's candidate and winner options through sparsecc/tune/space.hpp and
// hines_tuner.hpp, and whatever records a plan's options).
//
// SpmmOptions: an object of the fields that are set. Always rows_per_block, n_tile, groups and
// max_registers (0: automatic); row_split and value_mode ("equal", ... / "baked", ...) when chosen;
// cols_per_thread, step_lanes and stage_min_entries when not 0; accumulate when not empty;
// blocklets ("off", "auto" or "BHxBW:FILL", e.g. "16x8:0.75") when not off or when accumulate is
// set (a half-precision choice records "off" as well); assembler_opt_level and programmatic ("off",
// "wait", "trigger") when chosen; kernel_name and baked_instruction_budget when not the default;
// "compressed" ({"warps", "strips_per_warp", "chunk_k", "splits"} and "formats", "bitmap_weight",
// "position_weight" when set) when the compressed family's options are not all automatic.
// Reading applies the keys present to `base` and leaves the others; a key of the wrong type or an
// unknown word throws UsageError naming `context` and the key ("tuning options: 'n_tile' must be an
// integer"). Unknown keys are ignored (the tuning database stores its "emitter" beside them).
//
// HinesOptions: {"decomposition": "fine" | "minimal", "k", "k_large", "depth", "block_threads",
// "code"}, the fields a tuned candidate differs in. Reading applies the keys present to `base`; a
// malformed key throws InputError in the file `name`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "sparsecc/inspector/hines_planner.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"

namespace sparsecc {

nlohmann::json to_json(const SpmmOptions& options);
SpmmOptions spmm_options_from_json(const nlohmann::json& j, const std::string& context,
                                   SpmmOptions base = {});

// "off", "auto" or "BHxBW:FILL" (FILL as %g); set_blocklets reads it back.
std::string blocklet_spec(const SpmmOptions& options);

nlohmann::json to_json(const HinesOptions& options);
HinesOptions hines_options_from_json(const nlohmann::json& j, const std::string& name,
                                     HinesOptions base = {});

}  // namespace sparsecc
