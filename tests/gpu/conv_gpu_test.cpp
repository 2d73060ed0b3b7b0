// Convolution executors on a GPU, end to end: conv_problem -> pipeline::compile_spmm (plan, PTX or CUDA
// C++, bundle) -> SpmmExecutor::run_conv on NaN-poisoned outputs. Every output is checked against the
// fp64 convolution (conv2d) within kMaxRelError of max |Y| (f16 / bf16: the dtype's tolerance), and bit
// for bit against the plan's CPU interpreter (interpret_conv: the same operations in the same order).
// Cases: 3x3 (stride 1 and 2, same and valid padding), 1x1 (stride 1 and 2), the 7x7 stem, a 3x5 kernel
// with asymmetric pads; NCHW and NHWC; unrolled and rolled fp32, unrolled f16 and bf16; batch 1..5; bias
// and ReLU; and ResNet-50's 3x3 layers with SparseRT's pruned filters and published activations when
// the data folder is present. Also the launch's shape checks. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "gpu_skip.hpp"
#include "sparsecc/common/dtype.hpp"
#include "sparsecc/common/random.hpp"
#include "sparsecc/io/npz.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/pipeline/pipeline.hpp"
#include "sparsecc/pipeline/run.hpp"
#include "sparsecc/plan/spmm_interpreter.hpp"
#include "sparsecc/reference/conv.hpp"
#include "sparsecc/reference/spmm.hpp"
#include "sparsecc/runtime/device.hpp"
#include "sparsecc/runtime/executor.hpp"
#include "test_support.hpp"

using namespace sparsecc;

namespace {

constexpr double kMaxRelError = 1e-5;

rt::ConvGeometry geometry(rt::ConvLayout layout, std::int64_t c, std::int64_t h, std::int64_t w,
                          std::int64_t kh, std::int64_t kw, std::int64_t s, std::int64_t pt, std::int64_t pl,
                          std::int64_t pb, std::int64_t pr) {
  rt::ConvGeometry g;
  g.layout = layout;
  g.in_channels = c, g.height = h, g.width = w;
  g.kernel_h = kh, g.kernel_w = kw, g.stride_h = s, g.stride_w = s;
  g.pad_top = pt, g.pad_left = pl, g.pad_bottom = pb, g.pad_right = pr;
  return g;
}

std::vector<double> random_values(std::int64_t n, std::uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = static_cast<float>(rng.uniform_pm1());
  return v;
}

struct ConvCase {
  std::string name;
  CsrMatrix w;
  rt::ConvGeometry g;
  std::int64_t batch = 1;
  bool epilogue = false;                // bias and ReLU
  std::optional<SpmmValueMode> values;  // empty: the rule's family
  std::vector<double> x;                // empty: random
  DType dtype = DType::f32;             // f16 / bf16: X, Y and the weights in the dtype
};

// Compiles, runs on a NaN-poisoned Y and checks one case; returns the family it ran. f16 / bf16 cases
// round X and the weights to the dtype (the reference takes the rounded values) and allow the dtype's
// tolerance (spmm_check_tolerance) against conv2d; the interpreter's outputs are the same bits.
std::string run_case(const rt::Context& ctx, const ConvCase& c) {
  const std::int64_t o = c.w.rows;
  const bool half = c.dtype != DType::f32;
  pipeline::SpmmRequest r;
  r.problem = conv_problem(c.g, o, c.epilogue, c.epilogue, c.dtype);
  if (c.epilogue) r.bias = random_values(o, 77);
  if (c.values) r.options.value_mode = *c.values;
  r.long_cuda = pipeline::LongCompile::allow;
  r.name = c.name;
  const pipeline::SpmmArtifact art = pipeline::compile_spmm(c.w, r, default_gpu_target());
  // ptxas keeps a few setup values (tap pointers, masks) live across the block rows' jump table on the
  // stack at any register cap, stored once a thread before the jump; their bytes grow with the cases
  // (docs/performance/2026-11-28-conv.md, "Spills of the jump table"). The bound admits such words,
  // not accumulators spilled row by row.
  EXPECT_LE(art.usage.spill_store_bytes, 32) << c.name;
  const rt::SpmmExecutor ex = rt::SpmmExecutor::load(*art.bundle, c.name, ctx);

  std::vector<double> x = c.x.empty() ? random_values(c.g.input_elements(c.batch), 5) : c.x;
  for (double& v : x) v = round_to(c.dtype, v);
  const std::vector<float> xf(x.begin(), x.end());
  const std::size_t size = dtype_size(c.dtype);
  const std::int64_t outputs = c.g.output_elements(c.batch, o);
  std::vector<unsigned char> y_bytes(static_cast<std::size_t>(outputs) * size);
  const rt::DeviceBuffer dx = pipeline::upload_values(x, c.dtype);
  // NaN (of the dtype): an output the kernel does not write stays NaN.
  const rt::DeviceBuffer dy = pipeline::poisoned_outputs(y_bytes.size() / size, c.dtype);
  ex.run_conv(dx.get(), c.g.input_shape(c.batch), dy.get(), c.g.output_shape(c.batch, o));
  ctx.synchronize();
  dy.download(y_bytes.data(), y_bytes.size());

  const std::vector<double>* bias = c.epilogue ? &r.bias : nullptr;
  const std::vector<double> ref = conv2d(round_values(c.w, c.dtype), x, c.g, c.batch, bias, c.epilogue);
  const std::vector<float> interp =
      interpret_conv(art.plan, spmm_kernel_values(art.plan, c.w), xf, c.batch, bias);
  double max_ref = 0, max_diff = 0;
  std::int64_t nans = 0, bit_diffs = 0;
  for (double v : ref) max_ref = std::max(max_ref, std::fabs(v));
  for (std::size_t i = 0; i < static_cast<std::size_t>(outputs); ++i) {
    const double y = load_le(c.dtype, y_bytes.data() + i * size);
    if (!std::isfinite(y)) {
      ++nans;
      continue;
    }
    max_diff = std::max(max_diff, std::fabs(y - ref[i]));
    std::vector<unsigned char> want(size);
    store_le(c.dtype, interp[i], want.data());
    bit_diffs += std::memcmp(y_bytes.data() + i * size, want.data(), size) != 0;
  }
  const double rel = max_ref > 0 ? max_diff / max_ref : max_diff;
  const double tolerance =
      half ? pipeline::spmm_check_tolerance(c.w, std::string(dtype_name(c.dtype)), "f32") : kMaxRelError;
  const std::string family = to_string(art.plan.family());
  std::printf(
      "[ conv gpu ] %-38s %-28s %-4s O %4lld nnz %7lld batch %lld %-8s max rel err %.2e (tol %.1e) "
      "interpreter bit diffs %lld\n",
      c.name.c_str(), rt::describe(c.g).c_str(), std::string(dtype_name(c.dtype)).c_str(),
      static_cast<long long>(o), static_cast<long long>(c.w.nnz()), static_cast<long long>(c.batch),
      family.c_str(), rel, tolerance, static_cast<long long>(bit_diffs));
  std::fflush(stdout);
  EXPECT_EQ(nans, 0) << c.name << ": unwritten or NaN outputs";
  EXPECT_LE(rel, tolerance) << c.name;
  EXPECT_EQ(bit_diffs, 0) << c.name << ": the GPU and the interpreter differ";
  return family;
}

// One way of running every shape: its name, what it sets in the case, the family it must take.
struct Variant {
  std::string name;
  std::function<void(ConvCase&)> set;
  std::string family;
};

// Every shape (3x3 stride 1 and 2, same and valid padding, a 7x7 output whose pixel count is odd, 1x1
// stride 1 and 2, the 7x7 stem, a 3x5 kernel with asymmetric pads) in both layouts, once per variant;
// random filters of 37 rows from `seed`, batches of 1..5, bias and ReLU on every third case.
void run_every_shape(const rt::Context& ctx, const std::vector<Variant>& variants, std::uint64_t seed) {
  using L = rt::ConvLayout;
  const std::vector<std::pair<std::string, rt::ConvGeometry>> shapes = {
      {"3x3 s1 same", geometry(L::nchw, 16, 23, 19, 3, 3, 1, 1, 1, 1, 1)},
      {"3x3 s2 same", geometry(L::nchw, 12, 21, 30, 3, 3, 2, 1, 1, 1, 1)},
      {"3x3 s1 valid", geometry(L::nchw, 9, 12, 17, 3, 3, 1, 0, 0, 0, 0)},
      {"3x3 s1 valid 7x7", geometry(L::nchw, 9, 9, 9, 3, 3, 1, 0, 0, 0, 0)},
      {"1x1 s1", geometry(L::nchw, 40, 9, 13, 1, 1, 1, 0, 0, 0, 0)},
      {"1x1 s2", geometry(L::nchw, 24, 15, 15, 1, 1, 2, 0, 0, 0, 0)},
      {"7x7 s2 stem", geometry(L::nchw, 3, 45, 38, 7, 7, 2, 3, 3, 3, 3)},
      {"3x5 s2 asym", geometry(L::nchw, 7, 20, 22, 3, 5, 2, 0, 2, 1, 1)}};
  std::uint64_t index = 0;
  for (const auto& [label, base] : shapes)
    for (const L layout : {L::nchw, L::nhwc})
      for (const Variant& v : variants) {
        ConvCase c;
        c.g = base;
        c.g.layout = layout;
        c.name = label + (layout == L::nhwc ? " nhwc " : " nchw ") + v.name;
        c.w = test::random_csr(37, c.g.k(), 0.25, seed + index);
        c.batch = 1 + static_cast<std::int64_t>(index % 5);
        c.epilogue = index % 3 == 1;
        v.set(c);
        ++index;
        EXPECT_EQ(run_case(ctx, c), v.family) << c.name;
      }
}

TEST(ConvGpu, EveryShapeLayoutAndFamily) {
  SPARSECC_GPU_OR_SKIP();
  rt::Context ctx(0);
  run_every_shape(ctx,
                  {{"baked", [](ConvCase& c) { c.values = SpmmValueMode::baked; }, "unrolled"},
                   {"rolled", [](ConvCase& c) { c.values = SpmmValueMode::rolled; }, "rolled"}},
                  100);
}

// f16 and bf16 (the unrolled half family, two pixels a thread): odd pixel counts put a thread's pair in
// two rows or two images; 3x3 and 1x1 kernels read through tap pointers, the 7x7 stem and the 3x5
// kernel through masks.
TEST(ConvGpu, HalfEveryShapeAndLayout) {
  SPARSECC_GPU_OR_SKIP();
  rt::Context ctx(0);
  run_every_shape(ctx,
                  {{"f16", [](ConvCase& c) { c.dtype = DType::f16; }, "unrolled"},
                   {"bf16", [](ConvCase& c) { c.dtype = DType::bf16; }, "unrolled"}},
                  300);
}

// The rule's own choice: a large 3x3 filter bank (unrolled, through PTX), a 7x7 one too large for the
// CUDA C++ route (rolled), rows without nonzeros, and a batch of 16.
TEST(ConvGpu, AutomaticPlans) {
  SPARSECC_GPU_OR_SKIP();
  rt::Context ctx(0);
  ConvCase big;
  big.name = "auto 256x2304";
  big.g = geometry(rt::ConvLayout::nchw, 256, 14, 14, 3, 3, 1, 1, 1, 1, 1);
  big.w = test::random_csr(256, big.g.k(), 0.1, 7);
  big.batch = 16;
  EXPECT_EQ(run_case(ctx, big), "unrolled");
  ConvCase stem;
  stem.name = "auto 7x7 stem (rolled)";
  stem.g = geometry(rt::ConvLayout::nchw, 64, 20, 20, 7, 7, 2, 3, 3, 3, 3);
  stem.w = test::random_csr(16, stem.g.k(), 0.45, 7);
  stem.batch = 5;
  EXPECT_EQ(run_case(ctx, stem), "rolled");
  ConvCase small;
  small.name = "auto 64x576 empty rows";
  small.g = geometry(rt::ConvLayout::nhwc, 64, 28, 28, 3, 3, 2, 1, 1, 1, 1);
  small.w = test::random_csr(64, small.g.k(), 0.1, 8, 5, 2);
  small.batch = 3;
  small.epilogue = true;
  EXPECT_EQ(run_case(ctx, small), "unrolled");
}

// ResNet-50's 3x3 layers of block groups 1-3 with SparseRT's pruned filters (90 % and 95 %) on the
// published activations (stride 1, padding 1), batch 1 and a batch of 2 (the image and its negation).
TEST(ConvGpu, SparseRtResNet50Layers) {
  SPARSECC_GPU_OR_SKIP();
  SPARSECC_DATA_OR_SKIP(dir, "sparsert/resnet50_3x3_sparse90.npz");
  rt::Context ctx(0);
  for (const char* file : {"resnet50_3x3_sparse90.npz", "resnet50_3x3_sparse95.npz"}) {
    const auto path = dir.parent_path() / file;
    if (!std::filesystem::exists(path)) continue;
    for (int bg = 1; bg <= 3; ++bg) {
      const Tensor f = read_npz_tensor(path.string(), "filter_bg" + std::to_string(bg));
      const Tensor in = read_npz_tensor(path.string(), "input_bg" + std::to_string(bg));
      DenseMatrix d(f.shape[0], f.shape[1]);
      d.data = f.data;
      ConvCase c;
      c.w = csr_from_dense(d, DType::f32);
      c.g = geometry(rt::ConvLayout::nchw, in.shape[0], in.shape[1], in.shape[2], 3, 3, 1, 1, 1, 1, 1);
      for (const std::int64_t batch : {1, 2}) {
        c.batch = batch;
        c.x = in.data;
        if (batch == 2)
          for (double v : in.data) c.x.push_back(-v);
        c.name = std::string(file).substr(16, 8) + " bg" + std::to_string(bg);
        run_case(ctx, c);
        if (bg == 1) {  // the half family on the smallest layer (its CUDA C++ compile grows fast)
          ConvCase h = c;
          h.dtype = DType::f16;
          h.name += " f16";
          run_case(ctx, h);
        }
      }
    }
  }
}

TEST(ConvGpu, LaunchChecksShapes) {
  SPARSECC_GPU_OR_SKIP();
  rt::Context ctx(0);
  const rt::ConvGeometry g = geometry(rt::ConvLayout::nchw, 4, 8, 8, 3, 3, 1, 1, 1, 1, 1);
  const CsrMatrix w = test::random_csr(6, g.k(), 0.3, 9);
  pipeline::SpmmRequest r;
  r.problem = conv_problem(g, 6, false, false);
  const pipeline::SpmmArtifact art = pipeline::compile_spmm(w, r, default_gpu_target());
  const rt::SpmmExecutor ex = rt::SpmmExecutor::load(*art.bundle, "checks", ctx);
  rt::DeviceBuffer dx(4 * 4 * 64 * 4), dy(4 * 6 * 64 * 4);
  EXPECT_THROW(ex.run(dx.get(), dy.get(), 64), std::invalid_argument);  // a convolution: run_conv
  EXPECT_THROW(ex.run_conv(dx.get(), {2, 4, 8, 9}, dy.get(), {2, 6, 8, 8}), std::invalid_argument);
  EXPECT_THROW(ex.run_conv(dx.get(), {2, 4, 8, 8}, dy.get(), {3, 6, 8, 8}), std::invalid_argument);
  EXPECT_THROW(ex.run_conv(dx.get(), {2, 8, 8, 4}, dy.get(), {2, 8, 8, 6}), std::invalid_argument);  // NHWC
  EXPECT_THROW(ex.run_conv(0, {2, 4, 8, 8}, dy.get(), {2, 6, 8, 8}), std::invalid_argument);
  EXPECT_NO_THROW(ex.run_conv(dx.get(), {4, 4, 8, 8}, dy.get(), {4, 6, 8, 8}));
  ctx.synchronize();
}

}  // namespace
