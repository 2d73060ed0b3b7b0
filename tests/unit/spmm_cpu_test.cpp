// The CPU backend: plans, their interpreter against the fp64 reference, and (where LLVM is built)
// the emitted IR compiled by LLJIT, run on NaN-poisoned outputs and checked against the interpreter
// (bit for bit: the same fused multiply-adds in the same order) and against fp64.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/random.hpp"
#include "sparsecc/emit/spmm_llvm.hpp"
#include "sparsecc/inspector/spmm_cpu_planner.hpp"
#include "sparsecc/plan/spmm_cpu_plan.hpp"
#include "sparsecc/reference/spmm.hpp"
#include "test_support.hpp"
#if SPARSECC_HAVE_LLVM
#include "sparsecc/llvm/cpu_jit.hpp"
#endif

using namespace sparsecc;

namespace {

struct Inputs {
  std::vector<float> b, bias;
  DenseMatrix b64;
  std::vector<double> bias64;
};

Inputs inputs(const CsrMatrix& a, std::int64_t n, std::uint64_t seed) {
  Inputs in;
  SplitMix64 rng(seed);
  in.b64 = DenseMatrix(a.cols, n);
  for (double& v : in.b64.data) v = static_cast<float>(rng.uniform_pm1());
  for (const double v : in.b64.data) in.b.push_back(static_cast<float>(v));
  for (std::int64_t r = 0; r < a.rows; ++r) in.bias64.push_back(static_cast<float>(rng.uniform_pm1()));
  for (const double v : in.bias64) in.bias.push_back(static_cast<float>(v));
  return in;
}

// Relative L2 error of c against the fp64 product of the same fp32 inputs.
double rel_error(const CsrMatrix& a32, const Inputs& in, const SpmmProblem& pr, const std::vector<float>& c) {
  const DenseMatrix ref = spmm(a32, in.b64, pr.bias ? &in.bias64 : nullptr, pr.relu);
  return test::rel_l2_error(std::vector<double>(c.begin(), c.end()), ref.data);
}

}  // namespace

TEST(SpmmCpuPlan, PanelsCoverTheRowsAndTheJsonRoundTrips) {
  const CsrMatrix a = round_values(test::random_csr(300, 200, 0.1, 3), DType::f32);
  const CpuTarget t = cpu_target("x86-64-avx512");
  EXPECT_EQ(t.lanes_f32(), 16);
  EXPECT_EQ(cpu_target("x86-64-avx2").lanes_f32(), 8);
  EXPECT_THROW(cpu_target("x86-64-sse"), UsageError);
  const SpmmCpuPlan p = plan_spmm_cpu(a, test::problem_for(a, 40, true, false), t,
                                      {.column_tile = 0, .panel_nnz = 500, .rolled = std::nullopt});
  EXPECT_TRUE(check_cpu_plan(p, a).empty());
  EXPECT_GT(p.panel_count(), 3);
  EXPECT_EQ(p.column_tile, 40);  // N fits the accumulator vectors
  EXPECT_EQ(to_json(spmm_cpu_plan_from_json(to_json(p))), to_json(p));
  // Wide N: tiles of the accumulators' columns.
  EXPECT_EQ(plan_spmm_cpu(a, test::problem_for(a, 1000, false, false), t).column_tile,
            spmm_rules::kCpuTileVectors * 16);
  EXPECT_EQ(plan_spmm_cpu(a, test::problem_for(a, 1000, false, false), cpu_target("x86-64-avx2")).column_tile,
            spmm_rules::kCpuTileVectors * 8);
  SpmmCpuPlan broken = p;
  broken.panels[1] = broken.panels[2];
  EXPECT_FALSE(check_cpu_plan(broken, a).empty());
  broken = p;
  broken.column_tile = 20;
  EXPECT_FALSE(check_cpu_plan(broken, a).empty());
  EXPECT_THROW(plan_spmm_cpu(a, {a.rows, a.cols, 8, SpmmNMode::fixed, false, false, DType::f64}, t),
               UsageError);  // f16 and bf16: spmm_cpu_half_test.cpp
}

TEST(SpmmCpuPlan, RolledCodeWhereStraightLineCodeWouldBeLarge) {
  // Straight-line code up to kCpuStraightLineFmas vector fused multiply-adds, rolled above; the
  // options force either.
  const CsrMatrix a = round_values(test::random_csr(400, 250, 0.2, 13), DType::f32);  // ~20,000 nonzeros
  const CpuTarget t = cpu_target("x86-64-avx512");
  const auto rolled = [&](std::int64_t n, SpmmCpuOptions o = {}) {
    return plan_spmm_cpu(a, test::problem_for(a, n, false, false), t, o).rolled;
  };
  ASSERT_LT(a.nnz(), spmm_rules::kCpuStraightLineFmas);
  ASSERT_GT(3 * a.nnz(), spmm_rules::kCpuStraightLineFmas);
  EXPECT_FALSE(rolled(16));  // one vector a nonzero
  EXPECT_TRUE(rolled(48));   // three
  EXPECT_TRUE(rolled(16, {0, 0, true}));
  EXPECT_FALSE(rolled(48, {0, 0, false}));
  SpmmCpuPlan p = plan_spmm_cpu(a, test::problem_for(a, 48, false, false), t);
  EXPECT_EQ(spmm_cpu_plan_from_json(to_json(p)).rolled, true);
}

TEST(SpmmCpuPlan, InterpreterMatchesTheReference) {
  const CsrMatrix a = round_values(test::random_csr(130, 77, 0.2, 5), DType::f32);
  for (const std::int64_t n : {1, 13, 300}) {
    const SpmmProblem pr = test::problem_for(a, n, true, true);
    const SpmmCpuPlan p = plan_spmm_cpu(a, pr, cpu_target("x86-64-avx2"));
    const Inputs in = inputs(a, n, 11);
    std::vector<float> c(static_cast<std::size_t>(a.rows * n), std::numeric_limits<float>::quiet_NaN());
    interpret_spmm_cpu(p, a, in.b.data(), in.bias.data(), c.data());
    EXPECT_LT(rel_error(a, in, pr, c), 1e-6) << n;
  }
}

TEST(SpmmCpuPlan, IrHasAFunctionAPanelAndWidth) {
  const CsrMatrix a = round_values(test::random_csr(64, 64, 0.1, 7), DType::f32);
  const SpmmCpuPlan p = plan_spmm_cpu(a, test::problem_for(a, 70, false, true), cpu_target("x86-64-avx2"),
                                      {.column_tile = 64, .panel_nnz = 50, .rolled = std::nullopt});
  const std::string ir = emit_spmm_llvm_ir(p, a);
  const auto count = [&](const std::string& s) {
    std::size_t c = 0;
    for (std::size_t at = ir.find(s); at != std::string::npos; at = ir.find(s, at + 1)) ++c;
    return c;
  };
  EXPECT_EQ(count("define hidden void @sparsecc_cpu_panel_"),
            2 * static_cast<std::size_t>(p.panel_count()));  // 64 + 6 columns
  EXPECT_EQ(count("define void @sparsecc_cpu_tile("), 1u);
  EXPECT_NE(ir.find("@llvm.fma.v8f32"), std::string::npos);
  EXPECT_NE(ir.find("@llvm.fma.v6f32"), std::string::npos);
}

#if SPARSECC_HAVE_LLVM

TEST(SpmmCpuJit, EveryWidthEpilogueAndTargetAgainstFp64) {
  const CsrMatrix a = round_values(test::random_csr(61, 50, 0.15, 9), DType::f32);
  int ran = 0;
  for (const char* isa : {"x86-64-avx2", "x86-64-avx512"}) {
    const CpuTarget t = cpu_target(isa);
    if (!host_runs(t)) continue;
    for (const std::int64_t n : {1, 7, 16, 33, 300})
      for (const bool epilogue : {false, true}) {
        SCOPED_TRACE(fmt::format("{} N={} bias+relu and rolled={}", isa, n, epilogue));
        const SpmmProblem pr = test::problem_for(a, n, epilogue, epilogue);
        // Straight-line code, and rolled code for the epilogue's cases.
        const SpmmCpuPlan p = plan_spmm_cpu(a, pr, t, {0, 150, epilogue});
        ASSERT_EQ(p.rolled, epilogue);
        const CpuSpmmKernel k = CpuSpmmKernel::compile(emit_spmm_llvm_ir(p, a), p);
        const Inputs in = inputs(a, n, 17 + static_cast<std::uint64_t>(n));
        std::vector<float> c(static_cast<std::size_t>(a.rows * n), std::numeric_limits<float>::quiet_NaN());
        k.run(in.b.data(), c.data(), in.bias.data(), 2);
        std::vector<float> want(c.size(), std::numeric_limits<float>::quiet_NaN());
        interpret_spmm_cpu(p, a, in.b.data(), in.bias.data(), want.data());
        std::size_t differ = 0;
        for (std::size_t i = 0; i < c.size(); ++i)
          differ += std::bit_cast<std::uint32_t>(c[i]) != std::bit_cast<std::uint32_t>(want[i]);
        EXPECT_EQ(differ, 0u) << "outputs differing from the interpreter's";
        EXPECT_LT(rel_error(a, in, pr, c), 1e-6);
        ++ran;
      }
  }
  EXPECT_GT(ran, 0);
}

TEST(SpmmCpuJit, ModulesCompileApartAndLinkByName) {
  const CsrMatrix a = round_values(test::random_csr(200, 90, 0.1, 21), DType::f32);
  const std::int64_t n = 70;  // full column tiles and a rest (tiles of 32 or 64 columns)
  const SpmmProblem pr = test::problem_for(a, n, true, true);
  for (const bool rolled : {false, true}) {
    const SpmmCpuPlan p = plan_spmm_cpu(a, pr, cpu_target("native"), {0, 150, rolled});
    ASSERT_GT(p.panel_count(), 4);
    const Inputs in = inputs(a, n, 5);
    std::vector<float> want(static_cast<std::size_t>(a.rows * n), std::numeric_limits<float>::quiet_NaN());
    interpret_spmm_cpu(p, a, in.b.data(), in.bias.data(), want.data());
    for (const std::int64_t modules : {std::int64_t{1}, std::int64_t{3}, p.panel_count() + 5}) {
      SCOPED_TRACE(fmt::format("{} modules, rolled {}", modules, rolled));
      const std::vector<std::string> ir = emit_spmm_llvm_modules(p, a, modules);
      ASSERT_EQ(static_cast<std::int64_t>(ir.size()), std::min(modules, p.panel_count()));
      std::size_t panels = 0;
      for (std::size_t i = 0; i < ir.size(); ++i) {
        for (std::size_t at = ir[i].find("define hidden void @sparsecc_cpu_panel_"); at != std::string::npos;
             at = ir[i].find("define hidden void @sparsecc_cpu_panel_", at + 1))
          ++panels;
        EXPECT_EQ(ir[i].find("define void @sparsecc_cpu_tile(") != std::string::npos, i + 1 == ir.size());
      }
      EXPECT_EQ(static_cast<std::int64_t>(panels), 2 * p.panel_count());
      const CpuSpmmKernel k = CpuSpmmKernel::compile(ir, p, 2, 2);
      EXPECT_EQ(k.stats().modules, ir.size());
      std::vector<float> c(want.size(), std::numeric_limits<float>::quiet_NaN());
      k.run(in.b.data(), c.data(), in.bias.data(), 2);
      EXPECT_EQ(std::memcmp(c.data(), want.data(), c.size() * sizeof(float)), 0);
    }
    const CpuSpmmKernel built = CpuSpmmKernel::build(a, p, 2, 2);
    EXPECT_EQ(built.stats().modules,
              static_cast<std::size_t>(std::min<std::int64_t>(2 * kCpuModulesPerThread, p.panel_count())));
    std::vector<float> c(want.size(), std::numeric_limits<float>::quiet_NaN());
    built.run(in.b.data(), c.data(), in.bias.data(), 1);
    EXPECT_EQ(std::memcmp(c.data(), want.data(), c.size() * sizeof(float)), 0);
  }
  // A module that does not parse is named in the error.
  const SpmmCpuPlan p = plan_spmm_cpu(a, pr, cpu_target("native"),
                                      {.column_tile = 0, .panel_nnz = 150, .rolled = std::nullopt});
  std::vector<std::string> broken = emit_spmm_llvm_modules(p, a, 2);
  broken.front() += "define void @x( {";
  try {
    (void)CpuSpmmKernel::compile(broken, p, 2, 2);
    ADD_FAILURE() << "accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("sparsecc_cpu_spmm_0"), std::string::npos) << e.what();
  }
}

TEST(SpmmCpuJit, EmptyRowsAndARowOfOne) {
  CsrMatrix a;
  a.rows = 5;
  a.cols = 4;
  a.row_ptr = {0, 0, 1, 1, 1, 1};
  a.col_idx = {3};
  a.values = {2.5};
  const CpuTarget t = cpu_target("native");
  for (const bool rolled : {false, true}) {
    const SpmmCpuPlan p = plan_spmm_cpu(a, test::problem_for(a, 3, true, false), t, {0, 0, rolled});
    const CpuSpmmKernel k = CpuSpmmKernel::compile(emit_spmm_llvm_ir(p, a), p, 1);
    const std::vector<float> b = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, bias = {1, 2, 3, 4, 5};
    std::vector<float> c(15, std::numeric_limits<float>::quiet_NaN());
    k.run(b.data(), c.data(), bias.data(), 1);
    const std::vector<float> want = {1, 1, 1, 2 + 25, 2 + 27.5f, 2 + 30, 3, 3, 3, 4, 4, 4, 5, 5, 5};
    EXPECT_EQ(c, want) << "rolled " << rolled;
  }
}

TEST(SpmmCpuJit, RefusesIrThatDoesNotParse) {
  const CsrMatrix a = round_values(test::random_csr(8, 8, 0.5, 1), DType::f32);
  const SpmmCpuPlan p = plan_spmm_cpu(a, test::problem_for(a, 4, false, false), cpu_target("native"));
  EXPECT_THROW(CpuSpmmKernel::compile("define void @x( {", p), std::runtime_error);
}

#else

TEST(SpmmCpuJit, NotBuilt) {
  GTEST_SKIP() << "the CPU backend needs LLVM 14 (tools/setup.sh --llvm); not built";
}

#endif
