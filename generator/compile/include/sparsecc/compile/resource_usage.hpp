// What ptxas reports about a compiled kernel (registers, stack frame, spills, shared memory), read
// from the NVRTC log of a compilation with kPtxasVerbose among CudaCompileOptions::extra.
#pragma once

#include <cstdint>
#include <string>

namespace sparsecc {

// The NVRTC option that makes ptxas print its resource usage into the program log.
inline constexpr const char* kPtxasVerbose = "--ptxas-options=-v";

struct ResourceUsage {
  bool found = false;  // the log held a ptxas resource report
  std::int32_t registers = 0;
  std::int64_t stack_frame_bytes = 0;
  std::int64_t spill_store_bytes = 0;
  std::int64_t spill_load_bytes = 0;
  std::int64_t shared_bytes = 0;  // static shared memory (dynamic shared memory is not reported)
};

// The largest value of each field over all functions the log reports.
ResourceUsage parse_ptxas_log(const std::string& log);

}  // namespace sparsecc
