#include "sparsecc/emit/spmm_cuda.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <map>

#include "sparsecc/common/error.hpp"
#include "sparsecc/emit/contract.hpp"
#include "sparsecc/emit/template.hpp"
#include "unrolled_groups.hpp"

namespace sparsecc {

namespace {

// Programmatic plans with programmatic_trigger: every thread first lets the next grid launch
// (templates/spmm_unrolled.cu).
// Groups 1.. leave their sums in shared memory; group 0 adds them in group order, then adds the bias,
// applies ReLU and stores. Every thread reaches the barrier. With fp32 pairs a row's two columns
// (a<i>, e<i>) travel as one float2.
std::string epilogue(const SpmmPlan& p, const SpmmBlockRow& block) {
  const auto rows = static_cast<std::int32_t>(block.row_end - block.row_begin);
  const bool pairs = p.fp32_pairs();
  std::string s =
      p.hints.programmatic && p.hints.programmatic_trigger ? "      sparsecc_launch_dependents();\n" : "";
  if (p.layout.groups > 1) {
    s += pairs ? fmt::format(
                     "      if (live && group > 0) {{\n        float2* r = reinterpret_cast<float2*>(red) + "
                     "(group - 1) * {} * T + t;\n",
                     p.layout.rows_per_block)
               : fmt::format(
                     "      if (live && group > 0) {{\n        float* r = red + (group - 1) * {} * T + t;\n",
                     p.layout.rows_per_block);
    for (std::int32_t i = 0; i < rows; ++i)
      s += pairs ? fmt::format("        r[{0} * T] = make_float2(a{0}, e{0});\n", i)
                 : fmt::format("        r[{0} * T] = a{0};\n", i);
    s += "      }\n      __syncthreads();\n";
  }
  s += "      if (live && group == 0) {\n";
  if (pairs && p.layout.groups > 1)
    s += "        const float2* r = reinterpret_cast<const float2*>(red) + t;\n";
  for (std::int32_t i = 0; i < rows; ++i) {
    const std::string v = fmt::format("a{}", i), u = fmt::format("e{}", i);
    const std::int64_t row = spmm_row(p, block.row_begin + i);
    for (std::int32_t g = 1; g < p.layout.groups; ++g) {
      const std::int64_t at = std::int64_t{g - 1} * p.layout.rows_per_block + i;
      if (pairs)
        s += fmt::format("        {0} = __fadd_rn({0}, r[{2} * T].x); {1} = __fadd_rn({1}, r[{2} * T].y);\n",
                         v, u, at);
      else
        s += fmt::format("        {0} = __fadd_rn({0}, red[{1} * T + t]);\n", v, at);
    }
    for (const std::string& x : pairs ? std::vector<std::string>{v, u} : std::vector<std::string>{v}) {
      if (p.epilogue.bias) s += fmt::format("        {0} = __fadd_rn({0}, __ldg(bias + {1}));\n", x, row);
      if (p.epilogue.relu) s += fmt::format("        {0} = fmaxf({0}, 0.0f);\n", x);
    }
    s += pairs ? fmt::format("        *reinterpret_cast<float2*>(c + {} * ldc) = make_float2({}, {});\n", row,
                             v, u)
               : fmt::format("        c[{} * ldc] = {};\n", row, v);
  }
  return s + "      }\n";
}

// The plain empty block rows (spmm_plain_empty_block) share the switch's default: group 0 stores the
// epilogue of zero sums (0, plus the bias, through ReLU) to the rows the block row's index gives.
std::string empty_case(const SpmmPlan& p) {
  std::string s = "    default: {\n";
  if (p.hints.programmatic && p.hints.programmatic_trigger) s += "      sparsecc_launch_dependents();\n";
  s += fmt::format(
      "      const long long first = static_cast<long long>(blockIdx.y) * {0};\n"
      "      const long long end = first + {0} < {1}LL ? first + {0} : {1}LL;\n",
      p.layout.panel_rows, p.problem.m);
  s += "      if (live && group == 0)\n        for (long long r = first; r < end; ++r) {\n          float v "
       "= 0.0f;\n";
  if (p.epilogue.bias) s += "          v = __fadd_rn(v, __ldg(bias + r));\n";
  if (p.epilogue.relu) s += "          v = fmaxf(v, 0.0f);\n";
  s += p.fp32_pairs() ? "          *reinterpret_cast<float2*>(c + r * ldc) = make_float2(v, v);\n"
                      : "          c[r * ldc] = v;\n";
  return s + "        }\n      break;\n    }\n";
}

// The case of one block row: its accumulators, then per group its steps (one load, then one multiply
// for the first touch of an accumulator and one FMA for every later one), then the epilogue.
std::string block_case(const SpmmPlan& p, const std::vector<float>& weights, std::size_t bi,
                       std::int64_t& packed) {
  const SpmmBlockRow& block = p.layout.blocks[bi];
  const bool pairs = p.fp32_pairs();
  const bool streamed = p.value_mode() == SpmmValueMode::streamed;
  const std::int64_t stage_offset = spmm_stage_offset(p);
  const std::int64_t slot_bytes = std::int64_t{p.layout.block_x} * 4 * p.layout.cols_per_thread;
  const std::string commit = "        asm volatile(\"cp.async.commit_group;\" ::: \"memory\");\n";
  // Pairs: x holds B's two columns, z a streamed weight used for both.
  std::string s = fmt::format("    case {}: {{\n      {}", bi,
                              !pairs     ? "float x"
                              : streamed ? "float2 x;\n      float z"
                                         : "float2 x;\n      float");
  for (std::int64_t i = 0; i < block.row_end - block.row_begin; ++i)
    s += pairs ? fmt::format("{0}a{1} = 0.0f, e{1} = 0.0f", i || streamed ? ", " : " ", i)
               : fmt::format(", a{} = 0.0f", i);
  s += ";\n";
  s += emit_detail::unrolled_groups(
      p, block, packed,
      [&](std::int32_t k) {
        if (const auto& g = p.problem.conv) {
          const rt::ConvGeometry::Tap tap = g->tap_of(k);
          const std::int64_t channel = tap.channel * g->input_strides().channel;
          if (spmm_conv_tap_pointers(p.problem))
            return fmt::format("        x = __ldg(t{} + {});", tap.tap, channel);
          return fmt::format("        x = taps & 0x{:x}ull ? __ldg(b + {}) : 0.0f;",
                             std::uint64_t{1} << tap.tap, channel + g->tap_offset(tap.tap));
        }
        return pairs ? fmt::format("        x = __ldg(reinterpret_cast<const float2*>(b + {} * ld));", k)
                     : fmt::format("        x = __ldg(b + {} * ld);", k);
      },
      [&](const SpmmEntry& e, std::int64_t at, bool first) {
        const std::string w = p.value_mode() == SpmmValueMode::streamed
                                  ? fmt::format("__ldg(values + {})", at)
                                  : cuda_float_literal(weights[static_cast<std::size_t>(e.value_index)]);
        if (!pairs)
          return first ? fmt::format(" a{} = __fmul_rn(x, {});", e.row, w)
                       : fmt::format(" a{0} = __fmaf_rn(x, {1}, a{0});", e.row, w);
        // Streamed: one load of the weight for both columns.
        const std::string z = streamed ? fmt::format(" z = {};", w) : "";
        const std::string wz = z.empty() ? w : "z";
        return first
                   ? fmt::format("{0} a{1} = __fmul_rn(x.x, {2}); e{1} = __fmul_rn(x.y, {2});", z, e.row, wz)
                   : fmt::format("{0} a{1} = __fmaf_rn(x.x, {2}, a{1}); e{1} = __fmaf_rn(x.y, {2}, e{1});", z,
                                 e.row, wz);
      },
      // Staged steps: the copies of the thread's B values to its slots (`stage` in the template is
      // the shared address of slot 0 less the offset), then each read waits for its commit.
      [&](const SpmmGroup& g, const std::vector<char>& staged) {
        std::string c;
        const auto copies = static_cast<std::int64_t>(std::count(staged.begin(), staged.end(), 1));
        std::int64_t j = 0;
        for (std::size_t si = 0; si < g.steps.size(); ++si) {
          if (!staged[si]) continue;
          c += fmt::format(
              "        asm volatile(\"cp.async.ca.shared.global [%0], [%1], {};\" :: \"r\"(stage + {}u), "
              "\"l\"(b + {} * ld) "
              ": \"memory\");\n",
              4 * p.layout.cols_per_thread, stage_offset + j * slot_bytes, g.steps[si].k);
          if (spmm_stage_commit_after(j++, copies)) c += commit;
        }
        return c;
      },
      [&](std::int64_t slot, std::int64_t wait) {
        std::string c;
        if (wait >= 0)
          c += fmt::format("        asm volatile(\"cp.async.wait_group {};\" ::: \"memory\");\n", wait);
        const std::int64_t at = (stage_offset + slot * slot_bytes) / 4;
        return c + (pairs
                        ? fmt::format(
                              "        x = *reinterpret_cast<const float2*>(red + {} + threadIdx.x * 2);", at)
                        : fmt::format("        x = red[{} + threadIdx.x];", at));
      });
  return s + epilogue(p, block) + "      break;\n    }\n";
}

}  // namespace

std::string conv_pixel_setup(const SpmmPlan& plan, std::string_view col, std::string_view suffix,
                             bool tap_pointers, std::string_view element) {
  const rt::ConvGeometry& g = *plan.problem.conv;
  const auto xs = g.input_strides();
  const auto ys = g.output_strides(plan.problem.m);
  std::string s = fmt::format(
      "  const long long image{s} = {col} / {pix}, pixel{s} = {col} - image{s} * {pix};\n"
      "  const long long oy{s} = pixel{s} / {ow}, ox{s} = pixel{s} % {ow};\n"
      "  const long long iy{s} = oy{s} * {sh} - {pt}, ix{s} = ox{s} * {sw} - {pl};  // the window's corner "
      "in X\n"
      "  b{s} = B + image{s} * {ximg}LL + iy{s} * {xrow} + ix{s} * {xcol};\n"
      "  c{s} = C + image{s} * {yimg}LL + oy{s} * {yrow} + ox{s} * {ycol};\n",
      fmt::arg("s", suffix), fmt::arg("col", col), fmt::arg("pix", g.pixels()), fmt::arg("ow", g.out_width()),
      fmt::arg("sh", g.stride_h), fmt::arg("pt", g.pad_top), fmt::arg("sw", g.stride_w),
      fmt::arg("pl", g.pad_left), fmt::arg("ximg", xs.image), fmt::arg("xrow", xs.row),
      fmt::arg("xcol", xs.col), fmt::arg("yimg", ys.image), fmt::arg("yrow", ys.row),
      fmt::arg("ycol", ys.col));
  const auto inside = [&](std::int64_t dy, std::int64_t dx) {
    return fmt::format("iy{0} + {1} >= 0 && iy{0} + {1} < {2} && ix{0} + {3} >= 0 && ix{0} + {3} < {4}",
                       suffix, dy, g.height, dx, g.width);
  };
  if (tap_pointers) {
    // One pointer a tap: at the tap's pixel where it is inside the image, else at the zero buffer.
    for (std::int64_t t = 0; t < g.taps(); ++t)
      s += fmt::format("  const {}* {} = {} ? b{} + {} : zeros;\n", element, conv_tap_pointer(t, suffix),
                       inside(t / g.kernel_w, t % g.kernel_w), suffix, g.tap_offset(t));
    return s;
  }
  s += fmt::format("  unsigned long long taps{} = 0;\n", suffix);
  for (std::int64_t t = 0; t < g.taps(); ++t)
    s += fmt::format("  if ({}) taps{} |= 1ull << {};\n", inside(t / g.kernel_w, t % g.kernel_w), suffix, t);
  return s;
}

std::string conv_setup(const SpmmPlan& plan) {
  const auto ys = plan.problem.conv->output_strides(plan.problem.m);
  return fmt::format("  const long long ldc = {};\n", ys.channel) +
         conv_pixel_setup(plan, "col", "", spmm_conv_tap_pointers(plan.problem), "float");
}

std::string conv_tap_pointer(std::int64_t tap, std::string_view suffix) {
  return suffix.empty() ? fmt::format("t{}", tap) : fmt::format("t{}_{}", tap, suffix);
}

std::string cuda_float_literal(float v) {
  if (std::isnormal(v) || v == 0.0f) return fmt::format("{}f", fmt::format("{:a}", static_cast<double>(v)));
  return fmt::format("__int_as_float(0x{:x})", std::bit_cast<std::uint32_t>(v));
}

EmittedKernel emit_spmm_cuda(const SpmmPlan& plan, const CsrMatrix& a) {
  if (plan.value_mode() == SpmmValueMode::rolled) return emit_spmm_rolled_cuda(plan, a);
  if (plan.compressed()) return emit_spmm_compressed_cuda(plan, a);
  if (plan.half()) return emit_spmm_half_cuda(plan, a);
  EmittedKernel out;
  const std::vector<float> weights = emit_detail::start_cuda_kernel(plan, a, out);
  std::string body;
  std::int64_t packed = 0;
  for (std::size_t bi = 0; bi < plan.layout.blocks.size(); ++bi)
    if (!spmm_plain_empty_block(plan, bi)) body += block_case(plan, weights, bi, packed);
  if (spmm_has_plain_empty_blocks(plan)) body += empty_case(plan);
  const bool fixed = plan.problem.n_mode == SpmmNMode::fixed;
  const std::map<std::string, std::string> values = {
      {"BLOCK_X", std::to_string(plan.layout.block_x)},
      {"KERNEL_NAME", plan.hints.kernel_name},
      {"N_TILE", std::to_string(plan.layout.n_tile)},
      {"COLS", std::to_string(plan.layout.cols_per_thread)},
      // Convolutions: the columns are the batch's pixels, n of them (the images times the plan's N).
      {"LD", fixed && !plan.problem.conv ? fmt::format("{}", plan.problem.n) : "n"},
      {"PROGRAMMATIC", plan.hints.programmatic ? "true" : "false"},
      {"CONV", plan.problem.conv ? conv_setup(plan) : "  const long long ldc = ld;\n"},
      {"CONV_PARAMS", plan.problem.conv ? ", const float* __restrict__ zeros" : ""},
      {"BODY", body}};
  out.source = KernelTemplate::load("spmm_unrolled.cu").render(values);
  stamp_spmm_contract(out, plan, a);
  return out;
}

}  // namespace sparsecc
