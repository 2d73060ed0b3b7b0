// Condensed tensor-core windows: the planner's invariants (the checker on random matrices, and its
// refusals), exact unions, the padding and fallback rules, the greedy order on planted row clusters,
// the share of dense work kept on i.i.d. masks against the arithmetic of
// docs/techniques/half-precision-tensor-cores.md (section 1), determinism and the JSON summary.
#include "sparsecc/inspector/condensed_windows.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <vector>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/random.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

WindowOptions options(std::int64_t rows, WindowReorder reorder, std::int64_t granule = 16,
                      double fallback = 1.0) {
  WindowOptions o;
  o.window_rows = rows;
  o.reorder = reorder;
  o.k_granule = granule;
  o.fallback_fraction = fallback;
  return o;
}

std::vector<std::int32_t> window_columns(const CondensedWindows& w, std::size_t win) {
  return {w.columns.begin() + w.column_ptr[win], w.columns.begin() + w.column_ptr[win + 1]};
}

// `clusters` groups of `rows_per_cluster` rows; each group draws a column set of `set_size` columns
// of k, and each of its rows keeps each column of the set with probability `keep`. The rows are then
// shuffled, so A's own order mixes the groups. `planted` receives the rows of each group.
CsrMatrix planted_clusters(std::int64_t clusters, std::int64_t rows_per_cluster, std::int64_t k,
                           std::int64_t set_size, double keep, std::uint64_t seed,
                           std::vector<std::vector<std::int64_t>>* planted) {
  SplitMix64 rng(seed);
  const std::int64_t m = clusters * rows_per_cluster;
  std::vector<std::int64_t> slot(static_cast<std::size_t>(m));
  std::iota(slot.begin(), slot.end(), std::int64_t{0});
  for (std::int64_t i = m - 1; i > 0; --i)
    std::swap(slot[static_cast<std::size_t>(i)], slot[rng.next() % static_cast<std::uint64_t>(i + 1)]);
  DenseMatrix d(m, k);
  planted->assign(static_cast<std::size_t>(clusters), {});
  std::vector<std::int64_t> cols(static_cast<std::size_t>(k));
  for (std::int64_t g = 0; g < clusters; ++g) {
    std::iota(cols.begin(), cols.end(), std::int64_t{0});
    for (std::int64_t i = 0; i < set_size; ++i)
      std::swap(cols[static_cast<std::size_t>(i)],
                cols[static_cast<std::size_t>(i) + rng.next() % static_cast<std::uint64_t>(k - i)]);
    for (std::int64_t j = 0; j < rows_per_cluster; ++j) {
      const std::int64_t r = slot[static_cast<std::size_t>(g * rows_per_cluster + j)];
      (*planted)[static_cast<std::size_t>(g)].push_back(r);
      for (std::int64_t i = 0; i < set_size; ++i)
        if (static_cast<double>(rng.next() >> 11) * 0x1p-53 < keep)
          d(r, cols[static_cast<std::size_t>(i)]) = rng.uniform_pm1();
    }
  }
  return csr_from_dense(d, DType::f32);
}

// The work the planted grouping keeps: window_rows x (padded) union of each group's rows.
std::int64_t planted_work(const CsrMatrix& a, const std::vector<std::vector<std::int64_t>>& groups,
                          std::int64_t window_rows, std::int64_t granule) {
  std::int64_t work = 0;
  for (const auto& g : groups) {
    std::set<std::int32_t> u;
    for (const std::int64_t r : g)
      u.insert(a.col_idx.begin() + a.row_ptr[r], a.col_idx.begin() + a.row_ptr[r + 1]);
    work += window_rows * ((static_cast<std::int64_t>(u.size()) + granule - 1) / granule * granule);
  }
  return work;
}

TEST(CondensedWindows, CheckHoldsOnRandomMatrices) {
  std::uint64_t seed = 1;
  for (const auto& [m, k, density, empty_every] :
       std::vector<std::tuple<std::int64_t, std::int64_t, double, std::int64_t>>{
           {1, 1, 1.0, 0}, {37, 53, 0.1, 0}, {100, 64, 0.3, 7}, {257, 129, 0.05, 3}, {64, 300, 0.02, 0}}) {
    const CsrMatrix a = test::random_csr(m, k, density, seed++, empty_every, 1);
    for (const std::int64_t rows : {1, 4, 8, 16, 32})
      for (const WindowReorder reorder : {WindowReorder::none, WindowReorder::greedy})
        for (const std::int64_t granule : {1, 16})
          for (const double fallback : {0.25, 1.0}) {
            SCOPED_TRACE(testing::Message()
                         << m << "x" << k << " rows " << rows << " " << window_reorder_name(reorder)
                         << " granule " << granule << " fallback " << fallback);
            const CondensedWindows w = plan_condensed_windows(a, options(rows, reorder, granule, fallback));
            EXPECT_NO_THROW(check_condensed_windows(a, w));
            EXPECT_EQ(static_cast<std::int64_t>(w.windows.size()), (m + rows - 1) / rows);
            EXPECT_EQ(w.tensor_nnz + w.cuda_core_nnz, a.nnz());
            if (reorder == WindowReorder::none) {
              EXPECT_FALSE(w.reordered);
            }
            const std::vector<std::int64_t> order = greedy_window_order(a, options(rows, reorder));
            EXPECT_NO_THROW(check_condensed_windows(a, condense_windows(a, order, options(rows, reorder))));
          }
  }
}

TEST(CondensedWindows, UnionsAreExactOnAHandMadeMatrix) {
  // Rows: 0 {1, 3}, 1 {3, 7}, 2 {}, 3 {0, 9}, 4 {2}, 5 {2, 5, 8}.
  DenseMatrix d(6, 10);
  for (const auto& [r, c] : std::vector<std::pair<int, int>>{
           {0, 1}, {0, 3}, {1, 3}, {1, 7}, {3, 0}, {3, 9}, {4, 2}, {5, 2}, {5, 5}, {5, 8}})
    d(r, c) = 1.0 + r + 0.5 * c;
  const CsrMatrix a = csr_from_dense(d, DType::f32);
  const CondensedWindows w = plan_condensed_windows(a, options(4, WindowReorder::none, 4));
  ASSERT_EQ(w.windows.size(), 2u);
  EXPECT_EQ(window_columns(w, 0), (std::vector<std::int32_t>{0, 1, 3, 7, 9}));
  EXPECT_EQ(window_columns(w, 1), (std::vector<std::int32_t>{2, 5, 8}));
  EXPECT_EQ(w.windows[0].first, 0);
  EXPECT_EQ(w.windows[0].height, 4);
  EXPECT_EQ(w.windows[0].width, 8);  // 5 columns padded to 4
  EXPECT_EQ(w.windows[0].nnz, 6);
  EXPECT_EQ(w.windows[1].first, 4);
  EXPECT_EQ(w.windows[1].height, 2);
  EXPECT_EQ(w.windows[1].width, 4);
  EXPECT_EQ(w.windows[1].nnz, 4);
  EXPECT_EQ(w.union_columns, 8);
  EXPECT_EQ(w.kept_work, 4 * 8 + 4 * 4);  // a short window still costs window_rows rows
  EXPECT_EQ(w.dense_work, 60);
  EXPECT_DOUBLE_EQ(w.kept_share(), 48.0 / 60.0);
  EXPECT_DOUBLE_EQ(w.useful_fraction(), 10.0 / 48.0);
  EXPECT_NO_THROW(check_condensed_windows(a, w));

  // Granule 1, fallback at half of K: window 0 (5 of 10 columns) stays, a 3-row window of rows
  // {0, 1, 3} would not be wider either; with a fallback of 0.4 window 0 goes to the CUDA cores.
  const CondensedWindows f = plan_condensed_windows(a, options(4, WindowReorder::none, 1, 0.4));
  EXPECT_TRUE(f.windows[0].cuda_core);
  EXPECT_FALSE(f.windows[1].cuda_core);
  EXPECT_EQ(f.cuda_core_windows, 1);
  EXPECT_EQ(f.cuda_core_nnz, 6);
  EXPECT_EQ(f.tensor_nnz, 4);
  EXPECT_EQ(f.kept_work, 4 * 3);
  EXPECT_NO_THROW(check_condensed_windows(a, f));

  // A's own order already pairs rows that share columns here: the greedy order keeps as much, so the
  // plan keeps A's own order.
  const CondensedWindows same = plan_condensed_windows(a, options(2, WindowReorder::greedy, 1));
  EXPECT_FALSE(same.reordered);
  EXPECT_EQ(same.kept_work, 2 * (3 + 2 + 3));
  EXPECT_EQ(greedy_window_order(a, options(2, WindowReorder::greedy)).back(), 2);  // the empty row last
}

TEST(CondensedWindows, GreedyPairsRowsThatShareColumns) {
  // Rows 0 and 2 use {0, 1}, rows 1 and 3 use {4, 5}: A's own 2-row windows keep 4 columns each.
  DenseMatrix d(4, 6);
  for (const auto& [r, c] :
       std::vector<std::pair<int, int>>{{0, 0}, {0, 1}, {1, 4}, {1, 5}, {2, 0}, {2, 1}, {3, 4}, {3, 5}})
    d(r, c) = 1.0;
  const CsrMatrix a = csr_from_dense(d, DType::f32);
  const CondensedWindows g = plan_condensed_windows(a, options(2, WindowReorder::greedy, 1));
  EXPECT_NO_THROW(check_condensed_windows(a, g));
  EXPECT_TRUE(g.reordered);
  EXPECT_EQ(g.order, (std::vector<std::int64_t>{0, 2, 1, 3}));
  EXPECT_EQ(window_columns(g, 0), (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(window_columns(g, 1), (std::vector<std::int32_t>{4, 5}));
  EXPECT_EQ(g.kept_work, 2 * (2 + 2));
  EXPECT_EQ(plan_condensed_windows(a, options(2, WindowReorder::none, 1)).kept_work, 2 * (4 + 4));
}

TEST(CondensedWindows, CheckRefusesBrokenPlans) {
  const CsrMatrix a = test::random_csr(40, 50, 0.2, 5);
  const CondensedWindows good = plan_condensed_windows(a, options(8, WindowReorder::greedy, 1));
  ASSERT_NO_THROW(check_condensed_windows(a, good));
  const auto refuses = [&](auto&& mutate, const char* what) {
    CondensedWindows w = good;
    mutate(w);
    try {
      check_condensed_windows(a, w);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  refuses([](CondensedWindows& w) { w.order[3] = w.order[4]; }, "repeats row");
  refuses([](CondensedWindows& w) { w.columns.erase(w.columns.begin()); }, "column_ptr");
  refuses([](CondensedWindows& w) { w.columns[w.column_ptr[1]] = w.columns[w.column_ptr[1] + 1]; },
          "not strictly ascending");
  refuses([](CondensedWindows& w) { w.windows[0].width += 1; }, "has width");
  refuses([](CondensedWindows& w) { w.windows[1].first += 1; }, "starts at position");
  refuses([](CondensedWindows& w) { w.kept_work += 1; }, "do not add up");
  refuses([](CondensedWindows& w) { w.windows[2].cuda_core = true; }, "CUDA-core path");
  refuses([](CondensedWindows& w) { w.reordered = !w.reordered; }, "reordered is");
  // A column none of the window's rows uses (and one of its own missing): swap two windows' lists'
  // first entries where they differ.
  CondensedWindows w = good;
  const std::int64_t b = w.column_ptr[0], e = w.column_ptr[1];
  std::int32_t unused = -1;
  std::vector<char> in(50, 0);
  for (std::int64_t i = b; i < e; ++i) in[w.columns[i]] = 1;
  for (std::int32_t c = 0; c < 50 && unused < 0; ++c)
    if (!in[c] && (e == b || c > w.columns[e - 1])) unused = c;
  if (unused >= 0) {
    w.columns[e - 1] = unused;
    EXPECT_THROW(check_condensed_windows(a, w), UsageError);
  }
}

TEST(CondensedWindows, RejectsBadOptionsAndOrders) {
  const CsrMatrix a = test::random_csr(10, 10, 0.3, 2);
  EXPECT_THROW(plan_condensed_windows(a, options(0, WindowReorder::none)), UsageError);
  EXPECT_THROW(plan_condensed_windows(a, options(8, WindowReorder::none, 0)), UsageError);
  EXPECT_THROW(plan_condensed_windows(a, options(8, WindowReorder::none, 16, 0.0)), UsageError);
  EXPECT_THROW(plan_condensed_windows(a, options(8, WindowReorder::none, 16, 1.5)), UsageError);
  WindowOptions o = options(8, WindowReorder::greedy);
  o.candidates = 0;
  EXPECT_THROW(plan_condensed_windows(a, o), UsageError);
  EXPECT_THROW(condense_windows(a, {0, 1, 2}, options(8, WindowReorder::none)), UsageError);
  EXPECT_THROW(condense_windows(a, {0, 1, 2, 3, 4, 5, 6, 7, 8, 8}, options(8, WindowReorder::none)),
               UsageError);
  EXPECT_THROW(parse_window_reorder("random"), UsageError);
  EXPECT_EQ(parse_window_reorder("greedy"), WindowReorder::greedy);
  EXPECT_EQ(window_reorder_name(WindowReorder::none), "none");
}

TEST(CondensedWindows, ReorderingFindsPlantedClusters) {
  for (const std::int64_t rows : {4, 8, 16, 32}) {
    SCOPED_TRACE(testing::Message() << "window rows " << rows);
    std::vector<std::vector<std::int64_t>> groups;
    const CsrMatrix a = planted_clusters(48, rows, 1024, 96, 0.7, 100 + rows, &groups);
    for (const std::int64_t granule : {1, 16}) {
      const CondensedWindows none = plan_condensed_windows(a, options(rows, WindowReorder::none, granule));
      const CondensedWindows greedy =
          plan_condensed_windows(a, options(rows, WindowReorder::greedy, granule));
      EXPECT_NO_THROW(check_condensed_windows(a, greedy));
      EXPECT_TRUE(greedy.reordered);
      EXPECT_LE(greedy.kept_work, none.kept_work);
      // Close to the planted grouping (about 96 / 1024 of K), far below A's own order.
      const std::int64_t ideal = planted_work(a, groups, rows, granule);
      EXPECT_LE(static_cast<double>(greedy.kept_work), 1.05 * static_cast<double>(ideal))
          << "kept " << greedy.kept_share() << ", planted " << static_cast<double>(ideal) / greedy.dense_work;
      EXPECT_LT(greedy.kept_share(), 0.5 * none.kept_share());
    }
  }
}

TEST(CondensedWindows, ReorderingNeverKeepsMoreWork) {
  // i.i.d. masks leave the greedy order little to find: A's own order is taken when it keeps less.
  for (const double density : {0.05, 0.1, 0.3})
    for (const std::int64_t rows : {4, 8, 16, 32}) {
      const CsrMatrix a = test::random_csr(256, 512, density, 9 + rows);
      const CondensedWindows none = plan_condensed_windows(a, options(rows, WindowReorder::none));
      const CondensedWindows greedy = plan_condensed_windows(a, options(rows, WindowReorder::greedy));
      EXPECT_LE(greedy.kept_work + greedy.cuda_core_nnz, none.kept_work + none.cuda_core_nnz);
    }
}

TEST(CondensedWindows, IidNinetyPercentMatchesTheArithmetic) {
  // The note's table (90 %, no reordering, granule 1): 1 - 0.9^h of the dense work remains.
  const CsrMatrix a = test::random_csr(2048, 2048, 0.1, 17);
  for (const auto& [rows, share] :
       std::vector<std::pair<std::int64_t, double>>{{4, 0.34}, {8, 0.57}, {16, 0.81}, {32, 0.97}}) {
    const CondensedWindows w = plan_condensed_windows(a, options(rows, WindowReorder::none, 1));
    EXPECT_NEAR(w.kept_share(), share, 0.02) << rows << " rows";
    EXPECT_NEAR(w.kept_share(), 1 - std::pow(0.9, static_cast<double>(rows)), 0.01) << rows << " rows";
  }
}

TEST(CondensedWindows, PlansAreDeterministic) {
  const CsrMatrix a = test::random_csr(300, 400, 0.08, 23, 11, 4);
  for (const std::int64_t rows : {4, 8, 32}) {
    const WindowOptions o = options(rows, WindowReorder::greedy);
    const CondensedWindows x = plan_condensed_windows(a, o), y = plan_condensed_windows(a, o);
    EXPECT_EQ(x.order, y.order);
    EXPECT_EQ(x.columns, y.columns);
    EXPECT_EQ(x.column_ptr, y.column_ptr);
    EXPECT_EQ(x.kept_work, y.kept_work);
    EXPECT_EQ(greedy_window_order(a, o), greedy_window_order(a, o));
  }
}

TEST(CondensedWindows, EmptyRowsAndMatrices) {
  CsrMatrix empty;
  empty.rows = 5;
  empty.cols = 7;
  empty.row_ptr.assign(6, 0);
  for (const WindowReorder r : {WindowReorder::none, WindowReorder::greedy}) {
    const CondensedWindows w = plan_condensed_windows(empty, options(4, r));
    EXPECT_NO_THROW(check_condensed_windows(empty, w));
    EXPECT_EQ(w.kept_work, 0);
    EXPECT_EQ(w.kept_share(), 0.0);
    EXPECT_EQ(w.useful_fraction(), 0.0);
  }
  // Every 3rd row empty: the greedy order puts the empty rows last, where their windows keep nothing.
  const CsrMatrix a = test::random_csr(96, 64, 0.1, 31, 3, 0);
  const std::vector<std::int64_t> order = greedy_window_order(a, options(8, WindowReorder::greedy));
  for (std::size_t p = 64; p < order.size(); ++p) EXPECT_EQ(a.row_nnz(order[p]), 0) << "position " << p;
}

TEST(CondensedWindows, JsonSummary) {
  const CsrMatrix a = test::random_csr(64, 128, 0.1, 41);
  const CondensedWindows w = plan_condensed_windows(a, options(8, WindowReorder::greedy));
  const nlohmann::json j = to_json(w);
  EXPECT_EQ(j.at("rows"), 64);
  EXPECT_EQ(j.at("options").at("window_rows"), 8);
  EXPECT_EQ(j.at("options").at("reorder"), "greedy");
  EXPECT_EQ(j.at("kept_work"), w.kept_work);
  EXPECT_DOUBLE_EQ(j.at("kept_share").get<double>(), w.kept_share());
  EXPECT_TRUE(j.at("tensor_window_width").contains("median"));
  EXPECT_FALSE(j.contains("order"));
  EXPECT_FALSE(j.contains("columns"));
}

}  // namespace
}  // namespace sparsecc
