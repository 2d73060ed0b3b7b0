// The Hines executor's schedule, emitter, compile route and bundle on the CPU: workspace arrays
// disjoint, segment types shared by equal cells, the launch list's shape, tables in range, the module
// compiling for sm_90 in both precisions without spills, and the bundle round-tripping.
#include "sparsecc/plan/hines_schedule.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "hines_support.hpp"
#include "sparsecc/bundle/hines_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/compile/compile_hines.hpp"
#include "sparsecc/compile/resource_usage.hpp"
#include "sparsecc/emit/hines_cuda.hpp"
#include "sparsecc/inspector/hines_planner.hpp"
#include "sparsecc/neuron/morphology.hpp"
#include "sparsecc/runtime/bundle.hpp"

namespace sparsecc {
namespace {

// Workspace arrays (whole levels before shared_from, then the base's pivots) and shared-memory
// arrays (the largest block cell's part of each level from shared_from on) each lie disjoint inside
// their space, and the shared part keeps to the plan's limit.
void expect_disjoint_workspace(const HinesPlan& plan, const HinesSchedule& s) {
  using Spans = std::vector<std::pair<std::int64_t, std::int64_t>>;  // [begin, end) in elements
  Spans global, shared;
  const std::int64_t r = plan.problem.rhs;
  const auto rows = hines_cell_offsets_by_level(plan);
  const auto G = static_cast<std::size_t>(plan.grid_levels);
  const auto cell_max = [&](std::size_t l) {
    std::int64_t m = 0;
    for (std::size_t c = 0; c + 1 < rows[G].size(); ++c)
      if (rows[G][c + 1] > rows[G][c]) m = std::max<std::int64_t>(m, rows[l][c + 1] - rows[l][c]);
    return m;
  };
  EXPECT_GE(s.shared_from, plan.grid_levels);
  EXPECT_LE(s.shared_from, plan.depth());
  EXPECT_LE(s.shared_bytes(), plan.shared_workspace_limit);
  for (std::size_t l = 0; l < plan.levels.size(); ++l) {
    const bool in_shared = static_cast<std::int32_t>(l) >= s.shared_from;
    const std::int64_t n = in_shared ? cell_max(l) : plan.levels[l].size;
    const std::int64_t nj = in_shared ? cell_max(l + 1) : plan.levels[l].domain_size();
    const std::int64_t f = !in_shared || s.chain_max > 8 ? n : 0;  // piv and w: long chains only
    const std::int64_t len[kHinesLevelArrays] = {n * r, n, n, f, f, nj, nj, nj, nj * r, nj * r};
    for (int a = 0; a < kHinesLevelArrays; ++a)
      (in_shared ? shared : global).push_back({s.level_offsets[l][a], s.level_offsets[l][a] + len[a]});
  }
  global.push_back({s.base_pivot_offset, s.base_pivot_offset + plan.base_size()});
  for (auto [spans, size] :
       {std::pair{&global, s.workspace_elements}, std::pair{&shared, s.shared_elements}}) {
    std::sort(spans->begin(), spans->end());
    for (std::size_t i = 0; i < spans->size(); ++i) {
      EXPECT_GE((*spans)[i].first, 0);
      EXPECT_LE((*spans)[i].second, size);
      if (i) {
        EXPECT_LE((*spans)[i - 1].second, (*spans)[i].first);
      }
    }
  }
  // The block kernel's launch asks for the shared part.
  for (const HinesLaunch& l : s.launches)
    EXPECT_EQ(l.shared_bytes, l.kernel == "hines_block" ? s.shared_bytes() : 0);
}

TEST(HinesSchedule, ForestOfEqualCellsSharesOneSegmentType) {
  const HinesSystem cell = assemble_hines(make_demo_neuron());
  const HinesSystem forest = concatenate_hines(std::vector<HinesSystem>(50, cell));
  const HinesPlan plan = plan_hines(forest, 2, "f64", {});
  const HinesSchedule s = schedule_hines(plan);
  EXPECT_EQ(plan.grid_levels, 0);
  EXPECT_EQ(s.segments, 50);
  EXPECT_EQ(s.segment_types, 1);
  ASSERT_EQ(s.launches.size(), 1u);  // the whole step is one launch
  EXPECT_EQ(s.launches[0].kernel, "hines_block");
  EXPECT_EQ(s.launches[0].grid, 50);
  EXPECT_EQ(s.segment_stride, 2 + plan.depth());
  expect_disjoint_workspace(plan, s);
  // Every segment's row offsets are the cell's, and its type offset points into the tables.
  const auto rows = hines_cell_offsets_by_level(plan);
  for (int c = 0; c < s.segments; ++c) {
    const auto* seg = s.tables.data() + s.segments_offset + static_cast<std::int64_t>(c) * s.segment_stride;
    EXPECT_GE(seg[0], 0);
    EXPECT_LT(seg[0], s.segments_offset);
    for (int l = 0; l <= plan.depth(); ++l)
      EXPECT_EQ(seg[1 + l], rows[static_cast<std::size_t>(l)][static_cast<std::size_t>(c)]);
  }
}

// Levels in shared memory: all block levels of small cells, the deepest ones of a large cell under
// the rule's limit, none at limit 0; the plan's JSON keeps the limit (and reads plans without it).
TEST(HinesSchedule, DeepestBlockLevelsGoToSharedMemoryWithinTheLimit) {
  const HinesSystem demo = assemble_hines(make_demo_neuron());
  const HinesSystem forest = concatenate_hines(std::vector<HinesSystem>(50, demo));
  HinesPlan plan = plan_hines(forest, 2, "f64", {});
  EXPECT_EQ(plan.shared_workspace_limit,
            hines_shared_workspace_rule(plan.block_threads,
                                        hines_base_shared_bytes(hines_block_base_max(plan), 2, 8)));
  HinesSchedule s = schedule_hines(plan);
  EXPECT_EQ(s.shared_from, plan.grid_levels);  // a small cell: every block level
  EXPECT_GT(s.shared_bytes(), 0);
  expect_disjoint_workspace(plan, s);

  HinesOptions off;
  off.shared_workspace = 0;
  plan = plan_hines(forest, 2, "f64", off);
  s = schedule_hines(plan);
  EXPECT_EQ(s.shared_from, plan.depth());
  EXPECT_EQ(s.shared_elements, 0);
  expect_disjoint_workspace(plan, s);

  // A 6000-row cell in f64: its first level's arrays (224 KB) exceed any block's shared memory.
  const HinesSystem big = test::chain_system(6000);
  plan = plan_hines(big, 1, "f64", {});
  ASSERT_EQ(plan.grid_levels, 0);
  ASSERT_GE(plan.depth(), 3);
  s = schedule_hines(plan);
  EXPECT_EQ(s.shared_from, 1);
  expect_disjoint_workspace(plan, s);
  // Exactly the bytes of those levels keeps them; a byte less leaves the shallowest of them out.
  HinesOptions limit;
  limit.depth = plan.depth();
  limit.shared_workspace = s.shared_bytes();
  EXPECT_EQ(schedule_hines(plan_hines(big, 1, "f64", limit)).shared_from, 1);
  limit.shared_workspace = s.shared_bytes() - 1;
  const HinesPlan tight = plan_hines(big, 1, "f64", limit);
  const HinesSchedule t = schedule_hines(tight);
  EXPECT_EQ(t.shared_from, 2);
  EXPECT_LT(t.shared_bytes(), s.shared_bytes());
  expect_disjoint_workspace(tight, t);

  EXPECT_EQ(hines_plan_from_json(to_json(plan)).shared_workspace_limit, plan.shared_workspace_limit);
  nlohmann::json old = to_json(plan);
  old.erase("shared_workspace_limit");
  EXPECT_EQ(hines_plan_from_json(old).shared_workspace_limit, 0);
  HinesOptions bad;
  bad.shared_workspace = kHinesSharedWorkspaceMax + 1;
  EXPECT_THROW(plan_hines(big, 1, "f64", bad), UsageError);
}

TEST(HinesSchedule, LargeCellRunsItsTopLevelsOnTheGrid) {
  const HinesSystem chain = test::chain_system(100000);
  const HinesPlan plan = plan_hines(chain, 1, "f32", {});
  ASSERT_EQ(plan.grid_levels, 2);
  const HinesSchedule s = schedule_hines(plan);
  std::vector<std::string> kernels;
  for (const auto& l : s.launches) kernels.push_back(l.kernel);
  EXPECT_EQ(kernels, (std::vector<std::string>{"hines_stage1", "hines_stage2", "hines_stage1", "hines_stage2",
                                               "hines_block", "hines_stage4", "hines_stage4"}));
  EXPECT_EQ(s.segments, 1);
  EXPECT_EQ(s.real_bytes, 4);
  expect_disjoint_workspace(plan, s);
  // Pointer arguments stay inside their buffers.
  for (const auto& l : s.launches)
    for (const auto& a : l.args) {
      if (a.buffer == "tables") {
        EXPECT_LE(a.value, static_cast<std::int64_t>(s.tables.size() * 4));
      }
      if (a.buffer == "workspace") {
        EXPECT_LT(a.value, s.workspace_bytes());
      }
    }
}

TEST(HinesSchedule, EveryCellOfARandomForestIsASegment) {
  std::mt19937_64 rng(5);
  const HinesSystem s = test::random_system(rng, 5000, 40, 0.3);
  HinesOptions o;
  o.grid_levels = 1;
  const HinesPlan plan = plan_hines(s, 3, "f64", o);
  const HinesSchedule sch = schedule_hines(plan);
  const auto rows = hines_cell_offsets_by_level(plan);
  int nonempty = 0;
  for (std::size_t c = 0; c + 1 < rows[1].size(); ++c) nonempty += rows[1][c + 1] > rows[1][c];
  EXPECT_EQ(sch.segments, nonempty);
  EXPECT_LE(sch.segment_types, sch.segments);
  expect_disjoint_workspace(plan, sch);
  // The emitter's compile-time bounds: the longest chain and the largest per-cell base.
  std::int32_t longest = 0;
  for (const HinesLevel& L : plan.levels)
    for (const HinesChain& c : L.chains) longest = std::max(longest, c.end - c.begin + 1);
  EXPECT_EQ(sch.chain_max, longest);
  std::int32_t base = 0;
  const auto& br = rows.back();
  for (std::size_t c = 0; c + 1 < br.size(); ++c) base = std::max(base, br[c + 1] - br[c]);
  EXPECT_EQ(sch.base_max, base);
  EXPECT_GT(sch.base_max, 0);
}

// The emitted module compiles for sm_90 in both code modes and precisions (at most a few spilled
// values: with the small blocks this forest gets, ptxas keeps 8 to 12 bytes of the block kernel on the
// stack for R = 1, and a few accumulators for R = 4), and its bundle round-trips through the bundle
// format.
TEST(HinesSchedule, EmittedModuleCompilesAndBundles) {
  const HinesSystem cell = assemble_hines(make_demo_neuron());
  for (const char* code : {"tables", "unrolled"})
    for (const char* dtype : {"f64", "f32"})
      for (const int r : {1, 4}) {
        HinesOptions o;
        o.grid_levels = 1;  // every kernel in use
        o.code = code;
        const HinesPlan plan = plan_hines(concatenate_hines(std::vector<HinesSystem>(3, cell)), r, dtype, o);
        CudaCompileOptions co;
        co.extra.push_back(kPtxasVerbose);
        const CompiledHines c = compile_hines(plan, co);
        EXPECT_EQ(c.emitted.kernels,
                  (std::vector<std::string>{"hines_stage1", "hines_stage2", "hines_block", "hines_stage4"}));
        const ResourceUsage u = parse_ptxas_log(c.code.log);
        ASSERT_TRUE(u.found) << c.code.log;
        EXPECT_EQ(to_string(plan.code), std::string(code));
        std::printf("%s %s R %d: %d registers, %lld bytes spilled\n", code, dtype, r, u.registers,
                    static_cast<long long>(u.spill_store_bytes));
        EXPECT_LE(u.spill_store_bytes, r == 1 ? 16 : 64)
            << code << " " << dtype << " R " << r << ", " << plan.block_threads << " threads\n"
            << c.code.log;
        const rt::Bundle b =
            hines_bundle(plan, c.schedule, concatenate_hines(std::vector<HinesSystem>(3, cell)), c.code.cubin,
                         c.code.ptx, "sm_90");
        const auto bytes = rt::bundle_bytes(b);
        const rt::Bundle back = rt::parse_bundle(bytes, "round trip");
        EXPECT_EQ(back, b);
        EXPECT_EQ(back.metadata.hines.rhs, r);
        EXPECT_EQ(back.permutation.size(), static_cast<std::size_t>(plan.problem.n));
        const HinesSystem sys = hines_system_from_reference_bytes(back.reference, "round trip");
        EXPECT_EQ(sys.diag, concatenate_hines(std::vector<HinesSystem>(3, cell)).diag);
        // The plan comes back from its section, and a plan section that contradicts the bundle is refused.
        EXPECT_EQ(to_json(hines_bundle_plan(back, sys, "round trip")), to_json(plan));
        rt::Bundle bad = back;
        bad.tables.at(0) ^= 1;
        EXPECT_THROW(hines_bundle_plan(bad, sys, "round trip"), rt::BundleError);
        bad = back;
        bad.plan.clear();
        EXPECT_THROW(hines_bundle_plan(bad, sys, "round trip"), rt::BundleError);
      }
}

// A decomposition deep enough to leave no base rows (every junction eliminated) still emits a module
// that compiles, and its plan solves the system.
TEST(HinesSchedule, EmptyBaseCompiles) {
  const HinesSystem cell = assemble_hines(make_demo_neuron());
  HinesPlan plan;
  bool found = false;
  for (int depth = 1; depth <= kHinesMaxDepth && !found; ++depth) {
    HinesOptions o;
    o.k = 6;
    o.depth = depth;
    try {
      plan = plan_hines(cell, 2, "f32", o);
    } catch (const UsageError&) {
      break;
    }
    found = plan.base_size() == 0;
  }
  ASSERT_TRUE(found) << "no depth leaves an empty base";
  EXPECT_TRUE(check_hines_plan(plan).empty());
  const CompiledHines c = compile_hines(plan);
  EXPECT_FALSE(c.code.cubin.empty());
}

// The code mode: auto unrolls the bases within the budget and keeps tables above it, forced modes are
// honoured or refused with a reason, and the unrolled module carries one function per distinct base
// structure with the parents as immediates, deterministically.
TEST(HinesSchedule, CodeModeFollowsTheBudget) {
  const HinesSystem cell = assemble_hines(make_demo_neuron());
  const HinesPlan automatic = plan_hines(cell, 1, "f64", {});
  EXPECT_EQ(automatic.code, HinesCode::unrolled);
  EXPECT_GT(automatic.unrolled_instructions, 0);
  HinesOptions o;
  o.code_budget = automatic.unrolled_instructions - 1;
  const HinesPlan over = plan_hines(cell, 1, "f64", o);
  EXPECT_EQ(over.code, HinesCode::tables);
  EXPECT_EQ(over.unrolled_instructions, 0);
  o.code = "unrolled";  // forced: the budget does not apply
  EXPECT_EQ(plan_hines(cell, 1, "f64", o).code, HinesCode::unrolled);
  o = {};
  o.code = "tables";
  EXPECT_EQ(plan_hines(cell, 1, "f64", o).code, HinesCode::tables);
  o.code = "baked";
  EXPECT_THROW(plan_hines(cell, 1, "f64", o), UsageError);
  // A base of 4,000 rows (depth 0) takes more than the shared-memory stage holds.
  o = {};
  o.depth = 0;
  const HinesSystem chain = test::chain_system(4000);
  EXPECT_EQ(plan_hines(chain, 1, "f64", o).code, HinesCode::tables);
  o.code = "unrolled";
  EXPECT_THROW(plan_hines(chain, 1, "f64", o), UsageError);
  HinesPlan broken = plan_hines(chain, 1, "f64", {.depth = 0});
  broken.code = HinesCode::unrolled;
  EXPECT_FALSE(check_hines_plan(broken).empty());

  // Three equal cells and a different one: two segment types, two base functions.
  std::vector<HinesSystem> cells(3, test::chain_system(300));
  cells.push_back(test::chain_system(200));
  const HinesSystem forest = concatenate_hines(cells);
  o = {};
  o.code = "unrolled";
  const HinesPlan plan = plan_hines(forest, 2, "f64", o);
  const HinesSchedule s = schedule_hines(plan);
  EXPECT_EQ(s.segment_types, 2);
  EXPECT_EQ(s.type_offsets.size(), 2u);
  const EmittedHines e = emit_hines_cuda(plan, s);
  EXPECT_NE(e.source.find("base_unrolled_0("), std::string::npos);
  EXPECT_NE(e.source.find("base_unrolled_1("), std::string::npos);
  EXPECT_EQ(e.source.find("base_unrolled_2("), std::string::npos);
  EXPECT_NE(e.source.find("kUnrolledBase = true"), std::string::npos);
  for (const std::int32_t t : s.type_offsets)
    EXPECT_NE(e.source.find(fmt::format("case {}:", t)), std::string::npos);
  // The chain's base rows: row i's parent is i + 1, an immediate in the code.
  EXPECT_NE(e.source.find("piv[1] -= f * u[0];"), std::string::npos);
  EXPECT_EQ(emit_hines_cuda(plan, schedule_hines(plan)).source, e.source);
  const HinesPlan tables = plan_hines(forest, 2, "f64", {.code = "tables"});
  const EmittedHines et = emit_hines_cuda(tables, schedule_hines(tables));
  EXPECT_EQ(et.source.find("base_unrolled_0("), std::string::npos);
  EXPECT_NE(et.source.find("kUnrolledBase = false"), std::string::npos);
}

TEST(HinesSchedule, BundleRejectsBadLaunches) {
  const HinesSystem cell = assemble_hines(make_demo_neuron());
  const HinesPlan plan = plan_hines(cell, 1, "f64", {});
  const HinesSchedule s = schedule_hines(plan);
  rt::Bundle b = hines_bundle(plan, s, cell, {1, 2, 3}, "ptx", "sm_90");
  rt::Bundle bad = b;
  bad.metadata.hines.launches[0].args[0].value = static_cast<std::int64_t>(b.tables.size() * 4 + 4);
  EXPECT_THROW(rt::validate_bundle(bad, "bad"), rt::BundleError);
  bad = b;
  bad.metadata.hines.launches[0].args.push_back({"y", 0});
  EXPECT_THROW(rt::validate_bundle(bad, "bad"), rt::BundleError);
  bad = b;
  bad.permutation[0] = bad.permutation[1];
  EXPECT_THROW(rt::validate_bundle(bad, "bad"), rt::BundleError);
  bad = b;
  bad.metadata.hines.launches[0].block = 2048;
  EXPECT_THROW(rt::validate_bundle(bad, "bad"), rt::BundleError);
  // A truncated verification section is an InputError naming the byte.
  std::vector<unsigned char> ref = b.reference;
  ref.resize(ref.size() - 3);
  EXPECT_THROW(hines_system_from_reference_bytes(ref, "ref"), InputError);
}

}  // namespace
}  // namespace sparsecc
