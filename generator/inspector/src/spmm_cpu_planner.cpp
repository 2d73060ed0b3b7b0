// plan_spmm_cpu (sparsecc/inspector/spmm_cpu_planner.hpp).
#include "sparsecc/inspector/spmm_cpu_planner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/math.hpp"

namespace sparsecc {

std::int64_t cpu_panel_nnz_goal(const CsrMatrix& a, const CpuTarget& target) {
  using namespace spmm_rules;
  return std::clamp<std::int64_t>(a.nnz() / (kCpuPanelsPerCore * target.cores), kCpuMinPanelNnz,
                                  kCpuMaxPanelNnz);
}

std::int64_t cpu_straight_line_fmas(const CsrMatrix& a, std::int64_t n, std::int64_t tile,
                                    std::int64_t lanes) {
  const std::int64_t rest = n % tile;
  const auto vectors = [&](std::int64_t width) { return (width + lanes - 1) / lanes; };
  return a.nnz() * (vectors(tile) + (rest ? vectors(rest) : 0));
}

SpmmCpuPlan plan_spmm_cpu(const CsrMatrix& a, const SpmmProblem& problem, const CpuTarget& target,
                          const SpmmCpuOptions& options) {
  using namespace spmm_rules;
  if (problem.dtype != DType::f32 && problem.dtype != DType::f16 && problem.dtype != DType::bf16)
    throw UsageError(fmt::format("plan_spmm_cpu: dtype {} is not f32, f16 or bf16", problem.dtype));
  if (problem.n_mode != SpmmNMode::fixed) throw UsageError("plan_spmm_cpu: CPU plans are for a fixed N");
  if (problem.m != a.rows || problem.k != a.cols || problem.n < 1)
    throw UsageError(fmt::format("plan_spmm_cpu: problem {} x {} x {} does not fit A ({} x {})", problem.m,
                                 problem.k, problem.n, a.rows, a.cols));
  if (a.rows < 1) throw UsageError("plan_spmm_cpu: A has no rows");
  for (std::size_t e = 0; e < a.values.size(); ++e)
    if (!std::isfinite(round_to(problem.dtype, a.values[e])))
      throw UsageError(fmt::format("plan_spmm_cpu: A's value {} (nonzero {}) overflows {}", a.values[e], e,
                                   problem.dtype));
  SpmmCpuPlan p;
  p.problem = problem;
  p.target = target;
  p.lanes = target.lanes_f32();
  const std::int64_t most = std::int64_t{kCpuTileVectors} * p.lanes;
  if (options.column_tile < 0 ||
      (options.column_tile > 0 && options.column_tile % p.lanes && options.column_tile != problem.n))
    throw UsageError(fmt::format("plan_spmm_cpu: a column tile of {} is not a multiple of {} lanes",
                                 options.column_tile, p.lanes));
  p.column_tile =
      static_cast<std::int32_t>(options.column_tile ? std::min<std::int64_t>(options.column_tile, problem.n)
                                : problem.n <= most ? problem.n
                                                    : most);
  const std::int64_t goal = options.panel_nnz > 0 ? options.panel_nnz : cpu_panel_nnz_goal(a, target);
  p.panels.push_back(0);
  std::int64_t held = 0;
  for (std::int64_t r = 0; r < a.rows; ++r) {
    held += a.row_nnz(r);
    if (held >= goal && r + 1 < a.rows) {
      p.panels.push_back(r + 1);
      held = 0;
    }
  }
  p.panels.push_back(a.rows);
  p.rolled = options.rolled.value_or(cpu_straight_line_fmas(a, problem.n, p.column_tile, p.lanes) >
                                     kCpuStraightLineFmas);
  return p;
}

}  // namespace sparsecc
