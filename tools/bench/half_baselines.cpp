// Half-precision cuBLAS and cuSPARSE baselines: upload, check against the fp64 reference of the
// rounded inputs, then time.
#include "bench/half_baselines.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>
#include <memory>
#include <string>

#include "bench/llm_suite.hpp"
#include "bench/lt_gemm.hpp"
#include "bench/vendor_handles.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/reference/spmm.hpp"

namespace sparsecc::bench {
namespace {

cudaDataType data_type(HalfPrecision p) { return p == HalfPrecision::f16 ? CUDA_R_16F : CUDA_R_16BF; }

// One copy of every operand the cuBLAS and CSR baselines read; the timed launches rotate among
// several when timing cold L2. All values are fp16 or bf16 bits.
struct OperandSet {
  DeviceBuffer a_dense, a_dense_t;  // A, M×K row-major, and A transposed (K×M row-major)
  DeviceBuffer row_ptr, col, val;   // CSR A (int32 indices)
  DeviceBuffer b, c;                // B K×N and C M×N, row-major
};

struct Problem {
  HalfPrecision prec = HalfPrecision::f16;
  cudaDataType type = CUDA_R_16F;
  std::int64_t M = 0, K = 0, N = 0, nnz = 0;
  CsrMatrix a;                        // values rounded to prec
  std::vector<std::uint16_t> b_bits;  // B, K×N row-major
  std::vector<double> c_ref;          // fp64 A·B of the rounded inputs, M×N row-major (or its rows)
  std::vector<std::int64_t> rows;     // the rows of c_ref (HalfBaselineOptions::check_rows); empty: all
  std::vector<OperandSet> sets;
};

Problem prepare(const CsrMatrix& a, std::int64_t n, HalfPrecision prec, const HalfBaselineOptions& options,
                std::size_t l2_bytes) {
  if (n < 1 || n > INT_MAX || a.rows < 1 || a.rows > INT_MAX || a.cols < 1 || a.cols > INT_MAX ||
      a.nnz() > INT_MAX)
    throw UsageError(
        fmt::format("half baselines need 1 <= M, K, N and every size below 2^31 (M {}, K {}, N {}, nnz {})",
                    a.rows, a.cols, n, a.nnz()));
  validate(a);
  Problem p;
  p.prec = prec;
  p.type = data_type(prec);
  p.M = a.rows, p.K = a.cols, p.N = n, p.nnz = a.nnz();
  p.a = round_values(a, prec);
  for (std::size_t i = 0; i < p.a.values.size(); ++i)
    if (!std::isfinite(p.a.values[i]))
      throw UsageError(fmt::format("half baselines: value {} of A is not finite in {}", a.values[i],
                                   half_precision_name(prec)));
  p.b_bits = random_half_matrix(p.K, p.N, prec, options.seed);
  DenseMatrix b(p.K, p.N);
  for (std::size_t i = 0; i < p.b_bits.size(); ++i) b.data[i] = half_bits_to_double(p.b_bits[i], prec);
  p.rows = options.check_rows;
  p.c_ref = p.rows.empty() ? spmm(p.a, b).data : reference_rows(p.a, b.data, p.N, p.rows);

  const std::size_t dense_size = options.cublas ? static_cast<std::size_t>(p.M * p.K) : 0;
  std::vector<std::uint16_t> a_dense(dense_size, 0), val(p.a.values.size());
  std::vector<std::uint16_t> a_dense_t(a_dense.size(), 0);
  std::vector<std::int32_t> row_ptr(p.a.row_ptr.begin(), p.a.row_ptr.end());
  for (std::int64_t r = 0; r < p.M; ++r) {
    for (std::int64_t i = p.a.row_ptr[r]; i < p.a.row_ptr[r + 1]; ++i) {
      val[i] = double_to_half_bits(p.a.values[i], prec);  // exact: the value is rounded already
      if (!options.cublas) continue;
      a_dense[static_cast<std::size_t>(r * p.K + p.a.col_idx[i])] = val[i];
      a_dense_t[static_cast<std::size_t>(p.a.col_idx[i] * p.M + r)] = val[i];
    }
  }
  // The fewest bytes one launch of any baseline touches: sparse CSR or dense A.
  const std::size_t bc_bytes = (p.b_bits.size() + static_cast<std::size_t>(p.M * p.N)) * 2;
  const std::size_t sparse = static_cast<std::size_t>(p.nnz) * 6 + row_ptr.size() * 4 + bc_bytes;
  const std::size_t dense = options.cublas ? a_dense.size() * 2 + bc_bytes : sparse;
  const int sets = rotation_sets(std::min(sparse, dense), l2_bytes, options.timing.cold_l2);
  for (int s = 0; s < sets; ++s) {
    OperandSet o;
    if (options.cublas) o.a_dense = upload(a_dense), o.a_dense_t = upload(a_dense_t);
    o.b = upload(p.b_bits);
    o.row_ptr = upload(row_ptr), o.col = upload(p.a.col_idx), o.val = upload(val);
    o.c = DeviceBuffer(static_cast<std::size_t>(p.M * p.N) * 2);
    p.sets.push_back(std::move(o));
  }
  return p;
}

// The first `rows` rows of a device matrix of half bits with `stored_rows` rows and `cols` columns,
// row-major or column-major (ld = stored_rows), as a rows×cols row-major matrix of doubles.
std::vector<double> download_rows(const DeviceBuffer& c, std::int64_t stored_rows, std::int64_t rows,
                                  std::int64_t cols, bool col_major, HalfPrecision prec) {
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(stored_rows * cols));
  c.download(bits.data(), bits.size() * sizeof(std::uint16_t));
  std::vector<double> out(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < cols; ++j)
      out[static_cast<std::size_t>(r * cols + j)] = half_bits_to_double(
          bits[static_cast<std::size_t>(col_major ? j * stored_rows + r : r * cols + j)], prec);
  return out;
}

// The rows of a full M×N output that the reference holds (all of it without check_rows).
std::vector<double> checked_rows(const Problem& p, std::vector<double> full) {
  return p.rows.empty() ? full : pick_rows(full, p.N, p.rows);
}

using Enqueue = std::function<void(cudaStream_t, int set)>;

// One baseline, set up: the enqueue of one launch on one operand set; the outputs to NaN-poison
// before the check; set 0's C as M×N row-major doubles; a note for the result.
struct Case {
  Enqueue enqueue;
  std::vector<const DeviceBuffer*> outputs;
  std::function<std::vector<double>()> result;
  std::string note;
  std::shared_ptr<void> state;  // owns what the closures use
};

std::string join_note(const std::string& first, const std::string& second) {
  if (first.empty()) return second;
  if (second.empty()) return first;
  return first + "; " + second;
}

// Runs `setup`, checks one launch's output against the reference and, when it passes, times the
// launches rotating over the operand sets (CUDA graph replay; events around direct launches when the
// capture fails).
BaselineResult measure(const std::string& name, double tolerance, Problem& p,
                       const HalfBaselineOptions& options, const std::function<Case()>& setup) {
  BaselineResult r;
  r.name = name;
  r.tolerance = tolerance;
  try {
    Case c = setup();
    r.note = c.note;
    for (const DeviceBuffer* b : c.outputs)
      SPARSECC_CUDA_CHECK(cudaMemset(b->get(), 0xFF, b->bytes()));  // NaN
    c.enqueue(nullptr, 0);
    SPARSECC_CUDA_CHECK(cudaDeviceSynchronize());
    SPARSECC_CUDA_CHECK(cudaGetLastError());
    r.rel_error = rel_l2_error(c.result(), p.c_ref);
    if (!(r.rel_error <= tolerance)) {
      r.note = join_note(
          fmt::format("check failed: rel L2 error {:.3g} above {:.0e}", r.rel_error, tolerance), r.note);
      return r;
    }
    TimingOptions timing = options.timing;
    timing.buffer_sets = static_cast<int>(p.sets.size());
    int next = 0;
    auto enqueue_one = [&](cudaStream_t stream) {
      c.enqueue(stream, next);
      next = (next + 1) % timing.buffer_sets;
    };
    try {
      r.timing = time_steady(enqueue_one, timing);
    } catch (const CudaError& e) {
      cudaGetLastError();
      next = 0;
      r.timing = time_direct(enqueue_one, timing);
      r.note = join_note(r.note, fmt::format("CUDA graph capture failed ({}), timed with events around {} "
                                             "direct launches",
                                             e.what(), r.timing.launches_per_sample));
    }
    r.us = r.timing.median_us;
    r.ok = true;
  } catch (const NotSupported& e) {
    r.skipped = true;
    r.note = join_note(fmt::format("not supported: {}", e.what()), r.note);
  } catch (const std::exception& e) {
    r.note = join_note(e.what(), r.note);
  }
  cudaGetLastError();  // a non-sticky error of this baseline must not fail the next one
  return r;
}

// The outputs and result of the baselines that write the row-major C of the operand sets.
void use_set_outputs(Case& c, Problem& p) {
  for (const OperandSet& o : p.sets) c.outputs.push_back(&o.c);
  c.result = [&p] { return checked_rows(p, download_rows(p.sets[0].c, p.M, p.M, p.N, false, p.prec)); };
}

// Dense GEMM on the dense form of A, fp16/bf16 in and out, fp32 compute, default math (tensor ops):
// cublasGemmEx's default algorithm on A as stored (row-major C = A·B as column-major C^T = B^T·A^T:
// gemm(m = N, n = M, k = K) on B (ld N), A (ld K)), then cuBLASLt's first `cublas_algorithms`
// heuristic algorithms on A as stored and on A transposed, each checked and timed as its own result
// (cublas_<s>_gemmex, cublas_<s>_lt_wn<i>, cublas_<s>_lt_wt<i>).
std::vector<BaselineResult> cublas_baselines(Problem& p, const HalfBaselineOptions& options,
                                             const std::string& s, double tol) {
  struct State {
    CublasHandle handle;
    CublasLtHandle lt;
    DeviceBuffer workspace{std::size_t{32} << 20};
  };
  auto st = std::make_shared<State>();
  SPARSECC_CUBLAS_CHECK(cublasSetWorkspace(st->handle.h, st->workspace.get(), st->workspace.bytes()));
  SPARSECC_CUBLAS_CHECK(cublasSetMathMode(st->handle.h, CUBLAS_DEFAULT_MATH));
  const int m = static_cast<int>(p.N), n = static_cast<int>(p.M), k = static_cast<int>(p.K);
  const std::string prefix = fmt::format("cublas_{}_", s);
  std::vector<BaselineResult> tried;
  tried.push_back(measure(prefix + "gemmex", tol, p, options, [&] {
    Case c;
    c.enqueue = [&p, st, m, n, k](cudaStream_t stream, int set) {
      const float alpha = 1.0f, beta = 0.0f;
      const OperandSet& o = p.sets[static_cast<std::size_t>(set)];
      SPARSECC_CUBLAS_CHECK(cublasSetStream(st->handle.h, stream));
      SPARSECC_CUBLAS_CHECK(cublasGemmEx(st->handle.h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, o.b.get(),
                                         p.type, m, o.a_dense.get(), p.type, k, &beta, o.c.get(), p.type, m,
                                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    };
    use_set_outputs(c, p);
    c.state = st;
    return c;
  }));
  LtGemmShape shape;
  shape.m = p.M, shape.k = p.K, shape.n = p.N;
  shape.in = shape.out = p.type;
  lt_candidates(
      st->lt.h, shape, st->workspace.bytes(), options.cublas_algorithms, prefix, tol,
      [&](const std::string& name, const std::shared_ptr<LtGemm>& g, bool transposed, std::size_t i) {
        return measure(name, tol, p, options, [&] {
          Case c;
          c.enqueue = [&p, st, g, transposed, i](cudaStream_t stream, int set) {
            const OperandSet& o = p.sets[static_cast<std::size_t>(set)];
            lt_matmul(st->lt.h, *g, i, o.b.get(), (transposed ? o.a_dense_t : o.a_dense).get(), o.c.get(),
                      st->workspace.get(), st->workspace.bytes(), stream);
          };
          use_set_outputs(c, p);
          c.state = st;
          return c;
        });
      },
      tried);
  return tried;
}

struct CsrAlgorithm {
  const char* name;  // without the precision suffix
  cusparseSpMMAlg_t alg;
  bool preprocess;  // cusparseSpMM_preprocess helps CSR_ALG1 and CSR_ALG3 (DEFAULT may pick either)
};

constexpr CsrAlgorithm kCsrDefault{"cusparse_csr_default", CUSPARSE_SPMM_ALG_DEFAULT, true};
constexpr CsrAlgorithm kCsrAlg1{"cusparse_csr_alg1", CUSPARSE_SPMM_CSR_ALG1, true};
constexpr CsrAlgorithm kCsrAlg2{"cusparse_csr_alg2", CUSPARSE_SPMM_CSR_ALG2, false};
constexpr CsrAlgorithm kCsrAlg3{"cusparse_csr_alg3", CUSPARSE_SPMM_CSR_ALG3, true};

// cusparseSpMM on CSR A with row-major B and C of the precision, fp32 compute.
Case csr_case(Problem& p, const std::shared_ptr<CusparseHandle>& handle, const CsrAlgorithm& alg) {
  auto sets = std::make_shared<std::vector<SpmmSet>>(p.sets.size());
  // The handle may still name the stream of the previous baseline's timing run, destroyed by now.
  SPARSECC_CUSPARSE_CHECK(cusparseSetStream(handle->h, nullptr));
  for (std::size_t s = 0; s < p.sets.size(); ++s) {
    OperandSet& o = p.sets[s];
    SpmmSet& d = (*sets)[s];
    SPARSECC_CUSPARSE_CHECK(cusparseCreateCsr(&d.a.d, p.M, p.K, p.nnz, o.row_ptr.get(), o.col.get(),
                                              o.val.get(), CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                              CUSPARSE_INDEX_BASE_ZERO, p.type));
    prepare_spmm(handle->h, d, p.M, p.K, p.N, o.b.get(), o.c.get(), p.type, alg.alg, alg.preprocess);
  }
  SPARSECC_CUDA_CHECK(cudaDeviceSynchronize());
  Case c;
  c.enqueue = [handle, sets, a = alg.alg](cudaStream_t stream, int set) {
    run_spmm(handle->h, (*sets)[static_cast<std::size_t>(set)], a, stream);
  };
  use_set_outputs(c, p);
  c.state = sets;
  return c;
}

// One operand set of a Blocked-ELL baseline: A in Blocked-ELL form, B with zero rows up to the
// padded K, C with the padded M rows.
struct BellSet {
  DeviceBuffer col_ind, values, b, c;
  SpMat a;
  DnMat bd, cd;
  DeviceBuffer workspace;
};

// cusparseSpMM (CUSPARSE_SPMM_BLOCKED_ELL_ALG1, fp32 compute) on Blocked-ELL A with M and K padded up
// to a multiple of the block. B and C are row-major when the library takes that, else (or when
// forced) column-major (B transposed on the host, C read back transposed); the note says which.
Case bell_case(Problem& p, const std::shared_ptr<CusparseHandle>& handle, int block,
               bool force_column_major) {
  const BlockedEll e = blocked_ell_from_csr(p.a, block);
  if (e.ell_cols == 0) throw NotSupported("A has no nonzeros, so Blocked-ELL has no columns");
  if (e.rows > INT_MAX || e.cols > INT_MAX || e.stored() > INT_MAX)
    throw UsageError(fmt::format("Blocked-ELL of block {} too large ({} x {}, {} stored values)", block,
                                 e.rows, e.cols, e.stored()));
  std::vector<std::uint16_t> values(e.values.size());
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = double_to_half_bits(e.values[i], p.prec);
  const std::int64_t kp = e.cols, mp = e.rows;
  std::vector<std::uint16_t> b_row(static_cast<std::size_t>(kp * p.N), 0);  // zero rows K..kp-1
  std::copy(p.b_bits.begin(), p.b_bits.end(), b_row.begin());
  std::vector<std::uint16_t> b_col;  // made when column-major is used
  auto make_b_col = [&] {
    b_col.assign(b_row.size(), 0);
    for (std::int64_t r = 0; r < kp; ++r)
      for (std::int64_t j = 0; j < p.N; ++j)
        b_col[static_cast<std::size_t>(j * kp + r)] = b_row[static_cast<std::size_t>(r * p.N + j)];
  };

  auto sets = std::make_shared<std::vector<BellSet>>(p.sets.size());
  const float alpha = 1.0f, beta = 0.0f;
  const auto op = CUSPARSE_OPERATION_NON_TRANSPOSE;
  SPARSECC_CUSPARSE_CHECK(cusparseSetStream(handle->h, nullptr));

  auto build = [&](BellSet& d, bool col_major) {
    d.a.reset(), d.bd.reset(), d.cd.reset();  // a second try on set 0 starts afresh
    d.col_ind = upload(e.col_ind);
    d.values = upload(values);
    d.b = upload(col_major ? b_col : b_row);
    d.c = DeviceBuffer(static_cast<std::size_t>(mp * p.N) * 2);
    SPARSECC_CUSPARSE_CHECK(cusparseCreateBlockedEll(&d.a.d, mp, kp, block, e.ell_cols, d.col_ind.get(),
                                                     d.values.get(), CUSPARSE_INDEX_32I,
                                                     CUSPARSE_INDEX_BASE_ZERO, p.type));
    const auto order = col_major ? CUSPARSE_ORDER_COL : CUSPARSE_ORDER_ROW;
    SPARSECC_CUSPARSE_CHECK(
        cusparseCreateDnMat(&d.bd.d, kp, p.N, col_major ? kp : p.N, d.b.get(), p.type, order));
    SPARSECC_CUSPARSE_CHECK(
        cusparseCreateDnMat(&d.cd.d, mp, p.N, col_major ? mp : p.N, d.c.get(), p.type, order));
    std::size_t bytes = 0;
    SPARSECC_CUSPARSE_CHECK(cusparseSpMM_bufferSize(handle->h, op, op, &alpha, d.a.d, d.bd.d, &beta, d.cd.d,
                                                    CUDA_R_32F, CUSPARSE_SPMM_BLOCKED_ELL_ALG1, &bytes));
    d.workspace = DeviceBuffer(bytes);
  };
  // Set 0 with one untimed launch in the layout: the library may reject it only at the launch.
  auto try_layout = [&](bool col_major) {
    BellSet& d = (*sets)[0];
    build(d, col_major);
    SPARSECC_CUSPARSE_CHECK(cusparseSpMM(handle->h, op, op, &alpha, d.a.d, d.bd.d, &beta, d.cd.d, CUDA_R_32F,
                                         CUSPARSE_SPMM_BLOCKED_ELL_ALG1, d.workspace.get()));
    SPARSECC_CUDA_CHECK(cudaDeviceSynchronize());
  };

  bool col_major = force_column_major;
  std::string layout_note;
  if (force_column_major) {
    make_b_col();
    try_layout(true);
    layout_note = "B and C column-major (HalfBaselineOptions::bell_column_major), B transposed on the host";
  } else {
    try {
      try_layout(false);
      layout_note = "B and C row-major";
    } catch (const std::exception& row_error) {
      const bool row_unsupported = dynamic_cast<const NotSupported*>(&row_error) != nullptr;
      const std::string row_message = row_error.what();
      cudaGetLastError();
      col_major = true;
      make_b_col();
      try {
        try_layout(true);
      } catch (const NotSupported& col_error) {
        const std::string both =
            fmt::format("column-major: {}; row-major: {}", col_error.what(), row_message);
        if (row_unsupported) throw NotSupported(both);
        throw CudaError(both);
      } catch (const std::exception& col_error) {
        throw CudaError(fmt::format("column-major: {}; row-major: {}", col_error.what(), row_message));
      }
      layout_note =
          fmt::format("B and C column-major, B transposed on the host (row-major rejected: {})", row_message);
    }
  }
  for (std::size_t s = 1; s < sets->size(); ++s) build((*sets)[s], col_major);

  Case c;
  c.enqueue = [handle, sets](cudaStream_t stream, int set) {
    const float alpha = 1.0f, beta = 0.0f;
    const auto op = CUSPARSE_OPERATION_NON_TRANSPOSE;
    BellSet& d = (*sets)[static_cast<std::size_t>(set)];
    SPARSECC_CUSPARSE_CHECK(cusparseSetStream(handle->h, stream));
    SPARSECC_CUSPARSE_CHECK(cusparseSpMM(handle->h, op, op, &alpha, d.a.d, d.bd.d, &beta, d.cd.d, CUDA_R_32F,
                                         CUSPARSE_SPMM_BLOCKED_ELL_ALG1, d.workspace.get()));
  };
  for (const BellSet& d : *sets) c.outputs.push_back(&d.c);
  c.result = [&p, sets, mp, col_major] {
    return checked_rows(p, download_rows((*sets)[0].c, mp, p.M, p.N, col_major, p.prec));
  };
  c.note = fmt::format(
      "block {}, ell_cols {} ({} blocks per block row), padded {} x {}, fill {:.3f} ({} nnz / {} "
      "stored); {}",
      block, e.ell_cols, e.ell_width(), mp, kp, static_cast<double>(p.nnz) / static_cast<double>(e.stored()),
      p.nnz, e.stored(), layout_note);
  c.state = sets;
  return c;
}

}  // namespace

std::vector<BaselineResult> run_half_baselines(const CsrMatrix& a, std::int64_t n, HalfPrecision prec,
                                               const HalfBaselineOptions& options) {
  DeviceInfo device = query_device();
  Problem p = prepare(a, n, prec, options, static_cast<std::size_t>(device.l2_bytes));
  const double tol = half_tolerance(prec);
  const std::string suffix = fmt::format("_{}", half_precision_name(prec));

  const std::string s(half_precision_name(prec));
  std::vector<BaselineResult> results;
  if (options.cublas) {
    results = cublas_baselines(p, options, s, tol);
    results.push_back(best_of(results, fmt::format("cublas_{}_", s), fmt::format("cublas_{}", s), tol));
  }
  auto handle = std::make_shared<CusparseHandle>();
  std::vector<BaselineResult> csr;
  for (const CsrAlgorithm* alg : {&kCsrDefault, &kCsrAlg1, &kCsrAlg2})
    csr.push_back(measure(alg->name + suffix, tol, p, options, [&] { return csr_case(p, handle, *alg); }));
  std::vector<BaselineResult> bell;
  for (int block : options.ell_block_sizes)
    bell.push_back(measure(fmt::format("cusparse_bell{}{}", block, suffix), tol, p, options,
                           [&] { return bell_case(p, handle, block, options.bell_column_major); }));
  // CSR_ALG3 last: see HalfBaselineOptions::csr_alg3.
  if (options.csr_alg3) {
    csr.push_back(
        measure(kCsrAlg3.name + suffix, tol, p, options, [&] { return csr_case(p, handle, kCsrAlg3); }));
  } else {
    BaselineResult r;
    r.name = kCsrAlg3.name + suffix;
    r.tolerance = tol;
    r.skipped = true;
    r.note = "left out (HalfBaselineOptions::csr_alg3 is false)";
    csr.push_back(r);
  }

  results.insert(results.end(), csr.begin(), csr.end());
  results.push_back(best_of(csr, "cusparse_csr_", "cusparse_csr_best", tol));
  results.insert(results.end(), bell.begin(), bell.end());
  results.push_back(best_of(bell, "cusparse_bell", "cusparse_bell_best", tol));
  return results;
}

}  // namespace sparsecc::bench
