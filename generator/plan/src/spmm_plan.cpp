#include "sparsecc/plan/spmm_plan.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "sparsecc/common/error.hpp"

namespace sparsecc {

namespace {

using json = nlohmann::json;

const char* name(SpmmNMode m) { return m == SpmmNMode::fixed ? "fixed" : "runtime"; }
const char* name(SpmmValueMode m) { return m == SpmmValueMode::baked ? "baked" : "streamed"; }
const char* name(SpmmRowSplit s) { return s == SpmmRowSplit::equal ? "equal" : "balanced"; }

template <typename E>
E parse_enum(const json& j, const char* key, E a, E b) {
  const std::string s = j.at(key).get<std::string>();
  if (s == name(a)) return a;
  if (s == name(b)) return b;
  throw UsageError(fmt::format("SpMM plan: bad {} '{}'", key, s));
}

// Calls fn(block, group, step, entry) for every entry in emission order.
template <typename Fn>
void for_each_entry(const SpmmPlan& plan, Fn&& fn) {
  for (const auto& b : plan.blocks)
    for (const auto& g : b.groups)
      for (const auto& s : g.steps)
        for (const auto& e : s.entries) fn(b, g, s, e);
}

void check_block(const SpmmPlan& p, const CsrMatrix& a, std::size_t bi, std::vector<char>& seen,
                 std::vector<std::string>& errors) {
  const SpmmBlockRow& b = p.blocks[bi];
  const auto err = [&](const std::string& s) { errors.push_back(fmt::format("block row {}: {}", bi, s)); };
  if (b.row_end - b.row_begin > p.rows_per_block) err("more rows than rows_per_block");
  if (static_cast<std::int32_t>(b.groups.size()) != p.groups) err("group count differs from groups");
  std::int64_t total = 0;
  std::vector<std::int64_t> group_nnzs;
  std::int64_t max_col = 0;  // most nonzeros of one step (one column), for the balance bound
  for (std::int64_t r = b.row_begin; r < b.row_end && r < a.rows; ++r) total += a.row_nnz(r);
  std::int64_t last_k = -1;
  for (std::size_t gi = 0; gi < b.groups.size(); ++gi) {
    std::int64_t group_nnz = 0;
    for (const auto& s : b.groups[gi].steps) {
      if (s.k <= last_k) err(fmt::format("group {}: step k {} does not ascend", gi, s.k));
      if (s.entries.empty()) err(fmt::format("group {}: step k {} has no entries", gi, s.k));
      last_k = s.k;
      std::int32_t last_row = -1;
      for (const auto& e : s.entries) {
        const std::int64_t row = b.row_begin + e.row;
        if (e.row <= last_row || row >= b.row_end) err(fmt::format("k {}: bad row {}", s.k, e.row));
        last_row = e.row;
        if (e.value_index < 0 || e.value_index >= a.nnz() || e.value_index < a.row_ptr[row] ||
            e.value_index >= a.row_ptr[row + 1] || a.col_idx[e.value_index] != s.k) {
          err(fmt::format("k {} row {}: value index {} is not A[{}][{}]", s.k, e.row, e.value_index, row,
                          s.k));
          continue;
        }
        if (seen[e.value_index]++) err(fmt::format("nonzero {} appears twice", e.value_index));
      }
      group_nnz += static_cast<std::int64_t>(s.entries.size());
      max_col = std::max<std::int64_t>(max_col, static_cast<std::int64_t>(s.entries.size()));
    }
    group_nnzs.push_back(group_nnz);
  }
  const std::int64_t bound =
      (total + p.groups - 1) / std::max(p.groups, 1) + std::max<std::int64_t>(max_col - 1, 0);
  for (std::size_t gi = 0; gi < group_nnzs.size(); ++gi)
    if (group_nnzs[gi] > bound)
      err(fmt::format("group {} has {} nonzeros, above the balance bound {}", gi, group_nnzs[gi], bound));
}

}  // namespace

std::int64_t spmm_plan_loads(const SpmmPlan& plan) {
  std::int64_t n = 0;
  for (const auto& b : plan.blocks)
    for (const auto& g : b.groups) n += static_cast<std::int64_t>(g.steps.size());
  return n;
}

std::int64_t spmm_plan_nnz(const SpmmPlan& plan) {
  std::int64_t n = 0;
  for_each_entry(plan, [&](auto&, auto&, auto&, auto&) { ++n; });
  return n;
}

std::vector<float> spmm_kernel_values(const SpmmPlan& plan, const CsrMatrix& a) {
  std::vector<float> out;
  if (plan.value_mode == SpmmValueMode::streamed) {
    for (std::int64_t i : plan.packed_order) out.push_back(static_cast<float>(a.values.at(i)));
  } else {
    for (double v : a.values) out.push_back(static_cast<float>(v));
  }
  return out;
}

std::vector<std::string> check_plan(const SpmmPlan& p, const CsrMatrix& a) {
  std::vector<std::string> errors;
  const auto err = [&](std::string s) { errors.push_back(std::move(s)); };
  const SpmmProblem& pr = p.problem;
  if (pr.m != a.rows || pr.k != a.cols)
    err(fmt::format("problem {}x{} but A is {}x{}", pr.m, pr.k, a.rows, a.cols));
  if (pr.n < 1) err("n must be positive");
  if (pr.dtype != "f32") err("dtype must be f32");
  if (p.n_tile < 1 || p.groups < 1 || p.block_x != p.n_tile * p.groups || p.block_x > 1024)
    err(fmt::format("launch shape: n_tile {} groups {} block_x {}", p.n_tile, p.groups, p.block_x));
  if (p.rows_per_block < 1 || p.rows_per_block > kSpmmMaxAccumulators)
    err(fmt::format("rows_per_block {} outside 1..{}", p.rows_per_block, kSpmmMaxAccumulators));
  if (p.shared_bytes != std::int64_t{p.groups - 1} * p.rows_per_block * p.n_tile * 4)
    err("shared_bytes differs from (groups - 1) * rows_per_block * n_tile * 4");
  if (p.max_registers < p.estimated_registers || p.max_registers > kSpmmMaxRegisters)
    err(fmt::format("max_registers {} outside {}..{} (the accumulators and the overhead)", p.max_registers,
                    p.estimated_registers, kSpmmMaxRegisters));
  if (p.assembler_opt_level < 0 || p.assembler_opt_level > 3)
    err(fmt::format("assembler_opt_level {} outside 0..3", p.assembler_opt_level));
  if (!errors.empty()) return errors;
  if (pr.m > 0 && p.blocks.empty()) err("no block rows");
  std::int64_t next = 0;
  for (const auto& b : p.blocks) {
    if (b.row_begin != next || b.row_end <= b.row_begin)
      err(fmt::format("block row [{}, {}) does not continue at row {}", b.row_begin, b.row_end, next));
    next = b.row_end;
  }
  if (next != pr.m) err(fmt::format("block rows end at row {}, not {}", next, pr.m));
  if (!errors.empty()) return errors;
  std::vector<char> seen(static_cast<std::size_t>(a.nnz()), 0);
  for (std::size_t bi = 0; bi < p.blocks.size(); ++bi) check_block(p, a, bi, seen, errors);
  const auto missing = std::count(seen.begin(), seen.end(), 0);
  if (missing) err(fmt::format("{} nonzeros of A appear in no step", missing));
  if (p.value_mode == SpmmValueMode::streamed) {
    std::vector<std::int64_t> order;
    for_each_entry(p, [&](auto&, auto&, auto&, const SpmmEntry& e) { order.push_back(e.value_index); });
    if (order != p.packed_order) err("packed_order is not the emission order");
  } else if (!p.packed_order.empty()) {
    err("packed_order must be empty in baked mode");
  }
  return errors;
}

json to_json(const SpmmPlan& p) {
  json blocks = json::array();
  for (const auto& b : p.blocks) {
    json groups = json::array();
    for (const auto& g : b.groups) {
      json steps = json::array();
      for (const auto& s : g.steps) {
        json entries = json::array();
        for (const auto& e : s.entries) entries.push_back({e.row, e.value_index});
        steps.push_back({s.k, std::move(entries)});
      }
      groups.push_back(std::move(steps));
    }
    blocks.push_back({{"rows", {b.row_begin, b.row_end}}, {"groups", std::move(groups)}});
  }
  const SpmmProblem& pr = p.problem;
  return {{"kind", "spmm"},
          {"problem",
           {{"m", pr.m},
            {"k", pr.k},
            {"n", pr.n},
            {"n_mode", name(pr.n_mode)},
            {"bias", pr.bias},
            {"relu", pr.relu},
            {"dtype", pr.dtype}}},
          {"value_mode", name(p.value_mode)},
          {"kernel_name", p.kernel_name},
          {"row_split", name(p.row_split)},
          {"rows_per_block", p.rows_per_block},
          {"n_tile", p.n_tile},
          {"groups", p.groups},
          {"block_x", p.block_x},
          {"block_rows", p.block_rows()},
          {"shared_bytes", p.shared_bytes},
          {"estimated_registers", p.estimated_registers},
          {"max_registers", p.max_registers},
          {"estimated_instructions", p.estimated_instructions},
          {"assembler_opt_level", p.assembler_opt_level},
          {"packed_order", p.packed_order},
          {"blocks", std::move(blocks)}};
}

SpmmPlan plan_from_json(const json& j) {
  try {
    if (j.at("kind") != "spmm") throw UsageError("SpMM plan: kind is not 'spmm'");
    SpmmPlan p;
    const json& pr = j.at("problem");
    p.problem = {pr.at("m"),    pr.at("k"),
                 pr.at("n"),    parse_enum(pr, "n_mode", SpmmNMode::fixed, SpmmNMode::runtime),
                 pr.at("bias"), pr.at("relu"),
                 pr.at("dtype")};
    p.value_mode = parse_enum(j, "value_mode", SpmmValueMode::baked, SpmmValueMode::streamed);
    p.kernel_name = j.at("kernel_name");
    p.row_split = parse_enum(j, "row_split", SpmmRowSplit::equal, SpmmRowSplit::balanced);
    p.rows_per_block = j.at("rows_per_block");
    p.n_tile = j.at("n_tile");
    p.groups = j.at("groups");
    p.block_x = j.at("block_x");
    p.shared_bytes = j.at("shared_bytes");
    p.estimated_registers = j.at("estimated_registers");
    p.max_registers = j.at("max_registers");
    p.estimated_instructions = j.at("estimated_instructions");
    p.assembler_opt_level = j.at("assembler_opt_level");
    p.packed_order = j.at("packed_order").get<std::vector<std::int64_t>>();
    for (const json& jb : j.at("blocks")) {
      SpmmBlockRow b{jb.at("rows").at(0), jb.at("rows").at(1), {}};
      for (const json& jg : jb.at("groups")) {
        SpmmGroup g;
        for (const json& js : jg) {
          SpmmStep s{js.at(0), {}};
          for (const json& je : js.at(1)) s.entries.push_back({je.at(0), je.at(1)});
          g.steps.push_back(std::move(s));
        }
        b.groups.push_back(std::move(g));
      }
      p.blocks.push_back(std::move(b));
    }
    if (j.at("block_rows") != p.block_rows())
      throw UsageError("SpMM plan: block_rows differs from the blocks listed");
    return p;
  } catch (const json::exception& e) {
    throw UsageError(fmt::format("SpMM plan: malformed JSON: {}", e.what()));
  }
}

}  // namespace sparsecc
