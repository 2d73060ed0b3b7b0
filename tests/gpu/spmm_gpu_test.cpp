// Emitted SpMM executors on a GPU, end to end: matrix -> plan_spmm -> check_plan -> emit_spmm_cuda or
// emit_spmm_ptx -> NVRTC or nvJitLink for the device's arch (ptxas: no spills, no stack frame) -> rt::Bundle
// -> SpmmExecutor, run on a NaN-poisoned C for each n and compared with the fp64 reference (max error
// relative to max |ref| <= 1e-5) and with interpret_spmm bit for bit (so both emitters give the same
// bits). Cases: edge cases on random matrices (rolled plans among them) and every MobileNet v1 1x1
// layer through both emitters, every DLMC rn50 / transformer 0.9 matrix through the PTX route (the
// large rn50 layers at N = 49 plan rolled and compile as CUDA C++) and those up to an nnz limit also
// through NVRTC (all with SPARSECC_GPU_ALL=1), and a bundle file round trip. GPU tests skip with the reason
// when no driver or device is present; SpmmGpuPipelineCpu runs the build half without a device.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "gpu_skip.hpp"
#include "sparsecc/bundle/write_bundle.hpp"
#include "sparsecc/io/load.hpp"
#include "sparsecc/runtime/driver.hpp"
#include "spmm_gpu_support.hpp"
#include "test_support.hpp"

using namespace sparsecc;
using namespace sparsecc::gputest;

namespace {

bool run_everything() {
  const char* v = std::getenv("SPARSECC_GPU_ALL");
  return v && std::string(v) == "1";
}

SpmmCase make_case(std::string name, CsrMatrix a, std::int64_t n, SpmmNMode mode, bool bias, bool relu,
                   SpmmOptions options = {}, std::vector<int> ns = {}) {
  SpmmCase c;
  c.name = std::move(name);
  c.problem = {a.rows, a.cols, n, mode, bias, relu, DType::f32};
  c.options = std::move(options);
  if (bias) c.bias = random_vector(a.rows, 0xb1a5 + static_cast<std::uint64_t>(a.rows));
  c.ns = ns.empty() ? std::vector<int>{static_cast<int>(n)} : std::move(ns);
  c.a = std::move(a);
  return c;
}

SpmmOptions opts(std::int32_t ny, std::int32_t gy, std::optional<SpmmValueMode> vm,
                 SpmmRowSplit split = SpmmRowSplit::equal, std::int32_t t = 0) {
  SpmmOptions o;
  o.rows_per_block = ny;
  o.groups = gy;
  o.value_mode = vm;
  o.row_split = split;
  o.n_tile = t;
  return o;
}

// `o` with two adjacent fp32 columns a thread.
SpmmOptions pairs(SpmmOptions o) {
  o.cols_per_thread = 2;
  return o;
}

// A rolled `o` whose warps split into `l` slots of steps (0: the rule's).
SpmmOptions lanes(SpmmOptions o, std::int32_t l) {
  o.value_mode = SpmmValueMode::rolled;
  o.step_lanes = l;
  return o;
}

// `o` with the steps of at least `min_entries` nonzeros staged in shared memory (cp.async).
SpmmOptions staged(SpmmOptions o, std::int32_t min_entries = 1) {
  o.stage_min_entries = min_entries;
  return o;
}

// A random 37 x 53 matrix with rows 4..11 empty: with Ny = 4, block rows 1 and 2 hold nothing.
CsrMatrix with_empty_row_block() {
  DenseMatrix d = dense_from_csr(random_csr(37, 53, 0.2, 11));
  for (std::int64_t r = 4; r < 12; ++r)
    for (std::int64_t c = 0; c < 53; ++c) d(r, c) = 0;
  return csr_from_dense(d, DType::f32);
}

CsrMatrix one_nonzero() {
  DenseMatrix d(37, 53);
  d(17, 29) = -0.6875;
  return csr_from_dense(d, DType::f32);
}

// Rows of very different lengths, so the balanced split moves the block borders.
CsrMatrix skewed_rows() {
  DenseMatrix d = dense_from_csr(random_csr(61, 90, 0.05, 13));
  SplitMix64 rng(14);
  for (std::int64_t r : {3, 4, 40})
    for (std::int64_t c = 0; c < 90; ++c) d(r, c) = rng.uniform_pm1() + 2.0;  // never zero
  return csr_from_dense(d, DType::f32);
}

// Every case once per emitter ("<name>/cuda", "<name>/ptx").
std::vector<SpmmCase> both_emitters(const std::vector<SpmmCase>& cases) {
  std::vector<SpmmCase> out;
  for (const auto& c : cases)
    for (KernelLanguage l : {KernelLanguage::cuda, KernelLanguage::ptx}) {
      out.push_back(c);
      out.back().emit = l;
      out.back().name += std::string("/") + to_string(l);
    }
  return out;
}

const std::vector<int> kRuntimeNs = {1, 31, 33, 49, 128, 129, 3136};

std::vector<SpmmCase> edge_cases() {
  using V = SpmmValueMode;
  using M = SpmmNMode;
  std::vector<SpmmCase> cs;
  const CsrMatrix odd = random_csr(37, 53, 0.2, 12);
  cs.push_back(
      make_case("empty_row_block", with_empty_row_block(), 49, M::fixed, true, true, opts(4, 1, V::baked)));
  cs.push_back(make_case("empty_row_block_streamed_gy3", with_empty_row_block(), 49, M::fixed, true, false,
                         opts(4, 3, V::streamed)));
  cs.push_back(make_case("one_nonzero_n1", one_nonzero(), 1, M::fixed, false, false));
  cs.push_back(make_case("one_nonzero_runtime", one_nonzero(), 64, M::runtime, true, true,
                         opts(0, 0, V::streamed), kRuntimeNs));
  cs.push_back(make_case("all_zero_bias_relu", random_csr(9, 5, 0.0, 4), 49, M::fixed, true, true));
  cs.push_back(make_case("all_zero_plain", random_csr(9, 5, 0.0, 4), 1, M::fixed, false, false));
  cs.push_back(make_case("odd_n1_baked", odd, 1, M::fixed, false, false, opts(0, 1, V::baked)));
  cs.push_back(make_case("odd_n49_streamed_bias", odd, 49, M::fixed, true, false, opts(0, 1, V::streamed)));
  cs.push_back(make_case("odd_n3136_baked_bias_relu", odd, 3136, M::fixed, true, true, opts(0, 1, V::baked)));
  cs.push_back(
      make_case("odd_n3136_streamed_gy3", odd, 3136, M::fixed, false, false, opts(0, 3, V::streamed)));
  cs.push_back(make_case("odd_runtime_baked_gy1", odd, 64, M::runtime, false, false, opts(0, 1, V::baked),
                         kRuntimeNs));
  cs.push_back(make_case("odd_runtime_streamed_gy3_bias_relu", odd, 100, M::runtime, true, true,
                         opts(8, 3, V::streamed, SpmmRowSplit::equal, 32), kRuntimeNs));
  cs.push_back(make_case("balanced_ny16_baked", skewed_rows(), 49, M::fixed, true, false,
                         opts(16, 1, V::baked, SpmmRowSplit::balanced)));
  cs.push_back(make_case("balanced_runtime_streamed_gy3", skewed_rows(), 49, M::runtime, true, true,
                         opts(4, 3, V::streamed, SpmmRowSplit::balanced), kRuntimeNs));
  cs.push_back(make_case("wide_256x512_auto_runtime", random_csr(256, 512, 0.1, 15), 196, M::runtime, true,
                         true, {}, {49, 196, 3136}));
  // Two columns a thread (fixed even N): one pair, a last tile only partly live, group reductions
  // of float2, empty block rows, balanced rows, no nonzeros.
  cs.push_back(make_case("pairs_n2_baked", odd, 2, M::fixed, false, false, pairs(opts(0, 1, V::baked))));
  cs.push_back(make_case("pairs_n50_streamed_gy3_bias", odd, 50, M::fixed, true, false,
                         pairs(opts(4, 3, V::streamed, SpmmRowSplit::equal, 32))));
  cs.push_back(make_case("pairs_n3136_baked_gy2_bias_relu", odd, 3136, M::fixed, true, true,
                         pairs(opts(8, 2, V::baked))));
  cs.push_back(make_case("pairs_empty_row_block_gy3", with_empty_row_block(), 64, M::fixed, true, true,
                         pairs(opts(4, 3, V::baked))));
  cs.push_back(make_case("pairs_balanced_ny16_n196", skewed_rows(), 196, M::fixed, true, false,
                         pairs(opts(16, 2, V::baked, SpmmRowSplit::balanced))));
  cs.push_back(
      make_case("pairs_all_zero_bias_relu", random_csr(9, 5, 0.0, 4), 2, M::fixed, true, true, pairs({})));
  // Clustered rows (stores and bias reads at the regrouped rows): empty rows, odd shapes, runtime N,
  // groups, streamed values.
  cs.push_back(make_case("clustered_empty_row_block_bias_relu", with_empty_row_block(), 49, M::fixed, true,
                         true, opts(4, 1, V::baked, SpmmRowSplit::clustered)));
  cs.push_back(make_case("clustered_odd_n3136_gy3", odd, 3136, M::fixed, true, false,
                         opts(0, 3, V::baked, SpmmRowSplit::clustered)));
  cs.push_back(make_case("clustered_skewed_runtime_streamed_gy2", skewed_rows(), 49, M::runtime, true, true,
                         opts(16, 2, V::streamed, SpmmRowSplit::clustered, 32), kRuntimeNs));
  // Staged steps (cp.async copies of B to shared memory, waited for by commit): empty block rows,
  // more staged steps than a commit (odd: up to 53 steps a group), groups, runtime N (tails without
  // copies), streamed values, pairs (8-byte copies), clustered rows, a slot cap below the steps.
  cs.push_back(make_case("staged_empty_row_block_bias_relu", with_empty_row_block(), 49, M::fixed, true, true,
                         staged(opts(4, 1, V::baked))));
  cs.push_back(
      make_case("staged_odd_n3136_gy3_bias", odd, 3136, M::fixed, true, false, staged(opts(0, 3, V::baked))));
  cs.push_back(make_case("staged2_odd_runtime_streamed_gy2_bias_relu", odd, 100, M::runtime, true, true,
                         staged(opts(8, 2, V::streamed, SpmmRowSplit::equal, 32), 2), kRuntimeNs));
  cs.push_back(make_case("staged_pairs_n50_streamed_gy3_bias", odd, 50, M::fixed, true, false,
                         staged(pairs(opts(4, 3, V::streamed, SpmmRowSplit::equal, 32)))));
  cs.push_back(make_case("staged_clustered_skewed_n49_gy2", skewed_rows(), 49, M::fixed, true, true,
                         staged(opts(16, 2, V::baked, SpmmRowSplit::clustered, 32))));
  cs.push_back(make_case("staged_capped_1024_threads_n3136", random_csr(64, 300, 0.3, 18), 3136, M::fixed,
                         false, true, staged(opts(16, 4, V::baked, SpmmRowSplit::equal, 256))));
  cs = both_emitters(cs);
  // Rolled plans (one emitter: they are always CUDA C++): tilings, runtime N, bias and ReLU, empty
  // block rows, no nonzeros at all, columns not a multiple of the block's 2 T.
  cs.push_back(make_case("rolled_r1_g8_n49_bias_relu", random_csr(200, 700, 0.15, 17), 49, M::fixed, true,
                         true, opts(1, 8, V::rolled)));
  cs.push_back(make_case("rolled_r3_g3_runtime_bias_relu", odd, 100, M::runtime, true, true,
                         opts(3, 3, V::rolled, SpmmRowSplit::equal, 32), kRuntimeNs));
  cs.push_back(make_case("rolled_r4_t64_n3136", odd, 3136, M::fixed, false, false,
                         opts(4, 2, V::rolled, SpmmRowSplit::equal, 64)));
  cs.push_back(make_case("rolled_empty_row_block", with_empty_row_block(), 49, M::fixed, true, false,
                         opts(4, 2, V::rolled)));
  // Half-warp groups (each thread loads its records); one group of about 205 steps a row (chunks
  // of 32, the last of about 13: a whole batch and a partial one).
  cs.push_back(make_case("rolled_r2_t16_runtime_bias_relu", odd, 100, M::runtime, true, true,
                         opts(2, 2, V::rolled, SpmmRowSplit::equal, 16), kRuntimeNs));
  cs.push_back(make_case("rolled_r1_g1_long_rows", random_csr(64, 2048, 0.1, 21), 49, M::fixed, false, false,
                         opts(1, 1, V::rolled)));
  cs.push_back(
      make_case("rolled_one_nonzero_n1", one_nonzero(), 1, M::fixed, false, true, opts(1, 4, V::rolled)));
  cs.push_back(make_case("rolled_all_zero_bias_relu", random_csr(9, 5, 0.0, 4), 49, M::fixed, true, true,
                         opts(1, 1, V::rolled)));
  // Step lanes (small N; the slots' sums added by shuffles, then the groups' through shared memory):
  // N = 1 with many groups, 3 rows a record at N = 3, long rows over several batches of a lane at
  // N = 16, runtime N over many column tiles, empty block rows, no nonzeros, one nonzero.
  cs.push_back(make_case("lanes_n1_auto_bias_relu", random_csr(200, 700, 0.15, 17), 1, M::fixed, true, true));
  cs.push_back(make_case("lanes_n3_r3_g2_bias", odd, 3, M::fixed, true, false, lanes(opts(3, 2, {}), 0)));
  cs.push_back(make_case("lanes_n16_g1_long_rows", random_csr(64, 2048, 0.1, 21), 16, M::fixed, false, true,
                         lanes(opts(1, 1, {}), 2)));
  cs.push_back(make_case("lanes_l4_r2_runtime_bias_relu", odd, 100, M::runtime, true, true,
                         lanes(opts(2, 3, {}), 4), kRuntimeNs));
  cs.push_back(make_case("lanes_n2_empty_row_block", with_empty_row_block(), 2, M::fixed, true, false,
                         lanes(opts(4, 2, {}), 0)));
  cs.push_back(make_case("lanes_all_zero_n1_bias_relu", random_csr(9, 5, 0.0, 4), 1, M::fixed, true, true,
                         lanes(opts(0, 0, {}), 0)));
  cs.push_back(make_case("lanes_l32_one_nonzero_n5", one_nonzero(), 5, M::fixed, false, false,
                         lanes(opts(1, 2, {}), 32)));
  // Large enough for the split PTX layout (one function per block row, assembled in modules).
  SpmmCase split = make_case("split_layout_1000x700_gy2_bias_relu", random_csr(1000, 700, 0.06, 16), 196,
                             M::fixed, true, true, opts(8, 2, V::baked));
  cs.push_back(split);
  split.name = "split_layout_fixed_streamed_gy2_bias";
  split.problem.relu = false;
  split.options = opts(8, 2, V::streamed);
  cs.push_back(split);
  split.name = "split_layout_1024_threads_gy4";  // the register cap a block of 1024 threads fits (64)
  split.problem.relu = true;
  split.options = opts(16, 4, V::baked, SpmmRowSplit::equal, 256);
  cs.push_back(split);
  split.name = "split_layout_pairs_gy2_bias_relu";
  split.options = pairs(opts(8, 2, V::baked));
  cs.push_back(split);
  split.name = "split_layout_pairs_streamed_gy4_bias";
  split.problem.relu = false;
  split.options = pairs(opts(8, 4, V::streamed));
  cs.push_back(split);
  split.name = "split_layout_staged_gy2_bias";  // case functions find their slots from %redr
  split.options = staged(opts(8, 2, V::baked));
  cs.push_back(split);
  split.name = "split_layout_staged_pairs_gy1_bias";
  split.options = staged(pairs(opts(8, 1, V::baked)), 2);
  cs.push_back(split);
  split.problem.relu = true;
  split.name = "split_layout_runtime_streamed";
  split.problem.n_mode = M::runtime;
  split.options = opts(4, 1, V::streamed);
  split.ns = {1, 49, 196, 3136};
  cs.push_back(split);
  return cs;
}

// Builds every case in parallel, then loads and runs each on the device.
void build_and_run(const rt::Context& ctx, const std::vector<SpmmCase>& cases) {
  const auto built = build_all(cases, ctx.device().arch());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].name);
    const SpmmCase& c = cases[i];
    SpmmBuilt b;
    try {
      b = built[i].get();
    } catch (const CompileError& e) {
      ADD_FAILURE() << c.name << ": " << e.what() << "\n" << e.log();
      continue;
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.name << ": " << e.what();
      continue;
    }
    expect_clean_build(c, b);
    if (!b.plan_errors.empty()) continue;
    const auto ex = rt::SpmmExecutor::load(b.bundle, c.name, ctx);
    EXPECT_EQ(ex.loaded_from(), "cubin") << ex.load_reason();
    for (int n : c.ns) run_and_check(ctx, ex, c, b, n);
  }
}

std::vector<std::filesystem::path> sorted_files(const std::filesystem::path& dir, const std::string& suffix) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string s = e.path().filename().string();
    if (s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A DLMC .smtx.gz file with the values of seed 1 (the bench suites' values).
CsrMatrix load_dlmc(const std::filesystem::path& file) {
  LoadOptions lo;
  lo.seed = 1;
  return load_matrix(file.string(), lo);
}

// Skips the test, naming the file, when a DLMC layer of `layers` (paths under `dlmc` without
// ".smtx.gz", each the first element of its entry) is absent from a data folder that has others.
#define SPARSECC_LAYERS_OR_SKIP(dlmc, layers)                                        \
  for (const auto& entry_ : layers)                                                  \
    if (const auto file_ = (dlmc) / (std::string(std::get<0>(entry_)) + ".smtx.gz"); \
        !std::filesystem::exists(file_))                                             \
  GTEST_SKIP() << "real data incomplete: " << file_ << " is absent"

// Every DLMC matrix of one folder through the PTX route, and those with nnz <= limit also through
// NVRTC (all with SPARSECC_GPU_ALL=1), values seed 1.
void run_dlmc(const std::filesystem::path& dir, const std::string& label, std::int64_t limit, std::int64_t n,
              bool bias_relu) {
  rt::Context ctx(0);
  std::vector<SpmmCase> cases;
  std::int64_t skipped = 0;
  const bool all = run_everything();
  const auto files = sorted_files(dir, ".smtx.gz");
  ASSERT_FALSE(files.empty()) << dir;
  for (const auto& f : files) {
    CsrMatrix a = load_dlmc(f);
    std::string name = label + "/" + f.filename().string();
    name.resize(name.size() - std::string(".smtx.gz").size());
    const bool nvrtc = all || a.nnz() <= limit;
    skipped += nvrtc ? 0 : 1;
    SpmmCase c = make_case(name + "/ptx", std::move(a), n, SpmmNMode::fixed, bias_relu, bias_relu);
    if (nvrtc) {
      cases.push_back(c);
      cases.back().name = name + "/cuda";
      cases.back().emit = KernelLanguage::cuda;
    }
    cases.push_back(std::move(c));
  }
  std::printf(
      "[ spmm gpu ] %s: %zu matrices through PTX, %lld of them not through NVRTC (nnz > %lld; "
      "SPARSECC_GPU_ALL=1 runs all)\n",
      label.c_str(), files.size(), static_cast<long long>(skipped), static_cast<long long>(limit));
  std::fflush(stdout);
  build_and_run(ctx, cases);
}

}  // namespace

// The build half of the pipeline (plan, check, emit, NVRTC with the ptxas report, bundle, bundle
// bytes and file round trip) and the CPU oracles for one small case; needs no device.
TEST(SpmmGpuPipelineCpu, BuildsSmallCaseWithoutDevice) {
  const SpmmCase c = make_case("cpu_smoke", random_csr(37, 53, 0.2, 21), 49, SpmmNMode::runtime, true, true,
                               opts(4, 3, SpmmValueMode::streamed));
  const auto built = build_all({c}, "sm_90");
  const SpmmBuilt b = built[0].get();
  expect_clean_build(c, b);
  EXPECT_EQ(b.bundle.metadata.arch, "sm_90");
  EXPECT_EQ(b.bundle.metadata.kernel, b.emitted.kernel_name);
  EXPECT_EQ(b.bundle.metadata.block_rows, b.plan.block_rows());
  EXPECT_EQ(b.bundle.metadata.block_x, b.plan.layout.block_x);
  EXPECT_EQ(b.bundle.metadata.shared_bytes, b.plan.layout.shared_bytes);
  EXPECT_EQ(b.bundle.values, spmm_kernel_values(b.plan, c.a));
  EXPECT_EQ(rt::parse_bundle(rt::bundle_bytes(b.bundle, c.name), c.name), b.bundle);
  test::TempDir dir;
  write_bundle(dir.file("cpu_smoke.spcc"), b.bundle);
  EXPECT_EQ(rt::read_bundle_file(dir.file("cpu_smoke.spcc")), b.bundle);
  // The oracles the GPU half compares against agree with each other here.
  for (int n : {1, 49, 130}) {
    const DenseMatrix bm = random_b(c.a.cols, n, 99);
    const DenseMatrix ref = spmm(c.a, bm, &c.bias, true);
    const DenseMatrix interp = interpret_spmm(b.plan, spmm_kernel_values(b.plan, c.a), bm, &c.bias);
    std::vector<float> as_float(interp.data.begin(), interp.data.end());
    const Comparison r = compare(as_float, ref, interp);
    EXPECT_EQ(r.nan_count, 0);
    EXPECT_EQ(r.mismatches, 0);
    EXPECT_LE(r.max_rel_error, kMaxRelError) << "n=" << n;
  }
  std::printf("[ spmm cpu ] %s: plan ok, %d regs, compile %.2f s, cubin %zu B, bundle %zu B\n",
              c.name.c_str(), b.usage.registers, b.compiled.seconds, b.compiled.cubin.size(),
              rt::bundle_bytes(b.bundle).size());
}

TEST(SpmmGpu, EdgeCasesOnRandomMatrices) {
  SPARSECC_GPU_OR_SKIP();
  rt::Context ctx(0);
  build_and_run(ctx, edge_cases());
}

TEST(SpmmGpu, MobileNetV1Sparse90Layers) {
  SPARSECC_GPU_OR_SKIP();
  SPARSECC_DATA_OR_SKIP(file, "sparsert/mobilenet_v1_sparse90.npz");
  rt::Context ctx(0);
  std::vector<SpmmCase> cases;
  for (int i = 0; i < 12; ++i) {
    const std::string layer = "contraction_1x1_" + std::to_string(i);
    CsrMatrix a = load_matrix(file.string() + ":" + layer);
    const Tensor bias = load_tensor(file.string() + ":" + layer + "_bias");
    ASSERT_EQ(bias.numel(), a.rows) << layer << ": bias of " << bias.numel() << " for " << a.rows << " rows";
    SpmmCase c = make_case("mobilenet/" + layer, std::move(a), 196, SpmmNMode::fixed, true, true);
    c.bias.clear();
    for (double v : bias.data) c.bias.push_back(static_cast<float>(v));
    cases.push_back(std::move(c));
  }
  build_and_run(ctx, both_emitters(cases));
}

// The published end-to-end case (test::load_mobilenet_layer0): layer 0 on the depthwise-filtered
// `input_image` reproduces `result` (no bias, no ReLU) through both emitters and every value mode, on a
// NaN-poisoned C, bit for bit as the interpreter.
TEST(SpmmGpu, MobileNetLayer0ReproducesThePublishedResult) {
  SPARSECC_GPU_OR_SKIP();
  SPARSECC_DATA_OR_SKIP(file, "sparsert/mobilenet_v1_sparse90.npz");
  rt::Context ctx(0);
  const test::PublishedLayer l = test::load_mobilenet_layer0(file);
  const auto n = static_cast<int>(l.input.cols);
  std::vector<SpmmCase> cases;
  for (const SpmmValueMode mode : {SpmmValueMode::baked, SpmmValueMode::streamed})
    cases.push_back(make_case(std::string("published/") + to_string(mode), l.a, n, SpmmNMode::fixed, false,
                              false, opts(0, 0, mode)));
  cases = both_emitters(cases);
  cases.push_back(make_case("published/rolled", l.a, n, SpmmNMode::fixed, false, false,
                            opts(0, 0, SpmmValueMode::rolled)));
  const auto built = build_all(cases, ctx.device().arch());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const SpmmCase& c = cases[i];
    const SpmmBuilt b = built[i].get();
    expect_clean_build(c, b);
    const auto ex = rt::SpmmExecutor::load(b.bundle, c.name, ctx);
    const std::vector<float> got = run_on_gpu(ctx, ex, l.input, l.a.rows, n);
    const Comparison r =
        compare(got, l.result, interpret_spmm(b.plan, spmm_kernel_values(b.plan, l.a), l.input));
    std::printf(
        "[ spmm gpu ] %-30s 64x32 N %d: max rel err against the published result %.2e, bit-exact %s\n",
        c.name.c_str(), n, r.max_rel_error, r.mismatches == 0 ? "yes" : "no");
    EXPECT_EQ(r.nan_count, 0) << c.name;
    EXPECT_LE(r.max_rel_error, kMaxRelError) << c.name;
    EXPECT_EQ(r.mismatches, 0) << c.name << ": first " << r.first_mismatch;
  }
}

TEST(SpmmGpu, DlmcRn50Sparse90) {
  SPARSECC_GPU_OR_SKIP();
  SPARSECC_DATA_OR_SKIP(dir, "dlmc/rn50/magnitude_pruning/0.9");
  run_dlmc(dir, "rn50_0.9", 7000, 49, true);
}

// Step-lane executors on real layers at small N: the ResNet-50 classifier (1000 x 2048, 205k
// nonzeros) at N = 1 by the rule, and DLMC Transformer layers at N = 1, 4 and 16, with bias and ReLU.
TEST(SpmmGpu, StepLanesOnRealLayers) {
  SPARSECC_GPU_OR_SKIP();
  SPARSECC_DATA_OR_SKIP(rn50, "dlmc/rn50/magnitude_pruning/0.9/final_dense.smtx.gz");
  SPARSECC_DATA_OR_SKIP(tf, "dlmc/transformer/magnitude_pruning/0.9");
  rt::Context ctx(0);
  std::vector<SpmmCase> cases;
  cases.push_back(make_case("rn50/final_dense/n1", load_dlmc(rn50), 1, SpmmNMode::fixed, true, true));
  const auto files = sorted_files(tf, ".smtx.gz");
  ASSERT_GE(files.size(), 3u) << tf;
  for (std::size_t i = 0; i < 3; ++i)
    for (int n : {1, 4, 16})  // rolled by the rule at N <= 4 (26k nonzeros); N = 16 asks for 2 lanes
      cases.push_back(
          make_case(fmt::format("transformer/{}/n{}", files[i * files.size() / 3].filename().string(), n),
                    load_dlmc(files[i * files.size() / 3]), n, SpmmNMode::fixed, true, true,
                    lanes({}, n == 16 ? 2 : 0)));
  for (const SpmmCase& c : cases) {
    const SpmmPlan p = plan_spmm(c.a, c.problem, c.options);
    ASSERT_GT(p.step_lanes(), 1) << c.name;
  }
  build_and_run(ctx, cases);
}

TEST(SpmmGpu, DlmcTransformerSparse90) {
  SPARSECC_GPU_OR_SKIP();
  SPARSECC_DATA_OR_SKIP(dir, "dlmc/transformer/magnitude_pruning/0.9");
  run_dlmc(dir, "transformer_0.9", 0, 256, false);
}

// Clustered rows on real layers, both emitters: the DLMC ResNet-50 and Transformer layers of the
// SparseRT suite at their batch-1 N, and two MobileNet layers with their biases.
TEST(SpmmGpu, ClusteredRowsOnRealLayers) {
  SPARSECC_GPU_OR_SKIP();
  SPARSECC_DATA_OR_SKIP(dlmc, "dlmc");
  rt::Context ctx(0);
  const std::pair<const char*, std::int64_t> layers[] = {
      {"rn50/magnitude_pruning/0.9/bottleneck_1_block_group1_1_1", 3136},
      {"rn50/magnitude_pruning/0.9/bottleneck_3_block_group1_1_1", 3136},
      {"rn50/magnitude_pruning/0.9/bottleneck_1_block_group3_1_1", 196},
      {"transformer/magnitude_pruning/0.9/"
       "body_encoder_layer_0_self_attention_multihead_attention_q_fully_connected",
       256},
      {"transformer/magnitude_pruning/0.95/body_encoder_layer_0_ffn_conv1_fully_connected", 256}};
  SPARSECC_LAYERS_OR_SKIP(dlmc, layers);
  std::vector<SpmmCase> cases;
  for (const auto& [layer, n] : layers) {
    CsrMatrix a = load_dlmc(dlmc / (std::string(layer) + ".smtx.gz"));
    cases.push_back(make_case(std::string("clustered/") + layer, std::move(a), n, SpmmNMode::fixed, true,
                              true, opts(0, 0, std::nullopt, SpmmRowSplit::clustered)));
  }
  std::vector<SpmmCase> checked = both_emitters({cases.begin(), cases.begin() + 4});
  checked.push_back(cases.back());  // 52k nonzeros: the PTX route only (NVRTC takes minutes)
  build_and_run(ctx, checked);
}

// Staged steps on real layers: the DLMC ResNet-50 and Transformer layers of the SparseRT suite at
// their batch-1 N through both emitters (the 52k-nonzero one through PTX only), with every step
// staged that the slots hold and with only steps of two or more nonzeros.
TEST(SpmmGpu, StagedStepsOnRealLayers) {
  SPARSECC_GPU_OR_SKIP();
  SPARSECC_DATA_OR_SKIP(dlmc, "dlmc");
  rt::Context ctx(0);
  const std::tuple<const char*, std::int64_t, std::int32_t> layers[] = {
      {"rn50/magnitude_pruning/0.9/bottleneck_1_block_group1_1_1", 3136, 1},
      {"rn50/magnitude_pruning/0.9/bottleneck_3_block_group1_1_1", 3136, 2},
      {"rn50/magnitude_pruning/0.9/bottleneck_1_block_group2_1_1", 784, 1},
      {"transformer/magnitude_pruning/0.9/"
       "body_encoder_layer_0_self_attention_multihead_attention_q_fully_connected",
       256, 2},
      {"transformer/magnitude_pruning/0.95/body_encoder_layer_0_ffn_conv1_fully_connected", 256, 1}};
  SPARSECC_LAYERS_OR_SKIP(dlmc, layers);
  std::vector<SpmmCase> cases;
  for (const auto& [layer, n, min_entries] : layers) {
    CsrMatrix a = load_dlmc(dlmc / (std::string(layer) + ".smtx.gz"));
    cases.push_back(make_case(fmt::format("staged{}/{}", min_entries, layer), std::move(a), n,
                              SpmmNMode::fixed, true, true, staged({}, min_entries)));
  }
  std::vector<SpmmCase> checked = both_emitters({cases.begin(), cases.begin() + 4});
  checked.push_back(cases.back());
  build_and_run(ctx, checked);
}

// Tall block rows (32 rows, the automatic plan of heavy kernels) on real layers at the SparseRT
// suite's batch-16 widths, with the rows the automatic plan clusters where that cuts the B loads by
// 10 % (here all but the first layer), and a 105k-nonzero Transformer layer at N = 4096 (PTX only:
// NVRTC takes minutes on it).
TEST(SpmmGpu, TallBlockRowsAtBatch16) {
  SPARSECC_GPU_OR_SKIP();
  SPARSECC_DATA_OR_SKIP(dlmc, "dlmc");
  rt::Context ctx(0);
  const std::pair<const char*, std::int64_t> layers[] = {
      {"rn50/magnitude_pruning/0.9/bottleneck_1_block_group1_1_1", 50176},
      {"rn50/magnitude_pruning/0.9/bottleneck_3_block_group1_1_1", 50176},
      {"rn50/magnitude_pruning/0.95/bottleneck_3_block_group3_1_1", 3136},
      {"transformer/magnitude_pruning/0.9/body_encoder_layer_0_ffn_conv1_fully_connected", 4096}};
  SPARSECC_LAYERS_OR_SKIP(dlmc, layers);
  std::vector<SpmmCase> cases;
  for (const auto& [layer, n] : layers) {
    CsrMatrix a = load_dlmc(dlmc / (std::string(layer) + ".smtx.gz"));
    SpmmCase c = make_case(std::string("tall/") + layer, std::move(a), n, SpmmNMode::fixed, true, true);
    const SpmmPlan p = plan_spmm(c.a, c.problem);
    EXPECT_EQ(p.layout.panel_rows, 32) << layer;
    EXPECT_EQ(p.layout.row_split == SpmmRowSplit::clustered, cases.size() > 0) << layer;
    cases.push_back(std::move(c));
  }
  std::vector<SpmmCase> checked = both_emitters({cases.begin(), cases.begin() + 3});
  checked.push_back(cases.back());
  build_and_run(ctx, checked);
}

// write_bundle -> SpmmExecutor::load_file gives the same C, bit for bit, as the in-memory bundle.
TEST(SpmmGpu, BundleFileRoundTrip) {
  SPARSECC_GPU_OR_SKIP();
  rt::Context ctx(0);
  const std::vector<SpmmCase> cases = {
      make_case("roundtrip_streamed_runtime", random_csr(70, 90, 0.15, 31), 64, SpmmNMode::runtime, true,
                true, opts(4, 2, SpmmValueMode::streamed), {1, 49, 300}),
      make_case("roundtrip_baked_fixed", random_csr(70, 90, 0.15, 32), 49, SpmmNMode::fixed, true, false,
                opts(0, 0, SpmmValueMode::baked))};
  const auto built = build_all(cases, ctx.device().arch());
  test::TempDir dir;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].name);
    const SpmmCase& c = cases[i];
    const SpmmBuilt b = built[i].get();
    expect_clean_build(c, b);
    const std::string path = dir.file(c.name + ".spcc");
    write_bundle(path, b.bundle);
    const auto from_memory = rt::SpmmExecutor::load(b.bundle, c.name, ctx);
    const auto from_file = rt::SpmmExecutor::load_file(path, ctx);
    EXPECT_EQ(from_file.metadata(), b.bundle.metadata);
    EXPECT_EQ(from_file.loaded_from(), "cubin") << from_file.load_reason();
    for (int n : c.ns) {
      const std::vector<float> mem = run_and_check(ctx, from_memory, c, b, n);
      const std::vector<float> file = run_and_check(ctx, from_file, c, b, n);
      EXPECT_TRUE(std::equal(mem.begin(), mem.end(), file.begin(), file.end(),
                             [](float x, float y) {
                               return std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y);
                             }))
          << "n=" << n << ": the file bundle computes different bits";
    }
  }
}

// Programmatic dependent launch: a square layer applied ten times in a row on one stream, each launch
// programmatic and reading the buffer the one before it wrote, while writing the one that launch read
// (two buffers, ping-pong). A kernel that touched B or C before its predecessor finished would read a
// stale or half-written input, or overwrite one still being read. The chain must give the bits of
// the same chain launched plainly, and the fp64 chain within 1e-5. Covers both emitters, the split
// PTX layout (runtime N) and a rolled kernel, with the early launch of the next grid and without it
// (SpmmProgrammatic::wait, which the rule gives a plan above kSpmmProgrammaticTriggerInstructions);
// a plan with programmatic launches off, and a bundle that does not record the wait, launch plainly
// when asked for a programmatic launch.
TEST(SpmmGpu, ProgrammaticLaunchChains) {
  SPARSECC_GPU_OR_SKIP();
  rt::Context ctx(0);
  SPARSECC_PROGRAMMATIC_OR_SKIP(ctx);
  const auto scaled = scaled_for_chains;
  const auto with_mode = [](SpmmOptions o, SpmmProgrammatic mode) {
    o.programmatic = mode;
    return o;
  };
  const SpmmOptions trigger = with_mode({}, SpmmProgrammatic::trigger),
                    wait = with_mode({}, SpmmProgrammatic::wait);
  std::vector<SpmmCase> cases =
      both_emitters({make_case("chain_384_n196", scaled(random_csr(384, 384, 0.1, 41)), 196, SpmmNMode::fixed,
                               false, false, trigger),
                     make_case("chain_wait_384_n196", scaled(random_csr(384, 384, 0.1, 41)), 196,
                               SpmmNMode::fixed, false, false, wait)});
  cases.push_back(make_case("chain_split_runtime_512_n100/ptx", scaled(random_csr(512, 512, 0.06, 42)), 100,
                            SpmmNMode::runtime, false, false, trigger));
  cases.push_back(make_case("chain_wait_split_runtime_512_n100/ptx", scaled(random_csr(512, 512, 0.06, 42)),
                            100, SpmmNMode::runtime, false, false, wait));
  cases.push_back(make_case("chain_rule_768_n100/ptx", scaled(random_csr(768, 768, 0.12, 44)), 100,
                            SpmmNMode::fixed, false, false));
  cases.push_back(make_case("chain_off_384_n196/ptx", scaled(random_csr(384, 384, 0.1, 41)), 196,
                            SpmmNMode::fixed, false, false, with_mode({}, SpmmProgrammatic::off)));
  cases.push_back(make_case("chain_rolled_512_n49", scaled(random_csr(512, 512, 0.1, 43)), 49,
                            SpmmNMode::fixed, false, false,
                            with_mode(opts(1, 4, SpmmValueMode::rolled), SpmmProgrammatic::trigger)));
  cases.push_back(make_case("chain_wait_rolled_512_n49", scaled(random_csr(512, 512, 0.1, 43)), 49,
                            SpmmNMode::fixed, false, false,
                            with_mode(opts(1, 4, SpmmValueMode::rolled), SpmmProgrammatic::wait)));
  const auto built = build_all(cases, ctx.device().arch());
  constexpr int kLayers = 10;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].name);
    const SpmmCase& c = cases[i];
    const SpmmBuilt b = built[i].get();
    expect_clean_build(c, b);
    const auto named = [&](const char* word) { return c.name.find(word) != std::string::npos; };
    const bool plain_plan = named("_off_");
    ASSERT_EQ(b.plan.hints.programmatic, !plain_plan);
    ASSERT_EQ(b.plan.hints.programmatic_trigger, !plain_plan && !named("_wait_") && !named("_rule_"));
    ASSERT_EQ(b.bundle.metadata.programmatic_launch, !plain_plan);
    if (c.name.find("split") != std::string::npos) {
      EXPECT_FALSE(b.emitted.modules.empty()) << "not split";
    }
    // Programmatic where the bundle records the wait; the same kernel under a bundle that does not
    // launches plainly.
    rt::Bundle without = b.bundle;
    without.metadata.programmatic_launch = false;
    for (const rt::Bundle* bundle : std::vector<const rt::Bundle*>{&b.bundle, &without}) {
      const auto ex = rt::SpmmExecutor::load(*bundle, c.name, ctx);
      const int n = static_cast<int>(c.problem.n);
      const DenseMatrix x0 = random_b(c.a.cols, n, 77);
      const std::vector<float> h(x0.data.begin(), x0.data.end());
      const std::vector<float> plain = run_chain(ctx, ex, h, n, kLayers, false, kNaNPattern),
                               overlapped = run_chain(ctx, ex, h, n, kLayers, true, kNaNPattern);
      DenseMatrix ref = x0;
      for (int layer = 0; layer < kLayers; ++layer) ref = spmm(c.a, ref);
      double max_ref = 0, max_diff = 0;
      std::int64_t nonfinite = 0, differing = 0;
      for (std::size_t e = 0; e < ref.data.size(); ++e) {
        max_ref = std::max(max_ref, std::fabs(ref.data[e]));
        if (!std::isfinite(overlapped[e])) ++nonfinite;
        max_diff = std::max(max_diff, std::fabs(static_cast<double>(overlapped[e]) - ref.data[e]));
        differing += std::bit_cast<std::uint32_t>(overlapped[e]) != std::bit_cast<std::uint32_t>(plain[e]);
      }
      const double err = max_ref > 0 ? max_diff / max_ref : max_diff;
      std::printf(
          "[ spmm gpu ] %-44s %5lldx%-5lld nnz %7lld  N %4d  %-7s %d launches (%s%s): max rel err %.2e, "
          "%lld elements differ from the plain chain\n",
          c.name.c_str(), static_cast<long long>(c.a.rows), static_cast<long long>(c.a.cols),
          static_cast<long long>(c.a.nnz()), n, to_string(b.plan.value_mode()), kLayers,
          ex.metadata().programmatic_launch ? "programmatic" : "asked programmatic, plain",
          b.plan.hints.programmatic_trigger ? ", early trigger" : "", err, static_cast<long long>(differing));
      std::fflush(stdout);
      EXPECT_EQ(nonfinite, 0);
      EXPECT_LE(err, kMaxRelError);
      EXPECT_EQ(differing, 0) << "the programmatic chain computes other bits than the plain one";
    }
  }
}

// An executor with two columns a thread loads and stores 64-bit pairs: run() refuses B or C off an
// 8-byte boundary (the kernel would fault or read the wrong pairs) and takes aligned ones.
TEST(SpmmGpu, PairsRefuseMisalignedPointers) {
  SPARSECC_GPU_OR_SKIP();
  rt::Context ctx(0);
  const SpmmCase c = make_case("pairs_alignment", random_csr(37, 53, 0.2, 12), 64, SpmmNMode::fixed, false,
                               false, pairs({}));
  const SpmmBuilt b = build_all({c}, ctx.device().arch())[0].get();
  expect_clean_build(c, b);
  const auto ex = rt::SpmmExecutor::load(b.bundle, c.name, ctx);
  rt::DeviceBuffer db((53 * 64 + 2) * sizeof(float)), dc((37 * 64 + 2) * sizeof(float));
  EXPECT_THROW(ex.run(db.get() + 4, dc.get(), 64), std::invalid_argument);
  EXPECT_THROW(ex.run(db.get(), dc.get() + 4, 64), std::invalid_argument);
  run_and_check(ctx, ex, c, b, 64);
}
