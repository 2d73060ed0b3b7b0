// What ptxas reports about a compiled kernel (registers, stack frame, spills, shared memory), read
// from the log of a compile_cuda or assemble_ptx with kPtxasVerbose among CudaCompileOptions::extra.
#pragma once

#include <cstdint>
#include <string>

namespace sparsecc {

// The option that makes ptxas print its resource usage into the log (nvcc/NVRTC spelling;
// compile_cuda and assemble_ptx hand it to nvJitLink as -Xptxas=-v).
inline constexpr const char* kPtxasVerbose = "--ptxas-options=-v";

struct ResourceUsage {
  bool found = false;  // the log held a ptxas resource report
  std::int32_t registers = 0;
  std::int64_t stack_frame_bytes = 0;
  std::int64_t spill_store_bytes = 0;
  std::int64_t spill_load_bytes = 0;
  std::int64_t shared_bytes = 0;  // static shared memory (dynamic shared memory is not reported)
};

// The largest value of each field over all functions the log reports. Reads ptxas -v reports and
// nvJitLink -verbose summaries (registers and stack only: their smem counts reserved memory).
ResourceUsage parse_ptxas_log(const std::string& log);

}  // namespace sparsecc
