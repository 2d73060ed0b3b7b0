// The data-movement bound of an SpMM problem on this device, measured. Every executor of C = A*B must
// read the rows of B that A uses, read A's weights (4 bytes a nonzero at least, whether they are
// values or immediates in code) and write all of C. A probe kernel moves exactly those bytes, with
// wide coalesced loads and stores that do not wait for the loads, and is timed under the bench's
// protocol (warm L2) with a few grid shapes, the fastest counting. With the FMAs at the device's peak
// rate (SMs x 128 lanes x the SM clock) after the launch floor, it bounds the time of any executor,
// and so the speedup over a baseline that any executor could reach on this device.
#pragma once

#include <cstddef>
#include <cstdint>

#include "bench/baselines.hpp"
#include "bench/suites.hpp"
#include "bench/timing.hpp"
#include "sparsecc/matrix/csr.hpp"

namespace sparsecc::bench {

struct TrafficBound {
  TrafficBytes bytes;   // what the probe moves (traffic_bytes)
  double probe_us = 0;  // the fastest probe
  double fma_us = 0;    // nnz x N FMAs at the peak rate; 0 when the device gives no clock
  double bound_us = 0;  // max(probe_us, floor_us + fma_us)
};

// The probe kernel, compiled (NVRTC) and loaded for the current device `device`.
class TrafficProbe {
 public:
  explicit TrafficProbe(const DeviceInfo& device);

  // The bound of A at N, timed with `timing` (warm L2: its cold_l2 and buffer_sets are ignored);
  // floor_us is the launch floor measured under the same protocol.
  TrafficBound bound(const CsrMatrix& a, std::int64_t n, double floor_us, const TimingOptions& timing) const;
  // The probe's time for one plan's traffic (warm L2).
  double stream_us(const PlanTraffic& traffic, const TimingOptions& timing) const;

 private:
  // The fastest of a few grid shapes reading read_bytes (wrapping round unique_read_bytes) and
  // writing write_bytes.
  double probe_us(std::size_t read_bytes, std::size_t unique_read_bytes, std::size_t write_bytes,
                  const TimingOptions& timing) const;
  DeviceInfo device_;
  Library library_;
  cudaKernel_t kernel_ = nullptr;
};

}  // namespace sparsecc::bench
