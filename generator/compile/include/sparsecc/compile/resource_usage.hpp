// What ptxas reports about a compiled kernel (registers, stack frame, spills, shared memory), read
// from the log of a compile_cuda or assemble_ptx with kPtxasVerbose among CudaCompileOptions::extra.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "sparsecc/compile/nvrtc.hpp"

namespace sparsecc {

// The option that makes ptxas print its resource usage into the log (nvcc/NVRTC spelling;
// compile_cuda and assemble_ptx hand it to nvJitLink as -Xptxas=-v).
inline constexpr const char* kPtxasVerbose = "--ptxas-options=-v";

struct ResourceUsage {
  bool found = false;       // the log held a ptxas resource report, or the cubin its attributes
  bool from_cubin = false;  // read from the cubin: registers and stack frame only (see below)
  std::int32_t registers = 0;
  std::int64_t stack_frame_bytes = 0;
  std::int64_t spill_store_bytes = 0;
  std::int64_t spill_load_bytes = 0;
  std::int64_t shared_bytes = 0;  // static shared memory (dynamic shared memory is not reported)
};

// The largest value of each field over all functions the log reports. Reads ptxas -v reports and
// nvJitLink -verbose summaries (registers and stack only: their smem counts reserved memory).
ResourceUsage parse_ptxas_log(const std::string& log);

// The same read from a cubin's .nv.info attributes (register count and frame size per function,
// the largest of each). A cubin does not record spills, which live in the stack frame: the spill
// fields are 0 when every frame is 0 and -1 (unknown) otherwise; shared_bytes stays 0. found is
// false when the bytes are not a cubin with those attributes.
ResourceUsage read_cubin_resource_usage(std::span<const unsigned char> cubin);

// What a compile used: its log's ptxas report when there is one, otherwise the cubin's attributes
// (the assembler does not always print its report, e.g. for a kernel it has built before).
ResourceUsage resource_usage(const CudaCompileResult& compiled);

}  // namespace sparsecc
