// CPU SpMM executors of f16 and bf16 B and C (fp32 accumulation): plans, the interpreter against the
// fp64 product of the rounded inputs, and (where LLVM is built) the emitted code compiled by LLJIT on
// 0xFFFF-poisoned outputs, bit for bit against the interpreter, within spmm_tolerance of fp64, and
// rounding C to nearest even at ties; a half executor's bundle and embedded sources.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "sparsecc/bundle/cpu_bundle.hpp"
#include "sparsecc/bundle/embed.hpp"
#include "sparsecc/common/dtype.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/random.hpp"
#include "sparsecc/emit/spmm_llvm.hpp"
#include "sparsecc/inspector/spmm_cpu_planner.hpp"
#include "sparsecc/plan/spmm_cpu_plan.hpp"
#include "sparsecc/reference/spmm.hpp"
#include "sparsecc/runtime/bundle.hpp"
#include "test_support.hpp"
#if SPARSECC_HAVE_LLVM
#include "sparsecc/llvm/cpu_jit.hpp"
#include "sparsecc/llvm/cpu_pipeline.hpp"
#endif

using namespace sparsecc;

namespace {

constexpr std::uint16_t kPoison = 0xFFFF;  // a NaN in f16 and in bf16

std::uint16_t to_bits(DType t, double v) {
  return t == DType::f16 ? double_to_half_bits(v) : double_to_bf16_bits(v);
}
double from_bits(DType t, std::uint16_t b) {
  return t == DType::f16 ? half_bits_to_double(b) : bf16_bits_to_double(b);
}

SpmmProblem half_problem(const CsrMatrix& a, std::int64_t n, DType t, bool bias, bool relu) {
  SpmmProblem p = test::problem_for(a, n, bias, relu);
  p.dtype = t;
  return p;
}

struct HalfInputs {
  std::vector<std::uint16_t> b;
  std::vector<float> bias;
  DenseMatrix b64;             // B's values as the code reads them
  std::vector<double> bias64;  // the fp32 bias as double
};

HalfInputs half_inputs(const CsrMatrix& a, std::int64_t n, DType t, std::uint64_t seed) {
  HalfInputs in;
  SplitMix64 rng(seed);
  in.b64 = DenseMatrix(a.cols, n);
  for (double& v : in.b64.data) {
    in.b.push_back(to_bits(t, rng.uniform_pm1()));
    v = from_bits(t, in.b.back());
  }
  for (std::int64_t r = 0; r < a.rows; ++r) {
    in.bias.push_back(static_cast<float>(rng.uniform_pm1()));
    in.bias64.push_back(in.bias.back());
  }
  return in;
}

// max |C - C_ref| / max |C_ref| against the fp64 product of A's values rounded to the dtype and B.
double max_rel_error(const CsrMatrix& a, DType t, const HalfInputs& in, const SpmmProblem& pr,
                     const std::vector<std::uint16_t>& c) {
  const DenseMatrix ref = spmm(round_values(a, t), in.b64, pr.bias ? &in.bias64 : nullptr, pr.relu);
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    scale = std::max(scale, std::abs(ref.data[i]));
    worst = std::max(worst, std::abs(from_bits(t, c[i]) - ref.data[i]));  // NaN: fails below
    if (std::isnan(from_bits(t, c[i]))) return INFINITY;
  }
  return scale > 0 ? worst / scale : worst;
}

std::int64_t longest_row(const CsrMatrix& a) {
  std::int64_t most = 0;
  for (std::int64_t r = 0; r < a.rows; ++r) most = std::max(most, a.row_nnz(r));
  return most;
}

}  // namespace

TEST(SpmmCpuHalfPlan, DtypeInThePlanAndItsJson) {
  const CsrMatrix a = test::random_csr(60, 40, 0.2, 3);
  const CpuTarget t = cpu_target("x86-64-avx2");
  const SpmmCpuPlan f32 = plan_spmm_cpu(a, test::problem_for(a, 9), t);
  EXPECT_FALSE(to_json(f32)["problem"].contains("dtype"));  // f32 plans' JSON (and symbols) unchanged
  for (const DType d : {DType::f16, DType::bf16}) {
    const SpmmCpuPlan p = plan_spmm_cpu(a, half_problem(a, 9, d, true, false), t);
    EXPECT_TRUE(p.half());
    EXPECT_EQ(p.lanes, 8);  // fp32 lanes: the accumulators are fp32
    EXPECT_EQ(p.column_tile, f32.column_tile);
    EXPECT_EQ(p.panels, f32.panels);
    EXPECT_TRUE(check_cpu_plan(p, a).empty());
    EXPECT_EQ(to_json(p)["problem"]["dtype"], std::string(dtype_name(d)));
    EXPECT_EQ(spmm_cpu_plan_from_json(to_json(p)).problem.dtype, d);
    EXPECT_NE(cpu_spmm_symbol(p, a), cpu_spmm_symbol(f32, a));
    // The interpreter's overloads refuse arrays of the other kind.
    std::vector<float> bf(static_cast<std::size_t>(a.cols * 9)), cf(static_cast<std::size_t>(a.rows * 9));
    EXPECT_THROW(interpret_spmm_cpu(p, a, bf.data(), nullptr, cf.data()), UsageError);
  }
  std::vector<std::uint16_t> b16(static_cast<std::size_t>(a.cols * 9)),
      c16(static_cast<std::size_t>(a.rows * 9));
  EXPECT_THROW(interpret_spmm_cpu(f32, a, b16.data(), nullptr, c16.data()), UsageError);
  SpmmProblem f64 = test::problem_for(a, 9);
  f64.dtype = DType::f64;
  EXPECT_THROW(plan_spmm_cpu(a, f64, t), UsageError);
  nlohmann::json j = to_json(f32);
  j["problem"]["dtype"] = "f64";
  EXPECT_THROW(spmm_cpu_plan_from_json(j), UsageError);
  // A value the dtype cannot hold is refused, naming it.
  CsrMatrix big = a;
  big.values[0] = 1e6;
  EXPECT_THROW(plan_spmm_cpu(big, half_problem(big, 9, DType::f16, false, false), t), UsageError);
  EXPECT_NO_THROW(plan_spmm_cpu(big, half_problem(big, 9, DType::bf16, false, false), t));
}

TEST(SpmmCpuHalfPlan, InterpreterMatchesTheReference) {
  const CsrMatrix a = test::random_csr(130, 77, 0.2, 5);
  for (const DType d : {DType::f16, DType::bf16})
    for (const std::int64_t n : {1, 13, 70}) {
      SCOPED_TRACE(fmt::format("{} N={}", d, n));
      const SpmmProblem pr = half_problem(a, n, d, true, true);
      const SpmmCpuPlan p = plan_spmm_cpu(a, pr, cpu_target("x86-64-avx2"));
      const HalfInputs in = half_inputs(a, n, d, 11);
      std::vector<std::uint16_t> c(static_cast<std::size_t>(a.rows * n), kPoison);
      interpret_spmm_cpu(p, a, in.b.data(), in.bias.data(), c.data());
      EXPECT_LE(max_rel_error(a, d, in, pr, c), spmm_tolerance(d, DType::f32, longest_row(a)));
    }
}

TEST(SpmmCpuHalfPlan, IrWidensBAndNarrowsC) {
  const CsrMatrix a = test::random_csr(32, 32, 0.2, 7);
  const CpuTarget t = cpu_target("x86-64-avx2");
  const std::string f16 =
      emit_spmm_llvm_ir(plan_spmm_cpu(a, half_problem(a, 12, DType::f16, false, false), t), a);
  EXPECT_NE(f16.find("fpext <8 x half>"), std::string::npos);
  EXPECT_NE(f16.find("fptrunc <4 x float>"), std::string::npos);
  EXPECT_NE(f16.find("i16* %B, i16* %C, float* %bias"), std::string::npos);
  const std::string bf16 =
      emit_spmm_llvm_ir(plan_spmm_cpu(a, half_problem(a, 12, DType::bf16, false, false), t, {0, 0, true}), a);
  EXPECT_NE(bf16.find("zext <8 x i16>"), std::string::npos);
  EXPECT_NE(bf16.find("trunc <4 x i32>"), std::string::npos);
  EXPECT_EQ(bf16.find("half"), std::string::npos);
}

#if SPARSECC_HAVE_LLVM

TEST(SpmmCpuHalfJit, BitForBitWithTheInterpreterAndWithinTheBound) {
  const CsrMatrix a = test::random_csr(61, 50, 0.15, 9);
  int ran = 0;
  for (const char* isa : {"x86-64-avx2", "x86-64-avx512"}) {
    const CpuTarget t = cpu_target(isa);
    if (!host_runs(t)) continue;
    for (const DType d : {DType::f16, DType::bf16})
      for (const std::int64_t n : {1, 7, 16, 33})
        for (const bool epilogue : {false, true})
          for (const bool rolled : {false, true}) {
            SCOPED_TRACE(fmt::format("{} {} N={} bias+relu {} rolled {}", isa, d, n, epilogue, rolled));
            const SpmmProblem pr = half_problem(a, n, d, epilogue, epilogue);
            const SpmmCpuPlan p = plan_spmm_cpu(a, pr, t, {0, 150, rolled});
            const CpuSpmmKernel k = CpuSpmmKernel::compile(emit_spmm_llvm_modules(p, a, 2), p, 2, 2);
            const HalfInputs in = half_inputs(a, n, d, 17 + static_cast<std::uint64_t>(n));
            std::vector<std::uint16_t> c(static_cast<std::size_t>(a.rows * n), kPoison), want = c;
            k.run(in.b.data(), c.data(), in.bias.data(), 2);
            interpret_spmm_cpu(p, a, in.b.data(), in.bias.data(), want.data());
            std::size_t differ = 0;
            for (std::size_t i = 0; i < c.size(); ++i) differ += c[i] != want[i];
            EXPECT_EQ(differ, 0u) << "outputs differing from the interpreter's";
            EXPECT_LE(max_rel_error(a, d, in, pr, c), spmm_tolerance(d, DType::f32, longest_row(a)));
            std::vector<float> cf(c.size());
            EXPECT_THROW(k.run(std::vector<float>(in.b.size()).data(), cf.data(), in.bias.data(), 1),
                         std::invalid_argument);
            ++ran;
          }
  }
  EXPECT_GT(ran, 0);
}

TEST(SpmmCpuHalfJit, CIsRoundedToNearestEvenAtTies) {
  // C = A B + bias with B all zeros: every output is its row's fp32 bias rounded to the dtype once.
  // The biases sit at ties (round to the even neighbour), just above them, at overflow and among the
  // subnormals.
  struct Case {
    float bias;
    std::uint16_t want;
  };
  const float u = std::ldexp(1.f, -23);  // fp32's unit at 1
  const std::vector<Case> bf16 = {
      {1.f + std::ldexp(1.f, -8), 0x3f80},          // tie between 1 and 1 + 2^-7: 1
      {1.f + 3 * std::ldexp(1.f, -8), 0x3f82},      // tie between 1 + 2^-7 and 1 + 2^-6: the latter
      {1.f + std::ldexp(1.f, -8) + u, 0x3f81},      // above the tie
      {-(1.f + std::ldexp(1.f, -8)), 0xbf80},       // negative tie
      {std::numeric_limits<float>::max(), 0x7f80},  // rounds up to infinity
      {std::bit_cast<float>(0x00008000u), 0x0000},  // subnormal tie between 0 and the least bf16: 0
      {std::bit_cast<float>(0x00018000u), 0x0002},  // between 1 and 2 units: 2
  };
  const std::vector<Case> f16 = {
      {1.f + std::ldexp(1.f, -11), 0x3c00},      // tie between 1 and 1 + 2^-10: 1
      {1.f + 3 * std::ldexp(1.f, -11), 0x3c02},  // tie: the even neighbour
      {1.f + std::ldexp(1.f, -11) + u, 0x3c01},  // above the tie
      {-(1.f + std::ldexp(1.f, -11)), 0xbc00},   // negative tie
      {65520.f, 0x7c00},                         // tie between 65504 and 2^16: infinity
      {65519.f, 0x7bff},                         // below it: the largest finite
      {std::ldexp(1.f, -25), 0x0000},            // subnormal tie between 0 and 2^-24: 0
      {3 * std::ldexp(1.f, -25), 0x0002},        // between 1 and 2 units: 2
  };
  int ran = 0;
  for (const char* isa : {"x86-64-avx2", "x86-64-avx512"}) {
    const CpuTarget t = cpu_target(isa);
    if (!host_runs(t)) continue;
    for (const DType d : {DType::f16, DType::bf16}) {
      const std::vector<Case>& cases = d == DType::f16 ? f16 : bf16;
      CsrMatrix a;  // one nonzero a row, column 0
      a.rows = static_cast<std::int64_t>(cases.size());
      a.cols = 1;
      for (std::int64_t r = 0; r <= a.rows; ++r) a.row_ptr.push_back(r);
      a.col_idx.assign(cases.size(), 0);
      a.values.assign(cases.size(), 1.0);
      std::vector<float> bias;
      for (const Case& c : cases) bias.push_back(c.bias);
      for (const std::int64_t n : {1, 17})
        for (const bool rolled : {false, true}) {
          SCOPED_TRACE(fmt::format("{} {} N={} rolled {}", isa, d, n, rolled));
          const SpmmCpuPlan p = plan_spmm_cpu(a, half_problem(a, n, d, true, false), t, {0, 0, rolled});
          const CpuSpmmKernel k = CpuSpmmKernel::compile(emit_spmm_llvm_ir(p, a), p, 2);
          const std::vector<std::uint16_t> b(static_cast<std::size_t>(n), 0);
          std::vector<std::uint16_t> c(cases.size() * static_cast<std::size_t>(n), kPoison), interp = c;
          k.run(b.data(), c.data(), bias.data(), 1);
          interpret_spmm_cpu(p, a, b.data(), bias.data(), interp.data());
          for (std::size_t r = 0; r < cases.size(); ++r)
            for (std::int64_t j = 0; j < n; ++j) {
              const std::size_t i = r * static_cast<std::size_t>(n) + static_cast<std::size_t>(j);
              EXPECT_EQ(c[i], cases[r].want)
                  << fmt::format("row {} column {}: bias {:a}", r, j, cases[r].bias);
              EXPECT_EQ(interp[i], cases[r].want) << "the interpreter, row " << r;
            }
          ++ran;
        }
    }
  }
  EXPECT_GT(ran, 0);
}

TEST(SpmmCpuHalfJit, ArtifactCheckBundleAndEmbeddedSources) {
  const CsrMatrix a = test::random_csr(97, 61, 0.15, 11);
  for (const DType d : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(d));
    CpuSpmmRequest r;
    r.problem = half_problem(a, 19, d, true, true);
    for (std::int64_t i = 0; i < a.rows; ++i) r.bias.push_back(0.25 * static_cast<double>(i % 7) - 0.5);
    const CpuSpmmArtifact art = compile_spmm_cpu(a, r, cpu_target("native"));
    const CpuSpmmCheck check = check_spmm_cpu(art, a, r.bias);
    EXPECT_TRUE(check.ok()) << check.rel_error << " > " << check.tolerance << ", " << check.unwritten
                            << " unwritten";
    EXPECT_EQ(check.tolerance, spmm_tolerance(d, DType::f32, longest_row(a)));
    EXPECT_NE(art.text().find(fmt::format("{} (fp32 accumulation)", d)), std::string::npos) << art.text();
    const rt::BundleMetadata& md = art.bundle.metadata;
    EXPECT_EQ(md.dtype, dtype_name(d));
    EXPECT_EQ(md.accumulate, "f32");
    const std::vector<unsigned char> bytes = rt::bundle_bytes(art.bundle, "half.sccb");
    const rt::Bundle back = rt::parse_bundle(bytes, "half.sccb");
    EXPECT_EQ(back, art.bundle);
    EXPECT_EQ(to_json(cpu_spmm_bundle_plan(back, a, "half.sccb")), to_json(art.plan));
    // A bundle whose metadata says f32 over a half plan is refused.
    rt::Bundle lying = art.bundle;
    lying.metadata.dtype = "f32";
    EXPECT_THROW(cpu_spmm_bundle_plan(lying, a, "lying.sccb"), rt::BundleError);
    // embed declares the entry over 16-bit B and C and gives the executor its dtype.
    const EmbedSources src = embed_bundles({{"fc1", bytes}}, "net", "net.hpp");
    EXPECT_NE(
        src.source.find(fmt::format(
            "void {}_tile(std::int64_t, std::int64_t, std::int32_t, const std::uint16_t*, std::uint16_t*, "
            "const float*);",
            md.kernel)),
        std::string::npos)
        << src.source;
    EXPECT_NE(src.source.find(fmt::format("true, \"{}\"}}, embedded::kBias0}}", d)), std::string::npos)
        << src.source;
  }
}

#else

TEST(SpmmCpuHalfJit, NotBuilt) {
  GTEST_SKIP() << "the CPU backend needs LLVM 14 (tools/setup.sh --llvm); not built";
}

#endif
