#include "sparsecc/tune/space.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/math.hpp"
#include "sparsecc/emit/spmm_ptx.hpp"
#include "sparsecc/inspector/options_json.hpp"
#include "sparsecc/runtime/compressed_stream.hpp"
#include "sparsecc/target/target.hpp"

namespace sparsecc::tune {

namespace {

// The blocklet setting of a plan as a space value: "off", "auto" or "BHxBW:FILL".
std::string blocklet_spec(const SpmmPlan& plan) {
  if (plan.blocklets().shape.empty()) return "off";
  if (plan.blocklets().chosen_by == "auto") return "auto";
  return fmt::format("{}:{:g}", plan.blocklets().shape, plan.blocklets().fill_threshold);
}

// The coordinates of a candidate: one text per dimension, in SpmmSpaceDims order. Tiling values are
// the requested ones (a balanced plan's tallest block row may exceed its requested rows per block).
std::vector<std::string> coordinates(const SpmmCandidate& c) {
  const SpmmPlan& p = c.plan;
  return {std::to_string(c.options.rows_per_block),
          std::to_string(c.options.n_tile),
          std::to_string(c.options.groups),
          to_string(p.layout.row_split),
          to_string(p.value_mode()),
          to_string(c.emitter),
          blocklet_spec(p)};
}

// The texts of each dimension's values, in SpmmSpaceDims order.
std::vector<std::vector<std::string>> dimension_texts(const SpmmSpaceDims& d) {
  std::vector<std::vector<std::string>> out(7);
  for (auto v : d.rows_per_block) out[0].push_back(std::to_string(v));
  for (auto v : d.n_tile) out[1].push_back(std::to_string(v));
  for (auto v : d.groups) out[2].push_back(std::to_string(v));
  for (auto v : d.row_split) out[3].push_back(to_string(v));
  for (auto v : d.value_mode) out[4].push_back(to_string(v));
  for (auto v : d.emitter) out[5].push_back(to_string(v));
  out[6] = d.blocklets;
  return out;
}

// Empty when `emitter` may compile the problem, else the rule it breaks.
std::string emitter_rule(bool half, const CsrMatrix& a, KernelLanguage emitter, const SpmmSpaceDims& dims,
                         bool rolled = false) {
  if (emitter == KernelLanguage::ptx && half) return "the PTX emitter is fp32 only";
  if (rolled) return emitter == KernelLanguage::ptx ? "rolled plans compile as CUDA C++" : "";
  if (emitter == KernelLanguage::cuda && !half && a.nnz() > dims.cuda_max_nnz)
    return fmt::format("CUDA C++ for fp32 only up to {} nonzeros (NVRTC compile time)", dims.cuda_max_nnz);
  return {};
}

// Empty when the built plan is acceptable as a candidate, else the rule it breaks.
std::string plan_rule(const SpmmPlan& plan, const CsrMatrix& a, KernelLanguage emitter,
                      const SpmmOptions& base, const SpmmSpaceDims& dims) {
  const std::int32_t most = default_gpu_target().max_registers_per_thread;
  if (plan.hints.estimated_registers > most)
    return fmt::format("{} estimated registers exceed {}", plan.hints.estimated_registers, most);
  if (plan.value_mode() == SpmmValueMode::baked &&
      plan.hints.estimated_instructions > base.baked_instruction_budget)
    return fmt::format("baked code of {} instructions exceeds the budget of {}",
                       plan.hints.estimated_instructions, base.baked_instruction_budget);
  return emitter_rule(plan.half(), a, emitter, dims, plan.value_mode() == SpmmValueMode::rolled);
}

// Empty when a rolled point fits the problem, else the rule it breaks (checked before planning).
std::string rolled_rule(bool half, const SpmmProblem& problem, std::int32_t rows, SpmmRowSplit split,
                        const SpmmSpaceDims& dims) {
  if (half) return "rolled plans are fp32 only";
  if (problem.n > dims.rolled_max_n) return fmt::format("rolled plans only for N <= {}", dims.rolled_max_n);
  if (rows > dims.rolled_max_rows)
    return fmt::format("rolled plans take at most {} rows per block", dims.rolled_max_rows);
  if (split != SpmmRowSplit::equal) return "rolled plans take equal row panels";
  return {};
}

// c's plan re-planned with `options` as a variant labelled c's label + suffix, when it builds and
// stays within c's budget (the space's validity rules).
std::optional<SpmmCandidate> variant_of(const CsrMatrix& a, const SpmmCandidate& c,
                                        const SpmmOptions& options, const SpmmSpaceDims& dims,
                                        const char* suffix) {
  SpmmCandidate v;
  v.options = options;
  try {
    v.plan = plan_spmm(a, c.plan.problem, v.options);
  } catch (const UsageError&) {
    return std::nullopt;
  }
  if (!plan_rule(v.plan, a, c.emitter, c.options, dims).empty()) return std::nullopt;
  v.emitter = c.emitter;
  v.label = c.label + suffix;
  return v;
}

// c's options with its plan's tiling, split and value mode made explicit (the panel rows, not a
// balanced split's tallest block row), so that a variant changes only what it sets.
SpmmOptions pinned_options(const SpmmCandidate& c) {
  SpmmOptions o = c.options;
  o.rows_per_block = c.plan.layout.panel_rows;
  o.n_tile = c.plan.layout.n_tile;
  o.groups = c.plan.layout.groups;
  o.row_split = c.plan.layout.row_split;
  o.value_mode = c.plan.value_mode();
  return o;
}

}  // namespace

std::string spmm_label(const SpmmPlan& plan, KernelLanguage emitter, std::int32_t rows_per_block) {
  std::string s =
      fmt::format("R{}/T{}/G{}/{}/{}/{}", rows_per_block > 0 ? rows_per_block : plan.layout.rows_per_block,
                  plan.layout.n_tile, plan.layout.groups, to_string(plan.layout.row_split),
                  to_string(plan.value_mode()), to_string(emitter));
  if (plan.step_lanes() > 1) s += fmt::format("/L{}", plan.step_lanes());
  if (const SpmmCompressedBody* c = plan.compressed())
    return c->vector    ? fmt::format("compressed/vector/W{}x{}", c->warps, c->strips_per_warp)
           : c->scatter ? fmt::format("compressed/scatter/W{}x{}/K{}/P{}/S{}/R{}", c->warps,
                                      c->strips_per_warp, c->chunk_k, c->stages, c->splits, c->kept_rounds)
                        : fmt::format("compressed/W{}x{}/K{}/P{}/S{}/F{}", c->warps, c->strips_per_warp,
                                      c->chunk_k, c->stages, c->splits, c->formats);
  if (plan.half()) s += "/bl:" + blocklet_spec(plan);
  return s;
}

SpmmSpace spmm_space(const CsrMatrix& a, const SpmmProblem& problem, const SpmmOptions& base,
                     KernelLanguage default_emitter, const SpmmSpaceDims& dims) {
  SpmmSpace space;
  std::map<std::string, std::size_t> seen;
  const auto add = [&](const SpmmOptions& o, KernelLanguage emitter, bool is_default,
                       const std::string& point) {
    ++space.points;
    SpmmCandidate c;
    try {
      c.plan = plan_spmm(a, problem, o);
    } catch (const UsageError& e) {
      space.rejected.emplace_back(point, e.what());
      return;
    }
    // A default that comes out rolled compiles as CUDA C++ whatever emitter was asked for.
    if (is_default && c.plan.value_mode() == SpmmValueMode::rolled) emitter = KernelLanguage::cuda;
    if (const std::string rule = plan_rule(c.plan, a, emitter, base, dims); !rule.empty()) {
      if (is_default) throw UsageError("the default plan is not a valid candidate: " + rule);
      space.rejected.emplace_back(point, rule);
      return;
    }
    // Automatic choices become explicit, so the options reproduce the plan on their own.
    c.options = o;
    if (c.options.rows_per_block == 0)
      c.options.rows_per_block =
          c.plan.layout.row_split == SpmmRowSplit::equal ? c.plan.layout.rows_per_block : 0;
    if (!c.plan.compressed()) {
      c.options.n_tile = c.plan.layout.n_tile;
      c.options.groups = c.plan.layout.groups;
    }
    if (c.plan.value_mode() == SpmmValueMode::rolled) c.options.step_lanes = c.plan.step_lanes();
    c.emitter = emitter;
    c.is_default = is_default;
    c.label = spmm_label(c.plan, emitter, c.options.rows_per_block);
    if (seen.contains(c.label)) return;  // the same plan again
    seen.emplace(c.label, space.candidates.size());
    space.candidates.push_back(std::move(c));
  };

  add(base, default_emitter, true, "default");
  // A compressed default: its own dimensions, one at a time around the rules' plan (the grid below is
  // the unrolled families', whose code grows with the matrix these plans are made for).
  if (!space.candidates.empty() && space.candidates.front().plan.compressed()) {
    const SpmmCompressedBody& d = *space.candidates.front().plan.compressed();
    const auto variant = [&](const std::string& point, auto&& set) {
      SpmmOptions o = base;
      o.value_mode = SpmmValueMode::compressed;
      o.compressed.warps = d.warps;
      o.compressed.strips_per_warp = d.strips_per_warp;
      o.compressed.chunk_k = d.chunk_k;
      o.compressed.stages = d.stages;
      o.compressed.splits = d.splits;
      o.compressed.scatter = d.scatter;
      set(o.compressed);
      add(o, KernelLanguage::cuda, false, point);
    };
    // The vector layout in one block size: its own options alone (it takes none of the tensor-core
    // layouts'), with the default's strips where the default is a vector plan.
    const auto vector_candidate = [&](std::int32_t w) {
      SpmmOptions o = base;
      o.value_mode = SpmmValueMode::compressed;
      o.compressed = {};
      o.compressed.vector = true;
      o.compressed.warps = w;
      if (d.vector) o.compressed.strips_per_warp = d.strips_per_warp;
      add(o, KernelLanguage::cuda, false, fmt::format("vector, {} warps", w));
    };
    if (d.vector) {
      // The vector layout's other block sizes, and the tensor-core layouts at the same N.
      for (const std::int32_t w : dims.compressed_vector_warps)
        if (w != d.warps) vector_candidate(w);
      for (const bool scatter : dims.compressed_layouts) {
        SpmmOptions o = base;
        o.value_mode = SpmmValueMode::compressed;
        o.compressed.vector = false;
        o.compressed.scatter = scatter;
        add(o, KernelLanguage::cuda, false, scatter ? "scatter layout" : "records layout");
      }
      return space;
    }
    for (const std::int32_t s : dims.compressed_splits)
      variant(fmt::format("splits {}", s), [&](SpmmCompressedOptions& c) { c.splits = s; });
    for (const std::int32_t k : dims.compressed_chunk_k)
      variant(fmt::format("chunk {}", k), [&](SpmmCompressedOptions& c) {
        c.chunk_k = k;
        c.stages = 0;  // as many as fit the new chunk
      });
    for (const std::int32_t s : dims.compressed_stages)
      variant(fmt::format("stages {}", s), [&](SpmmCompressedOptions& c) { c.stages = s; });
    for (const auto& [w, st] : dims.compressed_shapes)
      variant(fmt::format("{} warps x {} strips", w, st), [&](SpmmCompressedOptions& c) {
        c.warps = w;
        c.strips_per_warp = st;
        c.chunk_k = 0;  // the chunk and stages that fit the new block
        c.stages = 0;
      });
    if (d.scatter)
      for (const std::int32_t r : dims.compressed_kept_rounds)
        if (r != d.kept_rounds)
          variant(fmt::format("kept rounds {}", r), [&](SpmmCompressedOptions& c) { c.kept_rounds = r; });
    if (!d.scatter)
      for (const std::uint32_t f : dims.compressed_formats)
        variant(fmt::format("formats {}", f), [&](SpmmCompressedOptions& c) { c.formats = f; });
    for (const bool scatter : dims.compressed_layouts)
      if (scatter != d.scatter)
        variant(scatter ? "scatter layout" : "records layout", [&](SpmmCompressedOptions& c) {
          c.scatter = scatter;
          c.warps = c.strips_per_warp = 0;  // the layout's own block shape, chunk and stages
          c.chunk_k = c.stages = 0;
        });
    // The vector layout where it applies (a fixed N up to rt::kVectorMaxN), in its block sizes.
    if (problem.n_mode == SpmmNMode::fixed && problem.n <= rt::kVectorMaxN && problem.k <= rt::kVectorMaxK)
      for (const std::int32_t w : dims.compressed_vector_warps) vector_candidate(w);
    return space;
  }
  // Second, the rules' plan of the other kind (rolled, or unrolled baked) where the dimensions hold
  // that kind: the tuner always times it, as the kinds trade places with the matrix and the L2 state.
  if (!space.candidates.empty()) {
    const bool default_rolled = space.candidates.front().plan.value_mode() == SpmmValueMode::rolled;
    const SpmmValueMode other = default_rolled ? SpmmValueMode::baked : SpmmValueMode::rolled;
    const bool rolled_fits = problem.dtype == DType::f32 && problem.n <= dims.rolled_max_n;
    if (std::find(dims.value_mode.begin(), dims.value_mode.end(), other) != dims.value_mode.end() &&
        (default_rolled || rolled_fits)) {
      SpmmOptions o = base;
      o.value_mode = other;
      add(o, default_rolled ? default_emitter : KernelLanguage::cuda, false,
          fmt::format("the rules' {} plan", to_string(other)));
    }
  }
  const bool half = problem.dtype != DType::f32;
  const std::int64_t threads_for_n = half ? (problem.n + 1) / 2 : problem.n;
  const std::int64_t widest = std::max<std::int64_t>(32, round_up(threads_for_n, 32));
  const std::vector<std::string> blocklets = half ? dims.blocklets : std::vector<std::string>{"off"};
  for (const std::string& bl : blocklets)
    for (const KernelLanguage emitter : dims.emitter)
      for (const SpmmValueMode values : dims.value_mode)
        for (const SpmmRowSplit split : dims.row_split)
          for (const std::int32_t r : dims.rows_per_block)
            for (const std::int32_t t : dims.n_tile)
              for (const std::int32_t g : dims.groups) {
                const std::string point =
                    fmt::format("R{}/T{}/G{}/{}/{}/{}{}", r, t, g, to_string(split), to_string(values),
                                to_string(emitter), half ? "/bl:" + bl : std::string());
                // Cheap rules first, without building the plan.
                const bool rolled = values == SpmmValueMode::rolled;
                std::string rule = emitter_rule(half, a, emitter, dims, rolled);
                if (rule.empty() && rolled) rule = rolled_rule(half, problem, r, split, dims);
                if (!rule.empty()) {
                } else if (r > std::max<std::int64_t>(a.rows, 1))
                  rule = fmt::format("{} rows per block exceed M = {}", r, a.rows);
                else if (r > kSpmmMaxAccumulators)
                  rule = fmt::format("{} rows per block exceed {} accumulators", r, kSpmmMaxAccumulators);
                else if (t > widest)
                  rule = fmt::format("n tile {} is wider than the {} threads N needs", t, widest);
                else if (std::int64_t{t} * g > 1024)
                  rule = fmt::format("{} groups of {} threads exceed 1024", g, t);
                if (!rule.empty()) {
                  ++space.points;
                  space.rejected.emplace_back(point, rule);
                  continue;
                }
                SpmmOptions o = base;
                o.rows_per_block = r;
                o.n_tile = t;
                o.groups = g;
                o.row_split = split;
                o.value_mode = values;
                if (half) set_blocklets(o, bl);
                add(o, emitter, false, point);
                if (rolled && t == 32 && problem.n_mode == SpmmNMode::fixed &&
                    problem.n > kSpmmStepLaneColumns && problem.n <= dims.step_lanes_max_n) {
                  o.step_lanes = spmm_step_lanes_for(problem.n);
                  add(o, emitter, false, fmt::format("{}/L{}", point, o.step_lanes));
                }
              }
  return space;
}

std::vector<SpmmCandidate> spmm_register_variants(const CsrMatrix& a, const SpmmCandidate& c,
                                                  const SpmmSpaceDims& dims) {
  std::vector<SpmmCandidate> out;
  const SpmmPlan& p = c.plan;
  if (c.emitter != KernelLanguage::ptx || p.half() || p.value_mode() == SpmmValueMode::rolled) return out;
  // What the assembler is given: the plan's cap, or the split layout's (see spmm_ptx_split_registers).
  const auto given = [](const SpmmPlan& plan) {
    return spmm_ptx_splits(plan) ? spmm_ptx_split_registers(plan) : plan.hints.max_registers;
  };
  std::vector<std::int32_t> seen{given(p)};
  for (const std::int32_t extra : dims.register_headroom) {
    const std::int32_t cap = p.hints.max_registers + extra;
    const GpuTarget& target = default_gpu_target();
    // The planner refuses a cap the block's register file cannot give every thread.
    if (extra <= 0 || cap > target.max_registers_per_thread ||
        cap > target.registers_per_block / p.layout.block_x / 8 * 8)
      continue;
    SpmmCandidate v;
    v.options = c.options;
    v.options.max_registers = cap;
    v.plan = plan_spmm(a, p.problem, v.options);
    if (std::find(seen.begin(), seen.end(), given(v.plan)) != seen.end()) continue;
    seen.push_back(given(v.plan));
    v.emitter = c.emitter;
    v.label = fmt::format("{}/r{}", c.label, cap);
    out.push_back(std::move(v));
  }
  return out;
}

std::optional<SpmmCandidate> spmm_pair_variant(const CsrMatrix& a, const SpmmCandidate& c,
                                               const SpmmSpaceDims& dims) {
  const SpmmPlan& p = c.plan;
  // Half, rolled and pair plans have two columns a thread already; plan_spmm refuses odd and runtime N.
  if (!dims.try_column_pairs || p.layout.cols_per_thread != 1) return std::nullopt;
  SpmmOptions o = c.options;
  o.cols_per_thread = 2;
  // The winner's rows and split as they were asked for (a balanced split's rows_per_block is its
  // tallest block row, not the panel height it was cut from).
  o.rows_per_block = p.layout.panel_rows;
  o.row_split = p.layout.row_split;
  return variant_of(a, c, o, dims, "/c2");
}

std::optional<SpmmCandidate> spmm_cluster_variant(const CsrMatrix& a, const SpmmCandidate& c,
                                                  const SpmmSpaceDims& dims) {
  const SpmmPlan& p = c.plan;
  // Not for a plan already clustered (asked for, or the automatic plan's).
  if (!dims.try_clustered_rows || p.half() || p.value_mode() == SpmmValueMode::rolled ||
      p.layout.cols_per_thread != 1 || p.layout.row_split == SpmmRowSplit::clustered)
    return std::nullopt;
  SpmmOptions o = pinned_options(c);
  o.row_split = SpmmRowSplit::clustered;
  return variant_of(a, c, o, dims, "/clu");
}

std::vector<SpmmCandidate> spmm_stage_variants(const CsrMatrix& a, const SpmmCandidate& c,
                                               const SpmmSpaceDims& dims) {
  std::vector<SpmmCandidate> out;
  const SpmmPlan& p = c.plan;
  if (p.half() || p.value_mode() == SpmmValueMode::rolled || p.stage_slots() > 0) return out;
  for (const std::int32_t least : dims.stage_min_entries) {
    if (least <= 0) continue;
    SpmmOptions o = pinned_options(c);
    o.stage_min_entries = least;
    auto v = variant_of(a, c, o, dims, fmt::format("/st{}", least).c_str());
    if (v && v->plan.stage_slots() > 0) out.push_back(std::move(*v));
  }
  return out;
}

std::string spmm_variant_base_label(const std::string& label) {
  std::string plan = label;
  for (bool more = true; more;) {
    const std::size_t slash = plan.rfind('/');
    const std::string last = slash == std::string::npos ? std::string() : plan.substr(slash + 1);
    const auto numbered = [&](const char* prefix) {  // prefix then one or more digits
      const std::size_t n = std::char_traits<char>::length(prefix);
      return last.size() > n && last.compare(0, n, prefix) == 0 &&
             last.find_first_not_of("0123456789", n) == std::string::npos;
    };
    more = last == "c2" || last == "clu" || numbered("r") || numbered("st");
    if (more) plan.erase(slash);
  }
  return plan;
}

nlohmann::json candidate_json(const SpmmCandidate& c) {
  // The candidate's options with the plan's choices filled in, through the options codec.
  const SpmmPlan& p = c.plan;
  SpmmOptions o;
  o.rows_per_block = c.options.rows_per_block;
  o.n_tile = p.layout.n_tile;
  o.groups = p.layout.groups;
  o.max_registers = c.options.max_registers;
  o.row_split = p.layout.row_split;
  o.value_mode = p.value_mode();
  if (p.fp32_pairs()) o.cols_per_thread = 2;
  if (p.value_mode() == SpmmValueMode::rolled) o.step_lanes = p.step_lanes();
  if (p.stage_slots() > 0) o.stage_min_entries = p.stage_min_entries();
  if (p.half()) {
    set_blocklets(o, blocklet_spec(p));
    o.accumulate = p.epilogue.accumulate;
  }
  if (const SpmmCompressedBody* b = p.compressed()) {
    o.n_tile = b->n_tile;
    o.groups = 0;
    o.compressed = {b->warps,         b->strips_per_warp, b->chunk_k, b->splits,      b->stages, b->formats,
                    b->bitmap_weight, b->position_weight, b->scatter, b->kept_rounds, b->vector};
    if (b->vector) {  // the layout takes its block size alone
      o.compressed = {};
      o.compressed.vector = true;
      o.compressed.warps = b->warps;
      o.compressed.strips_per_warp = b->strips_per_warp;
    }
  }
  nlohmann::json j = to_json(o);
  j["emitter"] = to_string(c.emitter);
  return j;
}

std::pair<SpmmOptions, KernelLanguage> spmm_options_from_json(const nlohmann::json& j,
                                                              const SpmmOptions& base) {
  const std::string context = "tuning options";
  if (!j.is_object()) throw UsageError(context + ": expected an object");
  // A record states every dimension of the space; blocklets only for half precision (absent: off).
  for (const char* key : {"rows_per_block", "n_tile", "groups"})
    if (!j.contains(key)) throw UsageError(fmt::format("{}: '{}' must be an integer", context, key));
  for (const char* key : {"row_split", "value_mode", "emitter"})
    if (!j.contains(key) || !j[key].is_string())
      throw UsageError(fmt::format("{}: '{}' must be a string", context, key));
  SpmmOptions start = base;
  start.blocklets = SpmmBlockletMode::off;
  return {sparsecc::spmm_options_from_json(j, context, start),
          parse_kernel_language(j["emitter"].get<std::string>())};
}

nlohmann::json to_json(const SpmmSpace& space, const SpmmSpaceDims& dims) {
  const auto texts = dimension_texts(dims);
  static const char* const names[] = {"rows_per_block", "n_tile",  "groups",   "row_split",
                                      "value_mode",     "emitter", "blocklets"};
  nlohmann::json d = nlohmann::json::object();
  for (std::size_t i = 0; i < texts.size(); ++i) d[names[i]] = texts[i];
  d["cuda_max_nnz"] = dims.cuda_max_nnz;
  d["register_headroom_of_the_winner"] = dims.register_headroom;
  // The ASpT-style choice, taken in the last step like the register caps: plain loads (the space's
  // plans) or the winner with its dense steps staged in shared memory.
  d["staged_steps_of_the_winner"] = dims.stage_min_entries;
  nlohmann::json cands = nlohmann::json::array();
  for (const SpmmCandidate& c : space.candidates)
    cands.push_back({{"label", c.label},
                     {"default", c.is_default},
                     {"options", candidate_json(c)},
                     {"estimated_registers", c.plan.hints.estimated_registers},
                     {"estimated_instructions", c.plan.hints.estimated_instructions}});
  nlohmann::json rejected = nlohmann::json::array();
  for (const auto& [point, rule] : space.rejected) rejected.push_back({{"point", point}, {"rule", rule}});
  return {{"op", "spmm"},
          {"dimensions", d},
          {"points", space.points},
          {"candidates", cands},
          {"rejected", rejected}};
}

std::vector<std::size_t> spmm_neighbours(const SpmmSpace& space, std::size_t c, const SpmmSpaceDims& dims) {
  const auto texts = dimension_texts(dims);
  const std::vector<std::string> at = coordinates(space.candidates.at(c));
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < space.candidates.size(); ++i) {
    if (i == c) continue;
    const std::vector<std::string> other = coordinates(space.candidates[i]);
    int differing = -1, count = 0;
    for (std::size_t d = 0; d < at.size(); ++d)
      if (at[d] != other[d]) {
        differing = static_cast<int>(d);
        ++count;
      }
    if (count != 1) continue;
    const auto& list = texts[static_cast<std::size_t>(differing)];
    const auto p = std::find(list.begin(), list.end(), at[static_cast<std::size_t>(differing)]);
    const auto q = std::find(list.begin(), list.end(), other[static_cast<std::size_t>(differing)]);
    // One step along an ordered dimension; any other value of an unordered one (split, values,
    // emitter, blocklets) or of a value outside the list (an automatic choice).
    const bool ordered = differing <= 2;
    if (!ordered || p == list.end() || q == list.end() || std::abs(static_cast<int>(p - q)) == 1)
      out.push_back(i);
  }
  return out;
}

}  // namespace sparsecc::tune
