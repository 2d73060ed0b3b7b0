// The end-to-end SpMM pipeline the GPU tests drive: matrix -> plan_spmm -> check_plan -> emit_spmm_cuda
// -> compile_cuda (ptxas report: no spills, no stack) -> rt::Bundle, and the GPU half: load the
// bundle, run on a NaN-poisoned C for each n, and compare with the fp64 reference (relative error)
// and the float32 plan interpreter (bit for bit). The build half needs no GPU.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "sparsecc/bundle/spmm_bundle.hpp"
#include "sparsecc/common/dtype.hpp"
#include "sparsecc/common/random.hpp"
#include "sparsecc/compile/compile_kernel.hpp"
#include "sparsecc/compile/resource_usage.hpp"
#include "sparsecc/emit/spmm_cuda.hpp"
#include "sparsecc/emit/spmm_ptx.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/plan/spmm_interpreter.hpp"
#include "sparsecc/plan/spmm_plan.hpp"
#include "sparsecc/reference/spmm.hpp"
#include "sparsecc/runtime/bundle.hpp"
#include "sparsecc/runtime/device.hpp"
#include "sparsecc/runtime/executor.hpp"

namespace sparsecc::gputest {

inline constexpr double kMaxRelError = 1e-5;
inline constexpr std::uint32_t kNaNPattern = 0x7fc00000u;

// One test case: a matrix, the problem and options to plan it with, its bias (m entries when
// problem.bias, float32-representable) and the n to run (all equal to problem.n in fixed mode).
struct SpmmCase {
  std::string name;
  CsrMatrix a;
  SpmmProblem problem;
  SpmmOptions options;
  std::vector<double> bias;
  std::vector<int> ns;
  KernelLanguage emit = KernelLanguage::ptx;  // which emitter builds the kernel
};

// Everything the build half produces.
struct SpmmBuilt {
  SpmmPlan plan;
  std::vector<std::string> plan_errors;  // check_plan; must be empty
  EmittedKernel emitted;
  CudaCompileResult compiled;
  ResourceUsage usage;
  rt::Bundle bundle;
};

// A random m x k matrix with about `density` nonzeros uniform in [-1, 1) (float32-exact).
// A value as the 16 bits of an f16 (bf16 when `bf16`) output, and back.
inline std::uint16_t to_bits(double v, bool bf16) {
  return bf16 ? double_to_bf16_bits(v) : double_to_half_bits(v);
}
inline double from_bits(std::uint16_t h, bool bf16) {
  return bf16 ? bf16_bits_to_double(h) : half_bits_to_double(h);
}

inline CsrMatrix random_csr(std::int64_t m, std::int64_t k, double density, std::uint64_t seed) {
  SplitMix64 rng(seed);
  DenseMatrix d(m, k);
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t c = 0; c < k; ++c)
      if (static_cast<double>(rng.next() >> 11) * 0x1p-53 < density) d(r, c) = rng.uniform_pm1();
  return csr_from_dense(d, DType::f32);
}

inline std::vector<double> random_vector(std::int64_t n, std::uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = rng.uniform_pm1();
  return v;
}

// B (k x n) uniform in [-1, 1) from SplitMix64; every entry is exact in float32.
inline DenseMatrix random_b(std::int64_t k, std::int64_t n, std::uint64_t seed) {
  DenseMatrix b(k, n);
  SplitMix64 rng(seed);
  for (auto& x : b.data) x = rng.uniform_pm1();
  return b;
}

inline const char* mode_name(SpmmNMode m) { return m == SpmmNMode::fixed ? "fixed" : "runtime"; }

// plan -> check -> emit -> compile for `arch` -> bundle. Throws (UsageError, CompileError,
// BundleError) when a stage fails; a plan that check_plan rejects is returned unemitted.
// One run of an f16 / bf16 executor (half_gpu_run): its error against the fp64 reference of its own
// inputs, and how it differs from the plan interpreter.
struct HalfGpuRun {
  double rel = 0;              // max |C - fp64| / max |fp64| over the finite outputs
  std::int64_t nans = 0;       // outputs not finite (unwritten: C is poisoned with NaN)
  std::int64_t bit_diffs = 0;  // outputs whose bits differ from interpret_spmm's
  // Of those, the ones beyond one unit in the last place plus 2^-20 max |C| (tensor cores and the
  // interpreter sum a fragment's products in fp32 in different orders: their results differ by fp32
  // roundings of partial sums, up to 2^-20 of max |C| here, and by one rounding to the dtype on top).
  std::int64_t far = 0;
  std::string first_far;  // the first of them, described
};

// Runs `ex` (the executor of `plan` for c.a) at n on a NaN-poisoned C, with B = random_b rounded to the
// dtype, and compares C with the fp64 reference and interpret_spmm.
inline HalfGpuRun half_gpu_run(const rt::Context& ctx, const rt::SpmmExecutor& ex, const SpmmCase& c,
                               const SpmmPlan& plan, int n) {
  const bool bf16 = plan.problem.dtype == DType::bf16;
  DenseMatrix b = random_b(c.a.cols, n, 91 + static_cast<std::uint64_t>(n));
  round_values(b, plan.problem.dtype);
  const std::vector<double>* bias = c.problem.bias ? &c.bias : nullptr;
  const DenseMatrix ref = spmm(round_values(c.a, plan.problem.dtype), b, bias, c.problem.relu);
  const DenseMatrix interp =
      interpret_spmm(plan, spmm_kernel_values(plan, c.a), b, bias, spmm_fragment_words(plan, c.a));
  std::vector<std::uint16_t> hb(b.data.size());
  for (std::size_t i = 0; i < hb.size(); ++i) hb[i] = to_bits(b.data[i], bf16);
  const auto outputs = static_cast<std::size_t>(c.a.rows) * static_cast<std::size_t>(n);
  rt::DeviceBuffer db(std::max<std::size_t>(hb.size() * 2, 16)), dc((outputs + 1) / 2 * 4);
  db.upload(hb.data(), hb.size() * 2);
  dc.fill32(bf16 ? 0x7fc07fc0u : 0x7e007e00u);  // NaN in both halves
  ex.run(db.get(), dc.get(), n);
  ctx.synchronize();
  std::vector<std::uint16_t> hc(outputs);
  dc.download(hc.data(), hc.size() * 2);

  HalfGpuRun r;
  double max_ref = 0, max_diff = 0;
  for (double v : ref.data) max_ref = std::max(max_ref, std::fabs(v));
  for (std::size_t i = 0; i < outputs; ++i) {
    const double g = from_bits(hc[i], bf16);
    if (!std::isfinite(g)) {
      ++r.nans;
      continue;
    }
    max_diff = std::max(max_diff, std::fabs(g - ref.data[i]));
    const std::uint16_t want = to_bits(interp.data[i], bf16);
    if (hc[i] == want) continue;
    ++r.bit_diffs;
    const double spacing =
        std::fabs(from_bits(static_cast<std::uint16_t>(want + 1), bf16) - from_bits(want, bf16));
    if (std::fabs(g - interp.data[i]) > spacing + 0x1p-20 * max_ref && r.far++ == 0)
      r.first_far = "C[" + std::to_string(i) + "]: GPU " + std::to_string(g) + ", interpreter " +
                    std::to_string(interp.data[i]) + ", fp64 " + std::to_string(ref.data[i]);
  }
  r.rel = max_ref > 0 ? max_diff / max_ref : max_diff;
  return r;
}

// The most nonzeros of one row of `a` (spmm_tolerance's argument).
inline std::int64_t max_row_nnz(const CsrMatrix& a) {
  std::int64_t m = 0;
  for (std::int64_t r = 0; r < a.rows; ++r) m = std::max(m, a.row_nnz(r));
  return m;
}

inline SpmmBuilt build_spmm(const SpmmCase& c, const std::string& arch) {
  SpmmBuilt out;
  out.plan = plan_spmm(c.a, c.problem, c.options);
  out.plan_errors = check_plan(out.plan, c.a);
  if (!out.plan_errors.empty()) return out;
  const GpuTarget target = gpu_target(arch);
  out.emitted = emit_spmm(out.plan, c.a, c.emit, target);
  CudaCompileOptions options;
  options.arch = arch;
  options.extra.push_back(kPtxasVerbose);
  out.compiled = compile_kernel(out.emitted, c.name, options);
  out.usage = resource_usage(out.compiled);  // the cubin's attributes when the log has no report
  if (out.usage.spill_store_bytes < 0) {
    // No report and a stack frame (the split PTX route's call stack): the cubin cannot say whether
    // it holds spills, so compile again for the report.
    std::printf("[ spmm gpu ] %s: no assembler report, compiling again\n", c.name.c_str());
    out.compiled = compile_kernel(out.emitted, c.name, options);
    out.usage = parse_ptxas_log(out.compiled.log);
  }
  rt::Bundle& b = out.bundle;
  b.metadata = spmm_bundle_metadata(out.plan, c.a, target);
  b.cubin = out.compiled.cubin;
  b.ptx = out.compiled.ptx;
  b.values = out.emitted.packed_values;  // empty when baked
  b.fragments = out.emitted.fragment_words;
  if (c.problem.bias)
    for (double v : c.bias) b.bias.push_back(static_cast<float>(v));
  rt::validate_bundle(b, c.name);
  return out;
}

// Builds every case on up to hardware_concurrency worker threads (std::async); a failed build
// rethrows from the returned future's get().
inline std::vector<std::shared_future<SpmmBuilt>> build_all(const std::vector<SpmmCase>& cases,
                                                            const std::string& arch) {
  std::vector<std::promise<SpmmBuilt>> promises(cases.size());
  std::vector<std::shared_future<SpmmBuilt>> futures;
  for (auto& p : promises) futures.push_back(p.get_future().share());
  std::atomic<std::size_t> next{0};
  const std::size_t workers =
      std::min<std::size_t>(cases.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::future<void>> pool;
  for (std::size_t w = 0; w < workers; ++w)
    pool.push_back(std::async(std::launch::async, [&] {
      for (std::size_t i; (i = next.fetch_add(1)) < cases.size();) {
        try {
          promises[i].set_value(build_spmm(cases[i], arch));
        } catch (...) {
          promises[i].set_exception(std::current_exception());
        }
      }
    }));
  for (auto& f : pool) f.get();
  return futures;
}

// The build-half assertions: a valid plan, a ptxas report with no spills and no stack frame (either
// PTX layout), a non-empty cubin and PTX, values present exactly in streamed mode (with nonzeros)
// and rolled mode (the step table; always CUDA C++).
inline void expect_clean_build(const SpmmCase& c, const SpmmBuilt& b) {
  EXPECT_TRUE(b.plan_errors.empty()) << c.name << ": "
                                     << (b.plan_errors.empty() ? "" : b.plan_errors.front());
  ASSERT_TRUE(b.plan_errors.empty());
  ASSERT_TRUE(b.usage.found) << c.name << ": no ptxas report in the log nor attributes in the cubin:\n"
                             << b.compiled.log;
  EXPECT_EQ(b.usage.spill_store_bytes, 0) << c.name;
  EXPECT_EQ(b.usage.spill_load_bytes, 0) << c.name;
  EXPECT_EQ(b.usage.stack_frame_bytes, 0) << c.name;
  EXPECT_FALSE(b.compiled.cubin.empty()) << c.name;
  EXPECT_FALSE(b.compiled.ptx.empty()) << c.name;
  EXPECT_EQ(b.bundle.values.empty(),
            b.plan.value_mode() == SpmmValueMode::baked ||
                (b.plan.value_mode() == SpmmValueMode::streamed && spmm_plan_nnz(b.plan) == 0))
      << c.name;
  if (b.plan.value_mode() == SpmmValueMode::rolled) {
    EXPECT_EQ(b.bundle.values, spmm_rolled_table(b.plan, c.a)) << c.name;
    EXPECT_EQ(b.emitted.language, KernelLanguage::cuda) << c.name;
  }
  if (b.plan.value_mode() == SpmmValueMode::streamed) {
    EXPECT_EQ(b.bundle.values.size(), static_cast<std::size_t>(c.a.nnz() - b.bundle.metadata.tile_nnz))
        << c.name;
  }
  EXPECT_EQ(b.bundle.metadata.nnz, c.a.nnz()) << c.name;
  EXPECT_EQ(b.bundle.metadata.n_mode, mode_name(c.problem.n_mode)) << c.name;
}

struct Comparison {
  double max_rel_error = 0;         // max |got - ref| / max(|ref|) (absolute when ref is all zero)
  std::int64_t nan_count = 0;       // NaN (or inf) anywhere in the GPU output
  std::int64_t mismatches = 0;      // elements whose bits differ from the interpreter's
  std::int64_t zero_sign_only = 0;  // of those, +0 vs -0
  std::string first_mismatch;
};

// Compares the GPU's C (m x n, row-major float) with the fp64 reference and the interpreter.
inline Comparison compare(const std::vector<float>& got, const DenseMatrix& ref, const DenseMatrix& interp) {
  Comparison r;
  double max_ref = 0, max_diff = 0;
  for (double v : ref.data) max_ref = std::max(max_ref, std::fabs(v));
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float g = got[i];
    if (!std::isfinite(g)) {
      ++r.nan_count;
      continue;
    }
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(g) - ref.data[i]));
    const auto want = static_cast<float>(interp.data[i]);
    if (std::bit_cast<std::uint32_t>(g) != std::bit_cast<std::uint32_t>(want)) {
      if (r.mismatches == 0) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "C(%lld, %lld): GPU %a, interpreter %a",
                      static_cast<long long>(i / static_cast<std::size_t>(ref.cols)),
                      static_cast<long long>(i % static_cast<std::size_t>(ref.cols)), g, want);
        r.first_mismatch = buf;
      }
      ++r.mismatches;
      if (g == 0.0f && want == 0.0f) ++r.zero_sign_only;
    }
  }
  r.max_rel_error = max_ref > 0 ? max_diff / max_ref : max_diff;
  if (r.nan_count) r.max_rel_error = INFINITY;
  return r;
}

// Runs the loaded executor at `n` on a poisoned C and returns C as downloaded.
inline std::vector<float> run_on_gpu(const rt::Context& ctx, const rt::SpmmExecutor& ex, const DenseMatrix& b,
                                     std::int64_t m, int n) {
  std::vector<float> hb(b.data.begin(), b.data.end());
  rt::DeviceBuffer db(hb.size() * sizeof(float));
  rt::DeviceBuffer dc(static_cast<std::size_t>(m) * static_cast<std::size_t>(n) * sizeof(float));
  db.upload(hb.data(), hb.size() * sizeof(float));
  dc.fill32(kNaNPattern);  // an element the kernel does not write stays NaN and fails
  ex.run(db.get(), dc.get(), n);
  ctx.synchronize();
  std::vector<float> hc(static_cast<std::size_t>(m) * static_cast<std::size_t>(n));
  dc.download(hc.data(), hc.size() * sizeof(float));
  return hc;
}

// Runs `ex` at n, checks it against both oracles and prints one line. Returns C.
inline std::vector<float> run_and_check(const rt::Context& ctx, const rt::SpmmExecutor& ex, const SpmmCase& c,
                                        const SpmmBuilt& built, int n, std::uint64_t seed = 7) {
  const DenseMatrix b = random_b(c.a.cols, n, seed + static_cast<std::uint64_t>(n));
  const std::vector<double>* bias = c.problem.bias ? &c.bias : nullptr;
  const DenseMatrix ref = spmm(c.a, b, bias, c.problem.relu);
  const DenseMatrix interp = interpret_spmm(built.plan, spmm_kernel_values(built.plan, c.a), b, bias);
  const std::vector<float> got = run_on_gpu(ctx, ex, b, c.a.rows, n);
  const Comparison r = compare(got, ref, interp);
  std::printf(
      "[ spmm gpu ] %-44s %5lldx%-5lld nnz %7lld  N %4d  %-7s %-8s compile %6.2f s  cubin %6.1f B/nnz  "
      "max rel err %.2e  bit-exact %s\n",
      c.name.c_str(), static_cast<long long>(c.a.rows), static_cast<long long>(c.a.cols),
      static_cast<long long>(c.a.nnz()), n, mode_name(c.problem.n_mode), to_string(built.plan.value_mode()),
      built.compiled.seconds,
      c.a.nnz() ? static_cast<double>(built.compiled.cubin.size()) / static_cast<double>(c.a.nnz()) : 0.0,
      r.max_rel_error, r.mismatches == 0 ? "yes" : "no");
  std::fflush(stdout);
  EXPECT_EQ(r.nan_count, 0) << c.name << " n=" << n << ": NaN/inf in C (unwritten or bad)";
  EXPECT_LE(r.max_rel_error, kMaxRelError) << c.name << " n=" << n;
  EXPECT_EQ(r.mismatches, 0) << c.name << " n=" << n << ": " << r.mismatches
                             << " elements differ from interpret_spmm (" << r.zero_sign_only
                             << " only in the sign of zero); first: " << r.first_mismatch;
  return got;
}

// Programmatic launch chains (SpmmGpu and SpmmHalfGpu ProgrammaticLaunchChains). Weights scaled by
// 1/8, exact in every dtype, keep ten layers' sums in range.
inline CsrMatrix scaled_for_chains(CsrMatrix a) {
  for (auto& v : a.values) v *= 0.125;
  return a;
}

// `layers` launches of the square layer `ex` in a row on one stream, each reading the buffer the one
// before it wrote and writing the one that launch read (ping-pong; `input` is uploaded to the first,
// the second is filled with `poison` first). Returns the last output.
template <typename T>
std::vector<T> run_chain(const rt::Context& ctx, const rt::SpmmExecutor& ex, const std::vector<T>& input,
                         int n, int layers, bool programmatic, std::uint32_t poison) {
  const std::size_t bytes = (input.size() * sizeof(T) + 3) / 4 * 4;
  rt::DeviceBuffer ping(bytes), pong(bytes);
  ping.upload(input.data(), input.size() * sizeof(T));
  pong.fill32(poison);
  rt::RunOptions options;
  options.programmatic = programmatic;
  for (int layer = 0; layer < layers; ++layer) {
    const bool even = layer % 2 == 0;
    ex.run(even ? ping.get() : pong.get(), even ? pong.get() : ping.get(), n, nullptr, options);
  }
  ctx.synchronize();
  std::vector<T> out(input.size());
  (layers % 2 ? pong : ping).download(out.data(), out.size() * sizeof(T));
  return out;
}

}  // namespace sparsecc::gputest

// Skips the current test, with the reason, on a device without programmatic dependent launch.
#define SPARSECC_PROGRAMMATIC_OR_SKIP(ctx)                                                                   \
  do {                                                                                                       \
    if (!::sparsecc::rt::arch_has_programmatic_launch((ctx).device().arch()))                                \
      GTEST_SKIP() << "programmatic launches need sm_90 or later; this device is " << (ctx).device().arch(); \
  } while (0)
