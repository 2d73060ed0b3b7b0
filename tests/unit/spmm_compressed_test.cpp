// The compressed family on the CPU: plans of every shape class (M and K not multiples of any tile,
// empty and dense rows, every record format alone and chosen by cost, splits, fixed and run-time N,
// bias and ReLU, f16 and bf16) hold their invariants; every record decodes to A's own piece; the plan
// interpreter agrees with the fp64 reference of the rounded inputs within spmm_tolerance and writes
// every output; the plan survives JSON; the runtime's walk refuses streams that point outside
// themselves; the automatic rule picks the family for large half layers at small N only, and its
// scatter layout for sparse ones; the kernel compiles with NVRTC for sm_90 without spills. The scatter
// layout is checked the same way.
#include "sparsecc/plan/spmm_compressed.hpp"

#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <functional>
#include <set>

#include "sparsecc/common/dtype.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/random.hpp"
#include "sparsecc/compile/compile_kernel.hpp"
#include "sparsecc/compile/resource_usage.hpp"
#include "sparsecc/emit/spmm_cuda.hpp"
#include "sparsecc/inspector/options_json.hpp"
#include "sparsecc/inspector/spmm_decisions.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/pipeline/pipeline.hpp"
#include "sparsecc/reference/spmm.hpp"
#include "sparsecc/tune/space.hpp"
#include "test_support.hpp"

using namespace sparsecc;

namespace {

// Random entries at `density`, a dense row band (rows 16..31 where they exist, so some pieces are
// full), and empty rows every 7th row.
CsrMatrix shaped(std::int64_t m, std::int64_t k, double density, std::uint64_t seed) {
  SplitMix64 rng(seed);
  DenseMatrix d(m, k);
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t c = 0; c < k; ++c) {
      const bool dense_band = r >= 16 && r < 32 && c < 128;
      if (r % 7 == 3) continue;
      if (dense_band || static_cast<double>(rng.next() >> 11) * 0x1p-53 < density)
        d(r, c) = rng.uniform_pm1();
    }
  return csr_from_dense(d, DType::f32);
}

// Records of the given formats.
SpmmOptions compressed(std::uint32_t formats = 7, std::int32_t splits = 0, std::int32_t chunk_k = 0) {
  SpmmOptions o;
  o.value_mode = SpmmValueMode::compressed;
  o.compressed.formats = formats;
  o.compressed.splits = splits;
  o.compressed.chunk_k = chunk_k;
  o.compressed.scatter = false;
  return o;
}

// The scatter layout.
SpmmOptions scattered(std::int32_t splits = 0, std::int32_t chunk_k = 0, std::int32_t warps = 0,
                      std::int32_t strips = 0) {
  SpmmOptions o = compressed(7, splits, chunk_k);
  o.compressed.formats.reset();
  o.compressed.scatter = true;
  o.compressed.warps = warps;
  o.compressed.strips_per_warp = strips;
  return o;
}

// The vector layout (a fixed N of 1..rt::kVectorMaxN), `warps` a block (0: the rule's).
SpmmOptions vectored(std::int32_t warps = 0) {
  SpmmOptions o;
  o.value_mode = SpmmValueMode::compressed;
  o.compressed.vector = true;
  o.compressed.warps = warps;
  return o;
}

std::int64_t max_row_nnz(const CsrMatrix& a) {
  std::int64_t m = 0;
  for (std::int64_t r = 0; r < a.rows; ++r) m = std::max(m, a.row_nnz(r));
  return m;
}

// Checks the plan, builds its stream and compares the interpreter with the reference.
void expect_correct(const CsrMatrix& a, const SpmmProblem& pr, const SpmmOptions& o, std::int64_t n) {
  const SpmmPlan plan = plan_spmm(a, pr, o);
  ASSERT_TRUE(plan.compressed());
  const auto errors = check_plan(plan, a);
  ASSERT_TRUE(errors.empty()) << errors.front();
  const std::vector<std::uint32_t> stream = spmm_compressed_stream(plan, a);
  EXPECT_EQ(static_cast<std::int64_t>(stream.size()), plan.compressed()->stream_words);
  const std::string dtype(dtype_name(pr.dtype));
  SplitMix64 rng(99);
  DenseMatrix b(a.cols, n);
  for (double& v : b.data) v = rng.uniform_pm1();
  round_values(b, dtype);
  std::vector<double> bias(static_cast<std::size_t>(a.rows));
  for (double& v : bias) v = rng.uniform_pm1();
  const DenseMatrix ref = spmm(round_values(a, dtype), b, pr.bias ? &bias : nullptr, pr.relu);
  const DenseMatrix got = interpret_spmm_compressed(plan, stream, b, pr.bias ? &bias : nullptr);
  // Unwritten (NaN) outputs make the error infinite.
  EXPECT_LE(test::max_rel_error(got, ref), spmm_tolerance(dtype, "f32", max_row_nnz(a)));
}

}  // namespace

// Every shape class: M and K multiples of no tile, one row, two columns, half-full and sparse.
struct ShapeClass {
  std::int64_t m, k;
  double density;
};
constexpr ShapeClass kShapeClasses[] = {{61, 75, 0.3},     {200, 333, 0.1}, {16, 64, 0.5},
                                        {130, 1000, 0.05}, {1, 1, 1.0},     {37, 2, 0.9}};

// Calls fn(a, dtype, label) for every shape class in f16 and bf16.
template <class Fn>
void for_every_shape_class(Fn&& fn) {
  for (const ShapeClass& s : kShapeClasses)
    for (const DType dtype : {DType::f16, DType::bf16}) {
      const CsrMatrix a = shaped(s.m, s.k, s.density, static_cast<std::uint64_t>(s.m * 7 + s.k));
      fn(a, dtype, fmt::format("{}x{} {}", s.m, s.k, dtype));
    }
}

TEST(SpmmCompressed, InterpreterMatchesTheReferenceForEveryShapeClass) {
  for_every_shape_class([](const CsrMatrix& a, DType dtype, const std::string& label) {
    for (const std::uint32_t formats : {1u, 2u, 4u, 7u})
      for (const std::int32_t splits : {1, 3}) {
        SCOPED_TRACE(fmt::format("{} formats {} splits {}", label, formats, splits));
        const bool epilogue = formats == 7;
        expect_correct(a, {a.rows, a.cols, 16, SpmmNMode::fixed, epilogue, epilogue, dtype},
                       compressed(formats, splits, 64), 16);
      }
  });
}

TEST(SpmmCompressed, ScatterInterpreterMatchesTheReferenceForEveryShapeClass) {
  for_every_shape_class([](const CsrMatrix& a, DType dtype, const std::string& label) {
    for (const auto& [splits, chunk, warps, strips] :
         {std::array{1, 64, 4, 1}, {3, 128, 4, 1}, {2, 64, 2, 4}, {1, 128, 8, 2}}) {
      SCOPED_TRACE(fmt::format("{} splits {} chunk {} {}x{}", label, splits, chunk, warps, strips));
      const bool epilogue = splits == 3;
      expect_correct(a, {a.rows, a.cols, 16, SpmmNMode::fixed, epilogue, epilogue, dtype},
                     scattered(splits, chunk, warps, strips), 16);
    }
  });
  const CsrMatrix a = shaped(150, 700, 0.1, 5);
  for (const std::int64_t n : {1, 5, 24, 100})
    for (const SpmmNMode mode : {SpmmNMode::fixed, SpmmNMode::runtime})
      expect_correct(a, {a.rows, a.cols, n, mode, true, false, DType::f16}, scattered(), n);
}

TEST(SpmmCompressed, ScatterStreamsHoldEveryNonzeroOnceAndTheWalkRefusesBadPlaces) {
  const CsrMatrix a = shaped(100, 300, 0.2, 13);
  const SpmmPlan plan =
      plan_spmm(a, {a.rows, a.cols, 16, SpmmNMode::fixed, false, false, DType::f16}, scattered(2, 128));
  const rt::CompressedShape shape = spmm_compressed_shape(plan);
  ASSERT_TRUE(shape.scatter);
  const std::vector<std::uint32_t> good = spmm_compressed_stream(plan, a);
  const DenseMatrix dense = dense_from_csr(a);
  std::set<std::pair<std::int64_t, std::int64_t>> seen;
  rt::walk_scatter_stream(good, shape, a.rows, a.cols, "ok", [&](const rt::ScatterEntry& e) {
    EXPECT_TRUE(seen.insert({e.row, e.col}).second) << e.row << " " << e.col;
    EXPECT_EQ(half_bits_to_double(e.value), round_to(DType::f16, dense(e.row, e.col)));
    EXPECT_EQ(e.row / 64, e.row_block);
    EXPECT_EQ(e.col / 128, e.chunk);
  });
  EXPECT_EQ(static_cast<std::int64_t>(seen.size()), a.nnz());
  EXPECT_THROW(rt::walk_compressed_stream(good, shape, a.cols, "records?"), std::invalid_argument);
  // The first segment's first list (warp 0's) starts after the list ends.
  const std::size_t data = static_cast<std::size_t>(shape.data_word() + shape.list_header_bytes() / 4);
  ASSERT_EQ(shape.warp_lists, 4);
  ASSERT_GT(good[static_cast<std::size_t>(shape.data_word())], 1u);  // warp 0's list is not empty
  const auto refused = [&](std::uint32_t place) {
    std::vector<std::uint32_t> bad = good;
    bad[data] = (bad[data] & 0xffff0000u) | place;
    try {
      rt::walk_scatter_stream(bad, shape, a.rows, a.cols, "bad.sccb");
      ADD_FAILURE() << "place " << place << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("bad.sccb"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("place"), std::string::npos) << e.what();
    }
  };
  refused(64 * 128 + 1);  // past the pad slot
  refused(0xffffu);
  refused(16 * 128 + 5);  // inside the tile, in warp 1's strip: not warp 0's to write
  // The list ends: out of order, past the segment, the last short of the segment's end.
  const auto list_refused = [&](std::size_t end, std::uint32_t value) {
    std::vector<std::uint32_t> bad = good;
    bad[static_cast<std::size_t>(shape.data_word()) + end] = value;
    try {
      rt::walk_scatter_stream(bad, shape, a.rows, a.cols, "lists.sccb");
      ADD_FAILURE() << "list end " << end << " = " << value << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("list end"), std::string::npos) << e.what();
    }
  };
  const std::uint32_t end0 = good[static_cast<std::size_t>(shape.data_word())];
  list_refused(1, end0 - 1);  // warp 1's list ends before warp 0's
  list_refused(0, 0);         // warp 0's list ends inside the header
  list_refused(3, good[static_cast<std::size_t>(shape.data_word()) + 3] + 4);
  // Row block 1 holds rows 64..99: a place in its strip 3 is row 112 > M (the stream's last row block).
  std::vector<std::uint32_t> tail = good;
  const std::size_t last = tail.size() - 1;
  tail[last] = (tail[last] & 0xffff0000u) | (3 * 8 * 256 + 7);
  EXPECT_THROW(rt::walk_scatter_stream(tail, shape, a.rows, a.cols, "tail"), std::invalid_argument);
}

// A warp's scatter loop: lane l takes quads l, l + 32, ... of its list and stores a quad's entries x, y,
// z, w in turn; a store takes one shared-memory wavefront a distinct word in its busiest bank. The
// stream deals each list so that a store's entries spread over the banks; the same lists in another
// order (shuffled) take twice the wavefronts.
TEST(SpmmCompressed, ScatterListsAreDealtToDistinctBanks) {
  const CsrMatrix a = test::random_csr(512, 4096, 0.1, 21);
  const SpmmPlan plan =
      plan_spmm(a, {a.rows, a.cols, 16, SpmmNMode::fixed, false, false, DType::f16}, scattered(1, 128, 4, 1));
  const rt::CompressedShape shape = spmm_compressed_shape(plan);
  ASSERT_EQ(shape.warp_lists, 4);
  const std::vector<std::uint32_t> stream = spmm_compressed_stream(plan, a);
  std::int64_t stores = 0;
  const auto wavefronts = [&](const std::vector<std::uint32_t>& e) {
    std::int64_t total = 0;
    const std::size_t quads = e.size() / 4;
    for (std::size_t j = 0; j < quads; j += 32)
      for (std::size_t c = 0; c < 4; ++c) {
        std::array<std::set<std::uint32_t>, 32> words;
        for (std::size_t q = j; q < std::min(quads, j + 32); ++q)
          words[((e[4 * q + c] & 0xffffu) >> 1) & 31u].insert((e[4 * q + c] & 0xffffu) >> 1);
        std::size_t most = 0;
        for (const auto& b : words) most = std::max(most, b.size());
        total += static_cast<std::int64_t>(most);
      }
    return total;
  };
  std::int64_t dealt = 0, shuffled = 0;
  SplitMix64 rng(3);
  const std::size_t table = static_cast<std::size_t>(shape.split_words());
  const auto data = static_cast<std::ptrdiff_t>(shape.data_word());
  const auto header = static_cast<std::ptrdiff_t>(shape.list_header_bytes() / 4);
  for (std::int64_t s = 0; s < shape.row_blocks * shape.chunks; ++s) {
    // Offsets count 16-byte units, four entries each: the segment, then its list ends.
    const auto begin = data + 4 * static_cast<std::ptrdiff_t>(stream[table + static_cast<std::size_t>(s)]);
    std::ptrdiff_t from = begin + header;
    for (std::int64_t w = 0; w < shape.warp_lists; ++w) {
      const auto to = begin + 4 * static_cast<std::ptrdiff_t>(stream[static_cast<std::size_t>(begin + w)]);
      std::vector<std::uint32_t> e(stream.begin() + from, stream.begin() + to);
      stores += static_cast<std::int64_t>((e.size() / 4 + 31) / 32 * 4);
      dealt += wavefronts(e);
      for (std::size_t i = e.size(); i > 1; --i) std::swap(e[i - 1], e[rng.next() % i]);
      shuffled += wavefronts(e);
      from = to;
    }
  }
  ASSERT_GT(stores, 2000);
  const double per_dealt = static_cast<double>(dealt) / static_cast<double>(stores);
  const double per_shuffled = static_cast<double>(shuffled) / static_cast<double>(stores);
  EXPECT_LT(per_dealt, 1.7) << "shuffled: " << per_shuffled;
  EXPECT_GT(per_shuffled, 2.5) << "dealt: " << per_dealt;
}

TEST(SpmmCompressed, FixedAndRuntimeNOfEveryWidth) {
  const CsrMatrix a = shaped(150, 700, 0.1, 5);
  for (const std::int64_t n : {1, 5, 8, 16, 24, 64, 100})
    for (const SpmmNMode mode : {SpmmNMode::fixed, SpmmNMode::runtime}) {
      SCOPED_TRACE(fmt::format("n {} {}", n, mode == SpmmNMode::fixed ? "fixed" : "runtime"));
      expect_correct(a, {a.rows, a.cols, n, mode, true, false, DType::f16}, compressed(), n);
    }
}

TEST(SpmmCompressed, BlockShapesRingDepthsAndChunksPlanAndInterpret) {
  // The GPU suite's block shapes (SpmmCompressedGpu.EveryFormatSplitAndShapeClass) on its matrix.
  const CsrMatrix a = shaped(1000, 1500, 0.1, 3);
  for (const auto& [w, st, stages, chunk] : test::kCompressedBlockShapes) {
    SCOPED_TRACE(fmt::format("{} warps x {} strips, {} stages, chunk {}", w, st, stages, chunk));
    SpmmOptions o = compressed(7, 2, chunk);
    o.compressed.warps = w;
    o.compressed.strips_per_warp = st;
    o.compressed.stages = stages;
    expect_correct(a, {a.rows, a.cols, 16, SpmmNMode::fixed, false, false, DType::f16}, o, 16);
  }
}

TEST(SpmmCompressed, RecordsDecodeToTheirPieceOfA) {
  const CsrMatrix a = shaped(100, 300, 0.2, 11);
  const DenseMatrix dense = dense_from_csr(a);
  for (const std::uint32_t formats : {1u, 2u, 4u, 7u}) {
    const SpmmPlan plan = plan_spmm(a, {a.rows, a.cols, 16, SpmmNMode::fixed, false, false, DType::f16},
                                    compressed(formats, 2, 128));
    const std::vector<std::uint32_t> stream = spmm_compressed_stream(plan, a);
    std::int64_t records = 0, nonzeros = 0;
    rt::RecordTile tile;
    rt::walk_compressed_stream(
        stream, spmm_compressed_shape(plan), a.cols, "test", [&](const rt::RecordRef& r) {
          ++records;
          if (formats != 7) {
            EXPECT_EQ(r.p[0], std::countr_zero(formats));
          }
          rt::decode_record(r.p, tile);
          const std::int64_t row0 = (r.row_block * plan.compressed()->warps + r.strip) * 16;
          const std::int64_t col0 = r.chunk * plan.compressed()->chunk_k + r.kt * 64;
          for (int i = 0; i < 16; ++i)
            for (int j = 0; j < 64; ++j) {
              const double want = row0 + i < a.rows && col0 + j < a.cols
                                      ? round_to(DType::f16, dense(row0 + i, col0 + j))
                                      : 0;
              ASSERT_EQ(half_bits_to_double(tile[static_cast<std::size_t>(i * 64 + j)]), want)
                  << i << " " << j;
              nonzeros += want != 0;
            }
        });
    const auto& counts = plan.compressed()->records;
    EXPECT_EQ(records, counts[0] + counts[1] + counts[2]);
    EXPECT_EQ(nonzeros, a.nnz());
  }
}

TEST(SpmmCompressed, FormatsFollowTheirCost) {
  // A sparse matrix takes positions, a half-full one bitmaps, a full one dense records (pure bytes).
  SpmmOptions o = compressed();
  o.compressed.bitmap_weight = 0;
  o.compressed.position_weight = 0;
  const auto records = [&](double density) {
    const CsrMatrix a = test::random_csr(64, 256, density, 3);
    const SpmmPlan plan = plan_spmm(a, {a.rows, a.cols, 8, SpmmNMode::fixed, false, false, DType::f16}, o);
    return std::to_array(plan.compressed()->records);
  };
  EXPECT_GT(records(0.05)[1], 0);
  EXPECT_EQ(records(0.05)[0], 0);
  EXPECT_GT(records(0.5)[0], 0);
  EXPECT_EQ(records(0.5)[1], 0);
  EXPECT_GT(records(1.0)[2], 0);
}

TEST(SpmmCompressed, SplitsBalanceBytesAndPlanSurvivesJson) {
  const CsrMatrix a = shaped(300, 3000, 0.05, 17);
  const SpmmPlan plan =
      plan_spmm(a, {a.rows, a.cols, 16, SpmmNMode::fixed, true, true, DType::bf16}, compressed(7, 4, 64));
  const SpmmCompressedBody& b = *plan.compressed();
  EXPECT_EQ(b.splits, 4);
  EXPECT_EQ(plan.block_rows(), plan.layout.block_rows() * 4);
  for (std::size_t r = 0; r < b.split_chunks.size(); r += 5) {
    EXPECT_EQ(b.split_chunks[r], 0);
    EXPECT_EQ(b.split_chunks[r + 4], ceil_div(a.cols, 64));
    for (int s = 0; s < 4; ++s) EXPECT_GT(b.split_chunks[r + s + 1], b.split_chunks[r + s]);
  }
  const SpmmPlan back = plan_from_json(to_json(plan));
  EXPECT_EQ(to_json(back), to_json(plan));
  EXPECT_TRUE(check_plan(back, a).empty());
  SpmmPlan broken = plan;
  broken.compressed()->split_chunks[1] = broken.compressed()->split_chunks[2] + 1;
  EXPECT_FALSE(check_plan(broken, a).empty());
}

TEST(SpmmCompressed, StagesAndTheStagedRowsOfBSizeSharedMemory) {
  // Rows of B: 2 n_tile bytes where the 16-byte pieces are swizzled (8, 16, 32, 64 columns), padded
  // by 16 bytes otherwise.
  EXPECT_EQ(spmm_compressed_pitch(8), 16);
  EXPECT_EQ(spmm_compressed_pitch(16), 32);
  EXPECT_EQ(spmm_compressed_pitch(32), 64);
  EXPECT_EQ(spmm_compressed_pitch(64), 128);
  EXPECT_EQ(spmm_compressed_pitch(24), 64);
  EXPECT_FALSE(spmm_compressed_swizzled(8));
  EXPECT_TRUE(spmm_compressed_swizzled(16));

  const CsrMatrix a = shaped(300, 3000, 0.05, 17);
  const SpmmProblem pr{a.rows, a.cols, 16, SpmmNMode::fixed, false, false, DType::f16};
  const SpmmPlan two = plan_spmm(a, pr, compressed(7, 2, 128));
  EXPECT_EQ(two.compressed()->stages, spmm_rules::kCompressedStages);
  SpmmOptions o = compressed(7, 2, 128);
  o.compressed.stages = 5;
  const SpmmPlan five = plan_spmm(a, pr, o);
  const SpmmCompressedBody& b = *five.compressed();
  EXPECT_EQ(b.stages, 5);
  EXPECT_EQ(five.layout.shared_bytes, 5 * (128 * 32 + b.stage_bytes) + kSpmmCompressedScratchBytes * b.warps);
  EXPECT_TRUE(check_plan(five, a).empty());
  EXPECT_EQ(to_json(plan_from_json(to_json(five))), to_json(five));
  for (const std::int32_t bad : {1, 9}) {
    SpmmPlan broken = five;
    broken.compressed()->stages = bad;
    EXPECT_FALSE(check_plan(broken, a).empty()) << bad;
    o.compressed.stages = bad;
    EXPECT_THROW(plan_spmm(a, pr, o), UsageError) << bad;
  }
  // The emitted kernel takes the plan's stages and rows of B.
  const std::string source = emit_spmm_cuda(five, a).source;
  EXPECT_NE(source.find("constexpr int NS = 5;"), std::string::npos);
  EXPECT_NE(source.find("constexpr int PITCH = 32;"), std::string::npos);
}

TEST(SpmmCompressed, TheWalkRefusesStreamsThatPointOutside) {
  const CsrMatrix a = shaped(100, 300, 0.2, 13);
  const SpmmPlan plan =
      plan_spmm(a, {a.rows, a.cols, 16, SpmmNMode::fixed, false, false, DType::f16}, compressed(7, 2, 128));
  const rt::CompressedShape shape = spmm_compressed_shape(plan);
  const std::vector<std::uint32_t> good = spmm_compressed_stream(plan, a);
  EXPECT_NO_THROW(rt::walk_compressed_stream(good, shape, a.cols, "ok"));
  const auto refused = [&](std::size_t word, std::uint32_t value, const std::string& part) {
    std::vector<std::uint32_t> bad = good;
    bad[word] = value;
    try {
      rt::walk_compressed_stream(bad, shape, a.cols, "bad.sccb");
      ADD_FAILURE() << "word " << word << " = " << value << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("bad.sccb"), std::string::npos) << e.what();
    }
  };
  refused(1, 99, "split table");  // a chunk past the end
  refused(static_cast<std::size_t>(shape.split_words() + 1), 1u << 30, "segment table");  // past the data
  const std::size_t data = static_cast<std::size_t>(shape.data_word());
  refused(data, 1u << 20, "strip 0 ends");  // the first strip's end past its segment
  const std::size_t first_record = data + static_cast<std::size_t>(shape.header_bytes() / 4);
  refused(first_record, good[first_record] | 0xffu, "unknown format");
  refused(first_record, (good[first_record] & 0xffff00ffu) | (200u << 8), "piece");
  refused(first_record, (good[first_record] & 0x0000ffffu) | (0xfff0u << 16), "");
  EXPECT_THROW(rt::walk_compressed_stream(std::span(good).first(3), shape, a.cols, "short"),
               std::invalid_argument);
}

TEST(SpmmCompressed, TheAutomaticRuleTakesLargeHalfLayersAtSmallN) {
  const CsrMatrix big = test::random_csr(512, 2048, 0.1, 1);  // 105k nonzeros
  const CsrMatrix small = test::random_csr(64, 64, 0.1, 1);
  const auto family = [](const CsrMatrix& a, std::int64_t n, DType t) {
    return plan_spmm(a, {a.rows, a.cols, n, SpmmNMode::fixed, false, false, t}).family();
  };
  EXPECT_GE(big.nnz(), spmm_rules::kCompressedMinNnz);
  EXPECT_EQ(family(big, 16, DType::f16), SpmmFamily::compressed);
  EXPECT_EQ(family(big, 1, DType::bf16), SpmmFamily::compressed);
  EXPECT_NE(family(big, 128, DType::f16), SpmmFamily::compressed);
  EXPECT_NE(family(big, 16, DType::f32), SpmmFamily::compressed);
  EXPECT_NE(family(small, 16, DType::f16), SpmmFamily::compressed);
  EXPECT_THROW(plan_spmm(small, {small.rows, small.cols, 16, SpmmNMode::fixed, false, false, DType::f32},
                         compressed()),
               UsageError);
  // The layout: scatter at most kCompressedScatterDensity dense, records above, either when asked.
  const CsrMatrix denser = test::random_csr(512, 2048, 0.45, 1);
  const auto scatter = [](const CsrMatrix& a, const SpmmOptions& o) {
    return plan_spmm(a, {a.rows, a.cols, 16, SpmmNMode::fixed, false, false, DType::f16}, o)
        .compressed()
        ->scatter;
  };
  EXPECT_TRUE(scatter(big, {}));
  EXPECT_FALSE(scatter(denser, {}));
  EXPECT_FALSE(scatter(big, compressed()));
  EXPECT_TRUE(scatter(denser, scattered()));
  // Record formats named without a layout take records; with the scatter layout named, scatter.
  SpmmOptions formats_only = compressed(2);
  formats_only.compressed.scatter.reset();
  EXPECT_FALSE(scatter(big, formats_only));
  formats_only.compressed.scatter = true;
  EXPECT_TRUE(scatter(big, formats_only));
  // A scatter tile holds at most kScatterSlots values: 8 warps x 4 strips take chunks of 64 only.
  EXPECT_EQ(plan_spmm(big, {big.rows, big.cols, 16, SpmmNMode::fixed, false, false, DType::f16},
                      scattered(0, 0, 8, 4))
                .compressed()
                ->chunk_k,
            64);
  EXPECT_THROW(plan_spmm(big, {big.rows, big.cols, 16, SpmmNMode::fixed, false, false, DType::f16},
                         scattered(0, 128, 8, 4)),
               UsageError);
}

// The scatter block: the tallest of kCompressedScatterShapes whose row blocks (8 splits) give the
// default target's SMs kCompressedScatterBlocksPerSm blocks each, with its chunk; what the options
// name wins.
TEST(SpmmCompressed, ScatterBlocksAreTheTallestThatFillTheSms) {
  const auto shape = [](std::int64_t m, const SpmmOptions& o) {
    const CsrMatrix a = test::random_csr(m, 1024, 0.01, 9);
    const SpmmPlan p = plan_spmm(a, {a.rows, a.cols, 16, SpmmNMode::fixed, false, false, DType::f16}, o);
    const SpmmCompressedBody& b = *p.compressed();
    EXPECT_TRUE(b.scatter);
    return std::array<std::int32_t, 3>{b.warps, b.strips_per_warp, b.chunk_k};
  };
  SpmmOptions o;
  o.value_mode = SpmmValueMode::compressed;
  ASSERT_EQ(default_gpu_target().sm_count, 132);
  // 256-row blocks from 42 row blocks (42 x 8 = 336 >= 2.5 x 132 = 330), 128-row ones from 42 row blocks.
  EXPECT_EQ(shape(28672, o), (std::array<std::int32_t, 3>{4, 4, 64}));
  EXPECT_EQ(shape(42 * 256, o), (std::array<std::int32_t, 3>{4, 4, 64}));
  EXPECT_EQ(shape(41 * 256, o), (std::array<std::int32_t, 3>{4, 2, 64}));
  EXPECT_EQ(shape(8192, o), (std::array<std::int32_t, 3>{4, 2, 64}));
  EXPECT_EQ(shape(41 * 128, o), (std::array<std::int32_t, 3>{4, 1, 128}));
  EXPECT_EQ(shape(4096, o), (std::array<std::int32_t, 3>{4, 1, 128}));
  EXPECT_EQ(shape(28672, scattered(0, 0, 4, 1)), (std::array<std::int32_t, 3>{4, 1, 128}));
  EXPECT_EQ(shape(4096, scattered(0, 0, 4, 4)), (std::array<std::int32_t, 3>{4, 4, 64}));  // the rule's chunk
  EXPECT_EQ(shape(4096, scattered(0, 0, 2, 4)), (std::array<std::int32_t, 3>{2, 4, 128}));
  EXPECT_EQ(shape(28672, scattered(0, 128, 0, 0)), (std::array<std::int32_t, 3>{4, 4, 128}));
  // Past the portable cluster only where K leaves each of the 16 splits 10 chunks: 4096 rows of a wide
  // layer (11008 columns, 172 chunks of 64) take 4 x 2 blocks and 16 splits; of 4096 columns, 4 x 1 and 8.
  for (const std::int64_t k : {11008, 4096}) {
    const CsrMatrix a = test::random_csr(4096, k, 0.002, 9);
    const SpmmPlan p = plan_spmm(a, {a.rows, a.cols, 16, SpmmNMode::fixed, false, false, DType::f16}, o);
    const SpmmCompressedBody& b = *p.compressed();
    EXPECT_EQ(
        (std::array<std::int32_t, 4>{b.warps, b.strips_per_warp, b.chunk_k, b.splits}),
        (k == 11008 ? std::array<std::int32_t, 4>{4, 2, 64, 16} : std::array<std::int32_t, 4>{4, 1, 128, 8}))
        << k;
  }
}

// Scatter plans keep the rounds of 32 entries their warps' lists take on average (at most
// kCompressedKeptRounds); what the options name wins.
TEST(SpmmCompressed, ScatterPlansKeepTheRoundsTheirListsTake) {
  const auto kept = [](std::int64_t m, double density, std::int32_t rounds = 0) {
    const CsrMatrix a = test::random_csr(m, 1024, density, 5);
    SpmmOptions o = scattered();
    o.compressed.kept_rounds = rounds;
    return plan_spmm(a, {a.rows, a.cols, 16, SpmmNMode::fixed, false, false, DType::f16}, o)
        .compressed()
        ->kept_rounds;
  };
  // 4 x 4 blocks, chunks of 64: a warp's 64 rows x 64 columns hold about 410 nonzeros at 10 %, 103
  // entries of four, 4 rounds; 4 x 1 blocks, chunks of 128: 205 nonzeros, 2 rounds; 41 nonzeros at 2 %.
  EXPECT_EQ(kept(28672, 0.1), 4);
  EXPECT_EQ(kept(4096, 0.1), 2);
  EXPECT_EQ(kept(4096, 0.02), 1);
  EXPECT_EQ(kept(28672, 0.3), spmm_rules::kCompressedKeptRounds);  // 10 rounds, at most that
  EXPECT_EQ(kept(4096, 0.1, 3), 3);
  EXPECT_THROW(kept(4096, 0.1, kSpmmCompressedMaxKeptRounds + 1), UsageError);
}

TEST(SpmmCompressed, KernelCompilesWithoutSpills) {
  const CsrMatrix a = shaped(200, 600, 0.1, 23);
  for (const std::int32_t splits : {1, 4})
    for (const std::int64_t n : {1, 8, 16, 64}) {
      SCOPED_TRACE(fmt::format("splits {} n {}", splits, n));
      // Records; scatter by the rule; scatter in the tallest block keeping the most rounds.
      for (const int layout : {0, 1, 2}) {
        const bool scatter = layout > 0;
        SCOPED_TRACE(layout);
        SpmmOptions o =
            scatter ? scattered(splits, 0, layout == 2 ? 4 : 0, layout == 2 ? 4 : 0) : compressed(7, splits);
        if (layout == 2) o.compressed.kept_rounds = kSpmmCompressedMaxKeptRounds;
        const SpmmPlan plan = plan_spmm(a, {a.rows, a.cols, n, SpmmNMode::fixed, true, true, DType::f16}, o);
        const EmittedKernel k = emit_spmm_cuda(plan, a);
        EXPECT_EQ(k.fragment_words.size(), static_cast<std::size_t>(plan.compressed()->stream_words));
        EXPECT_EQ(k.source.find("#define SPCC_SCATTER 1") != std::string::npos, scatter);
        EXPECT_EQ(k.source.find("#define SPCC_COLUMN 1") != std::string::npos, n == 1);
        CudaCompileOptions co;
        co.arch = "sm_90";
        co.extra.push_back("-Xptxas=-v");
        const CudaCompileResult r = compile_kernel(k, "compressed", co);
        const ResourceUsage u = resource_usage(r);
        EXPECT_EQ(u.spill_store_bytes, 0) << scatter;
        EXPECT_FALSE(r.cubin.empty());
      }
    }
  // The vector layout's kernel, f16 and bf16, blocks of 4 and 16 warps, with the epilogue.
  for (const DType t : {DType::f16, DType::bf16})
    for (const std::int32_t warps : {4, 16}) {
      SCOPED_TRACE(fmt::format("vector {} {} warps", t, warps));
      const SpmmPlan plan =
          plan_spmm(a, {a.rows, a.cols, 1, SpmmNMode::fixed, true, true, t}, vectored(warps));
      const EmittedKernel k = emit_spmm_cuda(plan, a);
      EXPECT_EQ(k.fragment_words.size(), static_cast<std::size_t>(plan.compressed()->stream_words));
      EXPECT_NE(k.source.find("SpMM skeleton, vector layout"), std::string::npos);
      CudaCompileOptions co;
      co.arch = "sm_90";
      co.extra.push_back("-Xptxas=-v");
      const CudaCompileResult r = compile_kernel(k, "vector", co);
      EXPECT_EQ(resource_usage(r).spill_store_bytes, 0);
      EXPECT_FALSE(r.cubin.empty());
    }
}

TEST(SpmmCompressed, OptionsRoundTripAndTheTunerSpaceCoversTheFamily) {
  SpmmOptions o = compressed(6, 4, 128);
  o.compressed.warps = 8;
  o.compressed.strips_per_warp = 2;
  o.compressed.bitmap_weight = 50;
  o.compressed.stages = 3;
  o.compressed.scatter = true;
  o.compressed.kept_rounds = 3;
  const SpmmOptions back = spmm_options_from_json(to_json(o), "test");
  EXPECT_EQ(back.compressed, o.compressed);
  EXPECT_THROW(spmm_options_from_json(nlohmann::json{{"compressed", {{"layout", "rows"}}}}, "test"),
               UsageError);
  EXPECT_EQ(back.value_mode, o.value_mode);
  EXPECT_THROW(spmm_options_from_json(nlohmann::json{{"compressed", {{"splits", "four"}}}}, "test"),
               UsageError);

  // A records default (45 % dense) and a scatter default (10 %): each space holds the other layout.
  for (const double density : {0.45, 0.1}) {
    SCOPED_TRACE(density);
    const CsrMatrix a = test::random_csr(512, 2048, density, 1);
    const SpmmProblem pr{a.rows, a.cols, 16, SpmmNMode::fixed, false, false, DType::f16};
    const tune::SpmmSpace space = tune::spmm_space(a, pr, {}, KernelLanguage::cuda, {});
    ASSERT_FALSE(space.candidates.empty());
    EXPECT_TRUE(space.candidates.front().is_default);
    std::set<std::int32_t> splits, chunks, formats, stages, kept, vector_warps;
    std::set<bool> layouts;
    for (const tune::SpmmCandidate& c : space.candidates) {
      ASSERT_TRUE(c.plan.compressed()) << c.label;
      if (c.plan.compressed()->vector) vector_warps.insert(c.plan.compressed()->warps);
      splits.insert(c.plan.compressed()->splits);
      chunks.insert(c.plan.compressed()->chunk_k);
      stages.insert(c.plan.compressed()->stages);
      layouts.insert(c.plan.compressed()->scatter);
      if (!c.plan.compressed()->scatter)
        formats.insert(static_cast<std::int32_t>(c.plan.compressed()->formats));
      else
        kept.insert(c.plan.compressed()->kept_rounds);
      // The stored options rebuild the candidate's plan.
      const SpmmOptions stored = spmm_options_from_json(tune::candidate_json(c), "db");
      EXPECT_EQ(tune::spmm_label(plan_spmm(a, pr, stored), KernelLanguage::cuda, 0), c.label);
    }
    EXPECT_EQ(space.candidates.front().plan.compressed()->scatter,
              density < spmm_rules::kCompressedScatterDensity);
    EXPECT_GE(splits.size(), 3u);
    EXPECT_GE(chunks.size(), 2u);
    EXPECT_EQ(formats.size(), density < spmm_rules::kCompressedScatterDensity ? 1u : 3u);
    // A scatter default's space holds its kept rounds and tune::SpmmSpaceDims' others (1, 2, 4).
    if (density < spmm_rules::kCompressedScatterDensity) EXPECT_GE(kept.size(), 3u);
    EXPECT_GE(stages.size(), 2u);
    EXPECT_EQ(layouts.size(), 2u);
    EXPECT_EQ(vector_warps, (std::set<std::int32_t>{4, 8, 16}));  // a fixed N of 16: the vector layout too
  }

  // A vector default (N = 1): its options survive JSON, and its space holds the other block sizes of
  // tune::SpmmSpaceDims and both tensor-core layouts.
  const SpmmOptions v = vectored(8);
  EXPECT_EQ(spmm_options_from_json(to_json(v), "test").compressed, v.compressed);
  const CsrMatrix a = test::random_csr(512, 2048, 0.1, 1);
  const SpmmProblem pr{a.rows, a.cols, 1, SpmmNMode::fixed, false, false, DType::f16};
  const tune::SpmmSpace space = tune::spmm_space(a, pr, {}, KernelLanguage::cuda, {});
  ASSERT_FALSE(space.candidates.empty());
  ASSERT_TRUE(space.candidates.front().plan.compressed() &&
              space.candidates.front().plan.compressed()->vector);
  std::set<std::string> kinds;
  for (const tune::SpmmCandidate& c : space.candidates) {
    const SpmmCompressedBody& b = *c.plan.compressed();
    kinds.insert(b.vector ? fmt::format("vector {}", b.warps) : b.scatter ? "scatter" : "records");
    const SpmmOptions stored = spmm_options_from_json(tune::candidate_json(c), "db");
    EXPECT_EQ(tune::spmm_label(plan_spmm(a, pr, stored), KernelLanguage::cuda, 0), c.label);
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"vector 4", "vector 8", "vector 16", "scatter", "records"}));
}

TEST(SpmmCompressed, BundlesAreCheckedBeforeAnyLaunch) {
  const CsrMatrix a = shaped(100, 300, 0.2, 29);
  pipeline::SpmmRequest req;
  req.problem = {a.rows, a.cols, 16, SpmmNMode::fixed, false, false, DType::f16};
  req.options = compressed(7, 2, 128);
  const pipeline::SpmmArtifact art = pipeline::compile_spmm(a, req, default_gpu_target());
  ASSERT_TRUE(art.bundle);
  const rt::Bundle& good = *art.bundle;
  EXPECT_EQ(good.metadata.values_mode, "compressed");
  EXPECT_NO_THROW(rt::validate_bundle(good, "ok.sccb"));
  const auto refused = [&](rt::Bundle b, const std::string& part) {
    try {
      rt::validate_bundle(b, "bad.sccb");
      ADD_FAILURE() << part << ": accepted";
    } catch (const rt::BundleError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  rt::Bundle b = good;
  const auto split_words = good.metadata.plan_summary["row_blocks"].get<std::size_t>() *
                           (good.metadata.plan_summary["splits"].get<std::size_t>() + 1);
  b.fragments[split_words + 1] = 0xffffffu;  // a segment past the data
  refused(b, "compressed stream");
  b = good;
  b.metadata.block_x = 0;
  refused(b, "block_x");
  // `base` with plan_summary[key] set to `value`.
  const auto with_summary = [](rt::Bundle base, const char* key, int value) {
    base.metadata.plan_summary[key] = value;
    return base;
  };
  refused(with_summary(good, "splits", rt::kMaxClusterSplits + 1), "plan_summary.splits");
  refused(with_summary(good, "chunks", 1), "plan_summary.chunks");
  b = good;
  b.metadata.values_mode = "compressed";
  b.metadata.dtype = "f32";
  refused(b, "");
  // The layout: a bundle from before it existed (no plan_summary.scatter) is a records one; a scatter
  // bundle's stream is walked as entries, and its layout is bound to its kernel both ways.
  b = good;
  b.metadata.plan_summary.erase("scatter");
  EXPECT_NO_THROW(rt::validate_bundle(b, "old.sccb"));
  refused(with_summary(b, "scatter", 3), "plan_summary.scatter");
  refused(with_summary(good, "scatter", 1), "");
  refused(with_summary(good, "scatter", 2), "");
  req.options = scattered(2, 128);
  const pipeline::SpmmArtifact sc = pipeline::compile_spmm(a, req, default_gpu_target());
  ASSERT_TRUE(sc.bundle);
  EXPECT_EQ(sc.bundle->metadata.plan_summary["scatter"], 2);  // a list a warp
  EXPECT_NO_THROW(rt::validate_bundle(*sc.bundle, "scatter.sccb"));
  refused(with_summary(*sc.bundle, "scatter", 0), "");
  refused(with_summary(*sc.bundle, "scatter", 1), "");  // one list a segment: not this kernel's
  b = *sc.bundle;
  b.metadata.plan_summary.erase("warps");
  refused(b, "plan_summary.warps");
  refused(with_summary(*sc.bundle, "warps", 3), "plan_summary.warps");
  b = *sc.bundle;
  b.fragments.back() = (b.fragments.back() & 0xffff0000u) | 0xffffu;  // a place past the tile
  refused(b, "scatter stream");
  // The vector layout: its stream is walked as rows, its nonzeros counted, its N and layout bound.
  req.problem.n = 1;
  req.options = {};
  req.options.value_mode = SpmmValueMode::compressed;
  const pipeline::SpmmArtifact vec = pipeline::compile_spmm(a, req, default_gpu_target());
  ASSERT_TRUE(vec.bundle);
  EXPECT_EQ(vec.bundle->metadata.plan_summary["vector"], 1);
  EXPECT_NO_THROW(rt::validate_bundle(*vec.bundle, "vector.sccb"));
  refused(with_summary(*vec.bundle, "vector", 0), "");  // read as records: not this kernel's
  refused(with_summary(*vec.bundle, "vector", 2), "plan_summary.vector");
  refused(with_summary(*vec.bundle, "scatter", 2), "plan_summary.vector");
  b = *vec.bundle;
  b.metadata.nnz -= 1;
  b.metadata.tile_nnz -= 1;
  refused(b, "vector stream");
  b = *vec.bundle;
  b.fragments[static_cast<std::size_t>(a.rows / 2)] = 0xffffffu;  // a row that ends past the data
  refused(b, "vector stream");
  b = *vec.bundle;
  b.metadata.n = 2;
  refused(b, "");  // the contract binds N
  b.metadata.n = rt::kVectorMaxN + 1;
  b.metadata.n_tile = 24;
  refused(b, "plan_summary.vector");
}

// The vector layout: a fixed N of 1..kCompressedVectorMaxN takes it automatically (not a larger N, a
// run-time N, K past 16-bit columns, or options that name another layout or record formats), up to
// rt::kVectorMaxN when asked; its interpreter matches the reference on every shape class at N of 1, 3
// and 16; its plan survives JSON and check_plan refuses it at an N it cannot run; the runtime's walk
// refuses streams that break the row table or name columns past K.
TEST(SpmmCompressed, VectorLayoutAtASmallFixedN) {
  const CsrMatrix big = test::random_csr(512, 2048, 0.1, 1);
  const auto plan_of = [](const CsrMatrix& a, std::int64_t n, SpmmNMode mode, const SpmmOptions& o = {}) {
    return plan_spmm(a, {a.rows, a.cols, n, mode, false, false, DType::f16}, o);
  };
  const auto vector = [&](const CsrMatrix& a, std::int64_t n, SpmmNMode mode, const SpmmOptions& o = {}) {
    const SpmmPlan p = plan_of(a, n, mode, o);
    return p.compressed() && p.compressed()->vector;
  };
  EXPECT_TRUE(vector(big, 1, SpmmNMode::fixed));
  EXPECT_TRUE(vector(big, spmm_rules::kCompressedVectorMaxN, SpmmNMode::fixed));
  EXPECT_FALSE(vector(big, spmm_rules::kCompressedVectorMaxN + 1, SpmmNMode::fixed));
  EXPECT_FALSE(vector(big, 1, SpmmNMode::runtime));
  EXPECT_FALSE(vector(big, 1, SpmmNMode::fixed, compressed()));
  EXPECT_FALSE(vector(big, 1, SpmmNMode::fixed, scattered()));
  SpmmOptions asked = vectored();
  EXPECT_TRUE(vector(big, 1, SpmmNMode::fixed, asked));
  EXPECT_TRUE(vector(big, 16, SpmmNMode::fixed, asked));
  EXPECT_EQ(plan_of(big, 16, SpmmNMode::fixed, asked).compressed()->n_tile, 16);  // one column tile
  EXPECT_EQ(plan_of(big, 5, SpmmNMode::fixed, asked).compressed()->n_tile, 8);
  EXPECT_THROW(plan_of(big, rt::kVectorMaxN + 1, SpmmNMode::fixed, asked), UsageError);
  EXPECT_THROW(plan_of(big, 1, SpmmNMode::runtime, asked), UsageError);
  SpmmOptions family;  // the compressed family, its layout the rule's
  family.value_mode = SpmmValueMode::compressed;
  const CsrMatrix wide = test::random_csr(16, rt::kVectorMaxK + 1, 0.001, 2);
  EXPECT_FALSE(vector(wide, 1, SpmmNMode::fixed, family));
  EXPECT_THROW(plan_of(wide, 1, SpmmNMode::fixed, asked), UsageError);
  asked.compressed.warps = 3;  // 16 rows do not split into 3 warps
  EXPECT_THROW(plan_of(big, 1, SpmmNMode::fixed, asked), UsageError);

  // One row a warp by default; the interpreter against the reference, with and without the epilogue.
  const SpmmPlan plan = plan_of(big, 1, SpmmNMode::fixed);
  EXPECT_EQ(plan.compressed()->warps, spmm_rules::kCompressedVectorWarps);
  EXPECT_EQ(plan.layout.rows_per_block, 16);
  EXPECT_EQ(plan.layout.shared_bytes, 0);
  // Past one wave of warp slots (132 SMs x 64 warps on the default target), two rows a warp.
  const CsrMatrix tall = test::random_csr(8448 + 16, 64, 0.1, 3);
  EXPECT_EQ(plan_of(tall, 1, SpmmNMode::fixed, family).compressed()->warps,
            spmm_rules::kCompressedVectorWarps / 2);
  const CsrMatrix wave = test::random_csr(8448, 64, 0.1, 3);
  EXPECT_EQ(plan_of(wave, 1, SpmmNMode::fixed, family).compressed()->warps,
            spmm_rules::kCompressedVectorWarps);
  for_every_shape_class([](const CsrMatrix& a, DType dtype, const std::string& label) {
    for (const std::int32_t warps : {0, 4}) {
      SCOPED_TRACE(fmt::format("{} warps {}", label, warps));
      expect_correct(a, {a.rows, a.cols, 1, SpmmNMode::fixed, warps == 0, warps == 0, dtype}, vectored(warps),
                     1);
    }
    for (const std::int64_t n : {3, 16}) {
      SCOPED_TRACE(fmt::format("{} N {}", label, n));
      expect_correct(a, {a.rows, a.cols, n, SpmmNMode::fixed, true, n == 3, dtype}, vectored(0), n);
    }
  });

  // JSON and check_plan.
  const SpmmPlan back = plan_from_json(to_json(plan));
  EXPECT_EQ(to_json(back), to_json(plan));
  EXPECT_EQ(to_json(plan)["body"]["layout"], "vector");
  EXPECT_TRUE(check_plan(back, big).empty());
  SpmmPlan other_n = plan;
  other_n.problem.n = 9;  // its n_tile would be 16
  EXPECT_FALSE(check_plan(other_n, big).empty());
  other_n.compressed()->n_tile = 16;
  EXPECT_TRUE(check_plan(other_n, big).empty());
  other_n.problem.n = rt::kVectorMaxN + 1;
  other_n.compressed()->n_tile = 24;
  EXPECT_FALSE(check_plan(other_n, big).empty());
  SpmmPlan scatter_too = plan;
  scatter_too.compressed()->scatter = true;
  EXPECT_FALSE(check_plan(scatter_too, big).empty());

  // The stream: the row table is A's row pointers, then value << 16 | column; the walk refuses breaks.
  const std::vector<std::uint32_t> stream = spmm_compressed_stream(plan, big);
  const std::int64_t data = rt::vector_data_word(big.rows);
  ASSERT_EQ(static_cast<std::int64_t>(stream.size()), data + round_up(big.nnz(), 4));
  std::int64_t seen = 0;
  rt::walk_vector_stream(stream, big.rows, big.cols, "ok",
                         [&](std::int64_t row, std::int64_t col, std::uint16_t) {
                           EXPECT_EQ(col, big.col_idx[static_cast<std::size_t>(seen)]);
                           EXPECT_GE(seen, big.row_ptr[static_cast<std::size_t>(row)]);
                           EXPECT_LT(seen++, big.row_ptr[static_cast<std::size_t>(row + 1)]);
                         });
  EXPECT_EQ(seen, big.nnz());
  const auto refused = [&](const std::function<void(std::vector<std::uint32_t>&)>& edit) {
    std::vector<std::uint32_t> s = stream;
    edit(s);
    EXPECT_THROW(rt::walk_vector_stream(s, big.rows, big.cols, "bad"), std::invalid_argument);
  };
  refused([](auto& s) { s[0] = 1; });                                       // the table starts past 0
  refused([](auto& s) { std::swap(s[5], s[6]); });                          // a row ends before it starts
  refused([&](auto& s) { s[static_cast<std::size_t>(big.rows)] += 8; });    // the last row past the data
  refused([&](auto& s) { s[static_cast<std::size_t>(data)] |= 0xffffu; });  // a column past K
  refused([](auto& s) { s.pop_back(); });                                   // data not in pieces of 4
  refused([&](auto& s) { s.resize(static_cast<std::size_t>(big.rows)); });  // no whole row table
}
