// The SpMM bundle stage: the verification section round-trips the matrix, rejects malformed bytes,
// travels through the bundle file, and the fingerprint tracks exactly the shape, pattern and values.
#include "sparsecc/bundle/spmm_bundle.hpp"

#include <gtest/gtest.h>

#include "sparsecc/bundle/write_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/matrix/prune.hpp"
#include "test_support.hpp"

using namespace sparsecc;

namespace {
CsrMatrix sample(std::uint64_t seed) { return magnitude_prune(random_dense(13, 9, seed), 0.7); }
}  // namespace

TEST(SpmmBundle, VerificationSectionRoundTrips) {
  const CsrMatrix a = sample(1);
  const CsrMatrix b = csr_from_reference_bytes(csr_reference_bytes(a), "t.sccb");
  EXPECT_EQ(b.rows, a.rows);
  EXPECT_EQ(b.cols, a.cols);
  EXPECT_EQ(b.row_ptr, a.row_ptr);
  EXPECT_EQ(b.col_idx, a.col_idx);
  EXPECT_EQ(b.values, a.values);  // float32-exact values survive
  const CsrMatrix empty = csr_from_reference_bytes(csr_reference_bytes(CsrMatrix{}), "e.sccb");
  EXPECT_EQ(empty.rows, 0);
}

TEST(SpmmBundle, MalformedVerificationSectionsAreRejected) {
  const auto bytes = csr_reference_bytes(sample(2));
  for (std::size_t cut = 0; cut < bytes.size(); cut += 7)
    test::expect_input_error([&] { csr_from_reference_bytes(std::span(bytes.data(), cut), "t.sccb"); },
                             {"t.sccb: byte"});
  auto extra = bytes;
  extra.push_back(0);
  test::expect_input_error([&] { csr_from_reference_bytes(extra, "t.sccb"); }, {"trailing bytes"});
  auto bad_col = bytes;
  const std::size_t col0 = 24 + 8 * 14;  // header, then 14 row offsets, then the first column index
  bad_col[col0] = 99;
  test::expect_input_error([&] { csr_from_reference_bytes(bad_col, "t.sccb"); }, {"verification section"});
  auto huge = bytes;
  huge[7] = 0x7f;  // rows
  test::expect_input_error([&] { csr_from_reference_bytes(huge, "t.sccb"); }, {"implausible"});
}

TEST(SpmmBundle, FingerprintTracksShapePatternAndValues) {
  const CsrMatrix a = sample(3);
  EXPECT_EQ(matrix_fingerprint(a), matrix_fingerprint(sample(3)));
  EXPECT_EQ(matrix_fingerprint(a).size(), 16u);
  CsrMatrix v = a;
  v.values[0] = -v.values[0];
  EXPECT_NE(matrix_fingerprint(v), matrix_fingerprint(a));
  CsrMatrix s = a;
  s.cols += 1;
  EXPECT_NE(matrix_fingerprint(s), matrix_fingerprint(a));
}

TEST(SpmmBundle, MetadataRecordsThePlanAndTheFileRoundTrips) {
  const CsrMatrix a = sample(4);
  SpmmProblem p;
  p.m = a.rows;
  p.k = a.cols;
  p.n = 33;
  p.n_mode = SpmmNMode::runtime;
  p.relu = true;
  const SpmmPlan plan = plan_spmm(a, p);
  const rt::BundleMetadata md = spmm_bundle_metadata(plan, a, gpu_target("sm_90"));
  EXPECT_EQ(md.n_mode, "runtime");
  // Kernels for sm_90 on wait for their predecessor (programmatic dependent launch), fp32 and half.
  EXPECT_TRUE(md.programmatic_launch);
  EXPECT_FALSE(spmm_bundle_metadata(plan, a, gpu_target("sm_80")).programmatic_launch);
  EXPECT_FALSE(spmm_bundle_metadata(plan, a, gpu_target("sm_89")).programmatic_launch);
  SpmmProblem half = p;
  half.dtype = DType::f16;
  EXPECT_TRUE(spmm_bundle_metadata(plan_spmm(a, half), a, gpu_target("sm_90")).programmatic_launch);
  EXPECT_FALSE(spmm_bundle_metadata(plan_spmm(a, half), a, gpu_target("sm_80")).programmatic_launch);
  EXPECT_EQ(md.block_rows, plan.block_rows());
  EXPECT_EQ(md.block_x, plan.layout.block_x);
  EXPECT_EQ(md.nnz, a.nnz());
  EXPECT_EQ(md.plan_summary.at("rows_per_block"), plan.layout.rows_per_block);
  rt::Bundle b;
  b.metadata = md;
  b.ptx = "// not compiled in this test\n";
  b.reference = csr_reference_bytes(a);
  test::TempDir dir;
  write_bundle(dir.file("a.sccb"), b);
  const rt::Bundle back = rt::read_bundle_file(dir.file("a.sccb"));
  EXPECT_EQ(back, b);
  EXPECT_EQ(matrix_fingerprint(csr_from_reference_bytes(back.reference, "a.sccb")), md.fingerprint);

  // make_spmm_bundle stores the plan: it comes back from the file as it was planned.
  const rt::Bundle whole = make_spmm_bundle(
      plan, a, gpu_target("sm_90"), {}, "// not compiled in this test\n",
      plan.value_mode() == SpmmValueMode::baked ? std::vector<float>{} : spmm_kernel_values(plan, a),
      spmm_fragment_words(plan, a), {});
  write_bundle(dir.file("b.sccb"), whole);
  const rt::Bundle whole_back = rt::read_bundle_file(dir.file("b.sccb"));
  EXPECT_FALSE(whole_back.plan.empty());
  EXPECT_EQ(to_json(spmm_bundle_plan(whole_back, a, "b.sccb")), to_json(plan));
}
