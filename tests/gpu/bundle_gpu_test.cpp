// Executor bundles on a GPU: a hand-written kernel with the SpMM kernel ABI (C = A·B, +bias, ReLU,
// for a small A written into the kernel) is compiled by NVRTC, packed into a bundle, loaded by
// SpmmExecutor from the cubin and from the PTX, and through the C API; C is poisoned with NaN and
// the result compared with fp64. Every test skips with the reason when no driver or device exists.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <span>
#include <string>

#include "gpu_skip.hpp"
#include "sparsecc/bundle/write_bundle.hpp"
#include "sparsecc/compile/nvrtc.hpp"
#include "sparsecc/runtime/executor.hpp"
#include "sparsecc/runtime/sparsecc_runtime.h"
#include "sparsecc/runtime/timing.hpp"
#include "test_support.hpp"

using namespace sparsecc;

namespace {

constexpr int kM = 5, kK = 7, kTile = 32;

// A dense 5×7 A with zeros; its nonzeros in row-major order.
double a_at(int i, int j) { return (i * 3 + j) % 4 == 0 ? 0.0 : (i - j) * 0.25 + 0.5; }

std::string hex_float(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%af", static_cast<float>(v));
  return buf;
}

// The kernel (the executor ABI): kTile columns per blockIdx.x, one block row of C per blockIdx.y.
std::string kernel_source(bool streamed, bool relu) {
  std::string row_ptr = "0", cols, vals;
  int nnz = 0;
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kK; ++j)
      if (a_at(i, j) != 0) {
        cols += (nnz ? "," : "") + std::to_string(j);
        vals += (nnz ? "," : "") + hex_float(a_at(i, j));
        ++nnz;
      }
    row_ptr += "," + std::to_string(nnz);
  }
  return "__constant__ int ROW_PTR[] = {" + row_ptr + "};\n__constant__ int COL[] = {" + cols +
         "};\n__constant__ float VALS[] = {" + vals +
         "};\n"
         "extern \"C\" __global__ void spmm_small(const float* B, float* C, const float* bias,\n"
         "                                        const float* values, int n) {\n"
         "  extern __shared__ float scratch[];\n"
         "  const int row = blockIdx.y, col = blockIdx.x * " +
         std::to_string(kTile) +
         " + threadIdx.x;\n"
         "  scratch[threadIdx.x] = 0.0f;\n"
         "  if (col >= n) return;\n"
         "  float acc = scratch[threadIdx.x];\n"
         "  for (int p = ROW_PTR[row]; p < ROW_PTR[row + 1]; ++p)\n"
         "    acc += " +
         (streamed ? "values[p]" : "VALS[p]") +
         " * B[COL[p] * n + col];\n"
         "  if (bias) acc += bias[row];\n" +
         (relu ? "  acc = fmaxf(acc, 0.0f);\n" : "") + "  C[row * n + col] = acc;\n}\n";
}

int count_nnz() {
  int nnz = 0;
  for (int i = 0; i < kM; ++i)
    for (int j = 0; j < kK; ++j) nnz += a_at(i, j) != 0;
  return nnz;
}

rt::Bundle make_bundle(const std::string& arch, bool streamed, bool bias, bool relu,
                       const std::string& n_mode, bool contract = true) {
  rt::Bundle b;
  auto& md = b.metadata;
  md.m = kM;
  md.k = kK;
  md.n = 37;
  md.nnz = count_nnz();
  md.n_mode = n_mode;
  md.n_tile = kTile;
  md.bias = bias;
  md.relu = relu;
  md.values_mode = streamed ? "streamed" : "baked";
  md.arch = arch;
  md.kernel = "spmm_small";
  md.block_rows = kM;
  md.block_x = kTile;
  md.shared_bytes = kTile * sizeof(float);
  md.generator_version = "test";
  md.fingerprint = "5ca1ab1e";
  if (streamed)
    for (int i = 0; i < kM; ++i)
      for (int j = 0; j < kK; ++j)
        if (a_at(i, j) != 0) b.values.push_back(static_cast<float>(a_at(i, j)));
  if (bias)
    for (int i = 0; i < kM; ++i) b.bias.push_back(0.25f * i - 0.5f);
  // The kernel carries the code contract of this metadata, as the generator's do.
  CudaCompileOptions options;
  options.arch = arch;
  const CudaCompileResult r = compile_cuda(
      kernel_source(streamed, relu) + (contract ? rt::contract_cuda(rt::bundle_contract(b)) : ""),
      "spmm_small.cu", options);
  b.cubin = r.cubin;
  b.ptx = r.ptx;
  return b;
}

// Runs `launch(B, C)` for an n-column B and checks C against fp64; returns the max abs error.
template <class Launch>
double run_and_check(const rt::Context& ctx, const rt::Bundle& b, int n, Launch&& launch) {
  std::vector<float> hb(std::size_t(kK) * n);
  for (std::size_t i = 0; i < hb.size(); ++i) hb[i] = static_cast<float>((i * 37 % 101) / 16.0 - 3.0);
  rt::DeviceBuffer db(hb.size() * sizeof(float)), dc(std::size_t(kM) * n * sizeof(float));
  db.upload(hb.data(), hb.size() * sizeof(float));
  dc.fill32(0x7fc00000u);
  launch(db.get(), dc.get());
  ctx.synchronize();
  std::vector<float> hc(std::size_t(kM) * n);
  dc.download(hc.data(), hc.size() * sizeof(float));
  double max_err = 0;
  for (int i = 0; i < kM; ++i)
    for (int c = 0; c < n; ++c) {
      double ref = b.metadata.bias ? b.bias[i] : 0.0;
      for (int j = 0; j < kK; ++j) ref += a_at(i, j) * hb[std::size_t(j) * n + c];
      if (b.metadata.relu) ref = std::max(ref, 0.0);
      const float got = hc[std::size_t(i) * n + c];
      EXPECT_TRUE(std::isfinite(got)) << "C(" << i << "," << c << ") not written";
      max_err = std::max(max_err, std::fabs(got - ref));
    }
  EXPECT_LT(max_err, 1e-5);
  return max_err;
}

std::string other_arch(const std::string& arch) { return arch == "sm_80" ? "sm_86" : "sm_80"; }

}  // namespace

TEST(GpuBundle, CubinRunsFixedN) {
  SPARSECC_GPU_OR_SKIP();
  rt::Context ctx(0);
  const rt::Bundle b = make_bundle(ctx.device().arch(), false, false, false, "fixed");
  const auto ex = rt::SpmmExecutor::load_bytes(rt::bundle_bytes(b), "small.spcc", ctx);
  EXPECT_EQ(ex.loaded_from(), "cubin") << ex.load_reason();
  const double err = run_and_check(ctx, b, 37, [&](CUdeviceptr B, CUdeviceptr C) { ex.run(B, C, 37); });
  std::printf("[ cubin ] %s, max abs error %.3g vs fp64\n", ex.load_reason().c_str(), err);
  EXPECT_THROW(ex.run(1, 1, 36), std::invalid_argument);
}

// Steady-state timing through the driver API (the tuner's clock): a graph of launches replayed between
// events gives positive, ordered per-launch samples, and the timed executor still computes C.
TEST(GpuBundle, TimeLaunchesInAGraph) {
  SPARSECC_GPU_OR_SKIP();
  rt::Context ctx(0);
  const rt::Bundle b = make_bundle(ctx.device().arch(), false, false, false, "fixed");
  const auto ex = rt::SpmmExecutor::load_bytes(rt::bundle_bytes(b), "small.spcc", ctx);
  rt::LaunchTimingOptions options;
  options.launches_per_graph = 20;
  options.repetitions = 5;
  rt::LaunchTiming t;
  double warm_seconds = 0;
  run_and_check(ctx, b, 37, [&](CUdeviceptr B, CUdeviceptr C) {
    t = rt::time_launches(
        ctx, [&](CUstream s) { ex.run(B, C, 37, s); }, options);
    // The warm-up replays the graph for at least warmup_seconds before the samples.
    rt::LaunchTimingOptions warm = options;
    warm.warmup_seconds = 0.2;
    const auto w0 = std::chrono::steady_clock::now();
    rt::time_launches(
        ctx, [&](CUstream s) { ex.run(B, C, 37, s); }, warm);
    warm_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  });
  EXPECT_GE(warm_seconds, 0.2);
  ASSERT_EQ(t.samples_us.size(), 5u);
  EXPECT_GT(t.min_us, 0.0);
  EXPECT_LE(t.min_us, t.median_us);
  EXPECT_LE(t.median_us, t.max_us);
  EXPECT_LT(t.median_us, 1000.0);  // a tiny kernel: microseconds, not milliseconds
  std::printf("[ timing ] %.2f us per launch (min %.2f, max %.2f)\n", t.median_us, t.min_us, t.max_us);
  options.repetitions = 0;
  EXPECT_THROW(rt::time_launches(
                   ctx, [](CUstream) {}, options),
               std::invalid_argument);
  options.repetitions = 5;
  options.warmup_seconds = -1;
  EXPECT_THROW(rt::time_launches(
                   ctx, [](CUstream) {}, options),
               std::invalid_argument);
}

TEST(GpuBundle, PtxFallbackStreamedBiasReluRuntimeN) {
  SPARSECC_GPU_OR_SKIP();
  rt::Context ctx(0);
  const std::string arch = ctx.device().arch();
  rt::Bundle b = make_bundle(arch, true, true, true, "runtime");
  b.metadata.arch = other_arch(arch);  // the cubin no longer matches: the runtime must JIT the PTX
  const auto ex = rt::SpmmExecutor::load_bytes(rt::bundle_bytes(b), "small.spcc", ctx);
  EXPECT_EQ(ex.loaded_from(), "ptx");
  EXPECT_NE(ex.load_reason().find("the device is " + arch), std::string::npos) << ex.load_reason();
  for (int n : {1, 37, 70, 200}) {
    const double err = run_and_check(ctx, b, n, [&](CUdeviceptr B, CUdeviceptr C) { ex.run(B, C, n); });
    std::printf("[ ptx ] n = %d, max abs error %.3g vs fp64\n", n, err);
  }
}

TEST(GpuBundle, ForcedPtx) {
  SPARSECC_GPU_OR_SKIP();
  rt::Context ctx(0);
  const rt::Bundle b = make_bundle(ctx.device().arch(), true, false, false, "fixed");
  rt::LoadOptions options;
  options.force_ptx = true;
  const auto ex = rt::SpmmExecutor::load_bytes(rt::bundle_bytes(b), "small.spcc", ctx, options);
  EXPECT_EQ(ex.loaded_from(), "ptx");
  run_and_check(ctx, b, 37, [&](CUdeviceptr B, CUdeviceptr C) { ex.run(B, C, 37); });
}

TEST(GpuBundle, LoadErrorsAreClear) {
  SPARSECC_GPU_OR_SKIP();
  rt::Context ctx(0);
  rt::Bundle b = make_bundle(ctx.device().arch(), false, false, false, "fixed");
  b.metadata.arch = other_arch(ctx.device().arch());
  b.ptx.clear();
  try {
    rt::SpmmExecutor::load(b, "cubin_only.spcc", ctx);
    FAIL() << "a cubin for another arch without PTX must not load";
  } catch (const rt::BundleError& e) {
    EXPECT_NE(std::string(e.what()).find("no PTX to JIT"), std::string::npos) << e.what();
  }
  b = make_bundle(ctx.device().arch(), false, false, false, "fixed");
  b.metadata.kernel = "not_there";
  try {
    rt::SpmmExecutor::load(b, "renamed.spcc", ctx);
    FAIL() << "a missing kernel must be found at load";
  } catch (const rt::DriverError& e) {
    EXPECT_NE(std::string(e.what()).find("not_there"), std::string::npos) << e.what();
  }
}

TEST(GpuBundle, CApiLoadsFileAndRuns) {
  SPARSECC_GPU_OR_SKIP();
  rt::Context ctx(0);
  const rt::Bundle b = make_bundle(ctx.device().arch(), true, true, false, "fixed");
  test::TempDir dir;
  const std::string path = dir.file("small.spcc");
  write_bundle(path, b);
  sparsecc_executor* ex = nullptr;
  ASSERT_EQ(sparsecc_executor_load_file(path.c_str(), 0, &ex), SPARSECC_OK) << sparsecc_last_error();
  EXPECT_STREQ(sparsecc_last_error(), "");
  EXPECT_NE(std::string(sparsecc_executor_metadata_json(ex)).find("\"kernel\":\"spmm_small\""),
            std::string::npos);
  run_and_check(ctx, b, 37, [&](CUdeviceptr B, CUdeviceptr C) {
    EXPECT_EQ(sparsecc_executor_run(ex, B, C, 37, nullptr), SPARSECC_OK) << sparsecc_last_error();
  });
  EXPECT_EQ(sparsecc_executor_run(ex, 1, 1, 38, nullptr), SPARSECC_BAD_ARGUMENT);
  EXPECT_NE(std::string(sparsecc_last_error()).find("fixed mode"), std::string::npos);
  // run_ex: with SPARSECC_RUN_PROGRAMMATIC this hand-made bundle (no programmatic_launch) launches
  // plainly; other flags are refused.
  run_and_check(ctx, b, 37, [&](CUdeviceptr B, CUdeviceptr C) {
    EXPECT_EQ(sparsecc_executor_run_ex(ex, B, C, 37, nullptr, SPARSECC_RUN_PROGRAMMATIC), SPARSECC_OK)
        << sparsecc_last_error();
  });
  EXPECT_EQ(sparsecc_executor_run_ex(ex, 1, 1, 37, nullptr, 2u), SPARSECC_BAD_ARGUMENT);
  EXPECT_NE(std::string(sparsecc_last_error()).find("unknown flags"), std::string::npos);
  EXPECT_EQ(sparsecc_executor_run_ex(nullptr, 1, 1, 37, nullptr, 0u), SPARSECC_BAD_ARGUMENT);
  sparsecc_executor_destroy(ex);
}

// A bundle whose metadata was edited after its code was generated (the checksum recomputed) is
// refused before anything is launched: by the contract read from the loaded module, whichever image
// the device takes, and already when the bundle is read where the code's contract is visible.
TEST(GpuBundle, ForgedMetadataIsRefusedBeforeLaunch) {
  SPARSECC_GPU_OR_SKIP();
  rt::Context ctx(0);
  const rt::Bundle honest = make_bundle(ctx.device().arch(), true, false, false, "fixed");
  rt::Bundle forged = honest;
  forged.metadata.m = kM - 1;  // C of 4 rows; the kernel writes 5
  forged.metadata.block_rows = kM - 1;
  forged.values.pop_back();  // and one value fewer than the kernel reads
  forged.metadata.nnz -= 1;
  const auto expect_refused = [](const std::function<void()>& load, const std::string& part) {
    try {
      load();
      ADD_FAILURE() << "a forged bundle loaded";
    } catch (const rt::BundleError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_refused([&] { rt::SpmmExecutor::load(forged, "forged.sccb", ctx); },
                 "forged.sccb: m is 4 in the bundle but 5 in the code's sparsecc_contract");
  // The loader's own check, on the module the device loaded (cubin, then PTX through the JIT).
  for (const bool ptx : {false, true}) {
    const std::span<const unsigned char> image =
        ptx ? std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(honest.ptx.data()),
                                             honest.ptx.size())
            : std::span<const unsigned char>(honest.cubin);
    const rt::Module module(image, ptx ? "honest.ptx" : "honest.cubin");
    EXPECT_NO_THROW(rt::check_loaded_contract(honest, module, "honest.sccb", ptx ? "ptx" : "cubin"));
    expect_refused([&] { rt::check_loaded_contract(forged, module, "forged.sccb", ptx ? "ptx" : "cubin"); },
                   std::string("m is 4 in the bundle but 5 in the code's sparsecc_contract (loaded ") +
                       (ptx ? "ptx" : "cubin") + ")");
  }
  // Code without a contract (a generator before it, or not sparsecc's) does not load.
  const rt::Bundle bare = make_bundle(ctx.device().arch(), true, false, false, "fixed", false);
  expect_refused([&] { rt::SpmmExecutor::load(bare, "bare.sccb", ctx); },
                 "bare.sccb: the cubin defines no sparsecc_contract");
  // The honest bundle runs.
  const auto ex = rt::SpmmExecutor::load(honest, "honest.sccb", ctx);
  run_and_check(ctx, honest, 37, [&](CUdeviceptr B, CUdeviceptr C) { ex.run(B, C, 37); });
}
