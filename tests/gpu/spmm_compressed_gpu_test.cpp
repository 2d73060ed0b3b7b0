// Compressed fp16 / bf16 SpMM executors on a GPU, end to end: plan_spmm (value mode compressed) ->
// emit_spmm_cuda (templates/spmm_compressed.cu and the stream) -> NVRTC (no spills) -> bundle (the
// runtime walks the stream) -> SpmmExecutor on a NaN-poisoned C. Each output is checked against the
// fp64 product of the executor's own inputs (A and B rounded to the dtype) within spmm_tolerance, and
// against interpret_spmm_compressed within one unit in the last place plus 2^-20 max |C| (tensor cores
// sum in their own order). Cases: every record format alone and chosen by cost, splits 1..16 (thread-
// block clusters, past 8 non-portable ones), M and K not multiples of any tile, empty and dense rows, fixed N
// of 1..64 and run-time N, bias and ReLU, f16 and bf16, an LLM-sized 4096 x 4096 layer at 90 % and a tall
// 12288 x 1536 one (the automatic rule's 256-row scatter blocks, run-time N, bias and ReLU), and the DLMC
// transformer 0.9 matrices when the data folder is present; the scatter layout through the same classes
// (splits, block shapes, chunks, kept list rounds, N, epilogues, dtypes) and on the LLM-sized and DLMC
// layers; the vector layout (a fixed N of 1..16) through blocks of 4..16 warps, short, empty and dense
// rows, bias and ReLU, both dtypes and the automatic rule on LLM-sized layers. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <initializer_list>

#include "gpu_skip.hpp"
#include "sparsecc/common/dtype.hpp"
#include "sparsecc/inspector/spmm_decisions.hpp"
#include "sparsecc/io/load.hpp"
#include "sparsecc/plan/spmm_compressed.hpp"
#include "spmm_gpu_support.hpp"
#include "test_support.hpp"

using namespace sparsecc;
using namespace sparsecc::gputest;

namespace {

SpmmCase compressed_case(std::string name, CsrMatrix a, std::int64_t n, DType dtype, std::uint32_t formats,
                         std::int32_t splits, SpmmNMode mode = SpmmNMode::fixed, bool bias_relu = false,
                         std::vector<int> ns = {}) {
  SpmmCase c;
  c.name = std::move(name);
  c.problem = {a.rows, a.cols, n, mode, bias_relu, bias_relu, dtype};
  c.options.value_mode = SpmmValueMode::compressed;
  c.options.compressed.formats = formats;
  c.options.compressed.splits = splits;
  c.options.compressed.scatter = false;
  if (bias_relu) c.bias = random_vector(a.rows, 0xb1a5);
  c.ns = ns.empty() ? std::vector<int>{static_cast<int>(n)} : std::move(ns);
  c.emit = KernelLanguage::cuda;
  c.a = std::move(a);
  return c;
}

// A fixed N (1 unless given) in the vector layout (`warps` a block; 0: the rule's).
SpmmCase vector_case(std::string name, CsrMatrix a, DType dtype, std::int32_t warps, bool bias_relu = false,
                     std::int64_t n = 1) {
  SpmmCase c = compressed_case(std::move(name), std::move(a), n, dtype, 7, 0, SpmmNMode::fixed, bias_relu);
  c.options.compressed.formats.reset();
  c.options.compressed.splits = 0;
  c.options.compressed.scatter.reset();
  c.options.compressed.vector = true;
  c.options.compressed.warps = warps;
  return c;
}

// The same case in the scatter layout.
SpmmCase scatter_case(SpmmCase c) {
  c.name += "/scatter";
  c.options.compressed.formats.reset();
  c.options.compressed.scatter = true;
  return c;
}

// Random entries, a dense band (rows 16..31, columns 0..127: full pieces) and empty rows (every 7th).
CsrMatrix shaped(std::int64_t m, std::int64_t k, double density, std::uint64_t seed) {
  DenseMatrix d = dense_from_csr(random_csr(m, k, density, seed));
  SplitMix64 rng(seed ^ 0x5eed);
  for (std::int64_t r = 16; r < 32 && r < m; ++r)
    for (std::int64_t c = 0; c < 128 && c < k; ++c) d(r, c) = rng.uniform_pm1();
  for (std::int64_t r = 3; r < m; r += 7)
    for (std::int64_t c = 0; c < k; ++c) d(r, c) = 0;
  return csr_from_dense(d, DType::f32);
}

void run_case(const rt::Context& ctx, const rt::SpmmExecutor& ex, const SpmmCase& c, const SpmmBuilt& built,
              int n) {
  const SpmmPlan& plan = built.plan;
  const HalfGpuRun r = half_gpu_run(ctx, ex, c, plan, n);
  const double tol = spmm_tolerance(plan.problem.dtype, DType::f32, max_row_nnz(c.a));
  const SpmmCompressedBody& body = *plan.compressed();
  std::printf(
      "[ compressed gpu ] %-48s %5lldx%-5lld nnz %8lld N %4d %-4s %dx%d splits %d chunk %4d %s max rel err "
      "%.2e (tol %.1e)%s\n",
      c.name.c_str(), static_cast<long long>(c.a.rows), static_cast<long long>(c.a.cols),
      static_cast<long long>(c.a.nnz()), n, std::string(dtype_name(plan.problem.dtype)).c_str(), body.warps,
      body.strips_per_warp, body.splits, body.chunk_k,
      body.vector ? "vector"
      : body.scatter
          ? "scatter"
          : fmt::format("records {}/{}/{}", body.records[0], body.records[1], body.records[2]).c_str(),
      r.rel, tol, r.far ? " INTERPRETER DIFFERS" : "");
  std::fflush(stdout);
  EXPECT_EQ(r.nans, 0) << c.name << " n=" << n << ": unwritten or NaN outputs";
  EXPECT_LE(r.rel, tol) << c.name << " n=" << n;
  EXPECT_EQ(r.far, 0) << c.name << " n=" << n
                      << ": beyond one ulp + 2^-20 max|C| from the interpreter; first " << r.first_far;
}

void build_and_run(const std::vector<SpmmCase>& cases) {
  rt::Context ctx(0);
  const auto built = build_all(cases, ctx.device().arch());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const SpmmCase& c = cases[i];
    SCOPED_TRACE(c.name);
    const SpmmBuilt& b = built[i].get();
    ASSERT_TRUE(b.plan_errors.empty()) << c.name << ": " << b.plan_errors.front();
    ASSERT_TRUE(b.plan.compressed()) << c.name;
    // Cases named for the vector layout (the automatic ones included) take it; no other case does.
    EXPECT_EQ(b.plan.compressed()->vector, c.name.find("/vector") != std::string::npos) << c.name;
    EXPECT_EQ(b.usage.spill_store_bytes, 0) << c.name;
    EXPECT_EQ(b.bundle.metadata.values_mode, "compressed");
    const rt::SpmmExecutor ex = rt::SpmmExecutor::load(b.bundle, c.name, ctx);
    for (int n : c.ns) run_case(ctx, ex, c, b, n);
  }
}

// The shape classes both layouts run: `splits`, a half-full matrix, bias and ReLU at N = 64, run-time N,
// and fixed N of 1..32, each case passed through `layout` (the records case as it is, or scatter_case).
std::vector<SpmmCase> shape_class_cases(const CsrMatrix& edges, const CsrMatrix& half_full,
                                        std::initializer_list<std::int32_t> splits,
                                        const std::function<SpmmCase(SpmmCase)>& layout) {
  std::vector<SpmmCase> cases;
  for (const DType t : {DType::f16, DType::bf16}) {
    const std::string d(dtype_name(t));
    for (const std::int32_t s : splits)
      cases.push_back(layout(compressed_case(fmt::format("edges/{}/splits{}", d, s), edges, 24, t, 7, s)));
    cases.push_back(layout(compressed_case("half-full/" + d, half_full, 8, t, 7, 2, SpmmNMode::fixed, true)));
    cases.push_back(
        layout(compressed_case("edges/" + d + "/bias-relu", edges, 64, t, 7, 0, SpmmNMode::fixed, true)));
    cases.push_back(layout(compressed_case("edges/" + d + "/runtime-n", edges, 16, t, 7, 0,
                                           SpmmNMode::runtime, true, {1, 7, 16, 64, 100})));
  }
  for (const std::int64_t n : {1, 5, 8, 32})
    cases.push_back(layout(compressed_case(fmt::format("edges/f16/n{}", n), edges, n, DType::f16, 7, 0)));
  return cases;
}

}  // namespace

TEST(SpmmCompressedGpu, EveryFormatSplitAndShapeClass) {
  SPARSECC_GPU_OR_SKIP();
  const CsrMatrix edges = shaped(1000, 1500, 0.1, 3);  // M, K multiples of no tile
  std::vector<SpmmCase> cases =
      shape_class_cases(edges, shaped(77, 70, 0.5, 5), {1, 2, 3, 8, 16}, [](SpmmCase c) { return c; });
  for (const DType t : {DType::f16, DType::bf16})
    for (const std::uint32_t formats : {1u, 2u, 4u, 7u})
      cases.push_back(compressed_case(fmt::format("edges/{}/formats{}", dtype_name(t), formats), edges, 16, t,
                                      formats, 0));
  // Block shapes, pipeline depths and chunk widths beside the rules' own.
  for (const auto& [w, st, stages, chunk] : test::kCompressedBlockShapes) {
    SpmmCase c = compressed_case(fmt::format("edges/f16/w{}s{}/stages{}/chunk{}", w, st, stages, chunk),
                                 edges, 16, DType::f16, 7, 2);
    c.options.compressed.warps = w;
    c.options.compressed.strips_per_warp = st;
    c.options.compressed.stages = stages;
    c.options.compressed.chunk_k = chunk;
    cases.push_back(std::move(c));
  }
  build_and_run(cases);
}

TEST(SpmmCompressedGpu, ScatterLayoutEveryShapeClass) {
  SPARSECC_GPU_OR_SKIP();
  const CsrMatrix edges = shaped(1000, 1500, 0.1, 3);  // M, K multiples of no tile
  std::vector<SpmmCase> cases = shape_class_cases(edges, shaped(77, 70, 0.5, 5), {1, 3, 8, 16}, scatter_case);
  // Block shapes (a tile of at most kScatterSlots values), chunks and kept list rounds (0: the rule's;
  // 1: every round but the first loaded again for the zeros; 8: more rounds than the lists take).
  for (const auto& [w, st, chunk, kept] : {std::array{4, 1, 64, 0},
                                           {4, 1, 256, 8},
                                           {2, 4, 128, 0},
                                           {8, 2, 64, 0},
                                           {8, 1, 128, 0},
                                           {4, 4, 64, 1},
                                           {4, 4, 64, 0},
                                           {4, 2, 64, 0}}) {
    SpmmCase c = scatter_case(compressed_case(
        fmt::format("edges/f16/w{}s{}/chunk{}/kept{}", w, st, chunk, kept), edges, 16, DType::f16, 7, 2));
    c.options.compressed.warps = w;
    c.options.compressed.strips_per_warp = st;
    c.options.compressed.chunk_k = chunk;
    c.options.compressed.kept_rounds = kept;
    cases.push_back(std::move(c));
  }
  build_and_run(cases);
}

TEST(SpmmCompressedGpu, VectorLayoutEveryShapeClass) {
  SPARSECC_GPU_OR_SKIP();
  // M and K multiples of no tile, empty rows (every 7th), a dense band, rows shorter than a lane's piece
  // (the 77 x 70 matrix), blocks of 4, 8 and 16 warps, bias and ReLU, f16 and bf16; the automatic rule
  // at N = 1 on an LLM-sized layer (both dtypes), at N = 4 and on a 28672-row one; N of 2, 3, 4, 8, 13 and 16
  // (16-byte, 4-byte and 2-byte rows of B; sums of 1, 2, 4, 8 and 16 columns a lane exchanged).
  const CsrMatrix edges = shaped(1000, 1500, 0.1, 3), small = shaped(77, 70, 0.5, 5);
  std::vector<SpmmCase> cases;
  for (const DType t : {DType::f16, DType::bf16}) {
    const std::string d(dtype_name(t));
    for (const std::int32_t w : {4, 8, 16})
      cases.push_back(vector_case(fmt::format("edges/{}/vector/w{}", d, w), edges, t, w));
    cases.push_back(vector_case("edges/" + d + "/vector/bias-relu", edges, t, 0, true));
    cases.push_back(vector_case("small/" + d + "/vector", small, t, 8, true));
    for (const std::int64_t n : {2, 3, 4, 8, 13, 16})
      cases.push_back(vector_case(fmt::format("edges/{}/vector/n{}", d, n), edges, t, 0, n % 2 == 1, n));
    cases.push_back(vector_case("small/" + d + "/vector/n16", small, t, 4, true, 16));
    SpmmCase llm = vector_case("llm-4096/" + d + "/vector-auto", random_csr(4096, 4096, 0.1, 49), t, 0, true);
    llm.options.value_mode.reset();  // the automatic rule: compressed, vector layout at N = 1
    llm.options.compressed.vector.reset();
    cases.push_back(std::move(llm));
  }
  SpmmCase four = vector_case("llm-4096/f16/vector-auto-n4", random_csr(4096, 4096, 0.1, 51), DType::f16, 0,
                              false, spmm_rules::kCompressedVectorMaxN);
  four.options.value_mode.reset();  // the automatic rule: the vector layout up to kCompressedVectorMaxN
  four.options.compressed.vector.reset();
  cases.push_back(std::move(four));
  SpmmCase tall =
      vector_case("tall-28672x1024/f16/vector-auto", random_csr(28672, 1024, 0.05, 50), DType::f16, 0);
  tall.options.value_mode.reset();
  tall.options.compressed.vector.reset();
  cases.push_back(std::move(tall));
  build_and_run(cases);
}

TEST(SpmmCompressedGpu, LlmSizedLayer) {
  SPARSECC_GPU_OR_SKIP();
  const CsrMatrix a = random_csr(4096, 4096, 0.1, 47);
  std::vector<SpmmCase> cases;
  for (const DType t : {DType::f16, DType::bf16})
    cases.push_back(compressed_case(fmt::format("llm-4096/{}", dtype_name(t)), a, 16, t, 7, 0,
                                    SpmmNMode::fixed, t == DType::bf16, {16}));
  cases.front().options.value_mode.reset();  // the automatic rule takes this layer (scatter)
  cases.front().options.compressed.scatter.reset();
  cases.push_back(scatter_case(cases.back()));  // bf16: records, then scatter
  // A tall layer: the automatic rule takes 256-row scatter blocks (4 warps x 4 strips, chunks of 64).
  const CsrMatrix tall = random_csr(12288, 1536, 0.1, 48);
  cases.push_back(
      compressed_case("tall-12288x1536/f16", tall, 16, DType::f16, 7, 0, SpmmNMode::runtime, true, {16, 5}));
  cases.back().options.value_mode.reset();
  cases.back().options.compressed.scatter.reset();
  build_and_run(cases);
}

TEST(SpmmCompressedGpu, DlmcTransformerMatrices) {
  SPARSECC_GPU_OR_SKIP();
  const auto data = test::data_dir();
  if (!data) GTEST_SKIP() << "no data folder (SPARSECC_DATA_DIR)";
  const std::filesystem::path dir = *data / "dlmc" / "transformer" / "magnitude_pruning" / "0.9";
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << dir << " is absent";
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string f = entry.path().filename().string();
    if (f.find("ffn") != std::string::npos && (f.ends_with(".smtx") || f.ends_with(".smtx.gz")))
      files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<SpmmCase> cases;
  for (std::size_t i = 0; i < files.size() && i < 4; ++i) {
    CsrMatrix a = load_matrix(files[i].string());
    fill_values_uniform(a, 7);
    cases.push_back(compressed_case("dlmc/" + files[i].filename().string().substr(0, 40), std::move(a), 16,
                                    DType::f16, 7, 0, SpmmNMode::runtime, false, {1, 16, 64}));
    cases.push_back(scatter_case(cases.back()));
  }
  if (cases.empty()) GTEST_SKIP() << "no .smtx files in " << dir;
  build_and_run(cases);
}
