#include "sparsecc/inspector/options_json.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <type_traits>

#include "sparsecc/common/error.hpp"

namespace sparsecc {

namespace {

using json = nlohmann::json;

const char* programmatic_word(SpmmProgrammatic p) {
  switch (p) {
    case SpmmProgrammatic::off:
      return "off";
    case SpmmProgrammatic::wait:
      return "wait";
    case SpmmProgrammatic::trigger:
      return "trigger";
  }
  return "off";
}

// Typed access to the optional keys of an options object, failing with `context` and the key.
struct Fields {
  const json& j;
  const std::string& context;

  bool has(const char* key) const { return j.contains(key); }
  template <class Int>
  void integer(const char* key, Int& field) const {
    if (!has(key)) return;
    if (!j[key].is_number_integer())
      throw UsageError(fmt::format("{}: '{}' must be an integer", context, key));
    field = j[key].get<Int>();
  }
  std::string text(const char* key) const {
    if (!j[key].is_string()) throw UsageError(fmt::format("{}: '{}' must be a string", context, key));
    return j[key].get<std::string>();
  }
};

}  // namespace

std::string blocklet_spec(const SpmmOptions& o) {
  switch (o.blocklets) {
    case SpmmBlockletMode::off:
      return "off";
    case SpmmBlockletMode::automatic:
      return "auto";
    case SpmmBlockletMode::forced:
      break;
  }
  return fmt::format("{}x{}:{:g}", o.blocklet_shape.bh, o.blocklet_shape.bw, o.blocklet_fill);
}

json to_json(const SpmmOptions& o) {
  const SpmmOptions defaults;
  json j{{"rows_per_block", o.rows_per_block},
         {"n_tile", o.n_tile},
         {"groups", o.groups},
         {"max_registers", o.max_registers}};
  if (o.row_split) j["row_split"] = to_string(*o.row_split);
  if (o.value_mode) j["value_mode"] = to_string(*o.value_mode);
  if (o.cols_per_thread) j["cols_per_thread"] = o.cols_per_thread;
  if (o.step_lanes) j["step_lanes"] = o.step_lanes;
  if (o.stage_min_entries) j["stage_min_entries"] = o.stage_min_entries;
  if (o.accumulate) j["accumulate"] = dtype_name(*o.accumulate);
  if (o.blocklets != SpmmBlockletMode::off || o.accumulate) j["blocklets"] = blocklet_spec(o);
  if (o.assembler_opt_level) j["assembler_opt_level"] = *o.assembler_opt_level;
  if (o.programmatic) j["programmatic"] = programmatic_word(*o.programmatic);
  if (o.kernel_name != defaults.kernel_name) j["kernel_name"] = o.kernel_name;
  if (o.baked_instruction_budget != defaults.baked_instruction_budget)
    j["baked_instruction_budget"] = o.baked_instruction_budget;
  if (o.compressed != defaults.compressed) {
    const SpmmCompressedOptions& c = o.compressed;
    json jc{{"warps", c.warps},
            {"strips_per_warp", c.strips_per_warp},
            {"chunk_k", c.chunk_k},
            {"stages", c.stages},
            {"splits", c.splits}};
    if (c.kept_rounds) jc["kept_rounds"] = c.kept_rounds;
    if (c.formats) jc["formats"] = *c.formats;
    if (c.bitmap_weight) jc["bitmap_weight"] = *c.bitmap_weight;
    if (c.position_weight) jc["position_weight"] = *c.position_weight;
    if (c.vector.value_or(false))
      jc["layout"] = "vector";
    else if (c.scatter)
      jc["layout"] = *c.scatter ? "scatter" : "records";
    j["compressed"] = std::move(jc);
  }
  return j;
}

SpmmOptions spmm_options_from_json(const json& j, const std::string& context, SpmmOptions o) {
  if (!j.is_object()) throw UsageError(fmt::format("{}: expected an object", context));
  const Fields f{j, context};
  f.integer("rows_per_block", o.rows_per_block);
  f.integer("n_tile", o.n_tile);
  f.integer("groups", o.groups);
  f.integer("max_registers", o.max_registers);
  f.integer("cols_per_thread", o.cols_per_thread);
  f.integer("step_lanes", o.step_lanes);
  f.integer("stage_min_entries", o.stage_min_entries);
  f.integer("baked_instruction_budget", o.baked_instruction_budget);
  if (f.has("assembler_opt_level")) {
    std::int32_t level = 0;
    f.integer("assembler_opt_level", level);
    o.assembler_opt_level = level;
  }
  if (f.has("row_split"))
    o.row_split = parse_row_split(f.text("row_split"), fmt::format("{}: 'row_split'", context));
  if (f.has("value_mode"))
    o.value_mode = parse_value_mode(f.text("value_mode"), fmt::format("{}: 'value_mode'", context));
  if (f.has("accumulate"))
    o.accumulate = require_dtype(f.text("accumulate"), fmt::format("{}: 'accumulate'", context), kSpmmDtypes);
  // A plan records an automatic choice as "auto": replaying it re-runs the same proposal.
  if (f.has("blocklets")) set_blocklets(o, f.text("blocklets"));
  if (f.has("programmatic"))
    o.programmatic = parse_programmatic(f.text("programmatic"), fmt::format("{}: 'programmatic'", context));
  if (f.has("kernel_name")) o.kernel_name = f.text("kernel_name");
  if (f.has("compressed")) {
    const std::string where = fmt::format("{}: 'compressed'", context);
    if (!j["compressed"].is_object()) throw UsageError(where + " must be an object");
    const Fields c{j["compressed"], where};
    SpmmCompressedOptions& co = o.compressed;
    c.integer("warps", co.warps);
    c.integer("strips_per_warp", co.strips_per_warp);
    c.integer("chunk_k", co.chunk_k);
    if (c.has("stages")) c.integer("stages", co.stages);
    c.integer("splits", co.splits);
    if (c.has("kept_rounds")) c.integer("kept_rounds", co.kept_rounds);
    const auto optional = [&](const char* key, auto& field) {
      if (!c.has(key)) return;
      typename std::remove_reference_t<decltype(field)>::value_type v{};
      c.integer(key, v);
      field = v;
    };
    optional("formats", co.formats);
    optional("bitmap_weight", co.bitmap_weight);
    optional("position_weight", co.position_weight);
    if (c.has("layout"))
      if (const std::string layout = c.text("layout"); !set_compressed_layout(co, layout))
        throw UsageError(fmt::format("{}: 'layout' is '{}', not records, scatter or vector", where, layout));
  }
  return o;
}

json to_json(const HinesOptions& o) {
  return {{"decomposition", to_string(o.decomposition)},
          {"k", o.k},
          {"k_large", o.k_large},
          {"depth", o.depth},
          {"block_threads", o.block_threads},
          {"code", o.code}};
}

HinesOptions hines_options_from_json(const json& j, const std::string& name, HinesOptions base) {
  if (!j.is_object()) throw InputError(SourceLocation::in_file(name), "Hines options are not a JSON object");
  const auto integer = [&](const char* key, std::int32_t& field) {
    if (!j.contains(key)) return;
    if (!j[key].is_number_integer())
      throw InputError(SourceLocation::in_file(name),
                       fmt::format("Hines option '{}' is not an integer", key));
    field = j[key].get<std::int32_t>();
  };
  integer("k", base.k);
  integer("k_large", base.k_large);
  integer("depth", base.depth);
  integer("block_threads", base.block_threads);
  if (j.contains("decomposition")) {
    const std::string d = j["decomposition"].is_string() ? j["decomposition"].get<std::string>() : "";
    if (d != "fine" && d != "minimal")
      throw InputError(SourceLocation::in_file(name),
                       "Hines option 'decomposition' is neither fine nor minimal");
    base.decomposition = d == "minimal" ? HinesDecomposition::minimal : HinesDecomposition::fine;
  }
  if (j.contains("code")) {
    if (!j["code"].is_string())
      throw InputError(SourceLocation::in_file(name), "Hines option 'code' is not a string");
    base.code = j["code"].get<std::string>();
  }
  return base;
}

}  // namespace sparsecc
