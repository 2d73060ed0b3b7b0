// The Hines planner and the plan interpreter: the notes' exact worked examples (minimal EDD of the
// 7-node tree, two fine levels of the 10-row chain), planner invariants (check_hines_plan; every
// domain matrix is again a Hines matrix), and the interpreter against the serial fp64 reference
// (max |x - x_serial| / max |x_serial| <= 1e-12) on random trees, a 100,000-row chain, a star, forests
// of 1 to 1,000 cells, R = 1..16, and every valid SWC cell of the real data.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>

#include "hines_support.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/compile/nvrtc.hpp"
#include "sparsecc/compile/resource_usage.hpp"
#include "sparsecc/emit/template.hpp"
#include "sparsecc/inspector/hines_planner.hpp"
#include "sparsecc/neuron/morphology.hpp"
#include "sparsecc/plan/hines_interpreter.hpp"
#include "sparsecc/reference/hines_solve.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

constexpr double kTolerance = 1e-12;

std::vector<double> random_rhs(std::int64_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> b(static_cast<std::size_t>(n));
  for (auto& v : b) v = u(rng);
  return b;
}

// A domain system times `sign` as a HinesSystem (cells end at each root). Every level negates the
// Schur complement of its matrix, so level l's domain has the sign (-1)^(l+1) of the system.
HinesSystem signed_domain(const std::vector<std::int32_t>& parent, const HinesDomainTrace& t, double sign) {
  HinesSystem s;
  s.parent = parent;
  s.cell_offsets = {0};
  for (std::size_t i = 0; i < parent.size(); ++i) {
    s.diag.push_back(sign * t.diag[i]);
    s.upper.push_back(sign * t.upper[i]);
    s.lower.push_back(sign * t.lower[i]);
    if (parent[i] < 0) s.cell_offsets.push_back(static_cast<std::int32_t>(i + 1));
  }
  return s;
}

// Plans, checks and interprets `s` with R right-hand sides; expects the serial solution and Hines
// domain matrices at every level. Returns the plan.
HinesPlan expect_plan_solves(const HinesSystem& s, std::int32_t rhs, const HinesOptions& o,
                             std::mt19937_64& rng, const std::string& label) {
  const HinesPlan plan = plan_hines(s, rhs, "f64", o);
  const auto errors = check_hines_plan(plan);
  EXPECT_TRUE(errors.empty()) << label << ": " << (errors.empty() ? "" : errors.front());
  const std::vector<double> b = random_rhs(std::int64_t{s.size()} * rhs, rng);
  std::vector<HinesDomainTrace> trace;
  const std::vector<double> x = interpret_hines(plan, s.diag, s.upper, s.lower, b, &trace);
  const std::vector<double> ref = hines_solve_many(s, b, static_cast<std::size_t>(rhs));
  EXPECT_LE(test::max_rel_error(x, ref), kTolerance) << label << " depth " << plan.depth();
  EXPECT_EQ(trace.size(), plan.levels.size()) << label;
  for (std::size_t li = 0; li < trace.size() && li < plan.levels.size(); ++li) {
    const auto problems =
        validate_hines(signed_domain(plan.levels[li].domain_parent, trace[li], li % 2 ? 1 : -1));
    EXPECT_TRUE(problems.empty()) << label << " level " << li << ": "
                                  << (problems.empty() ? "" : problems.front());
  }
  return plan;
}

TEST(HinesPlan, PublishedBaseThreshold) {
  EXPECT_EQ(hines_published_base_threshold(1), 3500);
  EXPECT_EQ(hines_published_base_threshold(2), 2662);
  EXPECT_EQ(hines_published_base_threshold(8), 695);
  EXPECT_EQ(hines_published_base_threshold(16), 367);
  EXPECT_EQ(hines_published_base_threshold(64), 121);
  EXPECT_THROW(hines_published_base_threshold(0), UsageError);
  EXPECT_EQ(hines_base_threshold(1), 64);
  EXPECT_EQ(hines_base_threshold(8), 8);
  EXPECT_EQ(hines_base_threshold(64), 8);
}

// Notes section 10.2: the 7-node tree, minimal decomposition, J = [2, 5].
TEST(HinesPlan, NotesTreeMinimalDomainIsExact) {
  const HinesSystem s = test::notes_tree();
  HinesOptions o;
  o.decomposition = HinesDecomposition::minimal;
  o.depth = 1;
  const HinesPlan plan = plan_hines(s, 1, "f64", o);
  ASSERT_TRUE(check_hines_plan(plan).empty());
  ASSERT_EQ(plan.depth(), 1);
  const HinesLevel& L = plan.levels[0];
  EXPECT_EQ(L.junctions, (std::vector<std::int32_t>{2, 5}));
  ASSERT_EQ(L.chains.size(), 4u);
  const std::vector<std::array<std::int32_t, 4>> chains = {
      {0, 0, 0, -1}, {1, 1, 0, -1}, {3, 4, 1, -1}, {6, 6, -1, 1}};
  for (std::size_t c = 0; c < 4; ++c) {
    EXPECT_EQ(L.chains[c].begin, chains[c][0]);
    EXPECT_EQ(L.chains[c].end, chains[c][1]);
    EXPECT_EQ(L.chains[c].parent_junction, chains[c][2]);
    EXPECT_EQ(L.chains[c].child_junction, chains[c][3]);
  }
  EXPECT_EQ(L.domain_parent, (std::vector<std::int32_t>{1, -1}));
  EXPECT_EQ(L.gather, (std::vector<std::int32_t>{0, 1, 2, 3}));  // junction 0: chains 0, 1; junction 1: 2, 3
  EXPECT_EQ(L.gather_offsets, (std::vector<std::int32_t>{0, 2, 4}));
  const std::vector<double> b = {-1, 1, 3, 3, 5, 9, 8};
  std::vector<HinesDomainTrace> trace;
  const auto x = interpret_hines(plan, s.diag, s.upper, s.lower, b, &trace);
  for (int i = 0; i < 7; ++i) EXPECT_NEAR(x[i], i + 1, 1e-14);
  ASSERT_EQ(trace.size(), 1u);
  EXPECT_NEAR(trace[0].diag[0], -3, 1e-15);
  EXPECT_NEAR(trace[0].diag[1], -31.0 / 10, 1e-15);
  EXPECT_NEAR(trace[0].upper[0], 1, 1e-15);
  EXPECT_NEAR(trace[0].lower[0], 1, 1e-15);
  EXPECT_NEAR(trace[0].rhs[0], -3, 1e-15);
  EXPECT_NEAR(trace[0].rhs[1], -78.0 / 5, 1e-14);
}

// Notes section 10.3: the 10-row chain, fine K = 3, two levels.
TEST(HinesPlan, NotesChainFineTwoLevelsAreExact) {
  const HinesSystem s = test::chain_system(10);
  HinesOptions o;
  o.k = 3;
  o.depth = 2;
  const HinesPlan plan = plan_hines(s, 1, "f64", o);
  ASSERT_TRUE(check_hines_plan(plan).empty());
  ASSERT_EQ(plan.depth(), 2);
  EXPECT_EQ(plan.levels[0].junctions, (std::vector<std::int32_t>{2, 5, 8}));
  EXPECT_EQ(plan.levels[0].domain_parent, (std::vector<std::int32_t>{1, 2, -1}));
  EXPECT_EQ(plan.levels[1].junctions, (std::vector<std::int32_t>{2}));
  EXPECT_EQ(plan.base_parent, (std::vector<std::int32_t>{-1}));
  const std::vector<double> b = {1, 4, 6, 8, 10, 12, 14, 16, 18, 21};
  std::vector<HinesDomainTrace> t;
  const auto x = interpret_hines(plan, s.diag, s.upper, s.lower, b, &t);
  for (int i = 0; i < 10; ++i) EXPECT_NEAR(x[i], i + 1, 1e-13);
  ASSERT_EQ(t.size(), 2u);
  const std::vector<double> md = {-571.0 / 165, -52.0 / 15, -17.0 / 5}, mrhs = {-549.0 / 55, -20, -151.0 / 5};
  for (int k = 0; k < 3; ++k) {
    EXPECT_NEAR(t[0].diag[k], md[k], 1e-14);
    EXPECT_NEAR(t[0].rhs[k], mrhs[k], 1e-13);
  }
  EXPECT_NEAR(t[0].upper[0], 1.0 / 15, 1e-15);
  EXPECT_NEAR(t[0].upper[1], 1.0 / 15, 1e-15);
  EXPECT_NEAR(t[1].diag[0], 302632.0 / 89043, 1e-13);
  EXPECT_NEAR(t[1].rhs[0], 907896.0 / 29681, 1e-12);
}

TEST(HinesPlan, RootJunctionLeavesNoRootChain) {
  const HinesSystem s = test::chain_system(9);  // K = 3: junctions 2, 5, 8 and 8 is the root
  HinesOptions o;
  o.k = 3;
  o.depth = 1;
  const HinesPlan plan = plan_hines(s, 1, "f64", o);
  ASSERT_TRUE(check_hines_plan(plan).empty());
  EXPECT_EQ(plan.levels[0].junctions, (std::vector<std::int32_t>{2, 5, 8}));
  EXPECT_EQ(plan.levels[0].chains.size(), 3u);
  EXPECT_EQ(plan.levels[0].chains.back().end, 7);
  EXPECT_EQ(plan.levels[0].chains.back().parent_junction, 2);
  std::mt19937_64 rng(1);
  expect_plan_solves(s, 2, o, rng, "chain 9, root junction");
}

// Notes section 10.4: linear N = 100,000, K = 3 on every level, R = 1, published threshold 3500:
// 100,000 -> 33,333 -> 11,111 -> 3,703 -> 1,234. The default plan of this one large cell takes K = 8 on
// every level (few large cells: the block kernel is latency-bound) down to the GPU threshold (64 rows).
TEST(HinesPlan, HundredThousandRowChainRecursesToTheThreshold) {
  const HinesSystem s = test::chain_system(100000);
  std::mt19937_64 rng(2);
  HinesOptions published;
  published.base_rows = hines_published_base_threshold(1);
  published.k = 3;
  published.k_large = 0;
  const HinesPlan plan = expect_plan_solves(s, 1, published, rng, "chain 100000");
  std::vector<std::int32_t> sizes;
  for (const auto& L : plan.levels) sizes.push_back(L.size);
  EXPECT_EQ(sizes, (std::vector<std::int32_t>{100000, 33333, 11111, 3703}));
  EXPECT_EQ(plan.base_size(), 1234);
  EXPECT_EQ(plan.problem.n, 100000);
  const HinesPlan gpu = expect_plan_solves(s, 1, {}, rng, "chain 100000, default threshold");
  sizes.clear();
  std::vector<std::int32_t> ks;
  for (const auto& L : gpu.levels) sizes.push_back(L.size), ks.push_back(L.k);
  EXPECT_EQ(sizes, (std::vector<std::int32_t>{100000, 12500, 1562, 195}));
  EXPECT_EQ(ks, (std::vector<std::int32_t>{8, 8, 8, 8}));
  EXPECT_EQ(gpu.base_size(), 24);
  // Execution: the levels above 12,288 rows on the grid, the rest in one block (1562 rows: 196
  // chains, rounded up to warps).
  EXPECT_EQ(gpu.grid_levels, 2);
  EXPECT_EQ(gpu.block_threads, 224);
  const auto offsets = hines_cell_offsets_by_level(gpu);
  ASSERT_EQ(offsets.size(), gpu.levels.size() + 1);
  EXPECT_EQ(offsets.back(), (std::vector<std::int32_t>{0, 24}));
  // 64 such cells (13,000 rows each): K = 8 only where a cell exceeds 12,288 rows, the rule's K below:
  // 6 at R = 1, 3 above; an explicit K wins over the rule.
  const HinesSystem cells64 = concatenate_hines(std::vector<HinesSystem>(64, test::chain_system(13000)));
  const auto level_ks = [](const HinesPlan& p) {
    std::vector<std::int32_t> out;
    for (const auto& L : p.levels) out.push_back(L.k);
    return out;
  };
  const HinesPlan forest = plan_hines(cells64, 1, "f64", {});
  EXPECT_EQ(level_ks(forest), (std::vector<std::int32_t>{8, 6, 6}));
  EXPECT_EQ(forest.grid_levels, 1);
  EXPECT_EQ(level_ks(plan_hines(cells64, 8, "f32", {})), (std::vector<std::int32_t>{8, 3, 3, 3, 3, 3}));
  HinesOptions k3;
  k3.k = 3;
  EXPECT_EQ(level_ks(plan_hines(cells64, 1, "f64", k3)), (std::vector<std::int32_t>{8, 3, 3, 3}));
  EXPECT_EQ(level_ks(plan_hines(cells64, 1, "f32", {})), (std::vector<std::int32_t>{8, 6, 6}));
  EXPECT_EQ(hines_k_rule(2), 3);
  EXPECT_THROW(hines_k_rule(0), UsageError);
  // K = 1 is no decomposition.
  HinesOptions bad;
  bad.k_large = 1;
  EXPECT_THROW(plan_hines(s, 1, "f64", bad), UsageError);
}

// Per-cell row offsets at every level, and the per-cell depth rule: each cell's base is small.
TEST(HinesPlan, ForestCellOffsetsAndPerCellDepth) {
  std::mt19937_64 rng(12);
  const HinesSystem s = test::random_system(rng, 30000, 300, 0.1);
  const HinesPlan plan = expect_plan_solves(s, 2, {}, rng, "forest of 300");
  const auto offsets = hines_cell_offsets_by_level(plan);
  ASSERT_EQ(offsets.size(), plan.levels.size() + 1);
  for (std::size_t li = 0; li < offsets.size(); ++li) {
    const auto& o = offsets[li];
    ASSERT_EQ(o.size(), 301u);
    EXPECT_EQ(o.front(), 0);
    EXPECT_EQ(o.back(), li < plan.levels.size() ? plan.levels[li].size : plan.base_size());
    EXPECT_TRUE(std::is_sorted(o.begin(), o.end()));
    if (li + 1 == offsets.size()) {
      for (std::size_t c = 0; c + 1 < o.size(); ++c) EXPECT_LE(o[c + 1] - o[c], hines_base_threshold(2));
    }
    if (li == 0 || li == offsets.size() - 1) continue;
    // Junction rows of level li - 1 fall into the same cell as their domain index says.
    const auto& prev = offsets[li - 1];
    const auto& J = plan.levels[li - 1].junctions;
    for (std::size_t c = 0; c + 1 < o.size(); ++c)
      for (std::int32_t k = o[c]; k < o[c + 1]; ++k) {
        EXPECT_GE(J[static_cast<std::size_t>(k)], prev[c]);
        EXPECT_LT(J[static_cast<std::size_t>(k)], prev[c + 1]);
      }
  }
  EXPECT_EQ(plan.grid_levels, 0);
  EXPECT_LE(plan.block_threads, 512);  // many cells: several blocks per multiprocessor
}

TEST(HinesPlan, RandomTreesEveryDecompositionAndDepth) {
  std::mt19937_64 rng(3);
  int plans = 0;
  for (const double branchiness : {0.02, 0.3, 0.9})
    for (const int n : {1, 2, 17, 300, 3000})
      for (const int cells : {1, 3}) {
        if (cells > n) continue;
        const HinesSystem s = test::random_system(rng, n, cells, branchiness);
        for (const int k : {0, 2, 3, 4, 7})
          for (const int depth : {-1, 0, 1, 3}) {
            HinesOptions o;
            o.decomposition = k ? HinesDecomposition::fine : HinesDecomposition::minimal;
            o.k = k ? k : 3;
            o.depth = depth;
            o.base_rows = 5;  // the automatic rule recurses down to 5 rows
            expect_plan_solves(s, 1 + plans % 3, o, rng,
                               "n " + std::to_string(n) + " cells " + std::to_string(cells) +
                                   " branchiness " + std::to_string(branchiness) + " K " + std::to_string(k) +
                                   " depth " + std::to_string(depth));
            ++plans;
          }
      }
  EXPECT_EQ(plans, 480);  // 24 systems x 5 decompositions x 4 depths
}

TEST(HinesPlan, LargeRandomTree) {
  std::mt19937_64 rng(4);
  const HinesSystem s = test::random_system(rng, 100000, 1, 0.05);
  HinesOptions o;
  o.base_rows = 200;
  const HinesPlan plan = expect_plan_solves(s, 2, o, rng, "random 100000");
  EXPECT_GE(plan.depth(), 3);
}

TEST(HinesPlan, StarOfThousandChildren) {
  HinesSystem s;
  const int n = 1001;
  for (int i = 0; i < n; ++i) s.parent.push_back(i + 1 < n ? n - 1 : -1);
  s.upper.assign(n, -0.5);
  s.upper[n - 1] = 0;
  s.lower = s.upper;
  s.diag.assign(n, 1.0);
  s.diag[n - 1] = 600;
  s.cell_offsets = {0, n};
  std::mt19937_64 rng(5);
  for (const auto d : {HinesDecomposition::minimal, HinesDecomposition::fine}) {
    HinesOptions o;
    o.decomposition = d;
    o.depth = 1;
    const HinesPlan plan = expect_plan_solves(s, 3, o, rng, "star");
    ASSERT_EQ(plan.levels[0].junctions, (std::vector<std::int32_t>{n - 1}));
    EXPECT_EQ(plan.levels[0].chains.size(), 1000u);
    EXPECT_EQ(plan.levels[0].gather_offsets.back(), 1000);
  }
}

TEST(HinesPlan, ForestsOfOneToThousandCells) {
  std::mt19937_64 rng(6);
  for (const int cells : {1, 10, 100, 1000}) {
    const HinesSystem s = test::random_system(rng, cells * 40, cells, 0.2);
    ASSERT_EQ(s.num_cells(), cells);
    HinesOptions o;
    o.base_rows = 50;
    const HinesPlan plan = expect_plan_solves(s, 1, o, rng, "forest " + std::to_string(cells));
    EXPECT_EQ(plan.problem.cells, cells);
  }
}

TEST(HinesPlan, ManyRightHandSidesMatchSeparateSolves) {
  std::mt19937_64 rng(7);
  const HinesSystem s = test::random_system(rng, 2000, 2, 0.1);
  HinesOptions o;
  o.base_rows = 30;
  for (int r = 1; r <= 16; ++r) {
    const HinesPlan plan = plan_hines(s, r, "f64", o);
    const std::vector<double> b = random_rhs(std::int64_t{s.size()} * r, rng);
    const std::vector<double> x = interpret_hines(plan, s.diag, s.upper, s.lower, b);
    for (int c = 0; c < r; ++c) {
      std::vector<double> one(static_cast<std::size_t>(s.size())), xc(one.size());
      for (int i = 0; i < s.size(); ++i) {
        one[i] = b[static_cast<std::size_t>(i) * r + c];
        xc[i] = x[static_cast<std::size_t>(i) * r + c];
      }
      EXPECT_LE(test::max_rel_error(xc, hines_solve(s, one)), kTolerance) << "R " << r << " column " << c;
    }
  }
}

TEST(HinesPlan, Float32InterpreterStaysWithinItsPrecision) {
  const HinesSystem s = assemble_hines(make_demo_neuron());
  HinesOptions o;
  o.base_rows = 20;
  const HinesPlan plan = plan_hines(s, 2, "f32", o);
  ASSERT_GE(plan.depth(), 2);
  std::mt19937_64 rng(8);
  const std::vector<double> b = random_rhs(std::int64_t{s.size()} * 2, rng);
  const auto to_float = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  const std::vector<float> x =
      interpret_hines(plan, to_float(s.diag), to_float(s.upper), to_float(s.lower), to_float(b));
  const std::vector<double> ref = hines_solve_many(s, b, 2);
  EXPECT_LE(test::max_rel_error({x.begin(), x.end()}, ref), 1e-4);
}

TEST(HinesPlan, EveryValidSwcCell) {
  SPARSECC_DATA_OR_SKIP(dir, "swc");
  std::mt19937_64 rng(9);
  int cells = 0, rejected = 0;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.path().extension() == ".swc") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    NeuronModel m;
    try {
      m = load_neuron(f.string());
    } catch (const InputError&) {
      ++rejected;  // the malformed edge cases; the reader's tests cover their messages
      continue;
    }
    const HinesSystem s = assemble_hines(m);
    for (const int k : {0, 3}) {
      HinesOptions o;
      o.decomposition = k ? HinesDecomposition::fine : HinesDecomposition::minimal;
      o.base_rows = 16;
      expect_plan_solves(s, 1, o, rng, f.filename().string() + (k ? " fine" : " minimal"));
    }
    ++cells;
  }
  std::printf("[ hines plan ] %d SWC files planned and solved, %d rejected by the reader\n", cells, rejected);
  EXPECT_GT(cells, 20);
}

TEST(HinesPlan, JsonRoundTripAndBrokenPlans) {
  std::mt19937_64 rng(10);
  const HinesSystem s = test::random_system(rng, 500, 2, 0.3);
  HinesOptions o;
  o.base_rows = 10;
  const HinesPlan plan = plan_hines(s, 4, "f32", o);
  ASSERT_TRUE(check_hines_plan(plan).empty());
  ASSERT_GE(plan.depth(), 2);
  const HinesPlan back = hines_plan_from_json(nlohmann::json::parse(to_json(plan).dump()));
  EXPECT_EQ(to_json(back), to_json(plan));
  EXPECT_TRUE(check_hines_plan(back).empty());
  EXPECT_THROW(hines_plan_from_json(nlohmann::json::parse(R"({"kind": "hines"})")), UsageError);

  HinesPlan p = plan;
  p.levels[0].chains[0].end += 1;
  EXPECT_FALSE(check_hines_plan(p).empty());
  p = plan;
  p.levels[0].chains.pop_back();
  EXPECT_FALSE(check_hines_plan(p).empty());
  p = plan;
  p.levels[1].junctions.erase(p.levels[1].junctions.begin());
  EXPECT_FALSE(check_hines_plan(p).empty());
  p = plan;
  std::swap(p.levels[0].gather[0], p.levels[0].gather[1]);
  EXPECT_FALSE(check_hines_plan(p).empty());
  p = plan;
  p.levels[0].domain_parent[0] = -1;
  EXPECT_FALSE(check_hines_plan(p).empty());
  p = plan;
  p.base_parent.push_back(-1);
  EXPECT_FALSE(check_hines_plan(p).empty());
  p = plan;
  p.problem.dtype = "f16";
  EXPECT_FALSE(check_hines_plan(p).empty());
}

TEST(HinesPlan, PlannerRejectsBadOptions) {
  const HinesSystem s = test::chain_system(20);
  HinesOptions o;
  o.k = 1;
  EXPECT_THROW(plan_hines(s, 1, "f64", o), UsageError);
  o = {};
  o.depth = kHinesMaxDepth + 1;
  EXPECT_THROW(plan_hines(s, 1, "f64", o), UsageError);
  EXPECT_THROW(plan_hines(s, 0, "f64", {}), UsageError);
  EXPECT_THROW(plan_hines(s, 1, "f16", {}), UsageError);
  HinesSystem bad = s;
  bad.parent[3] = 1;
  EXPECT_THROW(plan_hines(bad, 1, "f64", {}), UsageError);
  const HinesPlan plan = plan_hines(s, 1, "f64", {});
  std::vector<double> short_b(5);
  EXPECT_THROW(interpret_hines(plan, s.diag, s.upper, s.lower, short_b), UsageError);
}

}  // namespace
}  // namespace sparsecc
