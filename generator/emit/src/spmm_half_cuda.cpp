// CUDA C++ for half-precision SpMM plans: renders templates/spmm_half.cu (see its header for the
// kernel's shape). The unrolled path follows spmm_cuda.cpp, on column pairs; fragment plans add one
// spcc_fragment call per fragment and hand the warp's tile to the epilogue through shared memory.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string_view>

#include "sparsecc/common/dtype.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/emit/contract.hpp"
#include "sparsecc/emit/spmm_cuda.hpp"
#include "sparsecc/emit/template.hpp"
#include "unrolled_groups.hpp"

namespace sparsecc {

namespace {

// The 16-bit pattern of `w` (already rounded to the dtype) twice, as a packed-pair literal.
std::string pair_literal(const SpmmPlan& p, float w) {
  const std::uint32_t h = p.problem.dtype == DType::bf16 ? double_to_bf16_bits(w) : double_to_half_bits(w);
  return fmt::format("0x{:08x}u", h | (h << 16));
}

// The store of row `row`'s pair of outputs (v0, v1): adjacent columns of C, or a convolution's two pixels
// through their own pointers.
std::string store(const SpmmPlan& p, std::string_view row) {
  return p.problem.conv ? fmt::format("spcc_store_conv(c + {0} * ldc, c1 + {0} * ldc, v0, v1, live1);", row)
                        : fmt::format("spcc_store_pair(c + {} * ld, v0, v1, pair, live1);", row);
}

// Convolutions: Y's channel pitch and both pixels of the thread's pair (conv_pixel_setup: tap pointers,
// where the zero buffer comes in the fragments' place, or masks); past the batch's last pixel the second
// is the first again (never stored), without taps in the mask form.
std::string conv_setup_half(const SpmmPlan& p) {
  const bool pointers = spmm_conv_tap_pointers(p.problem);
  return fmt::format("  const long long ldc = {};\n", p.problem.conv->output_strides(p.problem.m).channel) +
         (pointers ? "  const spcc_u16* zeros = reinterpret_cast<const spcc_u16*>(fragments);\n" : "") +
         conv_pixel_setup(p, "col", "", pointers, "spcc_u16") +
         "  const long long col1 = live1 ? col + 1 : col;\n  spcc_u16* c1 = c;\n" +
         conv_pixel_setup(p, "col1", "1", pointers, "spcc_u16") +
         (pointers ? "" : "  if (!live1) taps1 = 0;\n");
}

std::string epilogue(const SpmmPlan& p, const SpmmBlockRow& block) {
  const auto rows = static_cast<std::int32_t>(block.row_end - block.row_begin);
  const bool half_acc = p.epilogue.accumulate != DType::f32;
  const auto pair_of = [&](std::int32_t i) {
    return half_acc ? std::pair{fmt::format("spcc_lo(a{})", i), fmt::format("spcc_hi(a{})", i)}
                    : std::pair{fmt::format("a{}x", i), fmt::format("a{}y", i)};
  };
  std::string s;
  // Groups 1.. hand over their partial sums (where they have steps); the barrier also publishes the
  // other groups' fragment stages.
  const bool reduces = spmm_block_reduces(p, block);
  if (reduces) {
    s += fmt::format(
        "      if (live && group > 0) {{\n        float* r = red + (group - 1) * {} * 2 * T + 2 * t;\n",
        p.layout.rows_per_block);
    for (std::int32_t i = 0; i < rows; ++i) {
      const auto [v0, v1] = pair_of(i);
      s += fmt::format("        *reinterpret_cast<float2*>(r + {} * 2 * T) = make_float2({}, {});\n", i, v0,
                       v1);
    }
    s += "      }\n";
  }
  if (p.layout.groups > 1 && (reduces || !block.fragments.empty())) s += "      __syncthreads();\n";
  s += "      if (live && group == 0) {\n        float v0, v1;\n";
  for (std::int32_t i = 0; i < rows; ++i) {
    const auto [v0, v1] = pair_of(i);
    s += fmt::format("        v0 = {}; v1 = {};\n", v0, v1);
    for (std::int32_t g = 1; g < (reduces ? p.layout.groups : 1); ++g) {
      const std::int64_t at = std::int64_t{(g - 1) * p.layout.rows_per_block + i} * 2;
      s += fmt::format(
          "        v0 = __fadd_rn(v0, red[{0} * T + 2 * t]); v1 = __fadd_rn(v1, red[{0} * T + 2 * t + 1]);\n",
          at);
    }
    if (!block.fragments.empty())
      for (std::int32_t g = 0; g < p.layout.groups; ++g) {
        const std::string at =
            g ? fmt::format("{} * SPCC_GROUP_STAGE + {} * 72", g, i) : fmt::format("{} * 72", i);
        s += fmt::format(
            "        v0 = __fadd_rn(v0, st[{0} + 2 * lane]); v1 = __fadd_rn(v1, st[{0} + 2 * lane + 1]);\n",
            at);
      }
    if (p.epilogue.bias)
      s += fmt::format(
          "        {{ const float bv = __ldg(bias + {}); v0 = __fadd_rn(v0, bv); v1 = __fadd_rn(v1, bv); "
          "}}\n",
          block.row_begin + i);
    if (p.epilogue.relu) s += "        v0 = fmaxf(v0, 0.0f); v1 = fmaxf(v1, 0.0f);\n";
    s += fmt::format("        {}\n", store(p, std::to_string(block.row_begin + i)));
  }
  return s + "      }\n";
}

// True when the 16-byte fragment path applies: N compiled in and divisible by 8.
bool vec8(const SpmmPlan& p) { return p.problem.n_mode == SpmmNMode::fixed && p.problem.n % 8 == 0; }

bool has_steps(const SpmmBlockRow& block) {
  for (const auto& g : block.groups)
    if (!g.steps.empty()) return true;
  return false;
}

// The epilogue of a block row without unrolled nonzeros on the 16-byte path: group 0 adds the other
// groups' staged tiles to its own and stores rows g and g + 8 of the lane's columns (8q .. 8q + 7 and
// 32 + 8q .. 32 + 8q + 7 of the warp).
std::string direct_store(const SpmmPlan& p, const SpmmBlockRow& block) {
  const auto rows = static_cast<std::int32_t>(block.row_end - block.row_begin);
  std::string s;
  if (p.layout.groups > 1) {
    s += "        if (group > 0) spcc_stage(st, d, g, q);\n        __syncthreads();\n        if (group == 0) "
         "{\n";
    for (std::int32_t g = 1; g < p.layout.groups; ++g)
      s += fmt::format("          spcc_add_stage(d, st + {} * SPCC_GROUP_STAGE, g, q);\n", g);
  } else {
    s += "        {\n";
  }
  s += fmt::format(
      "          const long long c0 = warp_col + 8 * q;\n          spcc_u16* cr = C + ({} + g) * ld + c0;\n",
      block.row_begin);
  const char* relu = p.epilogue.relu ? "true" : "false";
  for (int half = 0; half < 2; ++half) {
    const std::string row = half ? "g + 8" : "g";
    const bool guarded = rows < kSpmmFragmentRows;
    const std::string bias =
        p.epilogue.bias ? fmt::format("__ldg(bias + {} + {})", block.row_begin, row) : "0.0f";
    s += guarded ? fmt::format("          if ({} < {}) {{\n", row, rows) : "          {\n";
    s += fmt::format("            const float bv = {};\n", bias);
    s += fmt::format(
        "            if (c0 < ld) spcc_store_tile_row(cr{0}, d, {1}, bv, {2});\n"
        "            if (c0 + 32 < ld) spcc_store_tile_row(cr{0} + 32, d, {3}, bv, {2});\n          }}\n",
        half ? " + 8 * ld" : "", 2 * half, relu, 2 * half + 1);
  }
  return s + "        }\n";
}

// On the 16-byte path, a group's share of at most this many fragments wholly inside K is straight-line
// code, its k baked into the addresses; a longer one, or any share on the scalar path (where
// straight-line bf16 fragments spilled), is a rolled loop reading k from spcc_fragment_k. Measured on the
// H100 (RMB suite, batch 16): straight-line shares were 1-18 % faster on the layers of up to 8
// fragments per block row (no dependent load of k before B's, every load visible to the scheduler)
// and no slower at 14-29 (ResNet-50 3x3 block groups 2-3), without spills; the rolled loop exists
// for the block rows of hundreds of fragments, where straight-line code spilled.
constexpr std::int64_t kStraightFragments = 32;

// The fragments of one block row: a tile of fp32 accumulators per warp, each group's share
// (spmm_group_fragments): straight-line calls or a rolled loop over those wholly inside K (see
// kStraightFragments), one call for a last fragment that reaches past K; then the tile goes to the
// stage (or, on the 16-byte path without unrolled nonzeros, straight to C).
std::string fragments_code(const SpmmPlan& p, const SpmmBlockRow& block, std::int64_t& fragment,
                           bool direct) {
  if (block.fragments.empty()) return {};
  std::string s = "      SPCC_FRAGMENT_SETUP\n      {\n        float d[8][4] = {};\n";
  const std::int64_t words = 8 * p.fragment_k();  // per fragment: 32 lanes x fragment_k / 4
  const std::int64_t first = fragment;
  for (std::int32_t g = 0; g < p.layout.groups; ++g) {
    const auto [f0, f1] = spmm_group_fragments(block, p.layout.groups, g);
    if (f0 == f1) continue;
    std::int64_t inside = 0;
    for (std::size_t i = f0; i < f1; ++i) inside += block.fragments[i].k + p.fragment_k() <= p.problem.k;
    const auto at = first + static_cast<std::int64_t>(f0);
    std::string body;
    if (inside > 0 && inside <= kStraightFragments && vec8(p)) {
      for (std::size_t i = f0; i < f0 + static_cast<std::size_t>(inside); ++i)
        body += fmt::format(
            "          spcc_fragment(d, fragments + {} + lane * {}, bw + {} * ld, ld, wcols, {}, q);\n",
            (first + static_cast<std::int64_t>(i)) * words, p.fragment_k() / 4, block.fragments[i].k,
            p.fragment_k());
    } else if (inside > 0)
      body += fmt::format(
          "          spcc_fragments(d, fragments + {} + lane * {}, spcc_fragment_k + {}, {}, bw, ld, wcols, "
          "q);\n",
          at * words, p.fragment_k() / 4, at, inside);
    for (std::size_t i = f0 + static_cast<std::size_t>(inside); i < f1; ++i) {
      const SpmmFragment& f = block.fragments[i];
      body += fmt::format(
          "          spcc_fragment(d, fragments + {} + lane * {}, bw + {} * ld, ld, wcols, {}, q);\n",
          (first + static_cast<std::int64_t>(i)) * words, p.fragment_k() / 4, f.k, p.problem.k - f.k);
    }
    s += p.layout.groups > 1 ? fmt::format("        if (group == {}) {{\n{}        }}\n", g, body) : body;
  }
  fragment += static_cast<std::int64_t>(block.fragments.size());
  return s + (direct ? direct_store(p, block) : "        spcc_stage(st, d, g, q);\n") + "      }\n";
}

// The plain empty block rows (spmm_plain_empty_block) share the switch's default: group 0 stores the
// epilogue of zero sums (0, plus the bias, through ReLU, rounded to the dtype) to the rows the block
// row's index gives.
std::string empty_case(const SpmmPlan& p) {
  std::string s = fmt::format(
      "    default: {{\n      const long long first = static_cast<long long>(blockIdx.y) * {0};\n"
      "      const long long end = first + {0} < {1}LL ? first + {0} : {1}LL;\n"
      "      if (live && group == 0)\n        for (long long r = first; r < end; ++r) {{\n"
      "          float v0 = 0.0f, v1 = 0.0f;\n",
      p.layout.panel_rows, p.problem.m);
  if (p.epilogue.bias)
    s += "          { const float bv = __ldg(bias + r); v0 = __fadd_rn(v0, bv); v1 = __fadd_rn(v1, bv); }\n";
  if (p.epilogue.relu) s += "          v0 = fmaxf(v0, 0.0f); v1 = fmaxf(v1, 0.0f);\n";
  return s + "          " + store(p, "r") + "\n        }\n      break;\n    }\n";
}

std::string block_case(const SpmmPlan& p, const std::vector<float>& weights, std::size_t bi,
                       std::int64_t& packed, std::int64_t& fragment) {
  const SpmmBlockRow& block = p.layout.blocks[bi];
  const bool half_acc = p.epilogue.accumulate != DType::f32;
  const bool streamed = p.value_mode() == SpmmValueMode::streamed;
  const std::int64_t rows = block.row_end - block.row_begin;
  std::string s = fmt::format("    case {}: {{\n      spcc_u32 x;\n", bi);
  if (half_acc) {
    s += "      spcc_u32 ";
    for (std::int64_t i = 0; i < rows; ++i) s += fmt::format("{}a{} = 0u", i ? ", " : "", i);
    s += ";\n";
  } else {
    s += "      float x0, x1";
    for (std::int64_t i = 0; i < rows; ++i) s += fmt::format(", a{0}x = 0.0f, a{0}y = 0.0f", i);
    s += ";\n";
  }
  s += emit_detail::unrolled_groups(
      p, block, packed,
      [&](std::int32_t k) {
        const std::string widen = half_acc ? "" : " x0 = spcc_lo(x); x1 = spcc_hi(x);";
        if (const auto& g = p.problem.conv) {
          const rt::ConvGeometry::Tap tap = g->tap_of(k);
          const std::int64_t channel = tap.channel * g->input_strides().channel;
          if (spmm_conv_tap_pointers(p.problem))
            return fmt::format("        x = spcc_conv_pair_at({0} + {2}, {1} + {2});",
                               conv_tap_pointer(tap.tap, ""), conv_tap_pointer(tap.tap, "1"), channel) +
                   widen;
          return fmt::format("        x = spcc_conv_pair(b, b1, taps, taps1, 0x{:x}ull, {});",
                             std::uint64_t{1} << tap.tap, channel + g->tap_offset(tap.tap)) +
                 widen;
        }
        return fmt::format("        x = SPCC_LOAD({});", k) + widen;
      },
      [&](const SpmmEntry& e, std::int64_t at, bool first) {
        const float w = weights[static_cast<std::size_t>(streamed ? at : e.value_index)];
        if (half_acc) {
          const std::string w2 = streamed
                                     ? fmt::format("spcc_pack(__ldg(values + {0}), __ldg(values + {0}))", at)
                                     : pair_literal(p, w);
          return first ? fmt::format(" a{} = spcc_fma2(x, {}, SPCC_NEG0);", e.row, w2)
                       : fmt::format(" a{0} = spcc_fma2(x, {1}, a{0});", e.row, w2);
        }
        const std::string w1 = streamed ? fmt::format("__ldg(values + {})", at) : cuda_float_literal(w);
        return first ? fmt::format(" a{0}x = __fmul_rn(x0, {1}); a{0}y = __fmul_rn(x1, {1});", e.row, w1)
                     : fmt::format(" a{0}x = __fmaf_rn(x0, {1}, a{0}x); a{0}y = __fmaf_rn(x1, {1}, a{0}y);",
                                   e.row, w1);
      });
  // The fragments' lane set-up is scoped to the fragments and the epilogue that reads their stage.
  const bool direct = !block.fragments.empty() && vec8(p) && !has_steps(block);
  s += "      {\n" + fragments_code(p, block, fragment, direct) + (direct ? "" : epilogue(p, block)) +
       "      }\n";
  return s + "      break;\n    }\n";
}

}  // namespace

EmittedKernel emit_spmm_half_cuda(const SpmmPlan& plan, const CsrMatrix& a) {
  EmittedKernel out;
  const std::vector<float> weights = emit_detail::start_cuda_kernel(plan, a, out);
  if (!plan.half()) throw UsageError("emit_spmm_half_cuda: the plan's dtype is f32");
  out.fragment_words = spmm_fragment_words(plan, a);
  std::string body;
  std::int64_t packed = 0, fragment = 0;
  for (std::size_t bi = 0; bi < plan.layout.blocks.size(); ++bi)
    if (!spmm_plain_empty_block(plan, bi)) body += block_case(plan, weights, bi, packed, fragment);
  if (spmm_has_plain_empty_blocks(plan)) body += empty_case(plan);
  const bool fixed = plan.problem.n_mode == SpmmNMode::fixed;
  // The stages follow the reduction buffer (spmm_shared_bytes), in floats.
  const std::int64_t stage =
      spmm_fragment_stages(plan)
          ? (plan.layout.shared_bytes / 4 -
             std::int64_t{plan.layout.block_x / 32} * kSpmmFragmentRows * kSpmmFragmentStagePitch)
          : 0;
  std::string table;
  if (plan.fragment_k()) {
    table = "static __device__ const int spcc_fragment_k[] = {";
    std::int64_t i = 0;
    for (const auto& b : plan.layout.blocks)
      for (const auto& f : b.fragments)
        table += fmt::format("{}{}{}", i ? "," : "", i % 32 == 0 ? "\n    " : "", f.k), ++i;
    table += "};";
  }
  const std::map<std::string, std::string> values = {
      {"BLOCK_X", std::to_string(plan.layout.block_x)},
      {"KERNEL_NAME", plan.hints.kernel_name},
      {"N_TILE", std::to_string(plan.layout.n_tile)},
      // Convolutions: the columns are the batch's pixels, n of them (the images times the plan's N).
      {"LD", fixed && !plan.problem.conv ? fmt::format("{}", plan.problem.n) : "n"},
      {"PROGRAMMATIC", plan.hints.programmatic ? "true" : "false"},
      {"BF16", plan.problem.dtype == DType::bf16 ? "1" : "0"},
      {"FRAGMENT_K", std::to_string(plan.fragment_k())},
      {"PAIR32", fixed && !plan.problem.conv && plan.problem.n % 2 == 0 ? "1" : "0"},
      {"CONV", plan.problem.conv ? "1" : "0"},
      {"CONV_SETUP", plan.problem.conv ? conv_setup_half(plan) : ""},
      {"VEC8", vec8(plan) ? "1" : "0"},
      {"STAGE", std::to_string(stage)},
      {"FRAGMENT_TABLE", table},
      {"BODY", body}};
  out.source = KernelTemplate::load("spmm_half.cu").render(values);
  stamp_spmm_contract(out, plan, a);
  return out;
}

}  // namespace sparsecc
