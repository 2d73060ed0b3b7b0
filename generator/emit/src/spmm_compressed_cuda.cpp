// CUDA C++ emitter for compressed SpMM plans: renders templates/spmm_compressed.cu with the plan's shape;
// the matrix goes to the stream the kernel reads (spmm_compressed_stream), not into the code.
#include <fmt/format.h>

#include <map>

#include "sparsecc/common/math.hpp"
#include "sparsecc/emit/contract.hpp"
#include "sparsecc/emit/spmm_cuda.hpp"
#include "sparsecc/emit/template.hpp"
#include "sparsecc/plan/spmm_compressed.hpp"
#include "unrolled_groups.hpp"

namespace sparsecc {

EmittedKernel emit_spmm_compressed_cuda(const SpmmPlan& plan, const CsrMatrix& a) {
  const SpmmCompressedBody* body = plan.compressed();
  if (!body) throw UsageError("emit_spmm_compressed_cuda: the plan is not a compressed one");
  EmittedKernel out;
  emit_detail::start_cuda_kernel(plan, a, out);  // checks the plan; no values array
  out.fragment_words = spmm_compressed_stream(plan, a);
  const rt::CompressedShape shape = spmm_compressed_shape(plan);
  if (body->vector) {
    out.source = KernelTemplate::load("spmm_vector.cu")
                     .render({{"KERNEL_NAME", plan.hints.kernel_name},
                              {"BF16", plan.problem.dtype == DType::bf16 ? "1" : "0"},
                              {"WARPS", std::to_string(body->warps)},
                              {"ROWS", std::to_string(spmm_compressed_rows(*body))},
                              {"M", std::to_string(plan.problem.m)},
                              {"N", std::to_string(plan.problem.n)},
                              {"UNROLL", std::to_string(spmm_vector_unroll(plan.problem.n))},
                              {"BIAS", plan.epilogue.bias ? "true" : "false"},
                              {"RELU", plan.epilogue.relu ? "true" : "false"},
                              {"PROGRAMMATIC", plan.hints.programmatic ? "true" : "false"}});
    stamp_spmm_contract(out, plan, a);
    return out;
  }
  const bool fixed = plan.problem.n_mode == SpmmNMode::fixed;
  const std::map<std::string, std::string> values = {
      {"KERNEL_NAME", plan.hints.kernel_name},
      {"BF16", plan.problem.dtype == DType::bf16 ? "1" : "0"},
      {"WARPS", std::to_string(body->warps)},
      {"STRIPS", std::to_string(body->strips_per_warp)},
      {"CHUNK_K", std::to_string(body->chunk_k)},
      {"STAGES", std::to_string(body->stages)},
      {"PITCH", std::to_string(spmm_compressed_pitch(body->n_tile))},
      {"SWIZZLE", spmm_compressed_swizzled(body->n_tile) ? "1" : "0"},
      {"SCATTER", body->scatter ? "1" : "0"},
      {"KEEP", std::to_string(body->kept_rounds)},
      {"SPLITS", std::to_string(body->splits)},
      {"CLUSTER", body->splits > 1 ? fmt::format("__cluster_dims__(1, {}, 1)", body->splits) : ""},
      {"N_TILE", std::to_string(body->n_tile)},
      {"M", std::to_string(plan.problem.m)},
      {"K", std::to_string(plan.problem.k)},
      {"CHUNKS", std::to_string(shape.chunks)},
      {"ROW_BLOCKS", std::to_string(shape.row_blocks)},
      {"STAGE_BYTES", std::to_string(body->stage_bytes)},
      {"VEC", fixed && plan.problem.n % 8 == 0 ? "1" : "0"},
      {"COLUMN", fixed && plan.problem.n == 1 ? "1" : "0"},
      {"BIAS", plan.epilogue.bias ? "true" : "false"},
      {"RELU", plan.epilogue.relu ? "true" : "false"},
      {"PROGRAMMATIC", plan.hints.programmatic ? "true" : "false"},
      {"LD", fixed ? fmt::format("{}", plan.problem.n) : "n"}};
  out.source = KernelTemplate::load("spmm_compressed.cu").render(values);
  stamp_spmm_contract(out, plan, a);
  return out;
}

}  // namespace sparsecc
