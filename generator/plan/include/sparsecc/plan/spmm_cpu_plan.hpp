// A CPU SpMM plan (the LLVM backend): C = A * B (+bias[row]) (ReLU) in fp32 for one fixed sparse A
// on a CPU target. Plain data: the rows are cut into panels (what one thread takes at a time) of
// about equal nonzeros, and C's columns into tiles whose accumulators a row keeps in vector
// registers; emit_spmm_llvm_ir turns it into code, one function a panel (straight-line or rolled).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/plan/spmm_plan.hpp"
#include "sparsecc/target/target.hpp"

namespace sparsecc {

struct SpmmCpuPlan {
  SpmmProblem problem;               // f32, fixed N
  CpuTarget target;                  // the ISA the code is for
  std::int32_t lanes = 8;            // fp32 lanes a vector
  std::int32_t column_tile = 8;      // columns of C a row accumulates at once (a multiple of lanes)
  std::vector<std::int64_t> panels;  // row bounds: panel p is rows [panels[p], panels[p + 1])
  // false: straight-line code, the pattern in the instructions (their size grows with A's nonzeros);
  // true: each row loops over its nonzeros, reading their columns and values from tables (the code's
  // size grows with the panels only). The same fused multiply-adds in the same order either way.
  bool rolled = false;
  std::int64_t panel_count() const { return static_cast<std::int64_t>(panels.size()) - 1; }
};

nlohmann::json to_json(const SpmmCpuPlan& p);
// Throws UsageError naming the key for a malformed plan (shape checks are check_cpu_plan's).
SpmmCpuPlan spmm_cpu_plan_from_json(const nlohmann::json& j);
// Every way the plan does not fit A or its own rules; empty when it does.
std::vector<std::string> check_cpu_plan(const SpmmCpuPlan& p, const CsrMatrix& a);

// The fp64 interpreter of a CPU plan: panel by panel, column tile by column tile, each row's
// nonzeros in order with fp32 fused multiply-adds, as the emitted code does (then bias, ReLU):
// the emitted code matches it bit for bit. B is K x N and C M x N, row-major fp32.
void interpret_spmm_cpu(const SpmmCpuPlan& p, const CsrMatrix& a, const float* b, const float* bias,
                        float* c);

}  // namespace sparsecc
