// Steady-state timing by CUDA-graph replay, and the checked-call and device-buffer helpers.
#include "bench/timing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

namespace sparsecc::bench {

void throw_cuda_error(const char* call, const std::string& error, const char* file, int line) {
  throw CudaError(fmt::format("{}:{}: {}: {}", file, line, call, error));
}

void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess)
    throw_cuda_error(call, fmt::format("{} ({})", cudaGetErrorName(status), cudaGetErrorString(status)), file,
                     line);
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes > 0) SPARSECC_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, std::size_t bytes) {
  if (bytes > bytes_) throw CudaError(fmt::format("upload of {} bytes into a {}-byte buffer", bytes, bytes_));
  SPARSECC_CUDA_CHECK(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice));
}

void DeviceBuffer::download(void* host, std::size_t bytes) const {
  if (bytes > bytes_)
    throw CudaError(fmt::format("download of {} bytes from a {}-byte buffer", bytes, bytes_));
  SPARSECC_CUDA_CHECK(cudaMemcpy(host, ptr_, bytes, cudaMemcpyDeviceToHost));
}

int rotation_sets(std::size_t bytes_per_set, std::size_t l2_bytes, bool cold_l2) {
  if (!cold_l2 || bytes_per_set == 0) return 1;
  std::size_t target = 2 * l2_bytes;
  return static_cast<int>(std::max<std::size_t>(2, (target + bytes_per_set - 1) / bytes_per_set));
}

TimingStats summarize(std::vector<double> samples_us, int launches_per_sample) {
  if (samples_us.empty()) throw CudaError("no timing samples");
  TimingStats s;
  s.launches_per_sample = launches_per_sample;
  std::vector<double> sorted = samples_us;
  std::sort(sorted.begin(), sorted.end());
  std::size_t n = sorted.size();
  s.median_us = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  s.min_us = sorted.front();
  s.max_us = sorted.back();
  s.spread = s.median_us > 0 ? (s.max_us - s.min_us) / s.median_us : 0.0;
  s.samples_us = std::move(samples_us);
  return s;
}

nlohmann::json timing_json(const TimingStats& t) {
  return {{"median_us", t.median_us},
          {"min_us", t.min_us},
          {"max_us", t.max_us},
          {"spread", t.spread},
          {"launches_per_sample", t.launches_per_sample},
          {"samples_us", t.samples_us}};
}

namespace {

// Owners of the graph objects of one measurement.
using Graph = Owned<cudaGraph_t, cudaGraphDestroy>;
using GraphExec = Owned<cudaGraphExec_t, cudaGraphExecDestroy>;

// Captures `launches` enqueues into a graph; ends the capture even when an enqueue throws.
void capture(cudaStream_t stream, int launches, const std::function<void(cudaStream_t)>& enqueue_one,
             Graph& graph) {
  SPARSECC_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    for (int i = 0; i < launches; ++i) enqueue_one(stream);
  } catch (...) {
    cudaGraph_t partial = nullptr;
    cudaStreamEndCapture(stream, &partial);
    if (partial) cudaGraphDestroy(partial);
    cudaGetLastError();
    throw;
  }
  SPARSECC_CUDA_CHECK(cudaStreamEndCapture(stream, &graph.d));
}

void check_positive(int value, const char* what) {
  if (value < 1) throw CudaError(fmt::format("timing option {} must be at least 1 (got {})", what, value));
}

}  // namespace

namespace {

// `repetitions` samples of `body` (which enqueues `launches` calls on `stream`) between two events, in
// µs per call.
TimingStats sample_events(cudaStream_t stream, int repetitions, int launches,
                          const std::function<void()>& body) {
  Event start, stop;
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(repetitions));
  for (int r = 0; r < repetitions; ++r) {
    SPARSECC_CUDA_CHECK(cudaEventRecord(start.e, stream));
    body();
    SPARSECC_CUDA_CHECK(cudaEventRecord(stop.e, stream));
    SPARSECC_CUDA_CHECK(cudaEventSynchronize(stop.e));
    float ms = 0;
    SPARSECC_CUDA_CHECK(cudaEventElapsedTime(&ms, start.e, stop.e));
    samples.push_back(static_cast<double>(ms) * 1000.0 / launches);
  }
  return summarize(std::move(samples), launches);
}

}  // namespace

TimingStats time_steady(const std::function<void(cudaStream_t)>& enqueue_one, const TimingOptions& options) {
  check_positive(options.launches_per_graph, "launches_per_graph");
  check_positive(options.repetitions, "repetitions");
  check_positive(options.buffer_sets, "buffer_sets");
  Stream stream;
  for (int i = 0; i < options.warmup; ++i) enqueue_one(stream.s);
  SPARSECC_CUDA_CHECK(cudaStreamSynchronize(stream.s));
  SPARSECC_CUDA_CHECK(cudaGetLastError());

  int launches = std::max(options.launches_per_graph, options.buffer_sets);
  int repetitions = options.repetitions;
  {
    // One timed call: an operation that would take the whole protocol past max_seconds (some
    // cuSPARSE algorithms at large N take tens of milliseconds) gets fewer launches per graph and
    // fewer replays, never below buffer_sets launches and 5 replays.
    Event start, stop;
    SPARSECC_CUDA_CHECK(cudaEventRecord(start.e, stream.s));
    enqueue_one(stream.s);
    SPARSECC_CUDA_CHECK(cudaEventRecord(stop.e, stream.s));
    SPARSECC_CUDA_CHECK(cudaEventSynchronize(stop.e));
    float ms = 0;
    SPARSECC_CUDA_CHECK(cudaEventElapsedTime(&ms, start.e, stop.e));
    const double total = static_cast<double>(ms) * 1e-3 * launches * (repetitions + 1);
    if (total > options.max_seconds) {
      const double scale = options.max_seconds / total;
      launches = std::max(options.buffer_sets, static_cast<int>(launches * std::sqrt(scale)));
      repetitions = std::max(std::min(5, repetitions), static_cast<int>(repetitions * std::sqrt(scale)));
    }
  }
  Graph graph;
  capture(stream.s, launches, enqueue_one, graph);
  GraphExec exec;
  SPARSECC_CUDA_CHECK(cudaGraphInstantiate(&exec.d, graph.d, 0));
  SPARSECC_CUDA_CHECK(cudaGraphUpload(exec.d, stream.s));
  SPARSECC_CUDA_CHECK(cudaGraphLaunch(exec.d, stream.s));  // one untimed replay
  SPARSECC_CUDA_CHECK(cudaStreamSynchronize(stream.s));

  return sample_events(stream.s, repetitions, launches,
                       [&] { SPARSECC_CUDA_CHECK(cudaGraphLaunch(exec.d, stream.s)); });
}

TimingStats time_direct(const std::function<void(cudaStream_t)>& enqueue_one, const TimingOptions& options) {
  check_positive(options.launches_per_graph, "launches_per_graph");
  check_positive(options.repetitions, "repetitions");
  Stream stream;
  for (int i = 0; i < options.warmup; ++i) enqueue_one(stream.s);
  SPARSECC_CUDA_CHECK(cudaStreamSynchronize(stream.s));
  const int launches = options.launches_per_graph;
  return sample_events(stream.s, options.repetitions, launches, [&] {
    for (int i = 0; i < launches; ++i) enqueue_one(stream.s);
  });
}

double time_steady_us(const std::function<void(cudaStream_t)>& enqueue_one, const TimingOptions& options) {
  return time_steady(enqueue_one, options).median_us;
}

}  // namespace sparsecc::bench
