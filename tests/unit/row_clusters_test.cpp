// Clustered rows: cluster_rows, permute_rows, clustered plans (invariants, interpreter against the
// fp64 reference, JSON, refusals), both emitters, and the tuner's clustered variant.
#include "sparsecc/inspector/row_clusters.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "sparsecc/common/error.hpp"
#include "sparsecc/emit/spmm_ptx.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/io/load.hpp"
#include "sparsecc/plan/spmm_plan.hpp"
#include "sparsecc/tune/space.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

using test::interp_error;
using test::problem_for;

constexpr double kTolerance = 1e-5;  // rel L2 of the float32 kernel against the fp64 reference

// 2 * half rows of width k: row r and row r + half have the same columns (a pattern of its own for
// each pair, about density * k of them), with different values. Natural panels of `half` or fewer
// rows hold no pair; clustered panels of an even height hold whole pairs.
CsrMatrix paired_rows(std::int64_t half, std::int64_t k, double density, std::uint64_t seed) {
  const CsrMatrix base = test::random_csr(half, k, density, seed, 0, 1);
  DenseMatrix d(2 * half, k);
  for (std::int64_t r = 0; r < half; ++r)
    for (std::int64_t i = base.row_ptr[r]; i < base.row_ptr[r + 1]; ++i) {
      d(r, base.col_idx[i]) = base.values[i];
      d(r + half, base.col_idx[i]) = 0.5 - base.values[i] * 0.75;
    }
  return csr_from_dense(d, DType::f32);
}

bool is_permutation_of_rows(const std::vector<std::int64_t>& order, std::int64_t m) {
  std::vector<std::int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::int64_t> want(static_cast<std::size_t>(m));
  std::iota(want.begin(), want.end(), 0);
  return sorted == want;
}

SpmmOptions clustered(std::int32_t rows_per_block = 0, std::int32_t groups = 0) {
  SpmmOptions o;
  o.rows_per_block = rows_per_block;
  o.groups = groups;
  o.row_split = SpmmRowSplit::clustered;
  return o;
}

TEST(RowClusters, PairsOfEqualRowsShareAPanel) {
  const CsrMatrix a = paired_rows(32, 300, 0.08, 3);
  for (const std::int64_t panel : {2, 4, 16}) {
    const std::vector<std::int64_t> order = cluster_rows(a, panel);
    ASSERT_TRUE(is_permutation_of_rows(order, a.rows));
    EXPECT_EQ(order, cluster_rows(a, panel));  // deterministic
    // Every panel holds whole pairs: each row's twin sits in the same panel.
    for (std::size_t p = 0; p < order.size(); ++p) {
      const std::int64_t twin = order[p] < 32 ? order[p] + 32 : order[p] - 32;
      const auto at = static_cast<std::size_t>(std::find(order.begin(), order.end(), twin) - order.begin());
      EXPECT_EQ(at / static_cast<std::size_t>(panel), p / static_cast<std::size_t>(panel))
          << "row " << order[p] << " panel " << panel;
    }
  }
  EXPECT_THROW(cluster_rows(a, 0), UsageError);
  const CsrMatrix empty = test::random_csr(5, 7, 0.0, 1, 0, 1);
  EXPECT_TRUE(is_permutation_of_rows(cluster_rows(empty, 4), 5));
}

TEST(RowClusters, PermuteRowsMovesWholeRows) {
  const CsrMatrix a = test::random_csr(9, 20, 0.3, 5, 3, 1);
  const std::vector<std::int64_t> order{8, 0, 7, 1, 6, 2, 5, 3, 4};
  std::vector<std::int64_t> source;
  const CsrMatrix p = permute_rows(a, order, &source);
  validate(p);
  ASSERT_EQ(source.size(), static_cast<std::size_t>(a.nnz()));
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto r = static_cast<std::int64_t>(i);
    ASSERT_EQ(p.row_nnz(r), a.row_nnz(order[i]));
    for (std::int64_t j = 0; j < p.row_nnz(r); ++j) {
      const std::int64_t at = p.row_ptr[r] + j, from = a.row_ptr[order[i]] + j;
      EXPECT_EQ(source[static_cast<std::size_t>(at)], from);
      EXPECT_EQ(p.col_idx[at], a.col_idx[from]);
      EXPECT_EQ(p.values[at], a.values[from]);
    }
  }
  EXPECT_THROW(permute_rows(a, {0, 1, 2}), UsageError);
  EXPECT_THROW(permute_rows(a, {0, 1, 2, 3, 4, 5, 6, 7, 7}), UsageError);
  EXPECT_THROW(permute_rows(a, {0, 1, 2, 3, 4, 5, 6, 7, 9}), UsageError);
}

TEST(RowClusters, ClusteredPlansLoadFewerRowsOfBAndMatchTheReference) {
  const CsrMatrix a = paired_rows(40, 256, 0.06, 7);
  SpmmOptions equal;
  equal.rows_per_block = 8;
  equal.row_split = SpmmRowSplit::equal;
  const SpmmPlan natural = plan_spmm(a, problem_for(a, 64), equal);
  const SpmmPlan p = plan_spmm(a, problem_for(a, 64), clustered(8));
  ASSERT_TRUE(check_plan(p, a).empty()) << check_plan(p, a).front();
  EXPECT_EQ(p.layout.row_split, SpmmRowSplit::clustered);
  EXPECT_TRUE(is_permutation_of_rows(p.layout.row_order, a.rows));
  EXPECT_EQ(p.block_rows(), natural.block_rows());
  EXPECT_EQ(spmm_plan_nnz(p), a.nnz());
  // Twins share every column, so a clustered panel loads each of its columns once for two rows.
  EXPECT_LT(static_cast<double>(spmm_plan_loads(p)), 0.6 * static_cast<double>(spmm_plan_loads(natural)));
  EXPECT_LE(interp_error(p, a, 64, 1), kTolerance);

  std::uint64_t seed = 40;
  for (int variant = 0; variant < 8; ++variant) {
    const CsrMatrix r = test::random_csr(37 + variant * 5, 50, 0.15, seed++, variant % 2 ? 3 : 0, 1);
    SpmmOptions o = clustered(1 + variant % 5, 1 + variant % 3);
    o.value_mode = variant % 2 ? SpmmValueMode::streamed : SpmmValueMode::baked;
    const auto mode = variant >= 4 ? SpmmNMode::runtime : SpmmNMode::fixed;
    const SpmmPlan q = plan_spmm(r, problem_for(r, 33, variant % 3 == 1, variant % 2 == 0, mode), o);
    ASSERT_TRUE(check_plan(q, r).empty()) << variant << ": " << check_plan(q, r).front();
    EXPECT_LE(interp_error(q, r, mode == SpmmNMode::runtime ? 41 : 33, seed), kTolerance) << variant;
  }
}

TEST(RowClusters, RealLayersPlanAndMatchTheReference) {
  SPARSECC_DATA_OR_SKIP(dir, "dlmc/rn50/magnitude_pruning/0.9");
  for (const char* layer : {"bottleneck_1_block_group2_2_1", "bottleneck_3_block_group1_1_1"}) {
    const CsrMatrix a = load_matrix((dir / (std::string(layer) + ".smtx.gz")).string());
    SpmmOptions equal;
    equal.row_split = SpmmRowSplit::equal;
    const SpmmPlan natural = plan_spmm(a, problem_for(a, 196), equal);
    const SpmmPlan p = plan_spmm(a, problem_for(a, 196, true, true), clustered());
    ASSERT_TRUE(check_plan(p, a).empty()) << layer;
    EXPECT_EQ(p.layout.panel_rows, natural.layout.panel_rows) << layer;
    // Fewer (block row, k) loads: 7 % and 17 % fewer on these two layers (panels of 2 and 4 rows).
    EXPECT_LT(static_cast<double>(spmm_plan_loads(p)), 0.95 * static_cast<double>(spmm_plan_loads(natural)))
        << layer << ": " << spmm_plan_loads(p) << " against " << spmm_plan_loads(natural) << " rows "
        << p.layout.panel_rows;
    EXPECT_LE(interp_error(p, a, 196, 2), kTolerance) << layer;
  }
}

TEST(RowClusters, CheckPlanAndJsonKeepTheOrder) {
  const CsrMatrix a = test::random_csr(24, 40, 0.2, 9, 0, 1);
  const SpmmPlan good = plan_spmm(a, problem_for(a, 16, true, false, SpmmNMode::runtime), clustered(4, 2));
  ASSERT_TRUE(check_plan(good, a).empty());
  const nlohmann::json j = to_json(good);
  EXPECT_EQ(j["layout"]["row_split"], "clustered");
  const SpmmPlan back = plan_from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(back.layout.row_order, good.layout.row_order);
  EXPECT_EQ(to_json(back), j);

  SpmmPlan p = good;
  p.layout.row_order.clear();
  EXPECT_FALSE(check_plan(p, a).empty());
  p = good;
  p.layout.row_order[1] = p.layout.row_order[0];
  EXPECT_FALSE(check_plan(p, a).empty());
  p = good;
  std::swap(p.layout.row_order[0], p.layout.row_order[23]);  // entries no longer sit at their own rows
  if (good.layout.row_order[0] != good.layout.row_order[23] &&
      a.row_nnz(good.layout.row_order[0]) + a.row_nnz(good.layout.row_order[23]) > 0) {
    EXPECT_FALSE(check_plan(p, a).empty());
  }
  p = good;
  p.layout.row_split = SpmmRowSplit::equal;  // an order without the clustered split
  EXPECT_FALSE(check_plan(p, a).empty());
  nlohmann::json bad = j;
  bad["layout"]["row_split"] = "shuffled";
  EXPECT_THROW(plan_from_json(bad), UsageError);
}

TEST(RowClusters, RolledAndHalfPlansRefuseClusteredRows) {
  const CsrMatrix a = test::random_csr(32, 40, 0.2, 4, 0, 1);
  SpmmOptions o = clustered();
  o.value_mode = SpmmValueMode::rolled;
  EXPECT_THROW(plan_spmm(a, problem_for(a, 32), o), UsageError);
  SpmmProblem half = problem_for(a, 32);
  half.dtype = DType::f16;
  EXPECT_THROW(plan_spmm(a, half, clustered()), UsageError);
  EXPECT_EQ(parse_row_split("clustered"), SpmmRowSplit::clustered);
  EXPECT_STREQ(to_string(SpmmRowSplit::balanced), "balanced");
  EXPECT_THROW(parse_row_split("sideways"), UsageError);
}

TEST(RowClusters, BothEmittersStoreToTheOrderedRows) {
  // Two rows: the clustered order of a 2 x k matrix whose second row is heavier starts with row 1.
  DenseMatrix d(2, 8);
  d(0, 0) = 1.5;
  for (int c = 0; c < 8; ++c) d(1, c) = 0.25 * (c + 1);
  const CsrMatrix a = csr_from_dense(d, DType::f32);
  const SpmmPlan p = plan_spmm(a, problem_for(a, 32, true, false), clustered(2));
  ASSERT_TRUE(check_plan(p, a).empty());
  ASSERT_EQ(p.layout.row_order, (std::vector<std::int64_t>{1, 0}));
  const std::string cuda = emit_spmm(p, a, KernelLanguage::cuda).source;
  const std::string ptx = emit_spmm(p, a, KernelLanguage::ptx).source;
  // Accumulator 0 (position 0) is row 1: its store goes to C's row 1 (32 floats in), its bias to bias[1].
  EXPECT_NE(cuda.find("c[1 * ldc] = a0;"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("c[0 * ldc] = a1;"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("bias + 1)"), std::string::npos);
  EXPECT_NE(ptx.find("[%bias+4]"), std::string::npos) << ptx;
  EXPECT_NE(ptx.find("st.global.f32 [%c+128], %a0;"), std::string::npos) << ptx;
  EXPECT_NE(ptx.find("st.global.f32 [%c+0], %a1;"), std::string::npos) << ptx;
  EXPECT_EQ(emit_spmm(p, a, KernelLanguage::ptx).source, ptx);  // deterministic
}

TEST(RowClusters, TunerTimesTheWinnerWithClusteredRows) {
  const CsrMatrix a = paired_rows(32, 128, 0.1, 11);
  const SpmmProblem problem = problem_for(a, 64);
  const tune::SpmmSpace space = tune::spmm_space(a, problem, {}, KernelLanguage::ptx);
  const tune::SpmmSpaceDims dims;
  const tune::SpmmCandidate& winner = space.candidates.front();
  const auto v = tune::spmm_cluster_variant(a, winner, dims);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->label, winner.label + "/clu");
  EXPECT_EQ(v->plan.layout.row_split, SpmmRowSplit::clustered);
  EXPECT_EQ(v->plan.layout.panel_rows, winner.plan.layout.panel_rows);
  EXPECT_EQ(v->plan.layout.n_tile, winner.plan.layout.n_tile);
  EXPECT_EQ(v->plan.layout.groups, winner.plan.layout.groups);
  EXPECT_TRUE(check_plan(v->plan, a).empty());
  EXPECT_EQ(tune::spmm_variant_base_label(v->label), winner.label);
  EXPECT_EQ(tune::spmm_variant_base_label(v->label + "/r72"), winner.label);
  // The recorded options replay the same plan (what compile --db does).
  const auto [options, emitter] = tune::spmm_options_from_json(tune::candidate_json(*v), {});
  EXPECT_EQ(emitter, v->emitter);
  EXPECT_EQ(to_json(plan_spmm(a, problem, options)), to_json(v->plan));
  tune::SpmmSpaceDims off = dims;
  off.try_clustered_rows = false;
  EXPECT_FALSE(tune::spmm_cluster_variant(a, winner, off).has_value());
  // A default plan that the automatic rule already clusters (32 rows at N = 32768) gets no clustered
  // variant, and its recorded options replay it.
  const SpmmProblem wide = problem_for(a, 32768);
  const tune::SpmmSpace ws = tune::spmm_space(a, wide, {}, KernelLanguage::ptx);
  const tune::SpmmCandidate& d = ws.candidates.front();
  ASSERT_TRUE(d.is_default);
  ASSERT_EQ(d.plan.layout.row_split, SpmmRowSplit::clustered);
  EXPECT_EQ(d.plan.layout.panel_rows, 32);
  EXPECT_FALSE(tune::spmm_cluster_variant(a, d, dims).has_value());
  const auto [wide_options, wide_emitter] = tune::spmm_options_from_json(tune::candidate_json(d), {});
  EXPECT_EQ(to_json(plan_spmm(a, wide, wide_options)), to_json(d.plan));
}

}  // namespace
}  // namespace sparsecc
