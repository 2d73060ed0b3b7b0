#include "bench/traffic_bound.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "sparsecc/compile/nvrtc.hpp"

namespace sparsecc::bench {

namespace {

// Thread i loads float4 i, i + stride, ... of the reads and stores float4 i, i + stride, ... of the
// writes. A store's value comes from its index, so no store waits for a load; the loads are kept
// alive by their sum, which is stored only if it equals a value it never takes. Reads past the
// `unique` float4 of `in` wrap round to its start (the same bytes read again, from L2 once warm).
constexpr const char* kProbeSource = R"(
extern "C" __global__ void sparsecc_traffic_probe(const float4* __restrict__ in, unsigned long long n_in,
                                                  float4* __restrict__ out, unsigned long long n_out,
                                                  unsigned long long unique) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  const unsigned long long n = n_in > n_out ? n_in : n_out;
  float sum = 0.0f;
  for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    if (i < n_in) {
      const float4 v = __ldg(in + (i < unique ? i : i % unique));
      sum += (v.x + v.y) + (v.z + v.w);
    }
    if (i < n_out) out[i] = make_float4(static_cast<float>(i), 1.0f, 2.0f, 3.0f);
  }
  if (sum == -1.0f) out[0].y = sum;
}
)";

}  // namespace

TrafficProbe::TrafficProbe(const DeviceInfo& device) : device_(device) {
  CudaCompileOptions options;
  options.arch = fmt::format("sm_{}{}", device.cc_major, device.cc_minor);
  const CudaCompileResult compiled = compile_cuda(kProbeSource, "traffic_probe.cu", options);
  SPARSECC_CUDA_CHECK(
      cudaLibraryLoadData(&library_.d, compiled.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  SPARSECC_CUDA_CHECK(cudaLibraryGetKernel(&kernel_, library_.d, "sparsecc_traffic_probe"));
}

double TrafficProbe::probe_us(std::size_t read_bytes, std::size_t unique_read_bytes, std::size_t write_bytes,
                              const TimingOptions& timing) const {
  unsigned long long n_in = (read_bytes + 15) / 16, n_out = (write_bytes + 15) / 16;
  unsigned long long unique =
      std::clamp<unsigned long long>((unique_read_bytes + 15) / 16, 1, std::max(n_in, 1ull));
  DeviceBuffer in(unique * 16), out(std::max<std::size_t>(n_out, 1) * 16);
  SPARSECC_CUDA_CHECK(cudaMemset(in.get(), 0x3c, in.bytes()));  // 0.0115 in every float: not zero
  void* in_ptr = in.get();
  void* out_ptr = out.get();
  void* params[] = {&in_ptr, &n_in, &out_ptr, &n_out, &unique};
  const unsigned long long elements = std::max(n_in, n_out);
  constexpr unsigned kThreads = 256;
  std::vector<unsigned long long> grids{(elements + kThreads - 1) / kThreads,
                                        (elements + 4 * kThreads - 1) / (4 * kThreads)};
  for (const int per_sm : {4, 8, 16}) grids.push_back(static_cast<unsigned long long>(per_sm) * device_.sms);
  TimingOptions warm = timing;
  warm.cold_l2 = false;
  warm.buffer_sets = 1;
  double best = 0;
  for (const unsigned long long g : grids) {
    const auto grid = static_cast<unsigned>(std::clamp<unsigned long long>(g, 1, 1u << 30));
    const double us = time_steady_us(
        [&](cudaStream_t s) {
          SPARSECC_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(kernel_), dim3(grid),
                                               dim3(kThreads), params, 0, s));
        },
        warm);
    best = best > 0 ? std::min(best, us) : us;
  }
  return best;
}

TrafficBound TrafficProbe::bound(const CsrMatrix& a, std::int64_t n, double floor_us,
                                 const TimingOptions& timing) const {
  TrafficBound t;
  t.bytes = traffic_bytes(a, n);
  t.probe_us = probe_us(t.bytes.read, t.bytes.read, t.bytes.write, timing);
  const double fma_per_us = static_cast<double>(device_.sms) * 128.0 * device_.sm_clock_khz * 1e-3;
  t.fma_us = fma_per_us > 0 ? static_cast<double>(a.nnz()) * static_cast<double>(n) / fma_per_us : 0.0;
  t.bound_us = std::max(t.probe_us, floor_us + t.fma_us);
  return t;
}

double TrafficProbe::stream_us(const PlanTraffic& traffic, const TimingOptions& timing) const {
  return probe_us(traffic.read, traffic.unique_read, traffic.write, timing);
}

}  // namespace sparsecc::bench
