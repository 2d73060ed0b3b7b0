// Staged steps (the ASpT-style choice: B of a block row's dense steps copied to shared memory with
// cp.async): which steps a plan stages and how many slots it takes, check_plan and JSON, refusals,
// the text both emitters write (one copy and one slot read per staged step, commits of
// kSpmmStageChunk, waits in order), clean assembly, bundles and the tuner's variants.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "sparsecc/bundle/spmm_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/compile/compile_kernel.hpp"
#include "sparsecc/compile/resource_usage.hpp"
#include "sparsecc/emit/spmm_cuda.hpp"
#include "sparsecc/emit/spmm_ptx.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/io/load.hpp"
#include "sparsecc/plan/spmm_plan.hpp"
#include "sparsecc/target/target.hpp"
#include "sparsecc/tune/space.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

using test::problem_for;

constexpr double kTolerance = 1e-5;  // rel L2 of the float32 kernel against the fp64 reference

SpmmOptions staged(std::int32_t least, std::int32_t rows = 0, std::int32_t groups = 0,
                   std::int32_t n_tile = 0) {
  SpmmOptions o;
  o.stage_min_entries = least;
  o.rows_per_block = rows;
  o.groups = groups;
  o.n_tile = n_tile;
  o.row_split = SpmmRowSplit::equal;
  return o;
}

using test::count;

// Staged steps and commits of the whole plan, from spmm_staged_steps.
std::pair<std::size_t, std::size_t> staged_and_commits(const SpmmPlan& p) {
  std::size_t steps = 0, commits = 0;
  for (const auto& b : p.layout.blocks)
    for (const auto& g : b.groups) {
      const auto flags = spmm_staged_steps(p, g);
      const auto n = static_cast<std::size_t>(std::count(flags.begin(), flags.end(), 1));
      steps += n;
      commits += (n + kSpmmStageChunk - 1) / kSpmmStageChunk;
    }
  return {steps, commits};
}

TEST(SpmmStage, DenseStepsTakeTheSlotsInOrder) {
  const CsrMatrix a = test::random_csr(64, 300, 0.15, 3, 0, 1);
  const SpmmPlan plain = plan_spmm(a, problem_for(a, 96), staged(0, 8, 2));
  for (const std::int32_t least : {1, 2, 3}) {
    const SpmmPlan p = plan_spmm(a, problem_for(a, 96), staged(least, 8, 2));
    ASSERT_TRUE(check_plan(p, a).empty()) << least;
    EXPECT_EQ(p.stage_min_entries(), least);
    // The slots: the most dense steps of a group, within kSpmmMaxStageSlots and 48 KiB.
    std::int64_t dense = 0;
    for (const auto& b : p.layout.blocks)
      for (const auto& g : b.groups)
        dense = std::max<std::int64_t>(dense,
                                       std::count_if(g.steps.begin(), g.steps.end(), [&](const SpmmStep& s) {
                                         return static_cast<std::int32_t>(s.entries.size()) >= least;
                                       }));
    const std::int64_t fit =
        (default_gpu_target().shared_per_block - spmm_stage_offset(p)) / (std::int64_t{p.layout.block_x} * 4);
    EXPECT_EQ(p.stage_slots(), std::min<std::int64_t>({dense, kSpmmMaxStageSlots, fit})) << least;
    EXPECT_EQ(spmm_stage_offset(p),
              (spmm_reduction_bytes(2, p.layout.rows_per_block, p.layout.n_tile, 1) + 15) / 16 * 16);
    EXPECT_EQ(p.layout.shared_bytes,
              spmm_stage_offset(p) + std::int64_t{p.stage_slots()} * p.layout.block_x * 4);
    EXPECT_LE(p.layout.shared_bytes, default_gpu_target().shared_per_block);
    // Staged: exactly the first stage_slots steps of a group with `least` entries or more.
    for (const auto& b : p.layout.blocks)
      for (const auto& g : b.groups) {
        const auto flags = spmm_staged_steps(p, g);
        std::int32_t taken = 0;
        for (std::size_t i = 0; i < g.steps.size(); ++i) {
          const bool dense_step = static_cast<std::int32_t>(g.steps[i].entries.size()) >= least;
          EXPECT_EQ(flags[i] != 0, dense_step && taken < p.stage_slots());
          taken += flags[i] != 0;
        }
      }
    // The steps, and so the arithmetic, are the unstaged plan's.
    nlohmann::json steps = to_json(p), plain_steps = to_json(plain);
    EXPECT_EQ(steps["blocks"], plain_steps["blocks"]);
    EXPECT_EQ(test::interp_error(p, a, 96, 5), test::interp_error(plain, a, 96, 5));
    EXPECT_LE(test::interp_error(p, a, 96, 5), kTolerance);
  }
  // Nothing dense enough: the plan is the unstaged one.
  const SpmmPlan none = plan_spmm(a, problem_for(a, 96), staged(60, 8, 2));
  EXPECT_EQ(none.stage_slots(), 0);
  EXPECT_EQ(none.stage_min_entries(), 0);
  EXPECT_EQ(to_json(none), to_json(plain));
}

TEST(SpmmStage, SlotsStopAtTheSharedMemoryOfABlock) {
  // 512 threads beside one group's reduction: (48 KiB - 16 * 256 * 4) / (512 * 4) = 16 slots, where
  // each group has about 200 steps.
  const CsrMatrix a = test::random_csr(64, 400, 0.4, 6, 0, 1);
  const SpmmPlan p = plan_spmm(a, problem_for(a, 3136), staged(1, 16, 2, 256));
  ASSERT_TRUE(check_plan(p, a).empty());
  const std::int64_t fit =
      (default_gpu_target().shared_per_block - spmm_stage_offset(p)) / (std::int64_t{p.layout.block_x} * 4);
  EXPECT_EQ(fit, 16);
  EXPECT_EQ(p.stage_slots(), fit);  // every group has more dense steps than that
  EXPECT_LE(p.layout.shared_bytes, default_gpu_target().shared_per_block);
  const SpmmPlan q = plan_spmm(a, problem_for(a, 3136), staged(1, 16, 1, 64));
  EXPECT_EQ(q.stage_slots(), kSpmmMaxStageSlots);  // 100+ steps a group, capped
}

TEST(SpmmStage, CheckPlanJsonAndRefusals) {
  const CsrMatrix a = test::random_csr(40, 90, 0.2, 8, 0, 1);
  const SpmmPlan good = plan_spmm(a, problem_for(a, 49, true, true, SpmmNMode::runtime), staged(2, 4, 3, 32));
  ASSERT_TRUE(check_plan(good, a).empty());
  ASSERT_GT(good.stage_slots(), 0);
  const nlohmann::json j = to_json(good);
  EXPECT_EQ(j["body"]["stage_min_entries"], 2);
  EXPECT_EQ(j["body"]["stage_slots"], good.stage_slots());
  EXPECT_EQ(to_json(plan_from_json(nlohmann::json::parse(j.dump()))), j);
  SpmmPlan p = good;
  p.unrolled()->stage_slots = 0;  // a threshold without slots
  EXPECT_FALSE(check_plan(p, a).empty());
  p = good;
  p.unrolled()->stage_slots = kSpmmMaxStageSlots + 1;
  EXPECT_FALSE(check_plan(p, a).empty());
  p = good;
  p.unrolled()->stage_slots += 1;  // the shared memory no longer matches
  EXPECT_FALSE(check_plan(p, a).empty());
  p = good;
  p.unrolled()->stage_min_entries = -1;
  EXPECT_FALSE(check_plan(p, a).empty());
  EXPECT_THROW(emit_spmm_ptx(p, a), UsageError);

  SpmmOptions rolled = staged(1);
  rolled.value_mode = SpmmValueMode::rolled;
  EXPECT_THROW(plan_spmm(a, problem_for(a, 49), rolled), UsageError);
  SpmmProblem half = problem_for(a, 49);
  half.dtype = DType::f16;
  EXPECT_THROW(plan_spmm(a, half, staged(1)), UsageError);
  EXPECT_THROW(plan_spmm(a, problem_for(a, 49), staged(-1)), UsageError);
}

TEST(SpmmStage, StagingKeepsAnAutomaticPlanUnrolled) {
  // 1024 x 1024 at 5 %: 52k nonzeros, 51 a row, N = 49: the automatic plan is rolled.
  const CsrMatrix a = test::random_csr(1024, 1024, 0.05, 12, 0, 1);
  EXPECT_EQ(plan_spmm(a, problem_for(a, 49)).value_mode(), SpmmValueMode::rolled);
  SpmmOptions o;
  o.stage_min_entries = 1;
  const SpmmPlan p = plan_spmm(a, problem_for(a, 49), o);
  EXPECT_NE(p.value_mode(), SpmmValueMode::rolled);
  EXPECT_GT(p.stage_slots(), 0);
}

TEST(SpmmStage, BothEmittersCopyEveryStagedStepOnce) {
  const CsrMatrix a = test::random_csr(37, 53, 0.3, 9, 0, 1);
  struct Shape {
    std::int32_t least, rows, groups;
    SpmmNMode mode;
    std::int32_t cols;
  };
  for (const Shape& s : {Shape{1, 4, 1, SpmmNMode::fixed, 1}, Shape{2, 8, 3, SpmmNMode::runtime, 1},
                         Shape{1, 4, 2, SpmmNMode::fixed, 2}}) {
    SpmmOptions o = staged(s.least, s.rows, s.groups, 32);
    o.cols_per_thread = s.cols;
    const SpmmPlan p = plan_spmm(a, problem_for(a, 50, true, false, s.mode), o);
    ASSERT_TRUE(check_plan(p, a).empty());
    const auto [steps, commits] = staged_and_commits(p);
    ASSERT_GT(steps, static_cast<std::size_t>(kSpmmStageChunk));  // more than one commit somewhere
    const std::string ptx = emit_spmm_ptx(p, a).source;
    const std::string cuda = emit_spmm_cuda(p, a).source;
    const std::string size = s.cols == 2 ? "8" : "4";
    for (const std::string* text : {&ptx, &cuda}) {
      EXPECT_EQ(count(*text, "cp.async.ca.shared.global"), steps);
      EXPECT_EQ(count(*text, "cp.async.commit_group;"), commits);
      EXPECT_EQ(count(*text, "cp.async.wait_group"), commits);
    }
    EXPECT_EQ(count(ptx, "], " + size + ";\n"), steps) << "copies of " << size << " bytes";
    EXPECT_EQ(count(cuda, "[%1], " + size + ";"), steps) << "copies of " << size << " bytes";
    // Every copied step is read back from its slot instead of loaded from B.
    EXPECT_EQ(count(ptx, s.cols == 2 ? "ld.shared.v2.f32 {%x" : "ld.shared.f32 %x"), steps);
    EXPECT_EQ(count(ptx, "ld.global.nc.f32 %x") + count(ptx, "ld.global.nc.v2.f32 {%x"),
              static_cast<std::size_t>(spmm_plan_loads(p)) - steps);
    EXPECT_EQ(ptx, emit_spmm_ptx(p, a).source);  // deterministic
    EXPECT_EQ(cuda, emit_spmm_cuda(p, a).source);
    // The last commit of a group is waited for with nothing left in flight.
    EXPECT_NE(ptx.find("cp.async.wait_group 0;"), std::string::npos);
  }
}

TEST(SpmmStage, StagedKernelsAssembleWithoutSpills) {
  const CsrMatrix a = test::random_csr(128, 256, 0.1, 14, 0, 1);
  for (const auto& [least, groups] : {std::pair{1, 4}, std::pair{2, 1}}) {
    const SpmmPlan p = plan_spmm(a, problem_for(a, 784, true, true), staged(least, 16, groups, 64));
    ASSERT_GT(p.stage_slots(), 0);
    for (const KernelLanguage lang : {KernelLanguage::ptx, KernelLanguage::cuda}) {
      const EmittedKernel e = emit_spmm(p, a, lang);
      CudaCompileOptions options;
      options.extra.push_back(kPtxasVerbose);
      const CudaCompileResult r = compile_kernel(e, "staged", options);
      const ResourceUsage u = parse_ptxas_log(r.log);
      ASSERT_TRUE(u.found) << r.log;
      EXPECT_FALSE(r.cubin.empty());
      EXPECT_EQ(u.spill_store_bytes, 0) << to_string(lang);
      EXPECT_EQ(u.stack_frame_bytes, 0) << to_string(lang);
      EXPECT_LE(u.registers, p.hints.max_registers) << to_string(lang);
    }
  }
}

TEST(SpmmStage, BundlesCarryTheStagedPlan) {
  const CsrMatrix a = test::random_csr(48, 64, 0.2, 15, 0, 1);
  const SpmmPlan p = plan_spmm(a, problem_for(a, 64, true, false), staged(2, 8, 2));
  ASSERT_GT(p.stage_slots(), 0);
  const rt::BundleMetadata md = spmm_bundle_metadata(p, a, gpu_target("sm_90"));
  EXPECT_EQ(md.plan_summary.at("stage_min_entries"), 2);
  EXPECT_EQ(md.shared_bytes, p.layout.shared_bytes);
  rt::Bundle b;
  b.metadata = md;
  b.plan = to_json(p).dump();
  EXPECT_EQ(to_json(spmm_bundle_plan(b, a)), to_json(p));
}

TEST(SpmmStage, TunerTimesTheWinnerWithStagedSteps) {
  const CsrMatrix a = test::random_csr(64, 128, 0.2, 16, 0, 1);
  const SpmmProblem problem = problem_for(a, 64);
  const tune::SpmmSpace space = tune::spmm_space(a, problem, {}, KernelLanguage::ptx);
  const tune::SpmmSpaceDims dims;
  // A plan of 8 or more rows a block row, whose steps hold two or more entries often enough.
  const auto tall =
      std::find_if(space.candidates.begin(), space.candidates.end(), [](const tune::SpmmCandidate& c) {
        return c.plan.layout.rows_per_block >= 8 && c.plan.value_mode() == SpmmValueMode::baked;
      });
  ASSERT_NE(tall, space.candidates.end());
  const tune::SpmmCandidate& winner = *tall;
  const auto variants = tune::spmm_stage_variants(a, winner, dims);
  ASSERT_EQ(variants.size(), dims.stage_min_entries.size());
  for (std::size_t i = 0; i < variants.size(); ++i) {
    const tune::SpmmCandidate& v = variants[i];
    EXPECT_EQ(v.label, winner.label + "/st" + std::to_string(dims.stage_min_entries[i]));
    EXPECT_EQ(v.plan.stage_min_entries(), dims.stage_min_entries[i]);
    EXPECT_EQ(to_json(v.plan)["blocks"], to_json(winner.plan)["blocks"]);
    EXPECT_EQ(tune::spmm_variant_base_label(v.label), winner.label);
    EXPECT_EQ(tune::spmm_variant_base_label(v.label + "/r72"), winner.label);
    const auto [options, emitter] = tune::spmm_options_from_json(tune::candidate_json(v), {});
    EXPECT_EQ(emitter, v.emitter);
    EXPECT_EQ(to_json(plan_spmm(a, problem, options)), to_json(v.plan));
  }
  EXPECT_EQ(tune::spmm_variant_base_label("R4/T64/G1/equal/baked/ptx/st"), "R4/T64/G1/equal/baked/ptx/st");
  tune::SpmmSpaceDims off = dims;
  off.stage_min_entries.clear();
  EXPECT_TRUE(tune::spmm_stage_variants(a, winner, off).empty());
  EXPECT_EQ(tune::to_json(space, dims)["dimensions"]["staged_steps_of_the_winner"], nlohmann::json({1, 2}));
}

TEST(SpmmStage, RealLayerMatchesTheReference) {
  SPARSECC_DATA_OR_SKIP(dir, "dlmc/rn50/magnitude_pruning/0.9");
  const CsrMatrix a = load_matrix((dir / "bottleneck_1_block_group2_2_1.smtx.gz").string());
  SpmmOptions o;
  o.stage_min_entries = 1;
  const SpmmPlan p = plan_spmm(a, problem_for(a, 784, true, true), o);
  ASSERT_TRUE(check_plan(p, a).empty());
  EXPECT_GT(p.stage_slots(), 0);
  EXPECT_LE(test::interp_error(p, a, 784, 3), kTolerance);
  const std::string ptx = emit_spmm_ptx(p, a).source;
  EXPECT_EQ(count(ptx, "cp.async.ca.shared.global"), staged_and_commits(p).first);
}

}  // namespace
}  // namespace sparsecc
