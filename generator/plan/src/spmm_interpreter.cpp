#include "sparsecc/plan/spmm_interpreter.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sparsecc/common/error.hpp"

namespace sparsecc {

DenseMatrix interpret_spmm(const SpmmPlan& plan, const std::vector<float>& values, const DenseMatrix& b,
                           const std::vector<double>* bias) {
  const SpmmProblem& pr = plan.problem;
  if (b.rows != pr.k || (pr.n_mode == SpmmNMode::fixed && b.cols != pr.n))
    throw UsageError(fmt::format("interpret_spmm: B is {}x{}, the plan wants {} rows{}", b.rows, b.cols, pr.k,
                                 pr.n_mode == SpmmNMode::fixed ? fmt::format(" and {} columns", pr.n) : ""));
  if (pr.bias && (!bias || static_cast<std::int64_t>(bias->size()) != pr.m))
    throw UsageError(fmt::format("interpret_spmm: the plan needs a bias of {} entries", pr.m));
  const std::int64_t n = b.cols;
  const bool streamed = plan.value_mode == SpmmValueMode::streamed;
  DenseMatrix c(pr.m, n, std::nan(""));  // poisoned: a row the plan never writes stays NaN
  const auto ny = static_cast<std::size_t>(plan.rows_per_block);
  std::vector<float> partial(ny * static_cast<std::size_t>(plan.groups));
  std::int64_t packed_begin = 0;  // first packed value of the current block row
  for (const auto& block : plan.blocks) {
    for (std::int64_t col = 0; col < n; ++col) {
      std::int64_t p = packed_begin;
      for (std::size_t g = 0; g < block.groups.size(); ++g) {
        float* acc = &partial[g * ny];
        std::vector<char> touched(ny, 0);
        std::fill(acc, acc + ny, 0.0f);
        for (const auto& step : block.groups[g].steps) {
          const auto x = static_cast<float>(b(step.k, col));
          for (const auto& e : step.entries) {
            const float w = values.at(static_cast<std::size_t>(streamed ? p : e.value_index));
            ++p;
            acc[e.row] = touched[e.row] ? std::fmaf(x, w, acc[e.row]) : x * w;
            touched[e.row] = 1;
          }
        }
      }
      for (std::int64_t r = block.row_begin; r < block.row_end; ++r) {
        const auto i = static_cast<std::size_t>(r - block.row_begin);
        float v = partial[i];
        for (std::size_t g = 1; g < block.groups.size(); ++g) v += partial[g * ny + i];
        if (pr.bias) v += static_cast<float>((*bias)[static_cast<std::size_t>(r)]);
        if (pr.relu) v = std::fmax(v, 0.0f);
        c(r, col) = v;
      }
    }
    for (const auto& g : block.groups)
      for (const auto& s : g.steps) packed_begin += static_cast<std::int64_t>(s.entries.size());
  }
  return c;
}

}  // namespace sparsecc
