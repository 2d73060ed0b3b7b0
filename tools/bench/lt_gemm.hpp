// cuBLASLt matmuls for the dense baselines of C = A·B (A M×K the weight, B K×N, C M×N, all row-major),
// shared by the fp32 (baselines.cpp) and half-precision (half_baselines.cpp) baselines: the shape's
// descriptors and the heuristic's first algorithms, and one launch with a chosen algorithm.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/baselines.hpp"
#include "bench/vendor_handles.hpp"

namespace sparsecc::bench {

// Row-major C = A·B is column-major C^T = B^T·op(W): Lt's A is B^T (N×K, ld N), Lt's B the weight W,
// and C = D is C^T (N×M, ld N). W is A as stored (column-major K×M, ld K, op N) or A kept transposed
// (column-major M×K, ld M, op T), as a deployment may store a fixed weight either way.
struct LtGemmShape {
  std::int64_t m = 0, k = 0, n = 0;
  cudaDataType_t in = CUDA_R_32F;   // A and B
  cudaDataType_t out = CUDA_R_32F;  // C
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  bool transposed = false;  // W is A transposed (K×M row-major)
};

struct LtGemm {
  LtMatmulDesc desc;
  LtLayout b, w, c;
  std::vector<cublasLtMatmulHeuristicResult_t> algorithms;  // the heuristic's first results, best first
};

// The descriptors of `shape` and the heuristic's first `count` algorithms within `workspace_bytes`
// (possibly fewer; NotSupported when the library has none).
std::shared_ptr<LtGemm> lt_gemm(cublasLtHandle_t h, const LtGemmShape& shape, std::size_t workspace_bytes,
                                int count);

// Enqueues C = A·B with algorithm `index` of `g` (alpha 1, beta 0; fp32 scalars): `b` is B, `w` the
// weight in the shape's layout, `c` the output.
void lt_matmul(cublasLtHandle_t h, const LtGemm& g, std::size_t index, const void* b, const void* w, void* c,
               void* workspace, std::size_t workspace_bytes, cudaStream_t stream);

// The cuBLASLt candidates of one precision: for the weight as stored, then transposed (`shape` with
// its `transposed` set accordingly), the heuristic's first `count` algorithms, each measured by
// `measure_one(name, gemm, transposed, index)` and appended to `tried` as
// "<prefix>lt_wn<index>" / "<prefix>lt_wt<index>". A layout the library has no algorithm for adds one
// result of that layout's name saying why (skipped when NOT_SUPPORTED). Nothing when count < 1.
using LtMeasure = std::function<BaselineResult(const std::string& name, const std::shared_ptr<LtGemm>& gemm,
                                               bool transposed, std::size_t index)>;
void lt_candidates(cublasLtHandle_t h, LtGemmShape shape, std::size_t workspace_bytes, int count,
                   const std::string& prefix, double tolerance, const LtMeasure& measure_one,
                   std::vector<BaselineResult>& tried);

}  // namespace sparsecc::bench
