// GPU smoke tests: the runtime finds the driver and a device, and a kernel rendered from
// templates/, compiled by NVRTC, loads (as cubin and as PTX) and computes the right values.
// Every test skips with the reason when no driver or device is present.
#include "sparsecc/runtime/device.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "gpu_skip.hpp"
#include "sparsecc/compile/nvrtc.hpp"
#include "sparsecc/emit/template.hpp"

using namespace sparsecc;

TEST(GpuDevice, FindsDevice) {
  SPARSECC_GPU_OR_SKIP();
  const auto devices = rt::list_devices();
  ASSERT_FALSE(devices.empty());
  for (const auto& d : devices) {
    std::printf("[ device %d ] %s, %s, %d SMs, %.1f GiB, L2 %.0f MiB, driver %d\n", d.ordinal, d.name.c_str(),
                d.arch().c_str(), d.multiprocessors, static_cast<double>(d.total_memory) / (1ull << 30),
                static_cast<double>(d.l2_bytes) / (1 << 20), d.driver_version);
    EXPECT_GT(d.multiprocessors, 0);
    EXPECT_GE(d.cc_major, 7);
  }
}

namespace {
void run_check(bool use_ptx) {
  rt::Context ctx(0);
  const std::string arch = ctx.device().arch();
  const KernelTemplate t = KernelTemplate::load("toolchain_check.cu");
  const std::string src = t.render({{"KERNEL_NAME", "smoke"}, {"BODY", "v * v - 3.0f * v + 0.5f"}});
  CudaCompileOptions options;
  options.arch = arch;
  const CudaCompileResult r = compile_cuda(src, "smoke.cu", options);
  std::vector<unsigned char> image =
      use_ptx ? std::vector<unsigned char>(r.ptx.begin(), r.ptx.end()) : r.cubin;
  rt::Module mod(image, use_ptx ? "smoke.ptx" : "smoke.cubin");
  CUfunction fn = mod.function("smoke");

  const int n = 100003;  // not a multiple of the block size: the tail is exercised
  std::vector<float> x(n);
  std::mt19937 gen(12345);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  for (auto& v : x) v = dist(gen);
  rt::DeviceBuffer dx(n * sizeof(float)), dy(n * sizeof(float));
  dx.upload(x.data(), n * sizeof(float));
  dy.fill32(0x7fc00000u);  // poison with NaN: unwritten outputs fail the check
  CUdeviceptr px = dx.get(), py = dy.get();
  int nn = n;
  void* args[] = {&px, &py, &nn};
  rt::launch(fn, (n + 255) / 256, 256, args);
  ctx.synchronize();
  std::vector<float> y(n);
  dy.download(y.data(), n * sizeof(float));
  double max_err = 0;
  for (int i = 0; i < n; ++i) {
    const double ref = static_cast<double>(x[i]) * x[i] - 3.0 * x[i] + 0.5;
    ASSERT_TRUE(std::isfinite(y[i])) << "element " << i << " not written";
    max_err = std::max(max_err, std::fabs(y[i] - ref) / std::max(1.0, std::fabs(ref)));
  }
  std::printf("[ %s ] %d elements, max relative error %.3g vs fp64\n", use_ptx ? "ptx" : "cubin", n, max_err);
  EXPECT_LT(max_err, 1e-5);
}
}  // namespace

TEST(GpuDevice, NvrtcCubinRunsAndMatchesFp64) {
  SPARSECC_GPU_OR_SKIP();
  run_check(false);
}

TEST(GpuDevice, PtxLoadsThroughDriverJit) {
  SPARSECC_GPU_OR_SKIP();
  run_check(true);
}

TEST(GpuDevice, DriverErrorsAreNamed) {
  SPARSECC_GPU_OR_SKIP();
  rt::Context ctx(0);
  const unsigned char junk[] = {1, 2, 3, 4};
  try {
    rt::Module m(junk, "junk.cubin");
    FAIL() << "loading garbage must fail";
  } catch (const rt::DriverError& e) {
    EXPECT_NE(std::string(e.what()).find("junk.cubin"), std::string::npos) << e.what();
  }
}
