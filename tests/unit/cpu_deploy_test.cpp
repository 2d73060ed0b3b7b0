// The CPU executors' way into a program: the pipeline driver's artifacts (SpMM and Hines) checked
// in process, their bundles (target "cpu": metadata checks, the objects section, round trips,
// refusals), the archives merged into one library whose members define every entry, the runtime's
// executors over JIT-linked code against fp64, and the CPU API embed writes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "sparsecc/bundle/cpu_bundle.hpp"
#include "sparsecc/bundle/embed.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/neuron/forest.hpp"
#include "sparsecc/reference/hines_accuracy.hpp"
#include "sparsecc/reference/spmm.hpp"
#include "sparsecc/runtime/bundle.hpp"
#include "sparsecc/runtime/cpu_executor.hpp"
#include "test_support.hpp"
#if SPARSECC_HAVE_LLVM
#include "sparsecc/llvm/cpu_jit.hpp"
#include "sparsecc/llvm/cpu_pipeline.hpp"
#include "sparsecc/llvm/hines_jit.hpp"
#endif

using namespace sparsecc;

namespace {

#if SPARSECC_HAVE_LLVM
// The CPU target this machine runs: AVX-512 where it has it.
CpuTarget host_target() { return cpu_target("native"); }

CpuSpmmArtifact small_artifact(const CsrMatrix& a, std::int64_t n, bool bias, bool relu) {
  CpuSpmmRequest r;
  r.problem = test::problem_for(a, n, bias, relu);
  if (bias)
    for (std::int64_t i = 0; i < a.rows; ++i) r.bias.push_back(0.25 * static_cast<double>(i % 7) - 0.5);
  return compile_spmm_cpu(a, r, host_target());
}

HinesSystem forest(int copies) {
  const std::string swc = (test::source_dir() / "kernels_generated/examples/data/example_cell.swc").string();
  return load_hines_forest({swc}, copies, 1);
}
#endif

// A bundle that parses back equal to itself.
void expect_round_trip(const rt::Bundle& b) {
  const std::vector<unsigned char> bytes = rt::bundle_bytes(b, "test");
  EXPECT_EQ(rt::parse_bundle(bytes, "test"), b);
}

}  // namespace

#if SPARSECC_HAVE_LLVM

TEST(CpuDeploy, SpmmArtifactIsCheckedAndItsBundleRoundTrips) {
  const CsrMatrix a = round_values(test::random_csr(97, 61, 0.15, 11), DType::f32);
  for (const std::int64_t n : {1, 19, 64}) {
    const CpuSpmmArtifact art = small_artifact(a, n, n != 1, n == 64);
    const CpuSpmmCheck check = check_spmm_cpu(
        art, a, art.bundle.bias.empty() ? std::vector<double>{} : [&] {
          return std::vector<double>(art.bundle.bias.begin(), art.bundle.bias.end());
        }());
    EXPECT_TRUE(check.ok()) << "N " << n << ": " << check.rel_error << ", " << check.unwritten
                            << " unwritten";
    const rt::BundleMetadata& md = art.bundle.metadata;
    EXPECT_EQ(md.target, "cpu");
    EXPECT_EQ(md.kernel, art.symbol);
    EXPECT_EQ(md.block_rows, art.plan.panel_count());
    EXPECT_EQ(art.bundle.objects.size() > 8 && std::memcmp(art.bundle.objects.data(), "!<arch>\n", 8) == 0,
              true);
    expect_round_trip(art.bundle);
    EXPECT_EQ(to_json(cpu_spmm_bundle_plan(art.bundle, a, "test")), to_json(art.plan));
  }
}

TEST(CpuDeploy, SymbolsDifferByMatrixAndPlanSoExecutorsLinkSideBySide) {
  const CsrMatrix a = round_values(test::random_csr(40, 30, 0.2, 1), DType::f32);
  const CsrMatrix b = round_values(test::random_csr(40, 30, 0.2, 2), DType::f32);
  const CpuSpmmArtifact x = small_artifact(a, 8, false, false), y = small_artifact(b, 8, false, false),
                        z = small_artifact(a, 9, false, false), x2 = small_artifact(a, 8, false, false);
  EXPECT_NE(x.symbol, y.symbol);
  EXPECT_NE(x.symbol, z.symbol);
  EXPECT_EQ(x.symbol, x2.symbol);  // deterministic
  // One library of both: every entry defined once, the same member given twice kept once.
  const auto archive = [](const CpuSpmmArtifact& t) {
    return std::string(t.bundle.objects.begin(), t.bundle.objects.end());
  };
  const std::string merged = merge_cpu_archives({archive(x), archive(y), archive(x2)}, {"x", "y", "x2"});
  const std::string only = merge_cpu_archives({archive(x), archive(y)}, {"x", "y"});
  EXPECT_EQ(merged, only);
  EXPECT_THROW(merge_cpu_archives({"not an archive"}, {"junk.a"}), std::runtime_error);
  // The runtime's executor over the JIT-linked code of each: C = A B against fp64.
  for (const CpuSpmmArtifact* t : {&x, &y}) {
    const CpuSpmmKernel k = CpuSpmmKernel::link(t->objects, t->plan, t->symbol);
    std::vector<float> bm(30 * 8), c(40 * 8, std::numeric_limits<float>::quiet_NaN());
    DenseMatrix b64(30, 8);
    for (std::size_t i = 0; i < bm.size(); ++i)
      b64.data[i] = bm[i] = static_cast<float>(i % 13) * 0.125f - 0.75f;
    k.run(bm.data(), c.data(), nullptr, 2);
    const DenseMatrix ref = spmm(t == &x ? a : b, b64);
    EXPECT_LT(test::rel_l2_error(std::vector<double>(c.begin(), c.end()), ref.data), 1e-6);
  }
}

TEST(CpuDeploy, HinesArtifactIsCheckedAndRunsThroughTheRuntimeExecutor) {
  const HinesSystem s = forest(19);  // two groups of 8 and three leftover cells on AVX-512
  for (const DType dtype : {DType::f64, DType::f32}) {
    const CpuHinesArtifact art = compile_hines_cpu(s, dtype, 2, host_target());
    const CpuHinesCheck check = check_hines_cpu(art, s);
    EXPECT_TRUE(check.ok()) << check.rel_error << " > " << check.tolerance;
    const rt::BundleMetadata& md = art.bundle.metadata;
    EXPECT_EQ(md.target, "cpu");
    EXPECT_EQ(md.hines.rows, s.size());
    EXPECT_EQ(art.bundle.tables, art.plan.permutation());
    expect_round_trip(art.bundle);
  }
  // rt::CpuHinesExecutor over the linked entry, in its row order, against the kernel's own run.
  const CpuHinesArtifact art = compile_hines_cpu(s, DType::f64, 1, host_target());
  CpuHinesKernel kernel = CpuHinesKernel::link(art.objects, art.plan, art.symbol);
  const std::vector<std::int32_t> rows = art.plan.permutation();
  const std::size_t n = rows.size();
  std::vector<double> d(n), u(n), l(n), b(n), x1(n, NAN), x2(n, NAN);
  const std::vector<double> rhs = random_step_rhs(s, 1, 5);
  for (std::size_t i = 0; i < n; ++i) {
    const auto h = static_cast<std::size_t>(rows[i]);
    d[i] = s.diag[h];
    u[i] = s.upper[h];
    l[i] = s.lower[h];
    b[i] = rhs[h];
  }
  kernel.run(d.data(), u.data(), l.data(), b.data(), x1.data(), 1);
  const CpuJit jit = CpuJit::link(art.objects, art.plan.target);
  rt::CpuHinesExecutor ex(reinterpret_cast<void*>(jit.lookup(art.symbol + "_solve")),
                          {"f64", s.size(), s.num_cells(), 1,
                           static_cast<std::int64_t>(art.plan.groups.size()), art.plan.workspace_elements()},
                          art.bundle.tables);
  ex.run(d.data(), u.data(), l.data(), b.data(), x2.data(), 2);
  EXPECT_EQ(std::memcmp(x1.data(), x2.data(), n * sizeof(double)), 0);
  std::vector<double> x(n);
  ex.from_rows<double>(x2, x);
  const HinesAccuracy acc = hines_accuracy(s, rhs, 1);
  EXPECT_LE(hines_max_rel_error(x, acc.ref), acc.tolerance("f64"));
}

#endif

TEST(CpuDeploy, BundleChecksRefuseWhatACpuExecutorCannotBe) {
  rt::Bundle b;
  rt::BundleMetadata& md = b.metadata;
  md.target = "cpu";
  md.arch = "x86-64-avx2";
  md.kernel = "sparsecc_cpu_0123456789abcdef";
  md.fingerprint = "00ff";
  md.m = 4;
  md.k = 3;
  md.n = 5;
  md.nnz = 6;
  md.n_tile = 5;
  md.block_rows = 2;
  md.plan_summary = {{"panels", 2}, {"column_tile", 5}};
  const std::string ar = "!<arch>\n";
  b.objects.assign(ar.begin(), ar.end());
  EXPECT_NO_THROW(rt::validate_bundle(b, "ok"));
  expect_round_trip(b);
  const auto refused = [&](auto change, const std::string& says) {
    rt::Bundle bad = b;
    change(bad);
    try {
      rt::validate_bundle(bad, "bad.sccb");
      ADD_FAILURE() << "accepted: " << says;
    } catch (const rt::BundleError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused([](rt::Bundle& x) { x.metadata.arch = "sm_90"; }, "'arch'");
  refused([](rt::Bundle& x) { x.metadata.target = "tpu"; }, "'target'");
  refused([](rt::Bundle& x) { x.objects.clear(); }, "without an objects section");
  refused([](rt::Bundle& x) { x.objects.assign(4, 'x'); }, "not a static archive");
  refused([](rt::Bundle& x) { x.ptx = "ptx"; }, "section ptx");
  refused([](rt::Bundle& x) { x.metadata.plan_summary["panels"] = 3; }, "block_rows");
  refused([](rt::Bundle& x) { x.metadata.dtype = "f64"; }, "'dtype'");
  refused(
      [](rt::Bundle& x) {
        x.metadata.dtype = "bf16";
        x.metadata.accumulate = "bf16";
      },
      "'accumulate'");
  for (const char* half : {"f16", "bf16"}) {  // 16-bit B and C, fp32 accumulation
    rt::Bundle h = b;
    h.metadata.dtype = half;
    EXPECT_NO_THROW(rt::validate_bundle(h, half));
    expect_round_trip(h);
  }
  refused([](rt::Bundle& x) { x.metadata.n_mode = "runtime"; }, "'n_mode'");
  refused([](rt::Bundle& x) { x.metadata.bias = true; }, "section bias");
  // A GPU bundle may not carry objects.
  rt::Bundle gpu = b;
  gpu.metadata = rt::BundleMetadata{};
  gpu.ptx = "x";
  EXPECT_THROW(rt::validate_bundle(gpu, "gpu"), rt::BundleError);
}

TEST(CpuDeploy, RuntimeExecutorsRefuseBadShapesAndArguments) {
  const auto tile = [](std::int64_t, std::int64_t, std::int32_t, const float*, float*, const float*) {};
  const auto half_tile = [](std::int64_t, std::int64_t, std::int32_t, const std::uint16_t*, std::uint16_t*,
                            const float*) {};
  EXPECT_THROW(rt::CpuSpmmExecutor(rt::CpuSpmmTile{}, {4, 4, 4, 1, 4, false}), std::invalid_argument);
  EXPECT_THROW(rt::CpuSpmmExecutor(+tile, {4, 4, 4, 5, 4, false}), std::invalid_argument);
  EXPECT_THROW(rt::CpuSpmmExecutor(+tile, {4, 4, 4, 2, 4, false, "bf16"}), std::invalid_argument);
  EXPECT_THROW(rt::CpuSpmmExecutor(+half_tile, {4, 4, 4, 2, 4, false}), std::invalid_argument);  // f32
  EXPECT_THROW(rt::CpuSpmmExecutor(+half_tile, {4, 4, 4, 2, 4, false, "f64"}), std::invalid_argument);
  const rt::CpuSpmmExecutor ex(+tile, {4, 4, 4, 2, 4, false});
  float x = 0;
  std::uint16_t y = 0;
  EXPECT_THROW(ex.run(nullptr, &x), std::invalid_argument);
  EXPECT_THROW(ex.run(&y, &y), std::invalid_argument);  // 16-bit arrays, f32 executor
  const rt::CpuSpmmExecutor hx(+half_tile, {4, 4, 4, 2, 4, false, "f16"});
  EXPECT_EQ(hx.dtype(), "f16");
  EXPECT_THROW(hx.run(&x, &x), std::invalid_argument);  // float arrays, f16 executor
  EXPECT_NO_THROW(hx.run(&y, &y));
  static const std::int32_t rows[3] = {2, 0, 1};
  int fake = 0;
  rt::CpuHinesExecutor h(&fake, {"f64", 3, 1, 1, 1, 3}, rows);
  double d = 0;
  float f = 0;
  EXPECT_THROW(h.run(&f, &f, &f, &f, &f), std::invalid_argument);  // f32 arrays, f64 executor
  EXPECT_THROW(h.run(&d, &d, &d, nullptr, &d), std::invalid_argument);
  EXPECT_THROW(rt::CpuHinesExecutor(&fake, {"f64", 4, 1, 1, 1, 3}, rows), std::invalid_argument);
  std::vector<double> by_hines = {10, 20, 30}, mine(3), back(3);
  h.to_rows<double>(by_hines, mine);
  EXPECT_EQ(mine, (std::vector<double>{30, 10, 20}));
  h.from_rows<double>(mine, back);
  EXPECT_EQ(back, by_hines);
}
