// CUDA C++ emitter for rolled SpMM plans: renders templates/spmm_rolled.cu with the plan's shape; the
// steps themselves go to the table the kernel reads (spmm_rolled_table), not into the code.
#include <fmt/format.h>

#include <map>

#include "sparsecc/emit/contract.hpp"
#include "sparsecc/emit/spmm_cuda.hpp"
#include "sparsecc/emit/template.hpp"
#include "unrolled_groups.hpp"

namespace sparsecc {

namespace {

// The template's CONV block: kConv and the geometry of a convolution plan, neutral values otherwise.
std::string conv_constants(const SpmmPlan& plan) {
  if (!plan.problem.conv)
    return "  constexpr bool kConv = false;\n  constexpr int KH = 1, KW = 1;\n"
           "  constexpr long long PIX = 1, OW = 1, SH = 1, SW = 1, PT = 0, PL = 0, IH = 1, IW = 1;\n"
           "  constexpr long long XIMG = 0, XCH = 0, XROW = 0, XCOL = 0;\n"
           "  constexpr long long YIMG = 0, YCH = 0, YROW = 0, YCOL = 0;\n";
  const rt::ConvGeometry& g = *plan.problem.conv;
  const auto xs = g.input_strides();
  const auto ys = g.output_strides(plan.problem.m);
  return fmt::format(
      "  constexpr bool kConv = true;\n  constexpr int KH = {}, KW = {};\n"
      "  constexpr long long PIX = {}, OW = {}, SH = {}, SW = {}, PT = {}, PL = {}, IH = {}, IW = {};\n"
      "  constexpr long long XIMG = {}, XCH = {}, XROW = {}, XCOL = {};\n"
      "  constexpr long long YIMG = {}, YCH = {}, YROW = {}, YCOL = {};\n",
      g.kernel_h, g.kernel_w, g.pixels(), g.out_width(), g.stride_h, g.stride_w, g.pad_top, g.pad_left,
      g.height, g.width, xs.image, xs.channel, xs.row, xs.col, ys.image, ys.channel, ys.row, ys.col);
}

}  // namespace

EmittedKernel emit_spmm_rolled_cuda(const SpmmPlan& plan, const CsrMatrix& a) {
  if (plan.value_mode() != SpmmValueMode::rolled)
    throw UsageError("emit_spmm_rolled_cuda: the plan's value mode is not rolled");
  EmittedKernel out;
  emit_detail::start_cuda_kernel(plan, a, out);  // checks the plan; the table goes to out.packed_values
  const bool fixed = plan.problem.n_mode == SpmmNMode::fixed;
  const std::map<std::string, std::string> values = {
      {"BLOCK_X", std::to_string(plan.layout.block_x)},
      {"KERNEL_NAME", plan.hints.kernel_name},
      {"N_TILE", std::to_string(plan.layout.n_tile)},
      {"ROWS", std::to_string(plan.layout.rows_per_block)},
      {"GROUPS", std::to_string(plan.layout.groups)},
      {"BATCH", std::to_string(kSpmmRolledBatch)},
      {"STEP_LANES", std::to_string(plan.step_lanes())},
      {"HEADER", std::to_string(spmm_rolled_header_words(plan))},
      {"RECORD", std::to_string(spmm_rolled_record_words(plan))},
      {"M", std::to_string(plan.problem.m)},
      {"BIAS", plan.epilogue.bias ? "true" : "false"},
      {"RELU", plan.epilogue.relu ? "true" : "false"},
      {"PROGRAMMATIC", plan.hints.programmatic ? "true" : "false"},
      {"PROGRAMMATIC_TRIGGER", plan.hints.programmatic && plan.hints.programmatic_trigger ? "true" : "false"},
      // Convolutions: the columns are the batch's pixels, n of them (the images times the plan's N).
      {"LD", fixed && !plan.problem.conv ? fmt::format("{}", plan.problem.n) : "n"},
      {"CONV", conv_constants(plan)},
      {"CONV_PARAMS", plan.problem.conv ? ", const float* __restrict__ /*zeros*/" : ""}};
  out.source = KernelTemplate::load("spmm_rolled.cu").render(values);
  stamp_spmm_contract(out, plan, a);
  return out;
}

}  // namespace sparsecc
