// The pipeline driver: one call from a matrix (or a Hines system) to an artifact with a bundle and a
// report; the compile-cost rule that refuses, reroutes or allows a long CUDA C++ compile.
#include "sparsecc/pipeline/pipeline.hpp"

#include <gtest/gtest.h>

#include "sparsecc/common/error.hpp"
#include "sparsecc/neuron/forest.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

pipeline::SpmmRequest request_for(const CsrMatrix& a, std::int64_t n, const std::string& dtype = "f32") {
  pipeline::SpmmRequest r;
  r.problem = test::problem_for(a, n);
  r.problem.dtype = *parse_dtype(dtype);
  return r;
}

TEST(Pipeline, CompileSpmmGivesPlanKernelBundleAndReport) {
  const CsrMatrix a = test::random_csr(96, 80, 0.1, 7);
  const pipeline::SpmmArtifact art = pipeline::compile_spmm(a, request_for(a, 16), default_gpu_target());
  EXPECT_TRUE(check_plan(art.plan, a).empty());
  EXPECT_EQ(art.kernel.language, KernelLanguage::ptx);  // fp32's default emitter
  EXPECT_FALSE(art.compiled.cubin.empty());
  ASSERT_TRUE(art.bundle.has_value());
  EXPECT_EQ(art.bundle->metadata.m, 96);
  EXPECT_EQ(art.bundle->metadata.arch, "sm_90");
  const nlohmann::json j = art.report.json(art);
  ASSERT_EQ(j["steps"].size(), 4u);  // plan, emit, assemble, bundle
  EXPECT_EQ(j["steps"][0]["step"], "plan");
  EXPECT_EQ(j["steps"][2]["step"], "assemble (nvJitLink)");
  EXPECT_GT(j["steps"][2]["estimated_s"].get<double>(), 0.0);
  EXPECT_EQ(j["nnz"], a.nnz());
  EXPECT_NE(art.report.text(art).find("compiled "), std::string::npos);
}

TEST(Pipeline, HalfPrecisionDefaultsToCudaAndBundleCarriesTheBias) {
  const CsrMatrix a = test::random_csr(64, 64, 0.1, 8);
  pipeline::SpmmRequest r = request_for(a, 32, "f16");
  r.problem.bias = true;
  r.bias.assign(64, 0.5);
  const pipeline::SpmmArtifact art = pipeline::compile_spmm(a, r, default_gpu_target());
  EXPECT_EQ(art.kernel.language, KernelLanguage::cuda);
  EXPECT_EQ(art.bundle->bias.size(), 64u);
}

TEST(Pipeline, TheEstimateGrowsWithTheKernelAndRolledPlansStayCheap) {
  const CsrMatrix small = test::random_csr(64, 64, 0.05, 1), large = test::random_csr(512, 512, 0.1, 2);
  const SpmmPlan ps = plan_spmm(small, test::problem_for(small, 16));
  const SpmmPlan pl = plan_spmm(large, test::problem_for(large, 16));
  const auto cuda = [](const SpmmPlan& p) {
    return pipeline::estimate_spmm_compile(p, KernelLanguage::cuda).compile;
  };
  EXPECT_LT(cuda(ps), cuda(pl));
  EXPECT_LT(pipeline::estimate_spmm_compile(pl, KernelLanguage::ptx).compile, cuda(pl));
  SpmmOptions rolled;
  rolled.value_mode = SpmmValueMode::rolled;
  EXPECT_LT(cuda(plan_spmm(large, test::problem_for(large, 16), rolled)), cuda(pl));
}

TEST(Pipeline, ALongCudaCompileIsRefusedReroutedOrAllowed) {
  const CsrMatrix a = test::random_csr(64, 64, 0.05, 3);
  pipeline::SpmmRequest r = request_for(a, 16);
  r.emit = KernelLanguage::cuda;
  r.max_cuda_seconds = 1e-9;  // every compile is "long"
  try {
    pipeline::compile_spmm(a, r, default_gpu_target());
    FAIL() << "a long compile was started";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--emit ptx"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--allow-long-compile"), std::string::npos) << e.what();
  }
  r.long_cuda = pipeline::LongCompile::take_ptx;
  const pipeline::SpmmArtifact ptx = pipeline::compile_spmm(a, r, default_gpu_target());
  EXPECT_EQ(ptx.kernel.language, KernelLanguage::ptx);
  EXPECT_NE(ptx.report.emit_note.find("PTX route"), std::string::npos);
  r.long_cuda = pipeline::LongCompile::allow;
  EXPECT_EQ(pipeline::compile_spmm(a, r, default_gpu_target()).kernel.language, KernelLanguage::cuda);
  // Half plans have no PTX route: refused, naming no PTX way out.
  pipeline::SpmmRequest h = request_for(a, 16, "f16");
  h.max_cuda_seconds = 1e-9;
  h.long_cuda = pipeline::LongCompile::take_ptx;
  try {
    pipeline::compile_spmm(a, h, default_gpu_target());
    FAIL() << "a long half-precision compile was started";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()).find("--emit ptx"), std::string::npos) << e.what();
  }
}

TEST(Pipeline, NoProgressLinesForStepsEstimatedUnderASecond) {
  const CsrMatrix a = test::random_csr(64, 64, 0.05, 4);
  pipeline::SpmmRequest r = request_for(a, 16);
  std::vector<std::string> seen;
  r.progress = [&](const std::string& step, double, double) { seen.push_back(step); };
  pipeline::compile_spmm(a, r, default_gpu_target());
  EXPECT_TRUE(seen.empty());  // every step of this small kernel is estimated below a second
}

TEST(Pipeline, CompileHinesGivesPlanAndBundle) {
  const std::string swc = (test::source_dir() / "kernels_generated/examples/data/example_cell.swc").string();
  const HinesSystem s = load_hines_forest({swc}, 4, 2);
  pipeline::HinesRequest r;
  const pipeline::HinesArtifact art = pipeline::compile_hines(s, r, default_gpu_target());
  ASSERT_TRUE(art.compiled.has_value());
  ASSERT_TRUE(art.bundle.has_value());
  EXPECT_EQ(art.bundle->metadata.op, "hines");
  EXPECT_EQ(art.plan_text().rfind("planned ", 0), 0u);
  EXPECT_FALSE(art.compile_text().empty());
  EXPECT_EQ(art.json()["cells"], 4);
  r.compile = false;
  const pipeline::HinesArtifact planned = pipeline::compile_hines(s, r, default_gpu_target());
  EXPECT_FALSE(planned.bundle.has_value());
  EXPECT_TRUE(planned.compile_text().empty());
}

}  // namespace
}  // namespace sparsecc
