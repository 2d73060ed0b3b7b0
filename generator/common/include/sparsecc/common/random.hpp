// A small, fully specified pseudo-random generator (splitmix64, Steele, Lea & Flood 2014), so data
// generated from a seed is identical on every platform and compiler (std distributions are not).
#pragma once

#include <cstdint>

namespace sparsecc {

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1) on a grid of 2^-23: every value is exactly representable in float32.
  double uniform_pm1() {
    return static_cast<double>(static_cast<std::int64_t>(next() >> 40) - (1 << 23)) / (1 << 23);
  }

 private:
  std::uint64_t state_;
};

}  // namespace sparsecc
