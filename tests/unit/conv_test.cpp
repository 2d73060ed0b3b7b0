// Convolution executors without a GPU: the geometry, the fp64 reference against an explicit im2col,
// the plans (unrolled and rolled) through their CPU interpreter against the reference, and the
// pipeline's bundle of a convolution (NVRTC compiles here; the GPU runs are tests/gpu/conv_gpu_test.cpp);
// f32 and (unrolled) f16 / bf16.
#include "sparsecc/reference/conv.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "sparsecc/common/dtype.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/random.hpp"
#include "sparsecc/emit/spmm_cuda.hpp"
#include "sparsecc/inspector/spmm_decisions.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/pipeline/pipeline.hpp"
#include "sparsecc/plan/spmm_interpreter.hpp"
#include "sparsecc/plan/spmm_plan.hpp"
#include "sparsecc/reference/spmm.hpp"
#include "sparsecc/runtime/bundle.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

rt::ConvGeometry geometry(rt::ConvLayout layout, std::int64_t c, std::int64_t h, std::int64_t w,
                          std::int64_t kh, std::int64_t kw, std::int64_t sh, std::int64_t sw, std::int64_t pt,
                          std::int64_t pl, std::int64_t pb, std::int64_t pr) {
  rt::ConvGeometry g;
  g.layout = layout;
  g.in_channels = c, g.height = h, g.width = w;
  g.kernel_h = kh, g.kernel_w = kw, g.stride_h = sh, g.stride_w = sw;
  g.pad_top = pt, g.pad_left = pl, g.pad_bottom = pb, g.pad_right = pr;
  return g;
}

// The shapes every suite runs: 3x3 (stride 1 and 2, same and valid padding), 1x1 (stride 1 and 2),
// the 7x7 stem, a 3x5 kernel with asymmetric pads, in both layouts, sizes that are multiples of nothing.
std::vector<rt::ConvGeometry> shapes() {
  using L = rt::ConvLayout;
  return {geometry(L::nchw, 5, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1),
          geometry(L::nhwc, 6, 13, 10, 3, 3, 2, 2, 1, 1, 1, 1),
          geometry(L::nchw, 4, 7, 6, 3, 3, 1, 1, 0, 0, 0, 0),
          geometry(L::nhwc, 12, 5, 7, 1, 1, 1, 1, 0, 0, 0, 0),
          geometry(L::nchw, 8, 9, 9, 1, 1, 2, 2, 0, 0, 0, 0),
          geometry(L::nchw, 3, 19, 17, 7, 7, 2, 2, 3, 3, 3, 3),
          geometry(L::nhwc, 4, 8, 9, 3, 5, 1, 2, 0, 2, 1, 1),
          geometry(L::nchw, 3, 10, 12, 3, 3, 2, 2, 0, 0, 1, 1)};
}

std::vector<double> random_values(std::int64_t n, std::uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = static_cast<float>(rng.uniform_pm1());
  return v;
}

TEST(ConvGeometry, SizesStridesAndJson) {
  const rt::ConvGeometry g = geometry(rt::ConvLayout::nhwc, 64, 56, 56, 3, 3, 2, 2, 1, 1, 0, 0);
  EXPECT_EQ(g.out_height(), 28);
  EXPECT_EQ(g.out_width(), 28);
  EXPECT_EQ(g.k(), 576);
  EXPECT_EQ(g.input_shape(2), (std::array<std::int64_t, 4>{2, 56, 56, 64}));
  EXPECT_EQ(g.output_shape(2, 8), (std::array<std::int64_t, 4>{2, 28, 28, 8}));
  EXPECT_EQ(g.input_strides().row, 56 * 64);
  EXPECT_EQ(rt::conv_geometry_from_json(rt::to_json(g), "test"), g);
  EXPECT_EQ(rt::describe(g), "3x3 s2 p1,1,0,0 64x56x56 nhwc");
  nlohmann::json j = rt::to_json(g);
  j["out_width"] = 27;
  EXPECT_THROW(rt::conv_geometry_from_json(j, "test"), std::invalid_argument);
  j = rt::to_json(g);
  j["kernel"] = {9, 9};  // 81 taps
  EXPECT_THROW(rt::conv_geometry_from_json(j, "test"), std::invalid_argument);
  j = rt::to_json(g);
  j.erase("pads");
  EXPECT_THROW(rt::conv_geometry_from_json(j, "test"), std::invalid_argument);
  EXPECT_FALSE(
      rt::check_conv_geometry(geometry(rt::ConvLayout::nchw, 1, 2, 2, 3, 3, 1, 1, 0, 0, 0, 0)).empty());
  EXPECT_FALSE(
      rt::check_conv_geometry(geometry(rt::ConvLayout::nchw, 1, 8, 8, 3, 3, 0, 1, 1, 1, 1, 1)).empty());
  EXPECT_FALSE(
      rt::check_conv_geometry(geometry(rt::ConvLayout::nchw, 1, 8, 8, 3, 3, 1, 1, 3, 1, 1, 1)).empty());
}

// The reference's direct loops agree with W times the explicit im2col matrix, image by image.
TEST(ConvReference, EqualsSpmmOfIm2col) {
  for (const rt::ConvGeometry& g : shapes()) {
    const std::int64_t o = 7, batch = 2;
    const CsrMatrix w = test::random_csr(o, g.k(), 0.3, 11);
    const std::vector<double> x = random_values(g.input_elements(batch), 12);
    const std::vector<double> bias = random_values(o, 13);
    const std::vector<double> y = conv2d(w, x, g, batch, &bias, true);
    const auto ys = g.output_strides(o);
    for (std::int64_t b = 0; b < batch; ++b) {
      const DenseMatrix c = spmm(w, im2col(g, x, b), &bias, true);
      for (std::int64_t r = 0; r < o; ++r)
        for (std::int64_t p = 0; p < g.pixels(); ++p)
          ASSERT_NEAR(c(r, p),
                      y[static_cast<std::size_t>(b * ys.image + r * ys.channel + p / g.out_width() * ys.row +
                                                 p % g.out_width() * ys.col)],
                      1e-12)
              << rt::describe(g);
    }
  }
  const rt::ConvGeometry g = shapes().front();
  const CsrMatrix w = test::random_csr(3, g.k() + 1, 0.3, 1);
  EXPECT_THROW(conv2d(w, random_values(g.input_elements(1), 2), g, 1), UsageError);
  EXPECT_THROW(conv2d(test::random_csr(3, g.k(), 0.3, 1), random_values(5, 2), g, 1), UsageError);
}

double max_rel(const std::vector<float>& got, const std::vector<double>& ref) {
  double m = 0, d = 0;
  for (double v : ref) m = std::max(m, std::fabs(v));
  for (std::size_t i = 0; i < ref.size(); ++i) d = std::max(d, std::fabs(double(got[i]) - ref[i]));
  return d / m;
}

// Every shape, both families, with and without bias and ReLU: the plan as its kernel runs it.
TEST(ConvPlan, InterpreterMatchesReference) {
  for (const rt::ConvGeometry& g : shapes())
    for (const bool rolled : {false, true})
      for (const bool epilogue : {false, true}) {
        const std::int64_t o = 21, batch = 3;
        const CsrMatrix w = test::random_csr(o, g.k(), 0.35, 21);
        SpmmOptions options;
        if (rolled) options.value_mode = SpmmValueMode::rolled;
        const SpmmPlan plan = plan_spmm(w, conv_problem(g, o, epilogue, epilogue), options);
        ASSERT_TRUE(check_plan(plan, w).empty()) << check_plan(plan, w).front();
        EXPECT_EQ(plan.rolled() != nullptr, rolled);
        const std::vector<double> x = random_values(g.input_elements(batch), 22);
        const std::vector<double> bias = random_values(o, 23);
        const std::vector<float> xf(x.begin(), x.end());
        const std::vector<float> got =
            interpret_conv(plan, spmm_kernel_values(plan, w), xf, batch, epilogue ? &bias : nullptr);
        const std::vector<double> ref = conv2d(w, x, g, batch, epilogue ? &bias : nullptr, epilogue);
        EXPECT_LT(max_rel(got, ref), 1e-5) << rt::describe(g) << (rolled ? " rolled" : " unrolled");
      }
}

// f16 and bf16 plans (unrolled, two pixels a thread) through their interpreter against conv2d of the
// rounded values, within the dtype's tolerance; the emitted kernel reads X through tap pointers up to 9
// taps and through masks above, and stores each pixel through its own pointer.
TEST(ConvPlan, HalfInterpreterAndKernelText) {
  for (const rt::ConvGeometry& g : shapes())
    for (const DType dtype : {DType::f16, DType::bf16}) {
      const std::int64_t o = 13, batch = 3;
      const CsrMatrix w = test::random_csr(o, g.k(), 0.35, 31);
      const SpmmPlan plan = plan_spmm(w, conv_problem(g, o, true, true, dtype));
      ASSERT_TRUE(check_plan(plan, w).empty()) << check_plan(plan, w).front();
      ASSERT_TRUE(plan.unrolled());
      std::vector<double> x = random_values(g.input_elements(batch), 32);
      for (double& v : x) v = round_to(dtype, v);
      const std::vector<double> bias = random_values(o, 33);
      const std::vector<float> xf(x.begin(), x.end());
      const std::vector<float> got = interpret_conv(plan, spmm_kernel_values(plan, w), xf, batch, &bias);
      const std::vector<double> ref = conv2d(round_values(w, dtype), x, g, batch, &bias, true);
      EXPECT_LT(max_rel(got, ref), dtype == DType::f16 ? 1e-3 : 8e-3) << rt::describe(g) << " " << dtype;
      const std::string text = emit_spmm_cuda(plan, w).source;
      const bool pointers = g.taps() <= kSpmmConvTapPointers;
      EXPECT_EQ(text.find("spcc_conv_pair_at(t0 + ") != std::string::npos, pointers) << rt::describe(g);
      EXPECT_EQ(text.find("= spcc_conv_pair(b, b1, taps, taps1, ") != std::string::npos, !pointers);
      EXPECT_NE(text.find("spcc_store_conv(c + "), std::string::npos);
      EXPECT_EQ(text.find("spcc_store_pair(c + "), std::string::npos);
    }
}

TEST(ConvPlan, RulesAndRefusals) {
  const rt::ConvGeometry g = shapes().front();
  const CsrMatrix w = test::random_csr(16, g.k(), 0.3, 3);
  const SpmmPlan plan = plan_spmm(w, conv_problem(g, 16, false, false));
  EXPECT_TRUE(plan.unrolled());
  EXPECT_EQ(plan.layout.cols_per_thread, 1);
  // The geometry travels with the plan's JSON.
  const SpmmPlan back = plan_from_json(to_json(plan));
  ASSERT_TRUE(back.problem.conv);
  EXPECT_EQ(*back.problem.conv, g);
  // A problem whose K is not the geometry's, rolled half precision, and unrolled-only features are refused.
  SpmmProblem bad = conv_problem(g, 16, false, false);
  bad.n += 1;
  EXPECT_THROW(plan_spmm(w, bad), UsageError);
  SpmmOptions rolled_half;
  rolled_half.value_mode = SpmmValueMode::rolled;
  EXPECT_THROW(plan_spmm(w, conv_problem(g, 16, false, false, DType::f16), rolled_half), UsageError);
  SpmmOptions blocklets;
  blocklets.blocklets = SpmmBlockletMode::forced;
  EXPECT_THROW(plan_spmm(w, conv_problem(g, 16, false, false, DType::f16), blocklets), UsageError);
  // f16 / bf16: the unrolled half family (two pixels a thread), whatever the size; never compressed.
  const SpmmPlan half = plan_spmm(w, conv_problem(g, 16, false, false, DType::bf16));
  EXPECT_TRUE(half.unrolled());
  EXPECT_EQ(half.layout.cols_per_thread, 2);
  EXPECT_TRUE(check_plan(half, w).empty());
  SpmmOptions staged;
  staged.stage_min_entries = 2;
  EXPECT_THROW(plan_spmm(w, conv_problem(g, 16, false, false), staged), UsageError);
  // check_plan catches a plan whose geometry was edited after planning.
  SpmmPlan edited = plan;
  edited.problem.conv->width += 1;
  EXPECT_FALSE(check_plan(edited, w).empty());
  // A large 3x3 filter bank stays unrolled (the PTX route compiles it in seconds); a 7x7 one above
  // kConvUnrolledNnz nonzeros (CUDA C++ only) rolls, with groups of whole warps.
  const rt::ConvGeometry big = geometry(rt::ConvLayout::nchw, 256, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1);
  const CsrMatrix wb = test::random_csr(256, big.k(), 0.1, 4);
  ASSERT_GT(wb.nnz(), spmm_rules::kConvUnrolledNnz);
  EXPECT_TRUE(plan_spmm(wb, conv_problem(big, 256, false, false)).unrolled());
  const rt::ConvGeometry stem = geometry(rt::ConvLayout::nchw, 64, 20, 20, 7, 7, 2, 2, 3, 3, 3, 3);
  const CsrMatrix ws = test::random_csr(16, stem.k(), 0.45, 4);
  ASSERT_GT(ws.nnz(), spmm_rules::kConvUnrolledNnz);
  const SpmmPlan rolled = plan_spmm(ws, conv_problem(stem, 16, false, false));
  ASSERT_TRUE(rolled.rolled());
  EXPECT_EQ(rolled.layout.n_tile % 32, 0);
  EXPECT_EQ(rolled.step_lanes(), 1);
}

// The pipeline compiles both families to bundles that state the geometry, and the code carries it in
// its contract (NVRTC and nvJitLink run without a GPU); a 7x7 kernel takes CUDA C++ even when PTX is asked.
TEST(ConvPipeline, BundlesCarryTheGeometry) {
  const rt::ConvGeometry g = shapes()[1];
  const CsrMatrix w = test::random_csr(9, g.k(), 0.3, 5);
  for (const bool rolled : {false, true}) {
    pipeline::SpmmRequest r;
    r.problem = conv_problem(g, 9, true, true);
    r.bias = random_values(9, 6);
    if (rolled) r.options.value_mode = SpmmValueMode::rolled;
    const pipeline::SpmmArtifact art = pipeline::compile_spmm(w, r, default_gpu_target());
    ASSERT_TRUE(art.bundle);
    // Unrolled 3x3 kernels take the PTX route, rolled ones CUDA C++.
    EXPECT_EQ(art.kernel.language, rolled ? KernelLanguage::cuda : KernelLanguage::ptx);
    ASSERT_TRUE(art.bundle->metadata.conv);
    EXPECT_EQ(*art.bundle->metadata.conv, g);
    const std::vector<unsigned char> bytes = rt::bundle_bytes(*art.bundle, "conv.spcc");
    const rt::Bundle back = rt::parse_bundle(bytes, "conv.spcc");
    EXPECT_EQ(back.metadata, art.bundle->metadata);
    // Metadata that lies about the geometry no longer matches the code's contract.
    rt::Bundle lied = back;
    lied.metadata.conv->in_channels += 1;
    lied.metadata.k = lied.metadata.conv->k();
    EXPECT_THROW(rt::validate_bundle(lied, "lied.spcc"), rt::BundleError);
  }
  // An f16 convolution: CUDA C++ (the half family), a bundle the runtime's checks accept; a rolled half
  // convolution's metadata is refused.
  {
    pipeline::SpmmRequest r;
    r.problem = conv_problem(g, 9, true, false, DType::f16);
    r.bias = random_values(9, 7);
    const pipeline::SpmmArtifact art = pipeline::compile_spmm(w, r, default_gpu_target());
    ASSERT_TRUE(art.bundle);
    EXPECT_EQ(art.kernel.language, KernelLanguage::cuda);
    const rt::Bundle back = rt::parse_bundle(rt::bundle_bytes(*art.bundle, "half.spcc"), "half.spcc");
    EXPECT_EQ(back.metadata.dtype, "f16");
    EXPECT_EQ(back.metadata.params, rt::kConvParams);
    rt::BundleMetadata lied = back.metadata;
    lied.values_mode = "rolled";
    rt::Bundle b = back;
    b.metadata = lied;
    EXPECT_THROW(rt::validate_bundle(b, "lied.spcc"), rt::BundleError);
  }
  const rt::ConvGeometry stem = shapes()[5];
  pipeline::SpmmRequest r;
  r.problem = conv_problem(stem, 4, false, false);
  r.emit = KernelLanguage::ptx;
  const CsrMatrix ws = test::random_csr(4, stem.k(), 0.3, 6);
  EXPECT_EQ(pipeline::compile_spmm(ws, r, default_gpu_target()).kernel.language, KernelLanguage::cuda);
}

}  // namespace
}  // namespace sparsecc
