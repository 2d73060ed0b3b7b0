// Hines numbering, assembly and the serial solver, checked against a dense LU in this file.
#include "sparsecc/neuron/hines.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numbers>
#include <random>
#include <string>

#include "hines_support.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/reference/hines_solve.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

// Gaussian elimination with partial pivoting on a copy of a (row-major), one right-hand side.
std::vector<double> dense_solve(DenseMatrix a, std::vector<double> b) {
  const std::int64_t n = a.rows;
  for (std::int64_t k = 0; k < n; ++k) {
    std::int64_t piv = k;
    for (std::int64_t r = k + 1; r < n; ++r)
      if (std::fabs(a(r, k)) > std::fabs(a(piv, k))) piv = r;
    if (piv != k) {
      for (std::int64_t c = 0; c < n; ++c) std::swap(a(k, c), a(piv, c));
      std::swap(b[k], b[piv]);
    }
    for (std::int64_t r = k + 1; r < n; ++r) {
      const double f = a(r, k) / a(k, k);
      if (f == 0) continue;
      for (std::int64_t c = k; c < n; ++c) a(r, c) -= f * a(k, c);
      b[r] -= f * b[k];
    }
  }
  std::vector<double> x(n);
  for (std::int64_t i = n - 1; i >= 0; --i) {
    double s = b[i];
    for (std::int64_t c = i + 1; c < n; ++c) s -= a(i, c) * x[c];
    x[i] = s / a(i, i);
  }
  return x;
}

std::vector<double> dense_times(const DenseMatrix& a, const std::vector<double>& x) {
  std::vector<double> y(a.rows, 0.0);
  for (std::int64_t r = 0; r < a.rows; ++r)
    for (std::int64_t c = 0; c < a.cols; ++c) y[r] += a(r, c) * x[c];
  return y;
}

// A random forest in random compartment order, numbered, with random diagonally dominant values
// (off-diagonals of either sign, upper != lower).
TEST(Hines, NotesCase1ExactPivotsAndSolution) {
  const HinesSystem s = test::notes_tree();
  EXPECT_TRUE(validate_hines(s).empty());
  const std::vector<double> x = {1, 2, 3, 4, 5, 6, 7};
  const std::vector<double> b = {-1, 1, 3, 3, 5, 9, 8};
  EXPECT_EQ(dense_times(hines_to_dense(s), x), b);
  const HinesFactorization f = hines_factor(s);
  const std::vector<double> pivots = {2, 2, 3, 2, 2.5, 49.0 / 15, 83.0 / 49};
  for (int i = 0; i < 7; ++i) EXPECT_NEAR(f.pivot[i], pivots[i], 1e-15) << i;
  // The forward-eliminated b' satisfies b'[i] = d'[i] x[i] + U[i] x[P[i]].
  const std::vector<double> b_elim = {-1, 1, 3, 3, 6.5, 63.0 / 5, 83.0 / 7};
  for (int i = 0; i < 7; ++i) {
    const double bi = f.pivot[i] * x[i] + (s.parent[i] >= 0 ? s.upper[i] * x[s.parent[i]] : 0.0);
    EXPECT_NEAR(bi, b_elim[i], 1e-14) << i;
  }
  const std::vector<double> got = hines_solve(s, b);
  for (int i = 0; i < 7; ++i) EXPECT_NEAR(got[i], x[i], 1e-14) << i;
}

TEST(Hines, NumberingIsPostOrderWithConsecutiveBranches) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const HinesSystem s = test::random_system(rng, 300, 1 + trial % 4, 0.3);
    ASSERT_TRUE(validate_hines(s).empty());
    std::vector<int> children(s.size(), 0);
    for (int i = 0; i < s.size(); ++i)
      if (s.parent[i] >= 0) ++children[s.parent[i]];
    for (int i = 0; i < s.size(); ++i) {
      if (children[i] == 1) {
        EXPECT_EQ(s.parent[i - 1], i);  // the only child is right before
      }
      if (s.parent[i] >= 0 && s.parent[i] != i + 1) {
        EXPECT_GE(children[s.parent[i]], 2);
      }
    }
  }
}

TEST(Hines, SerialSolveMatchesDenseOnRandomTrees) {
  std::mt19937_64 rng(42);
  std::normal_distribution<double> g;
  for (const double branchiness : {0.0, 0.1, 0.5, 1.0}) {
    for (const int n : {1, 2, 5, 40, 250}) {
      for (const int cells : {1, 3}) {
        if (cells > n) continue;
        const HinesSystem s = test::random_system(rng, n, cells, branchiness);
        ASSERT_TRUE(validate_hines(s).empty());
        const DenseMatrix a = hines_to_dense(s);
        constexpr int R = 4;
        std::vector<double> b(static_cast<std::size_t>(n) * R);
        for (double& v : b) v = g(rng);
        const std::vector<double> many = hines_solve_many(s, b, R);
        for (int r = 0; r < R; ++r) {
          std::vector<double> br(n), xr(n);
          for (int i = 0; i < n; ++i) br[i] = b[static_cast<std::size_t>(i) * R + r];
          for (int i = 0; i < n; ++i) xr[i] = many[static_cast<std::size_t>(i) * R + r];
          const std::vector<double> dense = dense_solve(a, br);
          const std::vector<double> one = hines_solve(s, br);
          EXPECT_LT(test::rel_l2_error(one, dense), 1e-12) << n << " " << branchiness;
          EXPECT_EQ(one, xr);  // the many-RHS path computes the same operations
        }
      }
    }
  }
}

TEST(Hines, SingleCompartment) {
  HinesSystem s;
  s.parent = {-1};
  s.diag = {4};
  s.upper = s.lower = {0};
  s.cell_offsets = {0, 1};
  EXPECT_EQ(hines_solve(s, std::vector<double>{2}), std::vector<double>{0.5});
  const HinesSystem a =
      assemble_hines(build_neuron_model(SwcFile{"one", {SwcSample{1, 1, 0, 0, 0, 10, -1, 1}}}));
  ASSERT_EQ(a.size(), 1);
  const double area = 4 * std::numbers::pi * 100;
  EXPECT_NEAR(a.cap_over_dt[0], area * 1e-5 / 0.025, 1e-12);
  EXPECT_NEAR(a.leak[0], 1e-4 * area * 1e-2, 1e-15);
  // Steady state: V_old = E_leak and no current stays at E_leak.
  const std::vector<double> x =
      hines_solve(a, hines_rhs(a, std::vector<double>{-65}, std::vector<double>{0}));
  EXPECT_NEAR(x[0], -65, 1e-12);
}

SwcFile chain_file(int n, bool reversed) {
  SwcFile f{"chain.swc", {}};
  for (int i = 1; i <= n; ++i)
    f.samples.push_back(SwcSample{i, i == 1 ? 1 : 3, 0, 0, 2.0 * i, 1.0, i - 1 == 0 ? -1 : i - 1, i});
  if (reversed) std::reverse(f.samples.begin(), f.samples.end());
  return f;
}

TEST(Hines, HundredThousandCompartmentChain) {
  const auto t0 = std::chrono::steady_clock::now();
  const HinesSystem s = assemble_hines(build_neuron_model(chain_file(100000, true)));
  ASSERT_EQ(s.size(), 100000);
  EXPECT_TRUE(validate_hines(s).empty());
  for (int i = 0; i + 1 < s.size(); ++i) ASSERT_EQ(s.parent[i], i + 1);
  // Steady state plus a current at the far end: the voltage decays towards the soma.
  std::vector<double> v(s.size(), -65.0), i_ext(s.size(), 0.0);
  i_ext[0] = 0.1;
  const std::vector<double> b = hines_rhs(s, v, i_ext);
  const std::vector<double> x = hines_solve(s, b);
  EXPECT_GT(x[0], -65);
  for (int i = 0; i + 1 < s.size(); ++i) ASSERT_GE(x[i], x[i + 1]);
  // Independent check: the chain is tridiagonal (sub-diagonal lower[i-1], super-diagonal upper[i]);
  // solve it with the Thomas algorithm in the opposite direction (from the root end down).
  const int n = s.size();
  std::vector<double> c(n), d(n), y(n);
  for (int i = n - 1; i >= 0; --i) {
    // Row i: lower[i-1] x[i-1] + diag[i] x[i] + upper[i] x[i+1] = b[i]; eliminate x[i+1] first.
    const double up = i + 1 < n ? s.upper[i] : 0.0;
    const double den = s.diag[i] - (i + 1 < n ? up * c[i + 1] : 0.0);
    c[i] = i > 0 ? s.lower[i - 1] / den : 0.0;
    d[i] = (b[i] - (i + 1 < n ? up * d[i + 1] : 0.0)) / den;
  }
  for (int i = 0; i < n; ++i) y[i] = d[i] - (i > 0 ? c[i] * y[i - 1] : 0.0);
  EXPECT_LT(test::rel_l2_error(x, y), 1e-13);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 5.0);
}

TEST(Hines, SomaWithThousandChildren) {
  SwcFile f{"star.swc", {SwcSample{1, 1, 0, 0, 0, 10, -1, 1}}};
  for (int i = 0; i < 1000; ++i) {
    const double a = 2 * std::numbers::pi * i / 1000;
    f.samples.push_back(SwcSample{i + 2, 3, 20 * std::cos(a), 20 * std::sin(a), 0, 0.5, 1, i + 2});
  }
  const HinesSystem s = assemble_hines(build_neuron_model(f));
  ASSERT_EQ(s.size(), 1001);
  EXPECT_EQ(s.parent[1000], -1);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(s.parent[i], 1000);
  EXPECT_TRUE(validate_hines(s).empty());
  std::vector<double> b(1001, 1.0);
  EXPECT_LT(test::rel_l2_error(hines_solve(s, b), dense_solve(hines_to_dense(s), b)), 1e-13);
}

TEST(Hines, ForestIsBlockDiagonal) {
  std::mt19937_64 rng(3);
  const HinesSystem s = test::random_system(rng, 120, 5, 0.4);
  ASSERT_EQ(s.num_cells(), 5);
  std::vector<double> b(s.size());
  for (double& v : b) v = std::uniform_real_distribution<double>(-1, 1)(rng);
  const std::vector<double> x = hines_solve(s, b);
  for (int c = 0; c < 5; ++c) {
    const int lo = s.cell_offsets[c], hi = s.cell_offsets[c + 1];
    HinesSystem one;
    for (int i = lo; i < hi; ++i) {
      one.parent.push_back(s.parent[i] < 0 ? -1 : s.parent[i] - lo);
      one.diag.push_back(s.diag[i]);
      one.upper.push_back(s.upper[i]);
      one.lower.push_back(s.lower[i]);
    }
    one.cell_offsets = {0, hi - lo};
    ASSERT_TRUE(validate_hines(one).empty());
    const std::vector<double> xc = hines_solve(one, std::vector<double>(b.begin() + lo, b.begin() + hi));
    EXPECT_EQ(xc, std::vector<double>(x.begin() + lo, x.begin() + hi));
  }
}

TEST(Hines, PermutationRoundTrips) {
  const NeuronModel m = make_demo_neuron();
  const Compartments c = compartmentalize(m, CompartmentOptions{2});
  const HinesSystem s = assemble_hines(c);
  std::vector<double> v(s.size());
  for (int i = 0; i < s.size(); ++i) v[i] = i * 1.5;
  const std::vector<double> h = to_hines_order(s, v);
  EXPECT_EQ(from_hines_order(s, h), v);
  for (int i = 0; i < s.size(); ++i) EXPECT_EQ(h[s.hines_of[i]], v[i]);
  EXPECT_EQ(parent_first_to_hines(s, hines_to_parent_first(s, h)), h);
  const std::vector<std::int32_t> pf = parent_first_parents(s);
  for (int j = 0; j < s.size(); ++j) EXPECT_TRUE(pf[j] == -1 ? j == 0 : pf[j] < j) << j;
  for (int i = 0; i < s.size(); ++i) {
    const int j = parent_first_index(s, i);
    EXPECT_EQ(j, s.size() - 1 - i);  // one cell: the global reversal
    if (s.parent[i] >= 0) {
      EXPECT_EQ(pf[j], parent_first_index(s, s.parent[i]));
    }
  }
  // Hines order, then the compartment's parent agrees with the Hines parent.
  for (int i = 0; i < c.size(); ++i)
    if (c.parent[i] >= 0) {
      EXPECT_EQ(s.parent[s.hines_of[i]], s.hines_of[c.parent[i]]);
    }
  EXPECT_THROW(to_hines_order(s, std::vector<double>(3)), UsageError);
}

TEST(Hines, ParentFirstWithinEachCell) {
  std::mt19937_64 rng(5);
  const HinesSystem s = test::random_system(rng, 50, 3, 0.5);
  const std::vector<std::int32_t> pf = parent_first_parents(s);
  for (int c = 0; c < 3; ++c) {
    const int lo = s.cell_offsets[c], hi = s.cell_offsets[c + 1];
    EXPECT_EQ(pf[lo], -1);  // root first in its block
    EXPECT_EQ(parent_first_index(s, hi - 1), lo);
    for (int j = lo + 1; j < hi; ++j) EXPECT_TRUE(pf[j] >= lo && pf[j] < j);
  }
}

TEST(Hines, UnorderedSamplesGiveTheSameSystem) {
  const NeuronModel ordered = make_demo_neuron();
  SwcFile shuffled{"shuffled", ordered.samples};
  std::mt19937_64 rng(11);
  std::shuffle(shuffled.samples.begin(), shuffled.samples.end(), rng);
  const HinesSystem a = assemble_hines(ordered), b = assemble_hines(build_neuron_model(shuffled));
  EXPECT_EQ(a.parent, b.parent);
  EXPECT_EQ(a.upper, b.upper);
  EXPECT_LT(test::rel_l2_error(b.diag, a.diag), 1e-15);
  // The same sample lands on the same Hines row.
  const NeuronModel sm = build_neuron_model(shuffled);
  for (int s = 0; s < sm.size(); ++s)
    EXPECT_EQ(b.hines_of[s], a.hines_of[static_cast<std::size_t>(sm.samples[s].id - 1)]);
  // Reversed chain: a child-before-parent file of the deepest possible tree.
  EXPECT_EQ(assemble_hines(build_neuron_model(chain_file(1000, true))).parent,
            assemble_hines(build_neuron_model(chain_file(1000, false))).parent);
}

TEST(Hines, AssemblyUnitsAndProperties) {
  // Two samples 100 um apart, radius 1 um, not soma: one cylinder split in halves.
  const NeuronModel m = build_neuron_model(
      SwcFile{"cyl", {SwcSample{1, 3, 0, 0, 0, 1, -1, 1}, SwcSample{2, 3, 100, 0, 0, 1, 1, 2}}});
  CableParams p;
  p.axial_resistivity_ohm_cm = 200;
  p.dt_ms = 0.1;
  const HinesSystem s = assemble_hines(m, p);
  ASSERT_EQ(s.size(), 2);
  const double pi = std::numbers::pi;
  const double ga = 100 * pi * 1 * 1 / (200 * 100);          // uS: R = 200 Ohm cm * 100 um / (pi um^2)
  EXPECT_NEAR(1 / (ga * 1e-6), 200 * 1e4 * 100 / pi, 1e-3);  // back to Ohm
  EXPECT_NEAR(-s.upper[0], ga, 1e-15);
  EXPECT_EQ(s.upper[0], s.lower[0]);
  const double half_area = pi * 100;                                         // um^2
  EXPECT_NEAR(s.cap_over_dt[0], 1.0 * half_area * 1e-8 * 1e3 / 0.1, 1e-15);  // uF/cm^2 * cm^2 -> nF, / ms
  EXPECT_NEAR(s.leak[0], 1e-4 * half_area * 1e-8 * 1e6, 1e-18);              // S -> uS
  EXPECT_NEAR(s.diag[0], s.cap_over_dt[0] + s.leak[0] + ga, 1e-15);
  const std::vector<double> b = hines_rhs(s, std::vector<double>{-70, -60}, std::vector<double>{0.5, 0});
  EXPECT_NEAR(b[0], s.cap_over_dt[0] * -70 + s.leak[0] * -65 + 0.5, 1e-15);
  EXPECT_NEAR(b[1], s.cap_over_dt[1] * -60 + s.leak[1] * -65, 1e-15);
  EXPECT_THROW(hines_rhs(s, std::vector<double>{1}, std::vector<double>{1, 2}), UsageError);
  p.dt_ms = 0;
  EXPECT_THROW(assemble_hines(m, p), UsageError);
}

TEST(Hines, ExtremeGeometryStaysFiniteAndDominant) {
  // 2 nm long edges between 1e6 um radius samples: the coupling cap keeps the pivots meaningful.
  SwcFile f{"fat", {}};
  for (int i = 1; i <= 50; ++i)
    f.samples.push_back(SwcSample{i, 3, 0, 0, 0.002 * i, i % 2 ? 1e6 : 0.0, i == 1 ? -1 : i - 1, i});
  const HinesSystem s = assemble_hines(build_neuron_model(f), CableParams{}, CompartmentOptions{1000});
  EXPECT_TRUE(validate_hines(s).empty());
  std::vector<double> v(s.size(), -65), i_ext(s.size(), 1.0);
  const std::vector<double> x = hines_solve(s, hines_rhs(s, v, i_ext));
  for (const double xi : x) ASSERT_TRUE(std::isfinite(xi));
  for (int i = 0; i < s.size(); ++i)
    if (s.parent[i] >= 0) {
      ASSERT_LE(-s.upper[i], kMaxCouplingRatio * (s.cap_over_dt[i] + s.leak[i]) * (1 + 1e-12));
    }
}

TEST(Hines, ValidatorFindsProblems) {
  HinesSystem s = test::notes_tree();
  s.parent[3] = 2;  // parent before the node
  EXPECT_FALSE(validate_hines(s).empty());
  s = test::notes_tree();
  s.diag[4] = 1;  // 1 < |-1| + |-1|
  ASSERT_EQ(validate_hines(s).size(), 1u);
  EXPECT_NE(validate_hines(s)[0].find("not diagonally dominant"), std::string::npos);
  s = test::notes_tree();
  s.upper[1] = std::nan("");
  EXPECT_FALSE(validate_hines(s).empty());
  s = test::notes_tree();
  s.cell_offsets = {0, 3, 7};  // node 2's parent 5 lies in another cell
  EXPECT_FALSE(validate_hines(s).empty());
  s = test::notes_tree();
  s.diag.pop_back();
  EXPECT_FALSE(validate_hines(s).empty());
  s = test::notes_tree();
  s.hines_of = {0, 1, 2, 3, 4, 5, 5};
  s.compartment_of = {0, 1, 2, 3, 4, 5, 6};
  EXPECT_FALSE(validate_hines(s).empty());
  EXPECT_THROW(number_hines(std::vector<std::int32_t>{1, 0}, std::vector<std::int64_t>{0, 0}), UsageError);
}

}  // namespace
}  // namespace sparsecc
