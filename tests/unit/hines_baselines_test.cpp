// The Hines solver baselines without a GPU: the DHS schedule (validity and optimality against an
// exhaustive search), the layouts, the serial step, and the kernels of tools/bench/hines_baselines.cu
// themselves, compiled here as host C++ and run on CPU threads (one std::thread per GPU thread where
// lanes synchronise), against the fp64 reference; plus NVRTC compiling the embedded source.
#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "bench/hines_schedules.hpp"
#include "hines_support.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/compile/nvrtc.hpp"
#include "sparsecc/inspector/hines_planner.hpp"
#include "sparsecc/neuron/forest.hpp"
#include "sparsecc/neuron/morphology.hpp"
#include "sparsecc/plan/hines_interpreter.hpp"
#include "sparsecc/reference/hines_solve.hpp"
#include "test_support.hpp"

// ---- Host execution of the CUDA kernels -------------------------------------------------------------
namespace hines_host {
struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};
// The barriers of one thread block, one per (warp, lane mask) pair that synchronises.
struct Block {
  std::mutex mu;
  std::map<std::uint64_t, std::unique_ptr<std::barrier<>>> barriers;
};
thread_local Block* current_block = nullptr;
}  // namespace hines_host

static thread_local hines_host::Dim3 threadIdx, blockIdx;
static hines_host::Dim3 blockDim, gridDim;

static void __syncwarp(unsigned mask = 0xffffffffu) {
  hines_host::Block& b = *hines_host::current_block;
  std::barrier<>* barrier = nullptr;
  {
    std::lock_guard<std::mutex> lock(b.mu);
    auto& slot = b.barriers[(static_cast<std::uint64_t>(threadIdx.x / 32) << 32) | mask];
    if (!slot) slot = std::make_unique<std::barrier<>>(std::popcount(mask));
    barrier = slot.get();
  }
  barrier->arrive_and_wait();
}

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#include "bench/hines_baselines.cu"
#undef __global__
#undef __device__
#undef __forceinline__
#undef __launch_bounds__

namespace sparsecc::bench {
namespace {

// Runs `body` as `threads` GPU threads in blocks of HINES_BLOCK: one after another, or (for kernels
// whose lanes synchronise) on one std::thread each, block by block.
template <class F>
void run_kernel(std::int64_t threads, bool concurrent, F body) {
  const unsigned block = HINES_BLOCK;
  const auto grid = static_cast<unsigned>((threads + block - 1) / block);
  blockDim = {block, 1, 1};
  gridDim = {grid, 1, 1};
  for (unsigned bx = 0; bx < grid; ++bx) {
    hines_host::Block ctx;
    const auto one = [&ctx, &body, bx](unsigned tx) {
      hines_host::current_block = &ctx;
      blockIdx = {bx, 0, 0};
      threadIdx = {tx, 0, 0};
      body();
    };
    if (!concurrent) {
      for (unsigned tx = 0; tx < block; ++tx) one(tx);
      continue;
    }
    std::vector<std::thread> pool;
    for (unsigned tx = 0; tx < block; ++tx) pool.emplace_back(one, tx);
    for (std::thread& t : pool) t.join();
  }
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<double> random_rhs(std::mt19937_64& rng, std::size_t n, int r) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> b(n * static_cast<std::size_t>(r));
  for (double& v : b) v = u(rng);
  return b;
}

// The same structure with new values (still strictly diagonally dominant).
HinesSystem revalue(std::mt19937_64& rng, HinesSystem s) {
  std::uniform_real_distribution<double> u(0.5, 1.0);
  for (std::size_t i = 0; i < s.parent.size(); ++i) {
    s.upper[i] *= u(rng);
    s.lower[i] *= u(rng);
    s.diag[i] *= 1.0 + u(rng);
  }
  return s;
}

// Forests with repeated shapes (different values), unique shapes, single-node cells, a chain and a star.
std::vector<HinesSystem> test_forests() {
  std::mt19937_64 rng(42);
  std::vector<HinesSystem> out;
  out.push_back(test::notes_tree());
  out.push_back(test::chain_system(1));
  out.push_back(test::chain_system(2));
  out.push_back(test::chain_system(37));
  {
    HinesSystem star;  // soma (root) with 9 one-node children
    for (int i = 0; i < 9; ++i) star.parent.push_back(9);
    star.parent.push_back(-1);
    star.upper.assign(10, -0.5);
    star.upper[9] = 0;
    star.lower = star.upper;
    star.diag.assign(10, 1.5);
    star.diag[9] = 6;
    star.cell_offsets = {0, 10};
    out.push_back(star);
  }
  for (const double branchiness : {0.05, 0.3, 0.9})
    out.push_back(test::random_system(rng, 300, 3, branchiness));
  {
    std::vector<HinesSystem> parts;
    const HinesSystem a = test::random_system(rng, 60, 1, 0.3), b = test::random_system(rng, 25, 1, 0.6);
    for (int c = 0; c < 40; ++c) parts.push_back(revalue(rng, c % 3 == 2 ? b : a));
    parts.push_back(test::random_system(rng, 90, 1, 0.2));
    parts.push_back(test::chain_system(1));
    out.push_back(concatenate_hines(parts));
  }
  return out;
}

// ---- DHS schedule ------------------------------------------------------------------------------------

// The fewest steps of at most k eliminations each (a node after all its children), by exhaustive
// breadth-first search over the sets of eliminated nodes; eliminating fewer ready nodes than possible
// never helps, so each step takes min(k, ready) of them in every combination.
int optimal_steps(const std::vector<std::int32_t>& parent, int k) {
  const int n = static_cast<int>(parent.size());
  std::vector<std::uint32_t> children(static_cast<std::size_t>(n), 0);
  for (int i = 0; i < n; ++i)
    if (parent[static_cast<std::size_t>(i)] >= 0)
      children[static_cast<std::size_t>(parent[static_cast<std::size_t>(i)])] |= 1u << i;
  const std::uint32_t all = (n == 32) ? 0xffffffffu : ((1u << n) - 1u);
  std::vector<int> dist(std::size_t{1} << n, -1);
  std::vector<std::uint32_t> frontier = {0};
  dist[0] = 0;
  for (int steps = 0;; ++steps) {
    std::vector<std::uint32_t> next;
    for (const std::uint32_t done : frontier) {
      if (done == all) return steps;
      std::vector<int> ready;
      for (int v = 0; v < n; ++v)
        if (!(done >> v & 1u) && (children[static_cast<std::size_t>(v)] & ~done) == 0) ready.push_back(v);
      const int take = std::min<int>(k, static_cast<int>(ready.size()));
      // Every subset of `ready` of size `take`.
      for (std::uint32_t pick = 0; pick < (1u << ready.size()); ++pick) {
        if (std::popcount(pick) != take) continue;
        std::uint32_t state = done;
        for (std::size_t q = 0; q < ready.size(); ++q)
          if (pick >> q & 1u) state |= 1u << ready[q];
        if (dist[state] < 0) {
          dist[state] = steps + 1;
          next.push_back(state);
        }
      }
    }
    frontier = std::move(next);
  }
}

void expect_valid_schedule(const std::vector<std::int32_t>& parent, int k,
                           const std::vector<std::vector<std::int32_t>>& steps) {
  std::vector<int> at(parent.size(), -1);
  for (std::size_t t = 0; t < steps.size(); ++t) {
    EXPECT_LE(steps[t].size(), static_cast<std::size_t>(k));
    EXPECT_FALSE(steps[t].empty());
    for (const std::int32_t v : steps[t]) {
      ASSERT_GE(v, 0);
      ASSERT_LT(static_cast<std::size_t>(v), parent.size());
      EXPECT_EQ(at[static_cast<std::size_t>(v)], -1) << "node " << v << " scheduled twice";
      at[static_cast<std::size_t>(v)] = static_cast<int>(t);
    }
  }
  for (std::size_t v = 0; v < parent.size(); ++v) {
    ASSERT_GE(at[v], 0) << "node " << v << " never scheduled";
    const std::int32_t p = parent[v];
    if (p >= 0) {
      EXPECT_LT(at[v], at[static_cast<std::size_t>(p)]) << "node " << v << " not before its parent";
    }
  }
}

TEST(HinesBaselines, DhsScheduleOfTheNotesTree) {
  const std::vector<std::int32_t> parent = test::notes_tree().parent;
  EXPECT_EQ(dhs_schedule(parent, 1).size(), 7u);
  EXPECT_EQ(dhs_schedule(parent, 2).size(), 5u);
  EXPECT_EQ(dhs_schedule(parent, 3).size(), 4u);
  EXPECT_EQ(dhs_schedule(parent, 32).size(), 4u);  // the depth bound
  // K = 2: the deepest ready nodes first (depths 3, 3 | 3, 2 | 2 | 1 | 0).
  const std::vector<std::vector<std::int32_t>> expected = {{0, 1}, {3, 2}, {4}, {5}, {6}};
  EXPECT_EQ(dhs_schedule(parent, 2), expected);
  for (int k = 1; k <= 4; ++k)
    EXPECT_EQ(static_cast<int>(dhs_schedule(parent, k).size()), optimal_steps(parent, k));
}

TEST(HinesBaselines, DhsScheduleIsValidAndOptimalOnSmallForests) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 14);
    const int cells = 1 + static_cast<int>(rng() % std::min(n, 3));
    const double branchiness = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    const HinesSystem s = test::random_system(rng, n, cells, branchiness);
    for (int k = 1; k <= 4; ++k) {
      const auto steps = dhs_schedule(s.parent, k);
      expect_valid_schedule(s.parent, k, steps);
      EXPECT_EQ(static_cast<int>(steps.size()), optimal_steps(s.parent, k))
          << "n " << n << " cells " << cells << " k " << k;
    }
  }
}

TEST(HinesBaselines, DhsScheduleIsValidOnLargeForests) {
  for (const HinesSystem& s : test_forests())
    for (const int k : {1, 3, 4, 16, 32}) expect_valid_schedule(s.parent, k, dhs_schedule(s.parent, k));
}

TEST(HinesBaselines, DhsLayoutPlacesEveryNodeOnce) {
  for (const HinesSystem& s : test_forests()) {
    for (const int k : {1, 5, 8}) {
      const DhsLayout L = build_dhs(s, k, 2);
      std::set<std::int32_t> slots(L.map.slot.begin(), L.map.slot.end());
      EXPECT_EQ(slots.size(), static_cast<std::size_t>(s.size()));
      std::int32_t previous = std::numeric_limits<std::int32_t>::max(), nodes = 0;
      for (std::int32_t c = 0; c < L.num_cells(); ++c) {
        const std::int32_t* cell = &L.cells[static_cast<std::size_t>(4 * c)];
        EXPECT_LE(cell[2], previous);  // by descending steps
        previous = cell[2];
        for (std::int32_t q = 0; q < cell[2] * k; ++q)
          if (L.table[static_cast<std::size_t>(4 * (cell[1] + q))] != -2) ++nodes;
      }
      EXPECT_EQ(nodes, s.size());
      EXPECT_EQ(L.num_cells(), s.num_cells());
    }
  }
}

TEST(HinesBaselines, InterleavedCodesOfTheNotesTree) {
  // Node 2 has children 0 (first of two) and 1 (last); node 5 has children 2 (first) and 4; 3 -> 4 -> 5.
  const std::vector<std::int32_t> code = interleaved_codes(test::notes_tree().parent);
  const auto c = [](int parent, int flags) { return ((parent + 1) << 3) | flags; };
  const std::vector<std::int32_t> expected = {c(2, kFirstChild),
                                              c(2, 0),
                                              c(5, kHasChildren | kMultiChild | kFirstChild),
                                              c(4, 0),
                                              c(5, kHasChildren),
                                              c(6, kHasChildren | kMultiChild),
                                              c(-1, kHasChildren)};
  EXPECT_EQ(code, expected);
}

TEST(HinesBaselines, CellsGroupByStructure) {
  std::mt19937_64 rng(3);
  const HinesSystem a = test::random_system(rng, 20, 1, 0.5), b = test::random_system(rng, 20, 1, 0.5);
  const HinesSystem s = concatenate_hines({a, b, revalue(rng, a), a, test::chain_system(1)});
  const std::vector<CellGroup> groups = group_cells(s);
  ASSERT_EQ(groups.size(), a.parent == b.parent ? 2u : 3u);
  EXPECT_EQ(groups[0].cells, (std::vector<std::int32_t>{0, 2, 3}));
  const InterleavedLayout L = build_interleaved(s, 1);
  EXPECT_EQ(L.groups[1], 32);  // three cells interleaved with stride 32
  EXPECT_EQ(L.map.slot[static_cast<std::size_t>(s.cell_offsets[2]) + 1], 32 + 1);  // node 1 of slot 1
}

// ---- Serial step and kernels against the reference ----------------------------------------------------

TEST(HinesBaselines, SerialStepEqualsTheReferenceBitwise) {
  std::mt19937_64 rng(11);
  for (const HinesSystem& s : test_forests())
    for (const int r : {1, 3}) {
      const std::vector<double> b = random_rhs(rng, static_cast<std::size_t>(s.size()), r);
      std::vector<double> x(b.size(), kNaN), pivot(static_cast<std::size_t>(s.size()));
      serial_hines_step(s, b, r, x, pivot);
      EXPECT_EQ(x, hines_solve_many(s, b, static_cast<std::size_t>(r)));
    }
}

template <class T, int R, int C>
std::vector<double> run_interleaved(const HinesSystem& s, const std::vector<double>& b) {
  const InterleavedLayout L = build_interleaved(s, R);
  const auto diag = scatter_nodes<T>(L.map, s.diag), lower = scatter_nodes<T>(L.map, s.lower),
             upper = scatter_nodes<T>(L.map, s.upper), rhs = scatter_rhs<T>(L.map, b, R);
  std::vector<T> inv(static_cast<std::size_t>(L.map.slots), T(kNaN)),
      x(static_cast<std::size_t>(L.map.rhs_slots), T(kNaN));
  std::vector<double> first;
  for (int replay = 0; replay < 2; ++replay) {  // NaN-poisoned, then over the previous step's outputs
    run_kernel(static_cast<std::int64_t>(L.num_warps()) * 32, false, [&] {
      interleaved_kernel<T, R, C>(L.groups.data(), L.warps.data(), L.num_warps(), L.codes.data(), diag.data(),
                                  lower.data(), upper.data(), rhs.data(), inv.data(), x.data());
    });
    const std::vector<double> got = gather_rhs<T>(L.map, x, R);
    if (replay == 0) {
      first = got;
    } else {
      EXPECT_EQ(got, first);
    }
  }
  return first;
}

template <class T, int R, int C>
std::vector<double> run_dhs(const HinesSystem& s, const std::vector<double>& b, int k) {
  const DhsLayout L = build_dhs(s, k, R);
  const auto diag = scatter_nodes<T>(L.map, s.diag), lower = scatter_nodes<T>(L.map, s.lower),
             upper = scatter_nodes<T>(L.map, s.upper), rhs = scatter_rhs<T>(L.map, b, R);
  const auto slots = static_cast<std::size_t>(L.map.slots);
  std::vector<T> inv(slots, T(kNaN)), fac(slots, T(kNaN)), fu(slots, T(kNaN));
  std::vector<T> x(static_cast<std::size_t>(L.map.rhs_slots), T(kNaN));
  const int per_warp = 32 / k;
  const std::int64_t warps = (L.num_cells() + per_warp - 1) / per_warp;
  run_kernel(warps * 32, true, [&] {
    dhs_kernel<T, R, C>(L.cells.data(), L.num_cells(), k, L.table.data(), L.children.data(), diag.data(),
                        lower.data(), upper.data(), rhs.data(), inv.data(), fac.data(), fu.data(), x.data());
  });
  return gather_rhs<T>(L.map, x, R);
}

// Solves the tridiagonal m x m system (dl, d, du) for each column of the column-major block in place
// (Thomas algorithm; T is diagonally dominant), standing in for cuSPARSE's gtsv2.
template <class T>
void thomas(int m, int cols, const std::vector<T>& dl, const std::vector<T>& d, const std::vector<T>& du,
            std::vector<T>& block) {
  std::vector<T> w(static_cast<std::size_t>(m)), piv(static_cast<std::size_t>(m));
  for (int i = 0; i < m; ++i) {
    const auto si = static_cast<std::size_t>(i);
    piv[si] = i == 0 ? d[si] : d[si] - dl[si] * w[si - 1];
    w[si] = du[si] / piv[si];
  }
  for (int c = 0; c < cols; ++c) {
    T* y = block.data() + static_cast<std::size_t>(c) * static_cast<std::size_t>(m);
    for (int i = 0; i < m; ++i)
      y[i] = (y[i] - (i > 0 ? dl[static_cast<std::size_t>(i)] * y[i - 1] : T(0))) /
             piv[static_cast<std::size_t>(i)];
    for (int i = m - 2; i >= 0; --i) y[i] -= w[static_cast<std::size_t>(i)] * y[i + 1];
  }
}

struct MinTrsvRun {
  std::vector<double> x, md, mb;  // solution; the domain diagonal and right-hand sides before stage 3
};

template <class T, int R>
MinTrsvRun run_min_trsv(const HinesSystem& s, const std::vector<double>& b) {
  const MinTrsvLayout L = build_min_trsv(s);
  const auto typed = [](const std::vector<double>& v) { return std::vector<T>(v.begin(), v.end()); };
  const auto diag = typed(s.diag), lower = typed(s.lower), upper = typed(s.upper), bv = typed(b);
  const auto m = static_cast<std::size_t>(L.m), nj = static_cast<std::size_t>(L.num_junctions());
  std::vector<T> dl(m, T(kNaN)), d(m, T(kNaN)), du(m, T(kNaN)), X(m * (R + 2), T(kNaN));
  std::vector<T> md(nj, T(kNaN)), mu(nj, T(kNaN)), ml(nj, T(kNaN)), mb(nj * R, T(kNaN));
  std::vector<T> x(static_cast<std::size_t>(L.n) * R, T(kNaN));
  run_kernel(L.m, false, [&] {
    trsv_assemble_kernel<T, R>(L.n, L.m, L.rows.data(), diag.data(), lower.data(), upper.data(), bv.data(),
                               dl.data(), d.data(), du.data(), X.data());
  });
  EXPECT_EQ(dl[0], T(0));
  EXPECT_EQ(du[m - 1], T(0));
  thomas(L.m, R + 2, dl, d, du, X);
  run_kernel(L.num_junctions(), false, [&] {
    trsv_stage2_kernel<T, R>(L.num_junctions(), L.m, L.junctions.data(), L.gather_offsets.data(),
                             L.gather.data(), L.chains.data(), diag.data(), lower.data(), upper.data(),
                             bv.data(), X.data(), md.data(), mu.data(), ml.data(), mb.data());
  });
  MinTrsvRun out;
  out.md.assign(md.begin(), md.end());
  out.mb.assign(mb.begin(), mb.end());
  run_kernel(L.num_domain_cells(), false, [&] {
    trsv_stage3_kernel<T, R>(L.num_domain_cells(), L.domain_cells.data(), L.domain_parent.data(), md.data(),
                             mu.data(), ml.data(), mb.data());
  });
  run_kernel(L.n, false,
             [&] { trsv_stage4_kernel<T, R>(L.n, L.m, L.rows.data(), X.data(), mb.data(), x.data()); });
  out.x.assign(x.begin(), x.end());
  return out;
}

template <int R, int C>
void expect_kernels_match_reference(const char* label) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(100 + R * 10 + C));
  for (const HinesSystem& s : test_forests()) {
    SCOPED_TRACE(testing::Message() << label << ", N " << s.size() << ", cells " << s.num_cells());
    const std::vector<double> b = random_rhs(rng, static_cast<std::size_t>(s.size()), R);
    const std::vector<double> ref = hines_solve_many(s, b, R);
    EXPECT_LE(hines_max_rel_error(run_interleaved<double, R, C>(s, b), ref), 1e-12) << "interleaved";
    for (const int k : {1, 3, 4, 32})
      EXPECT_LE(hines_max_rel_error(run_dhs<double, R, C>(s, b, k), ref), 1e-12) << "DHS K = " << k;
    EXPECT_LE(hines_max_rel_error(run_min_trsv<double, R>(s, b).x, ref), 1e-12) << "MIN-TRSV";
  }
}

TEST(HinesBaselines, KernelsMatchTheReferenceOneColumn) { expect_kernels_match_reference<1, 1>("R 1"); }
TEST(HinesBaselines, KernelsMatchTheReferenceColumnChunks) {
  expect_kernels_match_reference<3, 2>("R 3 in chunks of 2");
}
TEST(HinesBaselines, KernelsMatchTheReferenceFiveColumns) { expect_kernels_match_reference<5, 5>("R 5"); }

TEST(HinesBaselines, KernelsInSinglePrecision) {
  std::mt19937_64 rng(5);
  for (const HinesSystem& s : test_forests()) {
    const std::vector<double> b = random_rhs(rng, static_cast<std::size_t>(s.size()), 2);
    const std::vector<double> ref = hines_solve_many(s, b, 2);
    EXPECT_LE(hines_max_rel_error(run_interleaved<float, 2, 2>(s, b), ref), 1e-4);
    EXPECT_LE(hines_max_rel_error(run_dhs<float, 2, 2>(s, b, 8), ref), 1e-4);
    EXPECT_LE(hines_max_rel_error(run_min_trsv<float, 2>(s, b).x, ref), 1e-4);
  }
}

TEST(HinesBaselines, MinTrsvDomainOfTheNotesTree) {
  // Notes section 10.2: J = [2, 5], Md = [-3, -31/10], Mrhs = [-3, -78/5], solution [3, 6].
  const HinesSystem s = test::notes_tree();
  const MinTrsvLayout L = build_min_trsv(s);
  EXPECT_EQ(L.junctions, (std::vector<std::int32_t>{2, 1, 5, 0}));  // 5 is the parent of junction 2
  EXPECT_EQ(L.domain_parent, (std::vector<std::int32_t>{1, -1}));
  EXPECT_EQ(L.num_chains(), 4);
  const MinTrsvRun run = run_min_trsv<double, 1>(s, {-1, 1, 3, 3, 5, 9, 8});
  ASSERT_EQ(run.md.size(), 2u);
  EXPECT_NEAR(run.md[0], -3.0, 1e-15);
  EXPECT_NEAR(run.md[1], -31.0 / 10, 1e-15);
  EXPECT_NEAR(run.mb[0], -3.0, 1e-15);
  EXPECT_NEAR(run.mb[1], -78.0 / 5, 1e-14);
  for (int i = 0; i < 7; ++i) EXPECT_NEAR(run.x[static_cast<std::size_t>(i)], i + 1.0, 1e-14);
}

// Every SWC cell of the shared data the reader accepts, two copies of it next to the previous cell (a
// forest of mixed shapes), on the right-hand sides of a passive step: the conditioning of real cells at
// the fp64 tolerance the GPU check uses.
TEST(HinesBaselines, KernelsOnEveryValidSwcCell) {
  SPARSECC_DATA_OR_SKIP(dir, "swc");
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.path().extension() == ".swc") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::mt19937_64 rng(17);
  std::optional<HinesSystem> previous;
  int cells = 0;
  double worst_margin = 0;  // of MIN-TRSV in f32: its error over the bound
  for (const auto& f : files) {
    HinesSystem cell;
    try {
      cell = assemble_hines(load_neuron(f.string()));
    } catch (const InputError&) {
      continue;  // the malformed edge cases
    }
    const HinesSystem s = previous ? concatenate_hines({cell, *previous, cell}) : cell;
    previous = cell;
    SCOPED_TRACE(f.filename().string());
    const auto n = static_cast<std::size_t>(s.size());
    std::uniform_real_distribution<double> v(-80, -50), i(-0.1, 0.1);
    std::vector<double> v_old(n), i_ext(n);
    for (std::size_t q = 0; q < n; ++q) v_old[q] = v(rng), i_ext[q] = i(rng);
    const std::vector<double> b = hines_rhs(s, v_old, i_ext);
    const std::vector<double> ref = hines_solve_many(s, b, 1);
    EXPECT_LE(hines_max_rel_error(run_interleaved<double, 1, 1>(s, b), ref), 1e-12) << "interleaved";
    EXPECT_LE(hines_max_rel_error(run_dhs<double, 1, 1>(s, b, 16), ref), 1e-12) << "DHS";
    EXPECT_LE(hines_max_rel_error(run_min_trsv<double, 1>(s, b).x, ref), 1e-12) << "MIN-TRSV";
    const double tol32 = hines_accuracy(s, b, 1).tolerance("f32");
    EXPECT_LE(hines_max_rel_error(run_interleaved<float, 1, 1>(s, b), ref), tol32) << "interleaved f32";
    EXPECT_LE(hines_max_rel_error(run_dhs<float, 1, 1>(s, b, 16), ref), tol32) << "DHS f32";
    const double trsv32 = hines_max_rel_error(run_min_trsv<float, 1>(s, b).x, ref);
    EXPECT_LE(trsv32, tol32) << "MIN-TRSV f32";
    worst_margin = std::max(worst_margin, trsv32 / tol32);
    ++cells;
  }
  std::printf("[ hines baselines ] %d SWC forests solved; MIN-TRSV f32 error up to %.2f of its bound\n",
              cells, worst_margin);
  EXPECT_GT(cells, 20);
}

// A cell refined to 10^5 compartments is badly conditioned: the serial fp64 solve itself misses the
// 1e-12 floor against the extended-precision reference, so the bound follows it (16x), and a fine
// decomposition (the plan interpreter, the executors' arithmetic) stays inside that bound in both
// precisions while the floors would reject every reordered solver.
TEST(HinesBaselines, AccuracyBoundFollowsTheSerialSolverOnARefinedCell) {
  SPARSECC_DATA_OR_SKIP(dir, "swc");
  const std::filesystem::path file = dir / "jaxley" / "morph_l5pc_with_axon.swc";
  if (!std::filesystem::exists(file)) GTEST_SKIP() << file << " is absent";
  const HinesSystem s = load_hines_forest({file.string()}, 1, 10);
  ASSERT_GT(s.size(), 100000);
  const std::vector<double> b = random_step_rhs(s, 1, 3);
  const HinesAccuracy acc = hines_accuracy(s, b, 1);
  std::printf("[ hines accuracy ] L5PC at resolution 10 (%d rows): serial fp64 %.3g, serial fp32 %.3g\n",
              s.size(), acc.serial_f64_error, acc.serial_f32_error);
  EXPECT_GT(acc.serial_f64_error, 1e-14);
  EXPECT_GT(acc.tolerance("f64"), kF64ToleranceFloor);
  EXPECT_FALSE(acc.note("f64").empty());
  const HinesPlan plan = plan_hines(s, 1, "f64", {});
  ASSERT_GE(plan.depth(), 3);
  const std::vector<double> x = interpret_hines(plan, s.diag, s.upper, s.lower, b);
  EXPECT_LE(hines_max_rel_error(x, acc.ref), acc.tolerance("f64"));
  const HinesPlan plan32 = plan_hines(s, 1, "f32", {});
  const auto f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  const std::vector<float> x32 = interpret_hines(plan32, f(s.diag), f(s.upper), f(s.lower), f(b));
  EXPECT_LE(hines_max_rel_error(std::vector<double>(x32.begin(), x32.end()), acc.ref), acc.tolerance("f32"));
}

TEST(HinesBaselines, MaxRelativeError) {
  EXPECT_EQ(hines_max_rel_error(std::vector<double>{1, 2.5}, std::vector<double>{1, 2}), 0.25);
  EXPECT_EQ(hines_max_rel_error(std::vector<double>{1e-3}, std::vector<double>{0}), 1e-3);
  EXPECT_TRUE(std::isinf(hines_max_rel_error(std::vector<double>{kNaN}, std::vector<double>{1})));
  EXPECT_TRUE(std::isinf(hines_max_rel_error(std::vector<double>{1}, std::vector<double>{1, 2})));
  // A well-conditioned system keeps the f32 floor.
  const HinesSystem s = test::notes_tree();
  const std::vector<double> b = {-1, 1, 3, 3, 5, 9, 8};
  const HinesAccuracy acc = hines_accuracy(s, b, 1);
  EXPECT_EQ(acc.tolerance("f32"), kF32ToleranceFloor);
  EXPECT_EQ(acc.tolerance("f64"), kF64ToleranceFloor);
  EXPECT_LT(acc.serial_f32_error, 1e-6);
  EXPECT_LT(acc.serial_f64_error, 1e-15);
  EXPECT_TRUE(acc.note("f64").empty());
  const std::vector<double> x = hines_solve_many(s, b, 1);
  EXPECT_LE(hines_max_rel_error(acc.ref, x), 1e-15);
}

TEST(HinesBaselines, EmbeddedSourceCompilesWithNvrtc) {
  const std::string source = hines_kernel_source();
  ASSERT_NE(source.find("hines_trsv_stage4"), std::string::npos);
  for (const char* real : {"double", "float"}) {
    CudaCompileOptions o;
    o.arch = "sm_90";
    o.extra = {std::string("-DHINES_REAL=") + real, "-DHINES_RHS=3", "-DHINES_RHS_CHUNK=2"};
    const CudaCompileResult r = compile_cuda(source, "hines_baselines.cu", o);
    EXPECT_FALSE(r.cubin.empty());
    for (const char* kernel : {"hines_interleaved", "hines_dhs", "hines_trsv_assemble", "hines_trsv_stage2",
                               "hines_trsv_stage3", "hines_trsv_stage4"})
      EXPECT_NE(r.ptx.find(std::string(".entry ") + kernel), std::string::npos)
          << kernel << " (" << real << ")";
  }
}

}  // namespace
}  // namespace sparsecc::bench
