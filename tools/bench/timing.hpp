// The bench harness's timing core: checked CUDA runtime calls, device buffers, and steady-state
// timing of one enqueued operation by replaying a CUDA graph of many launches (the protocol of
// /work/shared/docs/techniques/anchors-and-baselines.md, section 6.4).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace sparsecc::bench {

// A failed CUDA runtime, cuBLAS or cuSPARSE call: "file:line: call: ERROR_NAME (description)".
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_cuda_error(const char* call, const std::string& error, const char* file, int line);
void check_cuda(cudaError_t status, const char* call, const char* file, int line);

#define SPARSECC_CUDA_CHECK(call) ::sparsecc::bench::check_cuda((call), #call, __FILE__, __LINE__)

// Device memory owned by the object (freed in the destructor; movable, not copyable).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t bytes() const { return bytes_; }
  void upload(const void* host, std::size_t bytes);
  void download(void* host, std::size_t bytes) const;

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// A non-blocking stream and an event, destroyed with their owner.
struct Stream {
  cudaStream_t s = nullptr;
  Stream() { SPARSECC_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(s); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
};

struct Event {
  cudaEvent_t e = nullptr;
  Event() { SPARSECC_CUDA_CHECK(cudaEventCreate(&e)); }
  ~Event() { cudaEventDestroy(e); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

// An owned handle `d`, released with Destroy(d) when set (reset() releases it early):
// Owned<cudaLibrary_t, cudaLibraryUnload>, the cuBLASLt and cuSPARSE descriptors of vendor_handles.hpp.
template <class T, auto Destroy>
struct Owned {
  T d = nullptr;
  Owned() = default;
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() { reset(); }
  void reset() {
    if (d) Destroy(d);
    d = nullptr;
  }
};

// A loaded CUDA library (cudaLibraryLoadData of a cubin), unloaded with its owner.
using Library = Owned<cudaLibrary_t, cudaLibraryUnload>;

struct TimingOptions {
  int warmup = 3;                // direct enqueues before the graph is captured
  int launches_per_graph = 100;  // consecutive enqueues captured in one graph
  int repetitions = 21;          // graph replays, each one sample
  bool cold_l2 = false;          // rotate among enough buffer sets to exceed the L2 cache
  int buffer_sets = 1;           // sets the caller rotates among; the graph holds at least this many
  double max_seconds = 3.0;      // slow operations get fewer launches and replays to stay near this
};

struct TimingStats {
  std::vector<double> samples_us;  // per-launch µs of each replay, in the order measured
  int launches_per_sample = 0;
  double median_us = 0;
  double min_us = 0;  // a noise-free lower bound, not a typical time
  double max_us = 0;
  double spread = 0;  // (max - min) / median
};

// median_us, min_us, max_us, spread, launches_per_sample and samples_us, for result files.
nlohmann::json timing_json(const TimingStats& stats);

// Buffer sets to rotate among so that what one set touches (`bytes_per_set`) times the sets is at
// least twice the L2 cache: 1 unless `cold_l2`.
int rotation_sets(std::size_t bytes_per_set, std::size_t l2_bytes, bool cold_l2);

// Warms up, captures a graph of max(launches_per_graph, buffer_sets) calls of `enqueue_one` on a
// non-blocking stream, replays it `repetitions` times between events and returns the per-launch
// statistics. `enqueue_one` must only enqueue work on the stream it is given (graph-capturable).
TimingStats time_steady(const std::function<void(cudaStream_t)>& enqueue_one, const TimingOptions& options);

// The same protocol without a graph, for work that cannot be captured: warm-up, then `repetitions`
// samples of launches_per_graph direct enqueues between events.
TimingStats time_direct(const std::function<void(cudaStream_t)>& enqueue_one, const TimingOptions& options);

// The median of time_steady, in µs per launch.
double time_steady_us(const std::function<void(cudaStream_t)>& enqueue_one, const TimingOptions& options);

// Median, min, max and spread of samples (not empty).
TimingStats summarize(std::vector<double> samples_us, int launches_per_sample);

}  // namespace sparsecc::bench
