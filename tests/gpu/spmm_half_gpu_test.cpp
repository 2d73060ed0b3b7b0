// fp16 / bf16 SpMM executors on a GPU, end to end: plan_spmm (dtype f16 / bf16, blocklets off, auto or
// forced) -> emit_spmm_cuda (templates/spmm_half.cu) -> NVRTC (no spills, no stack frame) -> bundle
// (with the fragments section) -> SpmmExecutor on a poisoned C. Each output is checked against the
// fp64 product of the executor's own inputs (A and B rounded to the dtype) within spmm_tolerance, and
// against interpret_spmm: bit for bit without fragments, within one unit in the last place plus
// 2^-20 max |C| with them (tensor cores sum in their own order). Cases: planted dense blocks in random
// matrices with every tile shape, accumulation, value mode and N mode; the real MobileNet v1 layers and
// ResNet-50 3x3 filters, as stored and RMB-pruned (rmb:16x8 at 90 %); the DLMC rn50 0.9 matrices with
// blocklets auto. Skips without a GPU (and the real cases without the data folder).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "gpu_skip.hpp"
#include "sparsecc/common/dtype.hpp"
#include "sparsecc/io/load.hpp"
#include "sparsecc/matrix/prune.hpp"
#include "spmm_gpu_support.hpp"
#include "test_support.hpp"

using namespace sparsecc;
using namespace sparsecc::gputest;

namespace {

struct HalfCase {
  SpmmCase c;
  std::string blocklets = "off";
};

HalfCase half_case(std::string name, CsrMatrix a, std::int64_t n, const std::string& dtype,
                   const std::string& blocklets, const std::string& accumulate = "f32",
                   SpmmNMode mode = SpmmNMode::fixed, bool bias_relu = false,
                   std::optional<SpmmValueMode> values = {}, std::vector<int> ns = {}) {
  HalfCase h;
  h.blocklets = blocklets;
  SpmmCase& c = h.c;
  c.name = std::move(name);
  c.problem = {a.rows, a.cols, n, mode, bias_relu, bias_relu, *parse_dtype(dtype)};
  c.options.accumulate = *parse_dtype(accumulate);
  c.options.value_mode = values;
  set_blocklets(c.options, blocklets);
  if (bias_relu) c.bias = random_vector(a.rows, 0xb1a5);
  c.ns = ns.empty() ? std::vector<int>{static_cast<int>(n)} : std::move(ns);
  c.emit = KernelLanguage::cuda;
  c.a = std::move(a);
  return h;
}

// A random m x k matrix of the given density with dense blocks planted at (16 i + 16, 8 j) for a few
// (i, j), and an 8 x 8 block at rows 8..15: every tile shape finds something.
CsrMatrix planted(std::int64_t m, std::int64_t k, double density, std::uint64_t seed) {
  DenseMatrix d = dense_from_csr(random_csr(m, k, density, seed));
  SplitMix64 rng(seed ^ 0x5eed);
  for (std::int64_t r0 = 16; r0 + 16 <= m; r0 += 32)
    for (std::int64_t c0 = 8 * static_cast<std::int64_t>(rng.next() % 4); c0 + 16 <= k; c0 += 40)
      for (std::int64_t r = r0; r < r0 + 16; ++r)
        for (std::int64_t c = c0; c < c0 + 16; ++c) d(r, c) = rng.uniform_pm1();
  for (std::int64_t r = 8; r < 16 && r < m; ++r)
    for (std::int64_t c = 0; c < 8 && c < k; ++c) d(r, c) = rng.uniform_pm1();
  return csr_from_dense(d, DType::f32);
}

// Runs `ex` at n on a NaN-poisoned C and checks it; prints one line.
void run_half(const rt::Context& ctx, const rt::SpmmExecutor& ex, const SpmmCase& c, const SpmmBuilt& built,
              int n) {
  const SpmmPlan& plan = built.plan;
  const HalfGpuRun r = half_gpu_run(ctx, ex, c, plan, n);
  const double tol = spmm_tolerance(plan.problem.dtype, plan.epilogue.accumulate, max_row_nnz(c.a));
  std::printf(
      "[ half gpu ] %-46s %5lldx%-5lld nnz %7lld N %5d %-4s acc %-4s %-8s tiles %5lld (%5.1f %% nnz) "
      "max rel err %.2e (tol %.1e) interp %s\n",
      c.name.c_str(), static_cast<long long>(c.a.rows), static_cast<long long>(c.a.cols),
      static_cast<long long>(c.a.nnz()), n, std::string(dtype_name(plan.problem.dtype)).c_str(),
      std::string(dtype_name(plan.epilogue.accumulate)).c_str(), to_string(plan.value_mode()),
      static_cast<long long>(plan.blocklets().tiles),
      c.a.nnz() ? 100.0 * static_cast<double>(plan.blocklets().nnz_covered) / static_cast<double>(c.a.nnz())
                : 0.0,
      r.rel, tol,
      r.bit_diffs == 0 ? "bit-exact"
      : r.far == 0     ? "within bound"
                       : "DIFFERS");
  std::fflush(stdout);
  EXPECT_EQ(r.nans, 0) << c.name << " n=" << n << ": unwritten or NaN outputs";
  EXPECT_LE(r.rel, tol) << c.name << " n=" << n;
  if (plan.fragment_k() == 0) {
    EXPECT_EQ(r.bit_diffs, 0) << c.name << " n=" << n << ": differs from interpret_spmm";
  } else {
    EXPECT_EQ(r.far, 0) << c.name << " n=" << n
                        << ": beyond one ulp + 2^-20 max|C| from interpret_spmm; first " << r.first_far;
  }
}

void build_and_run_half(const std::vector<HalfCase>& cases) {
  rt::Context ctx(0);
  std::vector<SpmmCase> plain;
  for (const auto& h : cases) plain.push_back(h.c);
  const auto built = build_all(plain, ctx.device().arch());
  for (std::size_t i = 0; i < plain.size(); ++i) {
    const SpmmCase& c = plain[i];
    SCOPED_TRACE(c.name);
    const SpmmBuilt& b = built[i].get();
    expect_clean_build(c, b);
    if (!b.plan_errors.empty()) continue;
    EXPECT_EQ(b.bundle.fragments.size(), static_cast<std::size_t>(b.bundle.metadata.fragment_words));
    if (cases[i].blocklets != "off" && cases[i].blocklets != "auto") {
      EXPECT_GT(b.plan.fragment_count(), 0) << c.name << ": forced blocklets found no tile";
    }
    const rt::SpmmExecutor ex = rt::SpmmExecutor::load(b.bundle, c.name, ctx);
    for (int n : c.ns) run_half(ctx, ex, c, b, n);
  }
}

// An RMB-pruned copy of `a`: 16x8 blocklets keeping 10 % of the entries of each 16-row block row;
// with `refill`, the zeros inside kept blocklets get values of the layer (dense blocklets).
CsrMatrix rmb_pruned(const CsrMatrix& a, bool refill) {
  const PrunePattern rmb = parse_prune_pattern("rmb:16x8");
  const DenseMatrix d = prune_dense(dense_from_csr(a), rmb, 0.9);
  return csr_from_dense(refill ? refill_kept_tiles(d, rmb, 0x5eed) : d, DType::f32);
}

}  // namespace

TEST(SpmmHalfGpu, PlantedBlocksEveryConfiguration) {
  SPARSECC_GPU_OR_SKIP();
  std::vector<HalfCase> cases;
  const CsrMatrix a = planted(77, 70, 0.08, 5);
  for (const std::string dtype : {"f16", "bf16"}) {
    for (const std::string bl : {"off", "auto", "16x8:0.5", "16x16:0.25", "8x8:0.5"})
      cases.push_back(half_case("planted/" + dtype + "/" + bl, a, 45, dtype, bl));
    cases.push_back(half_case("planted/" + dtype + "/acc-half", a, 64, dtype, "16x8:0.5", dtype));
    cases.push_back(half_case("planted/" + dtype + "/acc-half-off-groups", a, 64, dtype, "off", dtype));
    cases.back().c.options.groups = 3;
    cases.push_back(half_case("planted/" + dtype + "/streamed-bias-relu", a, 130, dtype, "16x16:0.25", "f32",
                              SpmmNMode::fixed, true, SpmmValueMode::streamed));
    cases.push_back(half_case("planted/" + dtype + "/runtime-n", a, 96, dtype, "16x8:0.5", "f32",
                              SpmmNMode::runtime, false, {}, {1, 7, 64, 96, 203}));
  }
  // K and M not multiples of the tile: edge fragments read no B row past K.
  cases.push_back(half_case("planted/f16/edges-k-m", planted(45, 29, 0.1, 9), 33, "f16", "16x8:0.25"));
  cases.push_back(half_case("planted/f16/edges-k16", planted(45, 29, 0.1, 9), 33, "f16", "16x16:0.1"));
  // The 16-byte path (compiled N divisible by 8): blocks alone (block rows store straight from the
  // tiles), blocks beside unrolled nonzeros, several groups sharing a block row's fragments, a short
  // last block row, fragments reaching past K, column tiles past N.
  const CsrMatrix blocks_only = planted(77, 70, 0.0, 5);
  for (const std::string dtype : {"f16", "bf16"}) {
    cases.push_back(half_case("vec8/" + dtype + "/blocks-only", blocks_only, 200, dtype, "16x8:0.5", "f32",
                              SpmmNMode::fixed, true));
    cases.push_back(half_case("vec8/" + dtype + "/blocks-only-groups3", blocks_only, 72, dtype, "16x16:0.25",
                              "f32", SpmmNMode::fixed, true));
    cases.back().c.options.groups = 3;
    cases.push_back(half_case("vec8/" + dtype + "/mixed-groups2", a, 136, dtype, "16x8:0.5", dtype));
    cases.back().c.options.groups = 2;
    cases.push_back(half_case("vec8/" + dtype + "/mixed-8x8", a, 64, dtype, "8x8:0.5"));
  }
  cases.push_back(half_case("vec8/f16/edges-k-m", planted(45, 29, 0.0, 9), 8, "f16", "16x8:0.25"));
  cases.push_back(half_case("vec8/f16/edges-k16-groups2", planted(45, 29, 0.1, 9), 328, "f16", "16x16:0.1"));
  cases.back().c.options.groups = 2;
  cases.back().c.options.n_tile = 64;
  build_and_run_half(cases);
}

// Programmatic dependent launch of f16 / bf16 executors (they wait for their predecessor and never
// let the next grid launch early): a square layer applied ten times in a row on one stream, each
// launch programmatic and reading the buffer the one before it wrote while writing the one that
// launch read (ping-pong, the second buffer poisoned with NaN first). The chain must give the bits
// of the same chain launched plainly (each layer's arithmetic is checked against fp64 by the tests
// above), every output finite and not all zero. Unrolled, tensor-core tiles beside unrolled
// nonzeros, and the 16-byte path with runtime N.
TEST(SpmmHalfGpu, ProgrammaticLaunchChains) {
  SPARSECC_GPU_OR_SKIP();
  rt::Context ctx(0);
  SPARSECC_PROGRAMMATIC_OR_SKIP(ctx);
  const auto scaled = scaled_for_chains;
  std::vector<SpmmCase> cases = {
      half_case("chain/f16/unrolled", scaled(random_csr(256, 256, 0.1, 51)), 136, "f16", "off").c,
      half_case("chain/bf16/tiles", scaled(planted(256, 256, 0.05, 52)), 130, "bf16", "16x8:0.5").c,
      half_case("chain/f16/vec8-runtime-n", scaled(planted(256, 256, 0.05, 53)), 128, "f16", "16x16:0.25",
                "f32", SpmmNMode::runtime)
          .c};
  const auto built = build_all(cases, ctx.device().arch());
  constexpr int kLayers = 10;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const SpmmCase& c = cases[i];
    SCOPED_TRACE(c.name);
    const SpmmBuilt& b = built[i].get();
    expect_clean_build(c, b);
    ASSERT_TRUE(b.plan.hints.programmatic);
    ASSERT_FALSE(b.plan.hints.programmatic_trigger);
    ASSERT_TRUE(b.bundle.metadata.programmatic_launch);
    const bool bf16 = c.problem.dtype == DType::bf16;
    const rt::SpmmExecutor ex = rt::SpmmExecutor::load(b.bundle, c.name, ctx);
    const int n = static_cast<int>(c.problem.n);
    DenseMatrix x0 = random_b(c.a.cols, n, 97);
    std::vector<std::uint16_t> h(x0.data.size());
    for (std::size_t e = 0; e < h.size(); ++e) h[e] = to_bits(x0.data[e], bf16);
    const std::uint32_t poison = bf16 ? 0x7fc07fc0u : 0x7e007e00u;  // NaN in both halves
    const std::vector<std::uint16_t> plain = run_chain(ctx, ex, h, n, kLayers, false, poison),
                                     overlapped = run_chain(ctx, ex, h, n, kLayers, true, poison);
    std::int64_t nonfinite = 0, nonzero = 0, differing = 0;
    for (std::size_t e = 0; e < plain.size(); ++e) {
      const double v = from_bits(overlapped[e], bf16);
      nonfinite += !std::isfinite(v);
      nonzero += v != 0.0;
      differing += overlapped[e] != plain[e];
    }
    std::printf(
        "[ half gpu ] %-46s %5lldx%-5lld nnz %7lld N %5d %-4s tiles %5lld %d programmatic launches: "
        "%lld non-finite, %lld of %zu nonzero, %lld elements differ from the plain chain\n",
        c.name.c_str(), static_cast<long long>(c.a.rows), static_cast<long long>(c.a.cols),
        static_cast<long long>(c.a.nnz()), n, std::string(dtype_name(c.problem.dtype)).c_str(),
        static_cast<long long>(b.plan.blocklets().tiles), kLayers, static_cast<long long>(nonfinite),
        static_cast<long long>(nonzero), plain.size(), static_cast<long long>(differing));
    std::fflush(stdout);
    EXPECT_EQ(nonfinite, 0);
    EXPECT_GT(nonzero, static_cast<std::int64_t>(plain.size() / 2));
    EXPECT_EQ(differing, 0) << "the programmatic chain computes other bits than the plain one";
  }
}

TEST(SpmmHalfGpu, RealWeightsAsStoredAndRmbPruned) {
  SPARSECC_GPU_OR_SKIP();
  SPARSECC_DATA_OR_SKIP(mobilenet, "sparsert/mobilenet_v1_sparse90.npz");
  SPARSECC_DATA_OR_SKIP(resnet, "sparsert/resnet50_3x3_sparse90.npz");
  std::vector<HalfCase> cases;
  std::vector<std::pair<std::string, CsrMatrix>> layers;
  for (int i = 0; i < 12; ++i)
    layers.emplace_back("mobilenet/" + std::to_string(i),
                        load_matrix(mobilenet.string() + ":contraction_1x1_" + std::to_string(i)));
  for (int g = 1; g <= 3; ++g)
    layers.emplace_back("resnet3x3/bg" + std::to_string(g),
                        load_matrix(resnet.string() + ":filter_bg" + std::to_string(g)));
  // NVRTC takes seconds per thousand unrolled nonzeros: the stored (unstructured) layers above the
  // limit run with SPARSECC_GPU_ALL=1.
  const char* all = std::getenv("SPARSECC_GPU_ALL");
  const std::int64_t limit = all && std::string(all) == "1" ? std::int64_t{1} << 40 : 8000;
  for (auto& [name, a] : layers) {
    const CsrMatrix sparse_rmb = rmb_pruned(a, false), dense_rmb = rmb_pruned(a, true);
    if (a.nnz() <= limit)
      cases.push_back(half_case(name + "/f16/auto", a, 196, "f16", "auto", "f32", SpmmNMode::fixed, true));
    cases.push_back(half_case(name + "/rmb/f16/auto", sparse_rmb, 196, "f16", "auto"));
    // N = 392 takes the 16-byte fragment path, N = 196 the scalar one.
    cases.push_back(half_case(name + "/rmb-dense/f16/auto", dense_rmb, 392, "f16", "auto", "f32",
                              SpmmNMode::fixed, true));
    cases.push_back(half_case(name + "/rmb-dense/bf16/16x8", dense_rmb, 196, "bf16", "16x8:1", "bf16"));
    cases.push_back(half_case(name + "/rmb-dense/f16/16x16", dense_rmb, 392, "f16", "16x16:0.5", "f32",
                              SpmmNMode::fixed, false, SpmmValueMode::streamed));
  }
  build_and_run_half(cases);
}

TEST(SpmmHalfGpu, DlmcRn50Sparse90BlockletsAuto) {
  SPARSECC_GPU_OR_SKIP();
  SPARSECC_DATA_OR_SKIP(dir, "dlmc/rn50/magnitude_pruning/0.9");
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().string().ends_with(".smtx.gz")) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());
  // NVRTC takes seconds per ten thousand unrolled nonzeros: matrices above the limit run with
  // SPARSECC_GPU_ALL=1.
  const char* all = std::getenv("SPARSECC_GPU_ALL");
  const std::int64_t limit = all && std::string(all) == "1" ? std::int64_t{1} << 40 : 12000;
  std::vector<HalfCase> cases;
  std::int64_t skipped = 0;
  for (const auto& f : files) {
    LoadOptions lo;
    lo.seed = 1;
    std::string name = "rn50_0.9/" + f.filename().string();
    name.resize(name.size() - std::string(".smtx.gz").size());
    CsrMatrix a = load_matrix(f.string(), lo);
    if (a.nnz() > limit) {
      ++skipped;
      continue;
    }
    cases.push_back(half_case(name + "/f16/auto", std::move(a), 64, "f16", "auto"));
  }
  std::printf(
      "[ half gpu ] rn50_0.9: %zu matrices, %lld above %lld nonzeros left out (SPARSECC_GPU_ALL=1 runs "
      "all)\n",
      cases.size(), static_cast<long long>(skipped), static_cast<long long>(limit));
  build_and_run_half(cases);
}
