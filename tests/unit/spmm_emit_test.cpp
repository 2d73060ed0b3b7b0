// The SpMM CUDA emitter: exact literals, deterministic text, the unrolled structure, and NVRTC
// compiles for sm_90 with no spills and no stack frame (ptxas resource report).
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cstdlib>
#include <regex>

#include "sparsecc/common/error.hpp"
#include "sparsecc/compile/nvrtc.hpp"
#include "sparsecc/compile/resource_usage.hpp"
#include "sparsecc/emit/spmm_cuda.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/io/load.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

// Random matrices with every fifth row (from row 2) empty.
CsrMatrix random_csr(std::int64_t m, std::int64_t k, double density, std::uint64_t seed) {
  return test::random_csr(m, k, density, seed, 5, 2);
}

using test::count;

TEST(SpmmEmit, FloatLiteralsAreExact) {
  EXPECT_EQ(cuda_float_literal(3.0f), "0x1.8p+1f");
  EXPECT_EQ(cuda_float_literal(-0.0f), "-0x0p+0f");
  EXPECT_EQ(cuda_float_literal(0.0f), "0x0p+0f");
  EXPECT_EQ(cuda_float_literal(std::bit_cast<float>(0x00000001u)), "__int_as_float(0x1)");
  for (float v : {FLT_MAX, -FLT_MAX, FLT_MIN, 0.1f, -1.0f / 3.0f, 16777217.0f}) {
    const std::string s = cuda_float_literal(v);
    ASSERT_EQ(s.back(), 'f');
    EXPECT_EQ(std::strtof(s.substr(0, s.size() - 1).c_str(), nullptr), v) << s;
  }
}

TEST(SpmmEmit, SourceIsDeterministicAndUnrolled) {
  const CsrMatrix a = random_csr(22, 40, 0.2, 1);
  SpmmOptions o;
  o.rows_per_block = 3;
  const SpmmPlan p = plan_spmm(a, {22, 40, 49, SpmmNMode::fixed, true, true, DType::f32}, o);
  const EmittedKernel e = emit_spmm_cuda(p, a);
  EXPECT_EQ(e.source, emit_spmm_cuda(p, a).source);
  EXPECT_EQ(e.kernel_name, "sparsecc_spmm");
  EXPECT_TRUE(e.packed_values.empty());
  EXPECT_EQ(count(e.source, "__ldg(b + "), static_cast<std::size_t>(spmm_plan_loads(p)));
  EXPECT_EQ(count(e.source, "__fmaf_rn(x, ") + count(e.source, "__fmul_rn(x, "),
            static_cast<std::size_t>(a.nnz()));
  EXPECT_EQ(count(e.source, "\n    case "), p.layout.blocks.size());
  EXPECT_NE(e.source.find("const long long ld = 49;"), std::string::npos);
  EXPECT_NE(e.source.find("__ldg(bias + "), std::string::npos);
  EXPECT_NE(e.source.find(" = fmaxf(a"), std::string::npos);
  EXPECT_EQ(e.source.find("values +"), std::string::npos);
  EXPECT_FALSE(std::regex_search(e.source, std::regex(R"(\ba\[)")));  // accumulators are named scalars

  // A programmatic plan (sm_90 on, under __CUDA_ARCH__): one wait before the block rows' cases, and
  // every case's epilogue lets the next grid launch (programmatic_trigger); a plan without the trigger
  // only waits, and a plan that is not programmatic does neither.
  ASSERT_TRUE(p.hints.programmatic);
  ASSERT_TRUE(p.hints.programmatic_trigger);
  EXPECT_EQ(count(e.source, "  if (true) sparsecc_wait_for_predecessor();\n"), 1u);
  EXPECT_LT(e.source.find("sparsecc_wait_for_predecessor();\n"), e.source.find("switch (blockIdx.y)"));
  EXPECT_EQ(count(e.source, "      sparsecc_launch_dependents();\n"), p.layout.blocks.size());
  EXPECT_EQ(count(e.source, "#if __CUDA_ARCH__ >= 900"), 2u);
  SpmmPlan wait_only = p;
  wait_only.hints.programmatic_trigger = false;
  const std::string wait_text = emit_spmm_cuda(wait_only, a).source;
  EXPECT_EQ(count(wait_text, "  if (true) sparsecc_wait_for_predecessor();\n"), 1u);
  EXPECT_EQ(count(wait_text, "sparsecc_launch_dependents();\n"), 0u);
  SpmmPlan plain = wait_only;
  plain.hints.programmatic = false;
  const std::string plain_text = emit_spmm_cuda(plain, a).source;
  EXPECT_EQ(count(plain_text, "  if (false) sparsecc_wait_for_predecessor();\n"), 1u);
  EXPECT_EQ(count(plain_text, "sparsecc_launch_dependents();\n"), 0u);

  SpmmPlan other = p;
  other.hints.kernel_name = "layer2";
  EXPECT_NE(emit_spmm_cuda(other, a).source, e.source);
  other.hints.kernel_name = "2bad";
  EXPECT_THROW(emit_spmm_cuda(other, a), UsageError);
}

TEST(SpmmEmit, StreamedModeReadsPackedValuesInOrder) {
  const CsrMatrix a = random_csr(10, 30, 0.3, 2);
  SpmmOptions o;
  o.value_mode = SpmmValueMode::streamed;
  o.groups = 2;
  const SpmmPlan p = plan_spmm(a, {10, 30, 64, SpmmNMode::runtime, false, false, DType::f32}, o);
  const EmittedKernel e = emit_spmm_cuda(p, a);
  EXPECT_EQ(e.packed_values, spmm_kernel_values(p, a));
  EXPECT_EQ(e.packed_values.size(), static_cast<std::size_t>(a.nnz()));
  EXPECT_NE(e.source.find("const long long ld = n;"), std::string::npos);
  EXPECT_NE(e.source.find("__syncthreads()"), std::string::npos);
  std::size_t next = 0;
  const std::regex value_read(R"(values \+ (\d+)\))");
  for (auto it = std::sregex_iterator(e.source.begin(), e.source.end(), value_read);
       it != std::sregex_iterator(); ++it)
    EXPECT_EQ(std::stoul((*it)[1].str()), next++);
  EXPECT_EQ(next, static_cast<std::size_t>(a.nnz()));
}

TEST(SpmmEmit, ParsesPtxasReports) {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
      "ptxas info    : Function properties for k\n"
      "    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 1 barriers, 256 bytes smem, 388 bytes cmem[0]\n";
  const ResourceUsage u = parse_ptxas_log(log);
  EXPECT_TRUE(u.found);
  EXPECT_EQ(u.registers, 40);
  EXPECT_EQ(u.stack_frame_bytes, 8);
  EXPECT_EQ(u.spill_store_bytes, 4);
  EXPECT_EQ(u.spill_load_bytes, 12);
  EXPECT_EQ(u.shared_bytes, 256);
  EXPECT_FALSE(parse_ptxas_log("nothing here").found);
}

// Compiles the plan's kernel for sm_90, prints compile time, cubin bytes per nonzero and the ptxas
// report, and expects no spills and no stack frame.
void expect_clean_compile(const SpmmPlan& p, const CsrMatrix& a, const std::string& label) {
  const EmittedKernel e = emit_spmm_cuda(p, a);
  CudaCompileOptions options;
  options.extra.push_back(kPtxasVerbose);
  const CudaCompileResult r = compile_cuda(e.source, e.kernel_name + ".cu", options);
  const ResourceUsage u = parse_ptxas_log(r.log);
  ASSERT_TRUE(u.found) << r.log;
  std::printf(
      "[ spmm    ] %-34s nnz %7lld  Ny %2d T %3d Gy %d %-8s compile %6.2f s  cubin %8zu B (%.1f B/nnz)  "
      "%d regs, stack %lld, spills %lld/%lld\n",
      label.c_str(), static_cast<long long>(a.nnz()), p.layout.rows_per_block, p.layout.n_tile,
      p.layout.groups, to_string(p.value_mode()), r.seconds, r.cubin.size(),
      a.nnz() ? static_cast<double>(r.cubin.size()) / static_cast<double>(a.nnz()) : 0.0, u.registers,
      static_cast<long long>(u.stack_frame_bytes), static_cast<long long>(u.spill_store_bytes),
      static_cast<long long>(u.spill_load_bytes));
  EXPECT_EQ(u.stack_frame_bytes, 0) << label;
  EXPECT_EQ(u.spill_store_bytes, 0) << label;
  EXPECT_EQ(u.spill_load_bytes, 0) << label;
  // Rolled kernels hold a batch of records and loads besides the accumulators: their cap binds.
  EXPECT_LE(u.registers, p.value_mode() == SpmmValueMode::rolled ? p.hints.max_registers
                                                                 : p.hints.estimated_registers + 16)
      << label;
}

TEST(SpmmEmit, NvrtcCompilesSmallPlansWithoutSpills) {
  const CsrMatrix a = random_csr(37, 64, 0.15, 3);
  const CsrMatrix zero = random_csr(9, 5, 0.0, 4);
  SpmmOptions o;
  expect_clean_compile(plan_spmm(a, {37, 64, 49, SpmmNMode::fixed, false, false, DType::f32}, o), a,
                       "random fixed");
  expect_clean_compile(plan_spmm(zero, {9, 5, 1, SpmmNMode::fixed, true, true, DType::f32}, o), zero,
                       "all-zero N=1 (step lanes)");
  o.value_mode = SpmmValueMode::baked;
  expect_clean_compile(plan_spmm(zero, {9, 5, 1, SpmmNMode::fixed, true, true, DType::f32}, o), zero,
                       "all-zero N=1 unrolled");
  o.groups = 3;
  o.n_tile = 32;
  o.rows_per_block = 8;
  o.value_mode = SpmmValueMode::streamed;
  expect_clean_compile(plan_spmm(a, {37, 64, 100, SpmmNMode::runtime, true, true, DType::f32}, o), a,
                       "random runtime Gy=3 streamed");
  o = {};
  o.rows_per_block = 16;
  o.row_split = SpmmRowSplit::balanced;
  expect_clean_compile(plan_spmm(a, {37, 64, 49, SpmmNMode::fixed, true, false, DType::f32}, o), a,
                       "random balanced Ny=16");
  o.cols_per_thread = 2;
  o.groups = 3;
  expect_clean_compile(plan_spmm(a, {37, 64, 50, SpmmNMode::fixed, true, true, DType::f32}, o), a,
                       "random balanced Ny=16 pairs Gy=3");
  o.value_mode = SpmmValueMode::streamed;
  expect_clean_compile(plan_spmm(a, {37, 64, 50, SpmmNMode::fixed, false, false, DType::f32}, o), a,
                       "random balanced Ny=16 pairs streamed");
}

TEST(SpmmEmit, NvrtcCompilesRealDlmcLayerWithoutSpills) {
  SPARSECC_DATA_OR_SKIP(file, "dlmc/rn50/magnitude_pruning/0.9/bottleneck_2_block_group2_3_1.smtx.gz");
  const CsrMatrix a = load_matrix(file.string());  // 128 x 1152, 14,745 nonzeros
  expect_clean_compile(plan_spmm(a, {a.rows, a.cols, 196, SpmmNMode::fixed, true, true, DType::f32}, {}), a,
                       "rn50 0.9 bottleneck_2_block_group2_3_1");
}

}  // namespace
}  // namespace sparsecc
