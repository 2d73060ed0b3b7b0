#include "sparsecc/plan/spmm_interpreter.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "sparsecc/common/dtype.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/plan/spmm_compressed.hpp"
#include "sparsecc/reference/conv.hpp"

namespace sparsecc {

namespace {

// The weight of fragment word `w`'s half `h` (0: low).
double fragment_weight(std::uint32_t w, int h, bool bf16) {
  const auto bits = static_cast<std::uint16_t>(h ? w >> 16 : w & 0xffffu);
  return bf16 ? bf16_bits_to_double(bits) : half_bits_to_double(bits);
}

}  // namespace

DenseMatrix interpret_spmm(const SpmmPlan& plan, const std::vector<float>& values, const DenseMatrix& b,
                           const std::vector<double>* bias, const std::vector<std::uint32_t>& fragments) {
  if (plan.compressed()) {
    if (fragments.empty())
      throw UsageError(
          "interpret_spmm: a compressed plan needs its stream (spmm_fragment_words) as `fragments`");
    return interpret_spmm_compressed(plan, fragments, b, bias);
  }
  const SpmmProblem& pr = plan.problem;
  if (b.rows != pr.k || (pr.n_mode == SpmmNMode::fixed && b.cols != pr.n))
    throw UsageError(fmt::format("interpret_spmm: B is {}x{}, the plan wants {} rows{}", b.rows, b.cols, pr.k,
                                 pr.n_mode == SpmmNMode::fixed ? fmt::format(" and {} columns", pr.n) : ""));
  if (pr.bias && (!bias || static_cast<std::int64_t>(bias->size()) != pr.m))
    throw UsageError(fmt::format("interpret_spmm: the plan needs a bias of {} entries", pr.m));
  const std::int32_t fk = plan.fragment_k();
  const auto words_per_fragment = static_cast<std::size_t>(32 * fk / 4);
  if (fragments.size() != static_cast<std::size_t>(plan.fragment_count()) * words_per_fragment)
    throw UsageError(fmt::format("interpret_spmm: {} fragment words for {} fragments of k {}",
                                 fragments.size(), plan.fragment_count(), fk));
  const std::int64_t n = b.cols;
  const bool streamed = plan.value_mode() == SpmmValueMode::streamed;
  // Rounding to the plan's storage type (f32, f16 or bf16).
  const DType type = pr.dtype;
  const auto store = [type](double v) { return round_to(type, v); };
  // Accumulation in the dtype rounds every product and sum to it; fp32 accumulation uses float FMAs.
  const bool half_acc = plan.half() && plan.epilogue.accumulate != DType::f32;
  const bool bf16 = pr.dtype == DType::bf16;
  DenseMatrix c(pr.m, n, std::nan(""));  // poisoned: a row the plan never writes stays NaN
  const auto ny = static_cast<std::size_t>(plan.layout.rows_per_block);
  std::vector<float> partial(ny * static_cast<std::size_t>(plan.layout.groups));
  std::vector<float> lane_sums(ny *
                               static_cast<std::size_t>(std::max(plan.step_lanes(), 1)));  // rolled plans
  std::vector<double> half_partial(ny * static_cast<std::size_t>(plan.layout.groups));
  std::vector<char> touched(ny, 0);  // accumulators a group has written (unrolled plans)
  std::vector<float> tile(static_cast<std::size_t>(kSpmmFragmentRows * plan.layout.groups));  // one per group
  std::int64_t packed_begin = 0;   // first packed value of the current block row
  std::size_t fragment_begin = 0;  // first fragment word of the current block row
  // Rolled plans: the table's header and record size (the interpreter reads the table as the kernel
  // does, so that a wrong table fails here).
  const bool rolled = plan.value_mode() == SpmmValueMode::rolled;
  const std::int64_t header = rolled ? spmm_rolled_header_words(plan) : 0;
  const std::int32_t record = rolled ? spmm_rolled_record_words(plan) : 0;
  if (rolled && static_cast<std::int64_t>(values.size()) < header)
    throw UsageError(
        fmt::format("interpret_spmm: a step table of {} words has no room for its {}-word header",
                    values.size(), header));
  const auto word = [&](std::int64_t i) {
    return std::bit_cast<std::int32_t>(values.at(static_cast<std::size_t>(i)));
  };
  for (std::size_t bi = 0; bi < plan.layout.blocks.size(); ++bi) {
    const SpmmBlockRow& block = plan.layout.blocks[bi];
    for (std::int64_t col = 0; col < n; ++col) {
      std::int64_t p = packed_begin;
      for (std::size_t g = 0; g < block.groups.size(); ++g) {
        float* acc = &partial[g * ny];
        double* hacc = &half_partial[g * ny];
        if (rolled) {  // every step multiplies into every row, from zero
          // Step lanes: lane slot s runs steps s, s + L, ... from zero; the slots' sums are then
          // added pairwise, as the kernel's butterfly of shuffles leaves them in slot 0.
          const auto lanes = static_cast<std::size_t>(std::max(plan.step_lanes(), 1));
          std::fill(lane_sums.begin(), lane_sums.begin() + static_cast<std::ptrdiff_t>(lanes * ny), 0.0f);
          const std::int64_t slot =
              static_cast<std::int64_t>(bi) * plan.layout.groups + static_cast<std::int64_t>(g);
          for (std::int64_t r = word(slot); r < word(slot + 1); ++r) {
            const std::int64_t at = header + r * record;
            const std::int32_t k = word(at);
            if (k < 0 || k >= pr.k)
              throw UsageError(fmt::format("interpret_spmm: step table record {} has k {}", r, k));
            const float x = static_cast<float>(b(k, col));
            float* sums = &lane_sums[static_cast<std::size_t>(r - word(slot)) % lanes * ny];
            for (std::size_t i = 0; i < ny; ++i)
              sums[i] = std::fmaf(x, values.at(static_cast<std::size_t>(at + 1) + i), sums[i]);
          }
          for (std::size_t width = lanes; width > 1; width /= 2)
            for (std::size_t s = 0; s < width / 2; ++s)
              for (std::size_t i = 0; i < ny; ++i)
                lane_sums[s * ny + i] = lane_sums[2 * s * ny + i] + lane_sums[(2 * s + 1) * ny + i];
          std::copy(lane_sums.begin(), lane_sums.begin() + static_cast<std::ptrdiff_t>(ny), acc);
          continue;
        }
        std::fill(touched.begin(), touched.end(), 0);
        std::fill(acc, acc + ny, 0.0f);
        std::fill(hacc, hacc + ny, 0.0);
        for (const auto& step : block.groups[g].steps) {
          const double xd = store(b(step.k, col));
          const auto x = static_cast<float>(xd);
          for (const auto& e : step.entries) {
            const float w = values.at(static_cast<std::size_t>(streamed ? p : e.value_index));
            ++p;
            if (half_acc)  // products of two halves are exact in double; one rounding per operation
              hacc[e.row] = store(xd * w + (touched[e.row] ? hacc[e.row] : 0.0));
            else
              acc[e.row] = touched[e.row] ? std::fmaf(x, w, acc[e.row]) : x * w;
            touched[e.row] = 1;
          }
        }
        if (half_acc)
          for (std::size_t i = 0; i < ny; ++i) acc[i] = static_cast<float>(hacc[i]);
      }
      // Tensor-core fragments: each group's tile starts at zero, and each of its fragments adds its
      // exact product sum to the running fp32 tile value.
      std::fill(tile.begin(), tile.end(), 0.0f);
      for (std::int32_t g = 0; g < (block.fragments.empty() ? 0 : plan.layout.groups); ++g) {
        const auto [first, last] = spmm_group_fragments(block, plan.layout.groups, g);
        float* gt = &tile[static_cast<std::size_t>(g * kSpmmFragmentRows)];
        for (std::size_t f = first; f < last; ++f) {
          const std::uint32_t* w = &fragments[fragment_begin + f * words_per_fragment];
          const std::int32_t k0 = block.fragments[f].k;
          for (int r = 0; r < kSpmmFragmentRows; ++r) {
            double sum = gt[r];
            for (int cc = 0; cc < fk; ++cc) {
              if (k0 + cc >= pr.k) break;
              // Inverse of spmm_fragment_words' lane layout: (r, cc) sits in lane 4 * (r % 8) + (cc % 8) / 2,
              // register 2 * (cc / 8) + r / 8, half cc % 2.
              const int lane = 4 * (r % 8) + (cc % 8) / 2, reg = 2 * (cc / 8) + r / 8;
              const double a =
                  fragment_weight(w[static_cast<std::size_t>(lane * (fk / 4) + reg)], cc % 2, bf16);
              sum += a * store(b(k0 + cc, col));
            }
            gt[r] = static_cast<float>(sum);
          }
        }
      }
      for (std::int64_t r = block.row_begin; r < block.row_end; ++r) {
        const auto i = static_cast<std::size_t>(r - block.row_begin);
        float v = partial[i];
        if (spmm_block_reduces(plan, block))
          for (std::size_t g = 1; g < block.groups.size(); ++g) v += partial[g * ny + i];
        if (!block.fragments.empty())
          for (std::int32_t g = 0; g < plan.layout.groups; ++g)
            v += tile[static_cast<std::size_t>(g * kSpmmFragmentRows) + i];
        const std::int64_t row = spmm_row(plan, r);
        if (pr.bias) v += static_cast<float>((*bias)[static_cast<std::size_t>(row)]);
        if (pr.relu) v = std::fmax(v, 0.0f);
        c(row, col) = store(v);
      }
    }
    for (const auto& g : block.groups)
      for (const auto& s : g.steps) packed_begin += static_cast<std::int64_t>(s.entries.size());
    fragment_begin += block.fragments.size() * words_per_fragment;
  }
  return c;
}

std::vector<float> interpret_conv(const SpmmPlan& plan, const std::vector<float>& values,
                                  const std::vector<float>& x, std::int64_t batch,
                                  const std::vector<double>* bias) {
  if (!plan.problem.conv) throw UsageError("interpret_conv: the plan is no convolution");
  const rt::ConvGeometry& g = *plan.problem.conv;
  if (batch < 1 || static_cast<std::int64_t>(x.size()) != g.input_elements(batch))
    throw UsageError(fmt::format("interpret_conv: the input has {} values; {} images of {} have {}", x.size(),
                                 batch, rt::describe(g), g.input_elements(batch)));
  const std::vector<double> wide(x.begin(), x.end());
  const auto ys = g.output_strides(plan.problem.m);
  const std::int64_t ow = g.out_width();
  std::vector<float> y(static_cast<std::size_t>(g.output_elements(batch, plan.problem.m)));
  for (std::int64_t b = 0; b < batch; ++b) {
    const DenseMatrix c = interpret_spmm(plan, values, im2col(g, wide, b), bias);
    for (std::int64_t o = 0; o < c.rows; ++o)
      for (std::int64_t p = 0; p < c.cols; ++p)
        y[static_cast<std::size_t>(b * ys.image + o * ys.channel + p / ow * ys.row + p % ow * ys.col)] =
            static_cast<float>(c(o, p));
  }
  return y;
}

}  // namespace sparsecc
