// SpmmCpuPlan: JSON, checks and the interpreter (sparsecc/plan/spmm_cpu_plan.hpp).
#include "sparsecc/plan/spmm_cpu_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sparsecc/common/error.hpp"

namespace sparsecc {

nlohmann::json to_json(const SpmmCpuPlan& p) {
  nlohmann::json j = {{"family", "cpu"},
                      {"problem",
                       {{"m", p.problem.m},
                        {"k", p.problem.k},
                        {"n", p.problem.n},
                        {"bias", p.problem.bias},
                        {"relu", p.problem.relu}}},
                      {"target", to_json(p.target)},
                      {"lanes", p.lanes},
                      {"column_tile", p.column_tile},
                      {"panels", p.panels},
                      {"rolled", p.rolled}};
  // f32 plans have no dtype key, as before half plans existed (their symbols derive from this JSON).
  if (p.half()) j["problem"]["dtype"] = std::string(dtype_name(p.problem.dtype));
  return j;
}

SpmmCpuPlan spmm_cpu_plan_from_json(const nlohmann::json& j) {
  try {
    SpmmCpuPlan p;
    const nlohmann::json& pr = j.at("problem");
    p.problem = {pr.at("m"),    pr.at("k"),    pr.at("n"), SpmmNMode::fixed,
                 pr.at("bias"), pr.at("relu"), DType::f32};
    if (pr.contains("dtype"))
      p.problem.dtype =
          require_dtype(pr.at("dtype").get<std::string>(), "CPU plan JSON: problem.dtype", kSpmmCpuDtypes);
    p.target = cpu_target(j.at("target").at("isa").get<std::string>());
    p.lanes = j.at("lanes");
    p.column_tile = j.at("column_tile");
    p.panels = j.at("panels").get<std::vector<std::int64_t>>();
    p.rolled = j.at("rolled");
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(fmt::format("CPU plan JSON: {}", e.what()));
  }
}

std::vector<std::string> check_cpu_plan(const SpmmCpuPlan& p, const CsrMatrix& a) {
  std::vector<std::string> errors;
  const auto err = [&](std::string s) { errors.push_back(std::move(s)); };
  if (p.problem.m != a.rows || p.problem.k != a.cols)
    err(fmt::format("problem {} x {} is not A's {} x {}", p.problem.m, p.problem.k, a.rows, a.cols));
  if (p.problem.n < 1) err(fmt::format("n {} is not positive", p.problem.n));
  if (p.problem.dtype != DType::f32 && p.problem.dtype != DType::f16 && p.problem.dtype != DType::bf16)
    err(fmt::format("dtype {} is not f32, f16 or bf16", p.problem.dtype));
  if (p.problem.n_mode != SpmmNMode::fixed) err("CPU plans are for a fixed N");
  if (p.lanes != p.target.lanes_f32())
    err(fmt::format("lanes {} are not the target's {}", p.lanes, p.target.lanes_f32()));
  if (p.column_tile < 1 || (p.column_tile % p.lanes && p.column_tile != p.problem.n))
    err(fmt::format("column_tile {} is neither a multiple of {} lanes nor N", p.column_tile, p.lanes));
  if (p.panels.size() < 2 || p.panels.front() != 0 || p.panels.back() != p.problem.m)
    err(fmt::format("panels do not run from row 0 to row {}", p.problem.m));
  for (std::size_t i = 1; i < p.panels.size(); ++i)
    if (p.panels[i] <= p.panels[i - 1]) {
      err(fmt::format("panel {} is empty or out of order", i - 1));
      break;
    }
  return errors;
}

float spmm_cpu_weight(const SpmmCpuPlan& p, double v) {
  return static_cast<float>(round_to(p.problem.dtype, v));
}

namespace {
// The plan's arithmetic over B's values as fp32 (load(i): element i of B), each output handed to
// store(i, value) in fp32.
template <class Load, class Store>
void interpret(const SpmmCpuPlan& p, const CsrMatrix& a, Load&& load, const float* bias, Store&& store) {
  const std::int64_t n = p.problem.n;
  for (std::int64_t q = 0; q + 1 < static_cast<std::int64_t>(p.panels.size()); ++q)
    for (std::int64_t t0 = 0; t0 < n; t0 += p.column_tile) {
      const std::int64_t width = std::min<std::int64_t>(p.column_tile, n - t0);
      for (std::int64_t r = p.panels[static_cast<std::size_t>(q)];
           r < p.panels[static_cast<std::size_t>(q + 1)]; ++r)
        for (std::int64_t j = 0; j < width; ++j) {
          float acc = 0.f;
          for (std::int64_t e = a.row_ptr[r]; e < a.row_ptr[r + 1]; ++e)
            acc = std::fma(load(a.col_idx[e] * n + t0 + j), spmm_cpu_weight(p, a.values[e]), acc);
          if (p.problem.bias) acc += bias[r];
          if (p.problem.relu) acc = std::max(acc, 0.f);
          store(r * n + t0 + j, acc);
        }
    }
}
}  // namespace

void interpret_spmm_cpu(const SpmmCpuPlan& p, const CsrMatrix& a, const float* b, const float* bias,
                        float* c) {
  if (p.half())
    throw UsageError(fmt::format("interpret_spmm_cpu: fp32 arrays for a plan of {}", p.problem.dtype));
  interpret(
      p, a, [b](std::int64_t i) { return b[i]; }, bias, [c](std::int64_t i, float v) { c[i] = v; });
}

void interpret_spmm_cpu(const SpmmCpuPlan& p, const CsrMatrix& a, const std::uint16_t* b, const float* bias,
                        std::uint16_t* c) {
  if (!p.half())
    throw UsageError(fmt::format("interpret_spmm_cpu: 16-bit arrays for a plan of {}", p.problem.dtype));
  const bool f16 = p.problem.dtype == DType::f16;
  interpret(
      p, a,
      [b, f16](std::int64_t i) {
        return static_cast<float>(f16 ? half_bits_to_double(b[i]) : bf16_bits_to_double(b[i]));
      },
      bias,
      [c, f16](std::int64_t i, float v) {
        // float -> double is exact, so the one rounding to the dtype is the fp32 value's.
        c[i] = f16 ? double_to_half_bits(v) : double_to_bf16_bits(v);
      });
}

}  // namespace sparsecc
