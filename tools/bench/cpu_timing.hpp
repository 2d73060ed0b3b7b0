// Wall-clock timing for the CPU benches (no CUDA): the median of repeated runs after warm-up.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace sparsecc::bench {

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The median of `reps` timed calls of f (µs) after `warmups` untimed ones.
template <class F>
double cpu_median_us(F&& f, int reps, int warmups = 1) {
  for (int i = 0; i < warmups; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < std::max(reps, 1); ++i) {
    const double t0 = now_s();
    f();
    t.push_back(1e6 * (now_s() - t0));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace sparsecc::bench
