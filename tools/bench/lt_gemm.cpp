#include "bench/lt_gemm.hpp"

#include <fmt/format.h>

namespace sparsecc::bench {

std::shared_ptr<LtGemm> lt_gemm(cublasLtHandle_t h, const LtGemmShape& s, std::size_t workspace_bytes,
                                int count) {
  auto g = std::make_shared<LtGemm>();
  const cublasOperation_t op_b = CUBLAS_OP_N, op_w = s.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  SPARSECC_CUBLAS_CHECK(cublasLtMatmulDescCreate(&g->desc.d, s.compute, CUDA_R_32F));
  SPARSECC_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(g->desc.d, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof(op_b)));
  SPARSECC_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(g->desc.d, CUBLASLT_MATMUL_DESC_TRANSB, &op_w, sizeof(op_w)));
  SPARSECC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g->b.d, s.in, s.n, s.k, s.n));
  if (s.transposed)
    SPARSECC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g->w.d, s.in, s.m, s.k, s.m));
  else
    SPARSECC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g->w.d, s.in, s.k, s.m, s.k));
  SPARSECC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g->c.d, s.out, s.n, s.m, s.n));
  LtPreference pref;
  SPARSECC_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref.d));
  SPARSECC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref.d, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                             &workspace_bytes, sizeof(workspace_bytes)));
  g->algorithms.resize(static_cast<std::size_t>(count));
  int returned = 0;
  SPARSECC_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(h, g->desc.d, g->b.d, g->w.d, g->c.d, g->c.d, pref.d,
                                                       count, g->algorithms.data(), &returned));
  g->algorithms.resize(static_cast<std::size_t>(returned));
  return g;
}

void lt_matmul(cublasLtHandle_t h, const LtGemm& g, std::size_t index, const void* b, const void* w, void* c,
               void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  const float alpha = 1.0f, beta = 0.0f;
  SPARSECC_CUBLAS_CHECK(cublasLtMatmul(h, g.desc.d, &alpha, b, g.b.d, w, g.w.d, &beta, c, g.c.d, c, g.c.d,
                                       &g.algorithms.at(index).algo, workspace, workspace_bytes, stream));
}

void lt_candidates(cublasLtHandle_t h, LtGemmShape shape, std::size_t workspace_bytes, int count,
                   const std::string& prefix, double tolerance, const LtMeasure& measure_one,
                   std::vector<BaselineResult>& tried) {
  if (count < 1) return;
  for (const bool transposed : {false, true}) {
    const std::string layout = prefix + (transposed ? "lt_wt" : "lt_wn");
    shape.transposed = transposed;
    std::shared_ptr<LtGemm> g;
    try {
      g = lt_gemm(h, shape, workspace_bytes, count);
    } catch (const std::exception& e) {
      BaselineResult r;
      r.name = layout;
      r.tolerance = tolerance;
      r.skipped = dynamic_cast<const NotSupported*>(&e) != nullptr;
      r.note = fmt::format("no cuBLASLt algorithm: {}", e.what());
      tried.push_back(std::move(r));
      cudaGetLastError();
      continue;
    }
    for (std::size_t i = 0; i < g->algorithms.size(); ++i)
      tried.push_back(measure_one(fmt::format("{}{}", layout, i), g, transposed, i));
  }
}

}  // namespace sparsecc::bench
