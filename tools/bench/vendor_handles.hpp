// What the cuBLAS, cuBLASLt and cuSPARSE baselines (fp32: baselines.cpp, fp16 / bf16: half_baselines.cpp,
// Hines: hines_baselines.cpp) share: status checks that tell "not supported" (a skipped baseline) from a
// failure, owning handles and descriptors, a cusparseSpMM's preparation and launch, the upload of a
// host vector, and the error measure the baselines are checked with.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cusparse.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/timing.hpp"

namespace sparsecc::bench {

// A library call that reports CUSPARSE_STATUS_NOT_SUPPORTED / CUBLAS_STATUS_NOT_SUPPORTED.
class NotSupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  std::string error = fmt::format("{} ({})", cublasGetStatusName(status), cublasGetStatusString(status));
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) throw NotSupported(fmt::format("{}: {}", call, error));
  throw_cuda_error(call, error, file, line);
}

inline void check_cusparse(cusparseStatus_t status, const char* call, const char* file, int line) {
  if (status == CUSPARSE_STATUS_SUCCESS) return;
  std::string error = fmt::format("{} ({})", cusparseGetErrorName(status), cusparseGetErrorString(status));
  if (status == CUSPARSE_STATUS_NOT_SUPPORTED) throw NotSupported(fmt::format("{}: {}", call, error));
  throw_cuda_error(call, error, file, line);
}

#define SPARSECC_CUBLAS_CHECK(call) ::sparsecc::bench::check_cublas((call), #call, __FILE__, __LINE__)
#define SPARSECC_CUSPARSE_CHECK(call) ::sparsecc::bench::check_cusparse((call), #call, __FILE__, __LINE__)

struct CublasHandle {
  cublasHandle_t h = nullptr;
  CublasHandle() { SPARSECC_CUBLAS_CHECK(cublasCreate(&h)); }
  ~CublasHandle() { cublasDestroy(h); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
};

struct CublasLtHandle {
  cublasLtHandle_t h = nullptr;
  CublasLtHandle() { SPARSECC_CUBLAS_CHECK(cublasLtCreate(&h)); }
  ~CublasLtHandle() { cublasLtDestroy(h); }
  CublasLtHandle(const CublasLtHandle&) = delete;
  CublasLtHandle& operator=(const CublasLtHandle&) = delete;
};

// Owning cuBLASLt descriptors (Owned, timing.hpp).
using LtMatmulDesc = Owned<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using LtLayout = Owned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using LtPreference = Owned<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

struct CusparseHandle {
  cusparseHandle_t h = nullptr;
  CusparseHandle() { SPARSECC_CUSPARSE_CHECK(cusparseCreate(&h)); }
  ~CusparseHandle() { cusparseDestroy(h); }
  CusparseHandle(const CusparseHandle&) = delete;
  CusparseHandle& operator=(const CusparseHandle&) = delete;
};

// Owning cuSPARSE descriptors (Owned, timing.hpp).
using SpMat = Owned<cusparseSpMatDescr_t, cusparseDestroySpMat>;
using DnMat = Owned<cusparseDnMatDescr_t, cusparseDestroyDnMat>;
using DnVec = Owned<cusparseDnVecDescr_t, cusparseDestroyDnVec>;

// The descriptors and workspace of one cusparseSpMM on one operand set.
struct SpmmSet {
  SpMat a;
  DnMat b, c;
  DeviceBuffer workspace;
};

// Completes `d`, whose A is described: B (k x n) and C (m x n), row-major, of `type`, at `b` and `c`;
// the workspace of cusparseSpMM with `alg` (alpha 1, beta 0, fp32 compute) and, with `preprocess`, its
// preprocessing.
inline void prepare_spmm(cusparseHandle_t h, SpmmSet& d, std::int64_t m, std::int64_t k, std::int64_t n,
                         void* b, void* c, cudaDataType type, cusparseSpMMAlg_t alg, bool preprocess) {
  const float alpha = 1.0f, beta = 0.0f;
  const auto op = CUSPARSE_OPERATION_NON_TRANSPOSE;
  SPARSECC_CUSPARSE_CHECK(cusparseCreateDnMat(&d.b.d, k, n, n, b, type, CUSPARSE_ORDER_ROW));
  SPARSECC_CUSPARSE_CHECK(cusparseCreateDnMat(&d.c.d, m, n, n, c, type, CUSPARSE_ORDER_ROW));
  std::size_t bytes = 0;
  SPARSECC_CUSPARSE_CHECK(
      cusparseSpMM_bufferSize(h, op, op, &alpha, d.a.d, d.b.d, &beta, d.c.d, CUDA_R_32F, alg, &bytes));
  d.workspace = DeviceBuffer(bytes);
  if (preprocess)
    SPARSECC_CUSPARSE_CHECK(cusparseSpMM_preprocess(h, op, op, &alpha, d.a.d, d.b.d, &beta, d.c.d, CUDA_R_32F,
                                                    alg, d.workspace.get()));
}

// One cusparseSpMM of the prepared set `d` on `stream`.
inline void run_spmm(cusparseHandle_t h, SpmmSet& d, cusparseSpMMAlg_t alg, cudaStream_t stream) {
  const float alpha = 1.0f, beta = 0.0f;
  const auto op = CUSPARSE_OPERATION_NON_TRANSPOSE;
  SPARSECC_CUSPARSE_CHECK(cusparseSetStream(h, stream));
  SPARSECC_CUSPARSE_CHECK(
      cusparseSpMM(h, op, op, &alpha, d.a.d, d.b.d, &beta, d.c.d, CUDA_R_32F, alg, d.workspace.get()));
}

template <class T>
DeviceBuffer upload(const std::vector<T>& host) {
  DeviceBuffer d(host.size() * sizeof(T));
  d.upload(host.data(), host.size() * sizeof(T));
  return d;
}

// ||C - C_ref||_2 / ||C_ref||_2 (the absolute norm when C_ref is zero).
template <class T>
double rel_l2_error(const std::vector<T>& c, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double d = static_cast<double>(c[i]) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace sparsecc::bench
