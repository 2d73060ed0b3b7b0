// The direct PTX emitter: exact immediates, deterministic text, one load per step and one multiply
// or FMA per nonzero, value reads in packed order, both layouts (inline and split into separately
// assembled case functions), and nvJitLink assembling them for sm_90 with no spills and no stack
// frame (the split layout's call may take 8 bytes of stack).
#include "sparsecc/emit/spmm_ptx.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cstdio>
#include <map>
#include <regex>

#include "sparsecc/common/error.hpp"
#include "sparsecc/compile/compile_kernel.hpp"
#include "sparsecc/compile/resource_usage.hpp"
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

// A small inline plan of `a` (22 x 40): 3 rows a block row, 2 groups, fixed N = 49, bias and ReLU.
SpmmPlan grouped_plan(const CsrMatrix& a) {
  SpmmOptions o;
  o.rows_per_block = 3;
  o.groups = 2;
  return plan_spmm(a, {22, 40, 49, SpmmNMode::fixed, true, true, DType::f32}, o);
}

TEST(SpmmPtx, FloatImmediatesAreExactBitPatterns) {
  EXPECT_EQ(ptx_float_literal(1.0f), "0f3F800000");
  EXPECT_EQ(ptx_float_literal(-0.0f), "0f80000000");
  EXPECT_EQ(ptx_float_literal(std::bit_cast<float>(0x00000001u)), "0f00000001");
  EXPECT_EQ(ptx_float_literal(-2.5f), "0fC0200000");
}

TEST(SpmmPtx, TextIsDeterministicAndUnrolled) {
  const CsrMatrix a = random_csr(22, 40, 0.2, 1);
  const SpmmPlan p = grouped_plan(a);
  const EmittedKernel e = emit_spmm_ptx(p, a);
  EXPECT_EQ(e.language, KernelLanguage::ptx);
  EXPECT_EQ(e.source, emit_spmm_ptx(p, a).source);
  EXPECT_TRUE(e.modules.empty());  // small: the inline layout
  EXPECT_TRUE(e.packed_values.empty());
  EXPECT_NE(e.source.find(".target sm_90\n"), std::string::npos);
  EXPECT_NE(e.source.find(".visible .entry sparsecc_spmm("), std::string::npos);
  EXPECT_EQ(count(e.source, "ld.global.nc.f32 %x"), static_cast<std::size_t>(spmm_plan_loads(p)));
  EXPECT_EQ(count(e.source, "fma.rn.f32 %a") + count(e.source, "mul.rn.f32 %a"),
            static_cast<std::size_t>(a.nnz()));
  EXPECT_EQ(count(e.source, "max.f32 %a"), static_cast<std::size_t>(a.rows));
  EXPECT_EQ(count(e.source, "st.global.f32"), static_cast<std::size_t>(a.rows));
  EXPECT_NE(e.source.find("bar.sync 0;"), std::string::npos);
  // B at immediate offsets k * N * 4 from the thread's column.
  EXPECT_TRUE(std::regex_search(e.source, std::regex(R"(ld\.global\.nc\.f32 %x\d+, \[%b\+\d+\];)")));
  EXPECT_EQ(emit_spmm_ptx(p, a, gpu_target("sm_90a")).source.find(".target sm_90a\n") != std::string::npos,
            true);
  EXPECT_THROW(emit_spmm_ptx(p, a, gpu_target("sm_91")), UsageError);
  SpmmPlan other = p;
  other.hints.kernel_name = "2bad";
  EXPECT_THROW(emit_spmm_ptx(other, a), UsageError);
}

TEST(SpmmPtx, StreamedModeReadsPackedValuesInOrder) {
  const CsrMatrix a = random_csr(10, 30, 0.3, 2);
  SpmmOptions o;
  o.value_mode = SpmmValueMode::streamed;
  o.groups = 2;
  const SpmmPlan p = plan_spmm(a, {10, 30, 64, SpmmNMode::runtime, false, false, DType::f32}, o);
  const EmittedKernel e = emit_spmm_ptx(p, a);
  EXPECT_EQ(e.packed_values, spmm_kernel_values(p, a));
  EXPECT_NE(e.source.find("ld.param.u32 %n32"), std::string::npos);
  std::size_t next = 0;
  const std::regex value_read(R"(\[%vals\+(\d+)\])");
  for (auto it = std::sregex_iterator(e.source.begin(), e.source.end(), value_read);
       it != std::sregex_iterator(); ++it)
    EXPECT_EQ(std::stoul((*it)[1].str()), 4 * next++);
  EXPECT_EQ(next, static_cast<std::size_t>(a.nnz()));
}

TEST(SpmmPtx, LargePlansUseTheSplitLayout) {
  const CsrMatrix a = random_csr(1000, 1000, 0.06, 3);  // about 48,000 nonzeros
  const SpmmPlan p = plan_spmm(a, {a.rows, a.cols, 49, SpmmNMode::fixed, false, false, DType::f32}, {});
  const EmittedKernel e = emit_spmm_ptx(p, a);
  ASSERT_GE(e.modules.size(), 3u);
  EXPECT_NE(e.modules[0].find(".visible .entry sparsecc_spmm("), std::string::npos);
  EXPECT_EQ(count(e.modules[0], ".extern .func sparsecc_spmm_case"), p.layout.blocks.size());
  std::size_t functions = 0, fmas = 0, group_tests = 0;
  for (std::size_t i = 1; i < e.modules.size(); ++i) {
    EXPECT_EQ(e.modules[i].find(".entry"), std::string::npos);
    // Groups are reached by compare and branch: no jump table in constant bank 2 (see links_cleanly).
    EXPECT_EQ(count(e.modules[i], "brx.idx"), 0u);
    group_tests += count(e.modules[i], "setp.ne.u32 %p, %grp, 1;");
    functions += count(e.modules[i], ".visible .func sparsecc_spmm_case");
    fmas += count(e.modules[i], "fma.rn.f32 %a") + count(e.modules[i], "mul.rn.f32 %a");
  }
  EXPECT_EQ(functions, p.layout.blocks.size());
  EXPECT_EQ(group_tests, p.layout.blocks.size());  // every block row has steps in group 1
  EXPECT_EQ(fmas, static_cast<std::size_t>(a.nnz()));
  // The one-module form holds the same functions, defined, and no extern declarations.
  EXPECT_EQ(count(e.source, ".visible .func sparsecc_spmm_case"), p.layout.blocks.size());
  EXPECT_EQ(count(e.source, ".extern .func"), 0u);
  ASSERT_GT(p.layout.groups, 1);
  EXPECT_EQ(e.source, emit_spmm_ptx(p, a).source);
  // Seven register parameters, no return, and the split layout's register cap.
  EXPECT_EQ(count(e.modules[1],
                  "(.param .b64 p_b, .param .b64 p_c, .param .b64 p_bias, .param .b64 p_vals, "
                  ".param .b64 p_ldb, .param .b32 p_info, .param .b32 p_redr) .noreturn"),
            count(e.modules[1], ".visible .func"));
  EXPECT_EQ(e.max_registers,
            std::min(p.hints.max_registers + kSpmmPtxSplitExtraRegisters, 65536 / p.layout.block_x / 8 * 8));
}

// Programmatic plans (the inspector's rule: every fp32 plan, with the trigger up to
// kSpmmProgrammaticTriggerInstructions): for sm_90 on the kernel waits for its predecessor once,
// before its first load of B, and every block row's epilogue lets the next grid launch
// (programmatic_trigger), in both layouts; a plan without the trigger only waits (the rule's plans
// above the limit); sm_80 and sm_89 kernels, and plans with programmatic launches off, have neither.
TEST(SpmmPtx, ProgrammaticPlansWaitForTheirPredecessor) {
  const CsrMatrix a = random_csr(22, 40, 0.2, 1);
  const SpmmPlan p = grouped_plan(a);
  ASSERT_TRUE(p.hints.programmatic);
  ASSERT_TRUE(p.hints.programmatic_trigger);
  for (const char* arch : {"sm_90", "sm_90a", "sm_100"}) {
    const std::string text = emit_spmm_ptx(p, a, gpu_target(arch)).source;
    EXPECT_EQ(count(text, "griddepcontrol.wait;"), 1u) << arch;
    EXPECT_LT(text.find("griddepcontrol.wait;"), text.find("ld.global.nc")) << arch;
    EXPECT_EQ(count(text, "griddepcontrol.launch_dependents;"), p.layout.blocks.size()) << arch;
  }
  for (const char* arch : {"sm_80", "sm_89"})
    EXPECT_EQ(emit_spmm_ptx(p, a, gpu_target(arch)).source.find("griddepcontrol"), std::string::npos) << arch;
  SpmmPlan wait_only = p;
  wait_only.hints.programmatic_trigger = false;
  const std::string wait_text = emit_spmm_ptx(wait_only, a).source;
  EXPECT_EQ(count(wait_text, "griddepcontrol.wait;"), 1u);
  EXPECT_EQ(count(wait_text, "griddepcontrol.launch_dependents;"), 0u);
  // The split layout (runtime N splits above 4000 instructions): the entry waits, the case
  // functions let the next grid launch.
  const CsrMatrix mid = random_csr(300, 300, 0.1, 4);
  SpmmOptions trigger;
  trigger.programmatic = SpmmProgrammatic::trigger;
  const SpmmPlan r =
      plan_spmm(mid, {mid.rows, mid.cols, 64, SpmmNMode::runtime, false, false, DType::f32}, trigger);
  ASSERT_TRUE(r.hints.programmatic_trigger);
  const EmittedKernel split = emit_spmm_ptx(r, mid);
  ASSERT_GE(split.modules.size(), 2u);
  EXPECT_EQ(count(split.modules[0], "griddepcontrol.wait;"), 1u);
  EXPECT_LT(split.modules[0].find("griddepcontrol.wait;"), split.modules[0].find("call.uni"));
  std::size_t triggers = 0;
  for (std::size_t i = 1; i < split.modules.size(); ++i) {
    EXPECT_EQ(count(split.modules[i], "griddepcontrol.wait;"), 0u);
    triggers += count(split.modules[i], "griddepcontrol.launch_dependents;");
  }
  EXPECT_EQ(triggers, r.layout.blocks.size());
  // Above kSpmmProgrammaticTriggerInstructions: the wait alone; with programmatic launches off, neither.
  const SpmmProblem big_problem{mid.rows, mid.cols, 100, SpmmNMode::fixed, false, false, DType::f32};
  const SpmmPlan q = plan_spmm(mid, big_problem, {});
  ASSERT_GT(q.hints.estimated_instructions, kSpmmProgrammaticTriggerInstructions);
  const std::string q_text = emit_spmm_ptx(q, mid).source;
  EXPECT_EQ(count(q_text, "griddepcontrol.wait;"), 1u);
  EXPECT_EQ(count(q_text, "griddepcontrol.launch_dependents;"), 0u);
  SpmmOptions off;
  off.programmatic = SpmmProgrammatic::off;
  EXPECT_EQ(emit_spmm_ptx(plan_spmm(mid, big_problem, off), mid).source.find("griddepcontrol"),
            std::string::npos);
}

// No spills and no stack frame in either layout, and at most the layout's register cap (for split
// kernels the plan's plus kSpmmPtxSplitExtraRegisters, within what lets a block fit the SM).
void expect_clean_assembly(const SpmmPlan& p, const CsrMatrix& a, const std::string& label) {
  const EmittedKernel e = emit_spmm_ptx(p, a);
  CudaCompileOptions options;
  options.extra.push_back(kPtxasVerbose);
  const CudaCompileResult r = compile_kernel(e, label, options);
  const ResourceUsage u = parse_ptxas_log(r.log);
  ASSERT_TRUE(u.found) << r.log;
  std::printf(
      "[ spmm ptx] %-30s nnz %7lld  Ny %2d T %3d Gy %d %-8s %s  assemble %6.2f s  cubin %8zu B (%.1f B/nnz)  "
      "%d regs, stack %lld, spills %lld/%lld\n",
      label.c_str(), static_cast<long long>(a.nnz()), p.layout.rows_per_block, p.layout.n_tile,
      p.layout.groups, p.value_mode() == SpmmValueMode::baked ? "baked" : "streamed",
      e.modules.empty() ? "inline" : "split ", r.seconds, r.cubin.size(),
      a.nnz() ? static_cast<double>(r.cubin.size()) / static_cast<double>(a.nnz()) : 0.0, u.registers,
      static_cast<long long>(u.stack_frame_bytes), static_cast<long long>(u.spill_store_bytes),
      static_cast<long long>(u.spill_load_bytes));
  EXPECT_FALSE(r.cubin.empty());
  EXPECT_EQ(r.ptx, e.source);
  EXPECT_LE(u.registers, e.modules.empty() ? p.hints.max_registers : spmm_ptx_split_registers(p)) << label;
  EXPECT_LE(u.registers, 65536 / p.layout.block_x) << label;
  EXPECT_EQ(u.stack_frame_bytes, 0) << label;
  EXPECT_EQ(u.spill_store_bytes, 0) << label;
  EXPECT_EQ(u.spill_load_bytes, 0) << label;
}

TEST(SpmmPtx, NvJitLinkAssemblesPlansWithoutSpills) {
  const CsrMatrix a = random_csr(37, 64, 0.15, 3);
  const CsrMatrix zero = random_csr(9, 5, 0.0, 4);
  SpmmOptions o;
  expect_clean_assembly(plan_spmm(a, {37, 64, 49, SpmmNMode::fixed, false, false, DType::f32}, o), a,
                        "random fixed");
  SpmmOptions unrolled = o;  // N = 1 plans rolled by default: CUDA C++ only
  unrolled.value_mode = SpmmValueMode::baked;
  expect_clean_assembly(plan_spmm(zero, {9, 5, 1, SpmmNMode::fixed, true, true, DType::f32}, unrolled), zero,
                        "all-zero N=1");
  o.groups = 3;
  o.n_tile = 32;
  o.rows_per_block = 8;
  o.value_mode = SpmmValueMode::streamed;
  expect_clean_assembly(plan_spmm(a, {37, 64, 100, SpmmNMode::runtime, true, true, DType::f32}, o), a,
                        "random runtime Gy=3 streamed");
  // Runtime N, one function of ~13k nonzeros and 64 block rows behind one jump table.
  const CsrMatrix wide = random_csr(256, 512, 0.1, 15);
  o = {};
  expect_clean_assembly(plan_spmm(wide, {256, 512, 196, SpmmNMode::runtime, true, true, DType::f32}, o), wide,
                        "random 256x512 runtime split");
  expect_clean_assembly(plan_spmm(wide, {256, 512, 196, SpmmNMode::fixed, true, true, DType::f32}, o), wide,
                        "random 256x512 fixed inline");
  const CsrMatrix big = random_csr(1000, 1000, 0.06, 5);
  o = {};
  o.groups = 2;
  expect_clean_assembly(
      plan_spmm(big, {big.rows, big.cols, 196, SpmmNMode::fixed, true, true, DType::f32}, o), big,
      "random 1000x1000 split");
  o.groups = 4;  // 512 threads a block
  expect_clean_assembly(
      plan_spmm(big, {big.rows, big.cols, 196, SpmmNMode::fixed, true, true, DType::f32}, o), big,
      "random 1000x1000 split 512 thr");
  o.max_registers = 200;  // above what a block of 512 threads can have (128): refused by the planner
  EXPECT_THROW(plan_spmm(big, {big.rows, big.cols, 196, SpmmNMode::fixed, true, true, DType::f32}, o),
               UsageError);
  o.max_registers = 128;
  expect_clean_assembly(
      plan_spmm(big, {big.rows, big.cols, 196, SpmmNMode::fixed, true, true, DType::f32}, o), big,
      "random 1000x1000 split 512 thr r128");
  // Two columns a thread: inline and split layouts, baked and streamed, reduced through shared memory.
  o = {};
  o.cols_per_thread = 2;
  o.groups = 3;
  expect_clean_assembly(plan_spmm(a, {37, 64, 50, SpmmNMode::fixed, true, true, DType::f32}, o), a,
                        "pairs Gy=3");
  o.groups = 2;
  o.rows_per_block = 16;
  expect_clean_assembly(
      plan_spmm(big, {big.rows, big.cols, 196, SpmmNMode::fixed, true, true, DType::f32}, o), big,
      "pairs 1000x1000 split Ny=16");
  o.value_mode = SpmmValueMode::streamed;
  expect_clean_assembly(
      plan_spmm(big, {big.rows, big.cols, 196, SpmmNMode::fixed, false, false, DType::f32}, o), big,
      "pairs 1000x1000 split streamed");
}

// Two columns a thread load B and store C as 64-bit pairs and keep a second accumulator a row; the
// thread's first column is even. Plans that cannot take pairs are refused.
TEST(SpmmPtx, PairsLoadAndStoreTwoColumns) {
  const CsrMatrix a = random_csr(37, 64, 0.15, 3);
  SpmmOptions o;
  o.cols_per_thread = 2;
  o.groups = 2;
  const SpmmPlan p = plan_spmm(a, {37, 64, 50, SpmmNMode::fixed, true, false, DType::f32}, o);
  EXPECT_TRUE(p.fp32_pairs());
  EXPECT_EQ(p.block_columns(), 2 * p.layout.n_tile);
  const std::string s = emit_spmm_ptx(p, a).source;
  EXPECT_EQ(s, emit_spmm_ptx(p, a).source);
  EXPECT_NE(s.find("shl.b64 %col, %col, 1;"), std::string::npos);
  EXPECT_NE(s.find("ld.global.nc.v2.f32 {%x0, %z0}"), std::string::npos);
  EXPECT_NE(s.find("st.shared.v2.f32"), std::string::npos);
  EXPECT_NE(s.find("ld.shared.v2.f32 {%y, %v}"), std::string::npos);
  EXPECT_NE(s.find("st.global.v2.f32"), std::string::npos);
  EXPECT_EQ(s.find("ld.global.nc.f32 %x"), std::string::npos);
  EXPECT_GT(count(s, "%e"),
            static_cast<std::size_t>(a.nnz()));  // every entry also updates a second accumulator
  for (const std::int64_t n : {49, 51}) {
    EXPECT_THROW(plan_spmm(a, {37, 64, n, SpmmNMode::fixed, false, false, DType::f32}, o), UsageError) << n;
  }
  EXPECT_THROW(plan_spmm(a, {37, 64, 50, SpmmNMode::runtime, false, false, DType::f32}, o), UsageError);
  o.value_mode = SpmmValueMode::rolled;
  o.cols_per_thread = 1;
  EXPECT_THROW(plan_spmm(a, {37, 64, 50, SpmmNMode::fixed, false, false, DType::f32}, o), UsageError);
}

// The split layout's modules assembled on two threads (each to relocatable code, then linked) and
// on one (one nvJitLink session) give kernels of the same size and registers, and the parallel
// route gives the same bytes every time.
void expect_same_split_assembly(const CsrMatrix& a, const SpmmProblem& problem, const SpmmOptions& o) {
  const SpmmPlan p = plan_spmm(a, problem, o);
  const EmittedKernel e = emit_spmm_ptx(p, a);
  ASSERT_GE(e.modules.size(), 2u);
  CudaCompileOptions options;
  options.extra.push_back(kPtxasVerbose);
  options.threads = 1;
  const CudaCompileResult serial = compile_kernel(e, "serial", options);
  options.threads = 2;
  const CudaCompileResult parallel = compile_kernel(e, "parallel", options);
  const CudaCompileResult again = compile_kernel(e, "parallel", options);
  const ResourceUsage us = parse_ptxas_log(serial.log), up = parse_ptxas_log(parallel.log);
  ASSERT_TRUE(up.found) << parallel.log;
  EXPECT_EQ(up.registers, us.registers);
  EXPECT_EQ(up.spill_store_bytes, 0);
  EXPECT_EQ(up.stack_frame_bytes, 0);
  EXPECT_EQ(parallel.cubin, again.cubin);
  // The same machine code and the same kernel attributes (the per-function records of the other
  // .nv.info sections only come in another order).
  const auto ps = elf_sections(parallel.cubin), ss = elf_sections(serial.cubin);
  ASSERT_EQ(ps.size(), ss.size());
  std::size_t texts = 0;
  for (const auto& [name, bytes] : ss) {
    if (name.rfind(".text.", 0) != 0 && name != ".nv.info.sparsecc_spmm" && name.rfind(".nv.shared", 0) != 0)
      continue;
    ASSERT_TRUE(ps.count(name)) << name;
    EXPECT_EQ(ps.at(name), bytes) << name;
    texts += name.rfind(".text.", 0) == 0;
  }
  EXPECT_EQ(texts, p.layout.blocks.size() + 1);
  const double ratio = static_cast<double>(parallel.cubin.size()) / static_cast<double>(serial.cubin.size());
  EXPECT_NEAR(ratio, 1.0, 0.02);
  std::printf("[ spmm ptx] split assembly of %zu modules: %.2f s on one thread, %.2f s on two\n",
              e.modules.size(), serial.seconds, parallel.seconds);
}

TEST(SpmmPtx, SplitModulesAssembleInParallel) {
  const CsrMatrix a = random_csr(600, 600, 0.12, 9);  // about 43,000 nonzeros
  expect_same_split_assembly(a, {a.rows, a.cols, 49, SpmmNMode::fixed, false, false, DType::f32}, {});
  const CsrMatrix b = random_csr(1000, 700, 0.08, 16);  // about 45,000 nonzeros
  SpmmOptions o;
  o.rows_per_block = 8;
  o.groups = 2;
  o.value_mode = SpmmValueMode::baked;
  expect_same_split_assembly(b, {b.rows, b.cols, 196, SpmmNMode::fixed, true, true, DType::f32}, o);
}

TEST(SpmmPtx, AssemblesRealDlmcLayer) {
  SPARSECC_DATA_OR_SKIP(file, "dlmc/rn50/magnitude_pruning/0.9/bottleneck_2_block_group2_3_1.smtx.gz");
  const CsrMatrix a = load_matrix(file.string());  // 128 x 1152, 14,745 nonzeros
  expect_clean_assembly(plan_spmm(a, {a.rows, a.cols, 196, SpmmNMode::fixed, true, true, DType::f32}, {}), a,
                        "rn50 0.9 bottleneck_2_block_group2_3_1");
}

}  // namespace
}  // namespace sparsecc
