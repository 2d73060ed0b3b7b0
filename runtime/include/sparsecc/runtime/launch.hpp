// One kernel launch of an executor's launch list, as the generator schedules it (the Hines plan's
// schedule, sparsecc/plan/hines_schedule.hpp) and the runtime reads it from a bundle's metadata
// (HinesMetadata::launches, sparsecc/runtime/bundle.hpp): one type for both sides. Plain C++ and
// nlohmann_json only (the CUDA-free format library, sparsecc_bundle_format).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sparsecc::rt {

// A kernel argument: a pointer (`buffer` "d", "u", "l", "b", "x" with `value` 0, or "workspace",
// "tables" with `value` bytes into it) or an int (`buffer` "i32", the int `value`).
struct LaunchArg {
  std::string buffer;
  std::int64_t value = 0;
  bool operator==(const LaunchArg&) const = default;
};

struct KernelLaunch {
  std::string kernel;
  std::int64_t grid = 1, block = 1;  // 1-D
  std::int64_t shared_bytes = 0;     // dynamic shared memory of a block (metadata key absent: 0)
  std::vector<LaunchArg> args;
  bool operator==(const KernelLaunch&) const = default;
};

// {"kernel", "grid", "block", "args": [[buffer, value], ...]} and "shared_bytes" when not 0 (absent
// in the launches of earlier generators). The bundle reader validates what it reads back.
nlohmann::json to_json(const KernelLaunch& launch);

}  // namespace sparsecc::rt
