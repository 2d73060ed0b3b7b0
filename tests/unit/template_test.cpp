// Kernel templates: insertion-point parsing and rendering, and every skeleton in templates/
// compiling on its own through NVRTC for sm_90 (no GPU needed).
#include "sparsecc/emit/template.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "sparsecc/common/error.hpp"
#include "sparsecc/compile/nvrtc.hpp"

using namespace sparsecc;

TEST(Template, RendersBlockAndLoneMarkers) {
  KernelTemplate t("t.cu", "a /*@X*/default/*@end*/ b /*@Y@*/ c /*@X*/again/*@end*/");
  EXPECT_EQ(t.points(), (std::vector<std::string>{"X", "Y"}));
  EXPECT_EQ(t.render({{"X", "1"}, {"Y", "2"}}), "a 1 b 2 c 1");
}

TEST(Template, RejectsUnfilledUnknownAndMalformed) {
  KernelTemplate t("t.cu", "/*@X@*/");
  EXPECT_THROW(t.render({}), UsageError);
  EXPECT_THROW(t.render({{"X", ""}, {"Z", ""}}), UsageError);
  EXPECT_THROW(KernelTemplate("t.cu", "/*@X*/ no end"), UsageError);
  EXPECT_THROW(KernelTemplate("t.cu", "/*@bad name@*/"), UsageError);
  EXPECT_THROW(KernelTemplate("t.cu", "/*@end*/"), UsageError);
  EXPECT_THROW(KernelTemplate("t.cu", "/*@X*/ /*@Y@*/ /*@end*/"), UsageError);
}

TEST(Template, RenderIsDeterministic) {
  KernelTemplate t = KernelTemplate::load("toolchain_check.cu");
  const std::map<std::string, std::string> v = {{"KERNEL_NAME", "k"}, {"BODY", "v * v"}};
  EXPECT_EQ(t.render(v), t.render(v));
  EXPECT_NE(t.render(v).find("y[i] = v * v;"), std::string::npos);
}

// "Templates compile on their own": each skeleton's default text is valid CUDA C++.
TEST(Template, EverySkeletonCompilesWithNvrtc) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(template_dir())) {
    if (entry.path().extension() != ".cu") continue;
    ++count;
    const KernelTemplate t = KernelTemplate::load(entry.path().filename().string());
    // Render each point with its default text by reading the file as-is.
    std::ifstream f(entry.path());
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    SCOPED_TRACE(entry.path().string());
    const CudaCompileResult r = compile_cuda(text, entry.path().filename().string());
    EXPECT_GT(r.cubin.size(), 0u);
    EXPECT_NE(r.ptx.find(".target sm_90"), std::string::npos);
    EXPECT_FALSE(t.points().empty());
  }
  EXPECT_GT(count, 0);
}

TEST(Nvrtc, ReportsCompileErrorsWithLog) {
  try {
    compile_cuda("extern \"C\" __global__ void k() { undeclared(); }", "broken.cu");
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_NE(e.log().find("undeclared"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("broken.cu"), std::string::npos);
  }
}

TEST(Nvrtc, KnowsHopper) {
  const auto archs = nvrtc_architectures();
  EXPECT_NE(std::find(archs.begin(), archs.end(), "sm_90"), archs.end());
  EXPECT_FALSE(nvrtc_version().empty());
}
