// Half-precision SpMM plans on the CPU: fp16 / bf16 plans with and without tensor-core fragments
// (blocklets off, auto and forced shapes) hold their invariants, the plan interpreter agrees with the
// fp64 reference of the rounded inputs within spmm_tolerance on fresh random B and writes every
// output, the fragment words carry A's values in mma.sync's lane layout, the plan survives JSON, bad
// blocklet options are refused, and the tensor-core kernels compile with NVRTC for sm_90 without
// spills or a stack frame.
#include <gtest/gtest.h>

#include <cmath>

#include "sparsecc/common/dtype.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/random.hpp"
#include "sparsecc/compile/compile_kernel.hpp"
#include "sparsecc/compile/resource_usage.hpp"
#include "sparsecc/emit/spmm_cuda.hpp"
#include "sparsecc/emit/spmm_ptx.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/plan/spmm_interpreter.hpp"
#include "sparsecc/reference/spmm.hpp"

using namespace sparsecc;

namespace {

// Random entries at `density` plus dense 16 x 16 blocks at rows 16, 48, ... and an 8 x 8 block at
// rows 8..15: every tile shape finds tiles.
CsrMatrix planted(std::int64_t m, std::int64_t k, double density, std::uint64_t seed) {
  SplitMix64 rng(seed);
  DenseMatrix d(m, k);
  for (double& v : d.data)
    if (static_cast<double>(rng.next() >> 11) * 0x1p-53 < density) v = rng.uniform_pm1();
  for (std::int64_t r0 = 16; r0 + 16 <= m; r0 += 32)
    for (std::int64_t c0 = 8; c0 + 16 <= k; c0 += 40)
      for (std::int64_t r = r0; r < r0 + 16; ++r)
        for (std::int64_t c = c0; c < c0 + 16; ++c) d(r, c) = rng.uniform_pm1();
  for (std::int64_t r = 8; r < 16 && r < m; ++r)
    for (std::int64_t c = 0; c < 8 && c < k; ++c) d(r, c) = rng.uniform_pm1();
  return csr_from_dense(d, DType::f32);
}

SpmmOptions with_blocklets(const std::string& spec, const std::string& accumulate = "f32") {
  SpmmOptions o;
  set_blocklets(o, spec);
  o.accumulate = *parse_dtype(accumulate);
  return o;
}

double max_rel(const DenseMatrix& got, const DenseMatrix& ref, std::int64_t* unwritten) {
  double max_ref = 0, max_err = 0;
  *unwritten = 0;
  for (std::size_t i = 0; i < ref.data.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(ref.data[i]));
    if (!std::isfinite(got.data[i]))
      ++*unwritten;
    else
      max_err = std::max(max_err, std::fabs(got.data[i] - ref.data[i]));
  }
  return max_ref > 0 ? max_err / max_ref : max_err;
}

}  // namespace

TEST(SpmmHalf, InterpreterMatchesTheReferenceForEveryConfiguration) {
  const CsrMatrix a = planted(61, 75, 0.07, 3);
  std::int64_t max_row = 0;
  for (std::int64_t r = 0; r < a.rows; ++r) max_row = std::max(max_row, a.row_nnz(r));
  for (const std::string dtype : {"f16", "bf16"})
    for (const std::string bl : {"off", "auto", "16x8:0.5", "16x16:0.25", "8x8:0.5"})
      for (const std::string& acc : {std::string("f32"), dtype})
        for (const bool bias : {false, true})
          for (const int groups : {0, 3}) {
            SCOPED_TRACE(dtype + " " + bl + " acc " + acc + (bias ? " bias+relu" : "") + " groups " +
                         std::to_string(groups));
            const SpmmProblem pr{a.rows, a.cols, 37, SpmmNMode::fixed, bias, bias, *parse_dtype(dtype)};
            SpmmOptions o = with_blocklets(bl, acc);
            o.groups = groups;
            const SpmmPlan plan = plan_spmm(a, pr, o);
            if (groups) {
              EXPECT_EQ(plan.layout.groups, groups);
            }
            const auto errors = check_plan(plan, a);
            ASSERT_TRUE(errors.empty()) << errors.front();
            EXPECT_EQ(plan.layout.cols_per_thread, 2);
            if (bl != "off") {
              EXPECT_GT(plan.fragment_count(), 0);
              EXPECT_EQ(plan.layout.rows_per_block, 16);
            }
            SplitMix64 rng(99);
            DenseMatrix b(a.cols, 37);
            for (double& v : b.data) v = rng.uniform_pm1();
            round_values(b, dtype);
            std::vector<double> bv(static_cast<std::size_t>(a.rows));
            for (double& v : bv) v = rng.uniform_pm1();
            const DenseMatrix ref = spmm(round_values(a, dtype), b, bias ? &bv : nullptr, bias);
            const DenseMatrix got = interpret_spmm(plan, spmm_kernel_values(plan, a), b, bias ? &bv : nullptr,
                                                   spmm_fragment_words(plan, a));
            std::int64_t unwritten = 0;
            EXPECT_LE(max_rel(got, ref, &unwritten), spmm_tolerance(dtype, acc, max_row));
            EXPECT_EQ(unwritten, 0);
          }
}

TEST(SpmmHalf, ToleranceFollowsThePrecision) {
  EXPECT_EQ(spmm_tolerance("f32", "f32", 100), 1e-5);
  EXPECT_DOUBLE_EQ(spmm_tolerance("f16", "f32", 100), std::ldexp(1.0, -10));
  EXPECT_DOUBLE_EQ(spmm_tolerance("bf16", "f32", 100), std::ldexp(1.0, -7));
  EXPECT_DOUBLE_EQ(spmm_tolerance("f16", "f16", 100), std::ldexp(1.0, -11) * 22);
  // A wrong weight is caught: the interpreter of a plan with one corrupted value misses the bound.
  const CsrMatrix a = planted(32, 40, 0.1, 5);
  const SpmmPlan plan =
      plan_spmm(a, {a.rows, a.cols, 8, SpmmNMode::fixed, false, false, DType::f16}, with_blocklets("off"));
  std::vector<float> w = spmm_kernel_values(plan, a);
  w[3] += 0.5f;
  DenseMatrix b(a.cols, 8, 0.0);
  SplitMix64 rng(1);
  for (double& v : b.data) v = rng.uniform_pm1();
  round_values(b, "f16");
  std::int64_t unwritten = 0;
  EXPECT_GT(max_rel(interpret_spmm(plan, w, b), spmm(round_values(a, "f16"), b), &unwritten),
            spmm_tolerance("f16", "f32", 40));
}

TEST(SpmmHalf, FragmentWordsFollowTheMmaLaneLayout) {
  const CsrMatrix a = planted(32, 24, 0.0, 7);  // the 8x8 block and one 16x16 block
  const SpmmPlan plan = plan_spmm(a, {a.rows, a.cols, 16, SpmmNMode::fixed, false, false, DType::f16},
                                  with_blocklets("16x8:1"));
  ASSERT_EQ(plan.fragment_k(), 8);
  const std::vector<std::uint32_t> words = spmm_fragment_words(plan, a);
  ASSERT_EQ(words.size(), static_cast<std::size_t>(plan.fragment_count()) * 64);
  std::size_t f = 0;
  for (const SpmmBlockRow& b : plan.layout.blocks)
    for (const SpmmFragment& fr : b.fragments) {
      for (int lane = 0; lane < 32; ++lane)
        for (int reg = 0; reg < 2; ++reg)
          for (int h = 0; h < 2; ++h) {
            const int r = lane / 4 + 8 * reg, c = 2 * (lane % 4) + h;
            const std::uint32_t w = words[f * 64 + static_cast<std::size_t>(lane * 2 + reg)];
            const std::int64_t e = fr.entries[static_cast<std::size_t>(r * 8 + c)];
            const double want =
                e < 0 ? 0.0 : half_bits_to_double(double_to_half_bits(a.values[static_cast<std::size_t>(e)]));
            EXPECT_EQ(half_bits_to_double(static_cast<std::uint16_t>(h ? w >> 16 : w & 0xffff)), want)
                << "fragment " << f << " lane " << lane << " reg " << reg;
          }
      ++f;
    }
}

TEST(SpmmHalf, PlanJsonRoundTripKeepsFragments) {
  const CsrMatrix a = planted(40, 50, 0.05, 11);
  const SpmmPlan plan = plan_spmm(a, {a.rows, a.cols, 64, SpmmNMode::runtime, false, false, DType::bf16},
                                  with_blocklets("auto", "bf16"));
  const SpmmPlan back = plan_from_json(to_json(plan));
  EXPECT_TRUE(check_plan(back, a).empty());
  EXPECT_EQ(to_json(back), to_json(plan));
  EXPECT_EQ(back.fragment_count(), plan.fragment_count());
  EXPECT_EQ(back.epilogue.accumulate, DType::bf16);
}

TEST(SpmmHalf, BadOptionsAreRefused) {
  SpmmOptions o;
  for (const char* bad : {"16x8:0", "16x8:1.5", "4x4", "16x8:x", "16by8", "", "16x8:"})
    EXPECT_THROW(set_blocklets(o, bad), UsageError) << bad;
  EXPECT_NO_THROW(set_blocklets(o, "8x8"));
  EXPECT_EQ(o.blocklet_fill, 1.0);
  const CsrMatrix a = planted(32, 32, 0.1, 1);
  // Blocklets need a 16-bit dtype; accumulation in another type than the dtype is refused.
  EXPECT_THROW(
      plan_spmm(a, {32, 32, 8, SpmmNMode::fixed, false, false, DType::f32}, with_blocklets("16x8:0.5")),
      UsageError);
  EXPECT_THROW(
      plan_spmm(a, {32, 32, 8, SpmmNMode::fixed, false, false, DType::f16}, with_blocklets("off", "bf16")),
      UsageError);
  // Tensor-core tiles take whole warps and 16-row block rows.
  SpmmOptions partial_warp = with_blocklets("16x8:0.5");
  partial_warp.n_tile = 48;
  EXPECT_THROW(plan_spmm(a, {32, 32, 8, SpmmNMode::fixed, false, false, DType::f16}, partial_warp),
               UsageError);
  SpmmOptions short_rows = with_blocklets("16x8:0.5");
  short_rows.rows_per_block = 8;
  EXPECT_THROW(plan_spmm(a, {32, 32, 8, SpmmNMode::fixed, false, false, DType::f16}, short_rows), UsageError);
  // The PTX emitter writes fp32 kernels only.
  const SpmmPlan half =
      plan_spmm(a, {32, 32, 8, SpmmNMode::fixed, false, false, DType::f16}, with_blocklets("off"));
  EXPECT_THROW(emit_spmm(half, a, KernelLanguage::ptx), UsageError);
  // A weight beyond fp16's range cannot be represented.
  CsrMatrix big = a;
  big.values[0] = 1e6;
  const SpmmPlan p16 =
      plan_spmm(big, {32, 32, 8, SpmmNMode::fixed, false, false, DType::f16}, with_blocklets("off"));
  EXPECT_THROW(spmm_kernel_values(p16, big), UsageError);
}

TEST(SpmmHalf, GroupsShareTheFragmentsOfABlockRow) {
  SpmmBlockRow b;
  b.fragments.resize(10);
  std::size_t next = 0;
  for (std::int32_t g = 0; g < 4; ++g) {
    const auto [first, last] = spmm_group_fragments(b, 4, g);
    EXPECT_EQ(first, next);
    EXPECT_GE(last - first, 2u);
    EXPECT_LE(last - first, 3u);
    next = last;
  }
  EXPECT_EQ(next, 10u);
  EXPECT_EQ(spmm_group_fragments(b, 1, 0), (std::pair<std::size_t, std::size_t>{0, 10}));
  // Automatic plans take two groups only for long block rows on a grid short of warps (here 16
  // fragments per block row and 2 warps), else one; given groups split each block row's fragments,
  // within 48 KiB of shared memory.
  DenseMatrix d(32, 512);
  SplitMix64 rng(4);
  for (std::int64_t c0 = 0; c0 < 512; c0 += 32)
    for (std::int64_t r = 0; r < 32; ++r)
      for (std::int64_t c = c0; c < c0 + 8; ++c) d(r, c) = rng.uniform_pm1();
  const CsrMatrix a = csr_from_dense(d, DType::f32);
  const SpmmProblem pr{32, 512, 64, SpmmNMode::fixed, false, false, DType::f16};
  const SpmmPlan one = plan_spmm(a, pr, with_blocklets("16x8"));
  EXPECT_EQ(one.fragment_count(), 32);
  EXPECT_EQ(one.layout.groups, 2);
  EXPECT_TRUE(check_plan(one, a).empty());
  const SpmmProblem wide{32, 512, 65536, SpmmNMode::fixed, false, false, DType::f16};  // 2048 warps
  const SpmmPlan direct = plan_spmm(a, wide, with_blocklets("16x8"));
  EXPECT_EQ(direct.layout.groups, 1);
  // One group on the 16-byte path, fragments only: tiles go straight to C, no stage in shared memory.
  EXPECT_FALSE(spmm_fragment_stages(direct));
  EXPECT_EQ(direct.layout.shared_bytes, 0);
  SpmmProblem scalar = wide;
  scalar.n_mode = SpmmNMode::runtime;  // the scalar path stages every tile
  const SpmmPlan staged = plan_spmm(a, scalar, with_blocklets("16x8"));
  EXPECT_TRUE(spmm_fragment_stages(staged));
  EXPECT_EQ(staged.layout.shared_bytes, std::int64_t{staged.layout.block_x / 32} * 16 * 72 * 4);
  DenseMatrix shorter = d;  // 15 fragments per block row
  for (std::int64_t r = 0; r < 32; ++r)
    for (std::int64_t c = 480; c < 488; ++c) shorter(r, c) = 0;
  EXPECT_EQ(plan_spmm(csr_from_dense(shorter, DType::f32), pr, with_blocklets("16x8")).layout.groups, 1);
  SpmmOptions o = with_blocklets("16x8");
  o.groups = 4;
  const SpmmPlan four = plan_spmm(a, pr, o);
  EXPECT_EQ(four.layout.groups, 4);
  EXPECT_TRUE(check_plan(four, a).empty());
  EXPECT_EQ(four.layout.shared_bytes, 4 * 16 * 72 * 4);  // the warps' stages; no unrolled nonzeros to reduce
  o.groups = 11;                                         // 11 stages of 4.5 KiB
  EXPECT_THROW(plan_spmm(a, pr, o), UsageError);
}

TEST(SpmmHalf, TensorCoreKernelsCompileForSm90WithoutSpills) {
  // Random entries beside the blocks (the tiles' stage meets the unrolled path), and blocks alone (on
  // the 16-byte path their block rows store straight from the tiles); 45 rows and 61 columns leave a
  // short last block row and a fragment reaching past K.
  struct Config {
    double density;
    std::int64_t n;
    std::int32_t groups;
  };
  for (const Config cfg : {Config{0.05, 33, 0}, Config{0.05, 64, 0}, Config{0.0, 64, 1}, Config{0.0, 200, 3},
                           Config{0.05, 200, 2}})
    for (const std::string dtype : {"f16", "bf16"})
      for (const std::string bl : {"16x8:0.5", "16x16:0.25"}) {
        SCOPED_TRACE(dtype + " " + bl + " density " + std::to_string(cfg.density) + " N " +
                     std::to_string(cfg.n) + " groups " + std::to_string(cfg.groups));
        const CsrMatrix a = planted(45, 61, cfg.density, 13);
        SpmmOptions so = with_blocklets(bl);
        so.groups = cfg.groups;
        if (cfg.groups > 1) so.n_tile = 64;  // within 48 KiB of warp stages
        const SpmmPlan plan =
            plan_spmm(a, {a.rows, a.cols, cfg.n, SpmmNMode::fixed, true, true, *parse_dtype(dtype)}, so);
        const EmittedKernel k = emit_spmm_cuda(plan, a);
        EXPECT_NE(k.source.find(bl[3] == '8' ? "m16n8k8" : "m16n8k16"), std::string::npos);
        EXPECT_NE(k.source.find(cfg.n % 8 == 0 ? "#define SPCC_VEC8 1" : "#define SPCC_VEC8 0"),
                  std::string::npos);
        const bool direct = k.source.find("spcc_store_tile_row(cr") != std::string::npos;
        EXPECT_EQ(direct, cfg.n % 8 == 0 && cfg.density == 0.0);
        EXPECT_EQ(k.fragment_words, spmm_fragment_words(plan, a));
        EXPECT_EQ(emit_spmm_cuda(plan, a).source, k.source);  // deterministic
        // Programmatic (the rule for half plans): one wait before the block rows' cases, no trigger.
        ASSERT_TRUE(plan.hints.programmatic);
        EXPECT_NE(k.source.find("if (true) sparsecc_wait_for_predecessor();\n  switch (blockIdx.y)"),
                  std::string::npos);
        EXPECT_EQ(k.source.find("launch_dependents"), std::string::npos);
        CudaCompileOptions o;
        o.arch = "sm_90";
        o.extra.push_back(kPtxasVerbose);
        const CudaCompileResult r = compile_kernel(k, "half_test", o);
        const ResourceUsage u = parse_ptxas_log(r.log);
        ASSERT_TRUE(u.found) << r.log;
        EXPECT_FALSE(r.cubin.empty());
        EXPECT_NE(r.ptx.find("mma.sync.aligned"), std::string::npos);
        EXPECT_NE(r.ptx.find("griddepcontrol.wait"), std::string::npos);
        EXPECT_EQ(u.spill_store_bytes + u.spill_load_bytes, 0);
        EXPECT_EQ(u.stack_frame_bytes, 0);
      }
}
