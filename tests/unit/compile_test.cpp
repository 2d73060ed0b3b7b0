// The CUDA compile route: NVRTC once (cubin and PTX from one compilation); assemble_ptx (nvJitLink)
// on its own; errors with their logs; the ptxas resource report in either log; arch checks.
#include <gtest/gtest.h>

#include <string>

#include "sparsecc/common/error.hpp"
#include "sparsecc/compile/compile_kernel.hpp"
#include "sparsecc/compile/nvrtc.hpp"
#include "sparsecc/compile/resource_usage.hpp"

namespace sparsecc {
namespace {

const char* kKernel = R"(
extern "C" __global__ void scale(const float* x, float* y, int n) {
  __shared__ float s[64];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x % 64] = i < n ? x[i] : 0.0f;
  __syncthreads();
  if (i < n) y[i] = 2.0f * s[63 - threadIdx.x % 64];
}
)";

bool is_elf(const std::vector<unsigned char>& b) {
  return b.size() > 4 && b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F';
}

// Minimal PTX for sm_90 with one empty kernel `k`; `body` goes inside it.
std::string tiny_ptx(const std::string& body, const std::string& target = "sm_90") {
  return ".version 8.0\n.target " + target + "\n.address_size 64\n.visible .entry k()\n{\n" + body +
         "\nret;\n}\n";
}

TEST(Compile, SourceToPtxToCubin) {
  const CudaCompileResult r = compile_cuda(kKernel, "scale.cu");
  EXPECT_TRUE(is_elf(r.cubin));
  EXPECT_NE(r.ptx.find(".target sm_90"), std::string::npos);
  EXPECT_NE(r.ptx.find(".entry scale("), std::string::npos);
  EXPECT_EQ(r.ptx.find('\0'), std::string::npos);
  EXPECT_GT(r.ptx_seconds, 0);
  EXPECT_EQ(r.cubin_seconds, 0);
  EXPECT_EQ(r.seconds, r.ptx_seconds);
  EXPECT_FALSE(parse_ptxas_log(r.log).found) << r.log;  // no report unless asked for
}

TEST(Compile, AssemblesPtxAlone) {
  // The PTX of one compilation for sm_90 is the PTX of a compilation for compute_90.
  const CudaCompileResult src = compile_cuda(kKernel, "scale.cu");
  CudaCompileOptions o;
  o.extra = {kPtxasVerbose, "-DIGNORED=1"};  // NVRTC options do not reach nvJitLink
  const CudaCompileResult r = assemble_ptx(src.ptx, "scale.ptx", o);
  EXPECT_TRUE(is_elf(r.cubin));
  EXPECT_EQ(r.ptx, src.ptx);
  EXPECT_EQ(r.ptx_seconds, 0);
  EXPECT_GT(r.cubin_seconds, 0);
  const ResourceUsage u = parse_ptxas_log(r.log);
  ASSERT_TRUE(u.found) << r.log;
  EXPECT_EQ(u.shared_bytes, 256);
  EXPECT_EQ(u.spill_store_bytes, 0);
  EXPECT_TRUE(is_elf(assemble_ptx(tiny_ptx(""), "tiny.ptx").cubin));
}

TEST(Compile, ResourceReportIsParsedFromTheLog) {
  CudaCompileOptions o;
  o.extra.push_back(kPtxasVerbose);
  const CudaCompileResult r = compile_cuda(kKernel, "scale.cu", o);
  EXPECT_NE(r.log.find("Compiling entry function 'scale' for 'sm_90'"), std::string::npos) << r.log;
  const ResourceUsage u = parse_ptxas_log(r.log);
  ASSERT_TRUE(u.found) << r.log;
  EXPECT_GT(u.registers, 0);
  EXPECT_LE(u.registers, 32);
  EXPECT_EQ(u.stack_frame_bytes, 0);
  EXPECT_EQ(u.spill_store_bytes, 0);
  EXPECT_EQ(u.spill_load_bytes, 0);
  EXPECT_EQ(u.shared_bytes, 256);

  // The nvJitLink spelling and the register cap reach ptxas in both routes.
  o.extra = {"-Xptxas=-v", "--maxrregcount=16"};
  const ResourceUsage capped = parse_ptxas_log(compile_cuda(kKernel, "scale.cu", o).log);
  ASSERT_TRUE(capped.found);
  EXPECT_LE(capped.registers, 16);
  const ResourceUsage assembled = parse_ptxas_log(assemble_ptx(r.ptx, "scale.ptx", o).log);
  ASSERT_TRUE(assembled.found);
  EXPECT_LE(assembled.registers, 16);
}

TEST(Compile, ResourceUsageIsReadFromTheCubinWhenTheLogHasNone) {
  // A kernel without a stack frame and one with a dynamically indexed local array (a 256-byte frame).
  const char* stacked = R"(
extern "C" __global__ void stacked(float* a, int n) {
  float local[64];
  for (int j = 0; j < 64; ++j) local[j] = a[j * n + threadIdx.x];
  float s = 0.0f;
  for (int j = 0; j < n; ++j) s += local[(j * 7 + threadIdx.x) & 63];
  a[threadIdx.x] = s;
}
)";
  CudaCompileOptions o;
  o.extra.push_back(kPtxasVerbose);
  for (const char* source : {kKernel, stacked}) {
    CudaCompileResult r = compile_cuda(source, "k.cu", o);
    const ResourceUsage logged = parse_ptxas_log(r.log), read = read_cubin_resource_usage(r.cubin);
    ASSERT_TRUE(logged.found) << r.log;
    ASSERT_TRUE(read.found);
    EXPECT_TRUE(read.from_cubin);
    EXPECT_FALSE(logged.from_cubin);
    EXPECT_EQ(read.registers, logged.registers);
    EXPECT_EQ(read.stack_frame_bytes, logged.stack_frame_bytes);
    // Spills are known from a cubin only when there is no frame to hold them.
    EXPECT_EQ(read.spill_store_bytes, logged.stack_frame_bytes == 0 ? 0 : -1);
    r.log.clear();  // what the assembler hands back when it prints no report
    const ResourceUsage fallback = resource_usage(r);
    EXPECT_TRUE(fallback.found && fallback.from_cubin);
    EXPECT_EQ(fallback.registers, logged.registers);
  }
  const CudaCompileResult stack = compile_cuda(stacked, "k.cu", o);
  EXPECT_GE(parse_ptxas_log(stack.log).stack_frame_bytes, 256) << stack.log;

  // Not a cubin, a truncated one, a cubin whose attribute list is cut: nothing found, no overread.
  const CudaCompileResult r = compile_cuda(kKernel, "scale.cu", o);
  EXPECT_FALSE(read_cubin_resource_usage({}).found);
  const std::vector<unsigned char> text = {'n', 'o', 't', ' ', 'e', 'l', 'f'};
  EXPECT_FALSE(read_cubin_resource_usage(text).found);
  for (std::size_t n : {std::size_t{16}, r.cubin.size() / 2, r.cubin.size() - 1}) {
    const std::vector<unsigned char> cut(r.cubin.begin(), r.cubin.begin() + static_cast<std::ptrdiff_t>(n));
    (void)read_cubin_resource_usage(cut);  // any answer, but a bounded read
  }
}

TEST(Compile, ParsesNvJitLinkVerboseSummary) {
  // nvJitLink -verbose adds a summary per function of the linked cubin after ptxas's own report.
  const std::string log =
      "ptxas info    : Function properties for k\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 10 registers, used 1 barriers, 256 bytes smem\n"
      "ptxas info    : Compile time = 9.614 ms\n"
      "info    : 0 bytes gmem\n"
      "info    : Function properties for 'k':\n"
      "info    : used 10 registers, used 1 barriers, 0 stack, 1280 bytes smem, 536 bytes cmem[0], 0 bytes "
      "lmem\n";
  const ResourceUsage u = parse_ptxas_log(log);
  EXPECT_TRUE(u.found);
  EXPECT_EQ(u.registers, 10);
  EXPECT_EQ(u.shared_bytes, 256);  // the summary's smem includes the reserved 1 KiB
  const ResourceUsage summary = parse_ptxas_log(
      "info    : used 48 registers, used 0 barriers, 16 stack, 1024 bytes smem, 536 bytes cmem[0], 0 bytes "
      "lmem\n");
  EXPECT_TRUE(summary.found);
  EXPECT_EQ(summary.registers, 48);
  EXPECT_EQ(summary.stack_frame_bytes, 16);
  EXPECT_EQ(summary.shared_bytes, 0);
}

TEST(Compile, NvrtcErrorsCarryTheLog) {
  try {
    compile_cuda("extern \"C\" __global__ void k() { undeclared(); }", "broken.cu");
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_NE(e.log().find("undeclared"), std::string::npos) << e.log();
    EXPECT_NE(std::string(e.what()).find("broken.cu"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("sm_90"), std::string::npos);
  }
}

TEST(Compile, PtxErrorsCarryTheLog) {
  try {
    assemble_ptx(tiny_ptx("bogus.instr %r1;"), "bad.ptx");
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_NE(e.log().find("bogus"), std::string::npos) << e.log();
    EXPECT_NE(std::string(e.what()).find("bad.ptx"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("NVJITLINK_ERROR_PTX_COMPILE"), std::string::npos) << e.what();
  }
  // PTX for a newer architecture than the cubin's.
  try {
    assemble_ptx(tiny_ptx("", "sm_100"), "newer.ptx");
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_FALSE(e.log().empty());
    EXPECT_NE(std::string(e.what()).find("newer.ptx"), std::string::npos);
  }
  EXPECT_THROW(assemble_ptx("", "empty.ptx"), CompileError);
}

// A ptxas option the user gave is the user's error, with the assembler's cause, on both routes; good
// options and none pass.
TEST(Compile, BadPtxasOptionsAreTheUsersError) {
  for (const KernelLanguage language : {KernelLanguage::ptx, KernelLanguage::cuda}) {
    try {
      check_ptxas_options({"-Xptxas=-bogus"}, "sm_90", language);
      FAIL() << "expected a UsageError";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--Xptxas: the assembler refuses -bogus: "), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("bogus'"), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW(check_ptxas_options({"-Xptxas=-O1"}, "sm_90", language));
    EXPECT_NO_THROW(check_ptxas_options({}, "sm_90", language));
  }
}

TEST(Compile, AcceptsArchSpecificSm90a) {
  CudaCompileOptions o;
  o.arch = "sm_90a";
  o.extra.push_back(kPtxasVerbose);
  const CudaCompileResult r = compile_cuda(kKernel, "scale.cu", o);
  EXPECT_TRUE(is_elf(r.cubin));
  EXPECT_NE(r.ptx.find(".target sm_90a"), std::string::npos);
  EXPECT_NE(r.log.find("for 'sm_90a'"), std::string::npos) << r.log;
  EXPECT_TRUE(parse_ptxas_log(r.log).found);
  EXPECT_TRUE(is_elf(assemble_ptx(r.ptx, "scale.ptx", o).cubin));
}

TEST(Compile, RejectsArchitecturesThatAreNotRealAndKnown) {
  for (const char* arch : {"compute_90", "sm_1", "sm_999", "90", "sm_90x", ""}) {
    CudaCompileOptions o;
    o.arch = arch;
    EXPECT_THROW(compile_cuda(kKernel, "scale.cu", o), std::invalid_argument) << arch;
    EXPECT_THROW(assemble_ptx(tiny_ptx(""), "tiny.ptx", o), std::invalid_argument) << arch;
  }
}

TEST(Compile, LineInfoReachesThePtx) {
  CudaCompileOptions o;
  o.line_info = true;
  const CudaCompileResult r = compile_cuda(kKernel, "scale.cu", o);
  EXPECT_NE(r.ptx.find(".loc"), std::string::npos);
  EXPECT_TRUE(is_elf(r.cubin));
}

}  // namespace
}  // namespace sparsecc
