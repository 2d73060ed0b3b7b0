// A CPU SpMM plan (the LLVM backend): C = A * B (+bias[row]) (ReLU) for one fixed sparse A on a CPU
// target, accumulated in fp32. B and C are fp32, or (problem.dtype f16 / bf16) 16-bit values: B
// widened to fp32, A's values rounded to the dtype, fp32 fused multiply-adds, bias (fp32) and ReLU in
// fp32, every output rounded to the dtype once (round to nearest even). Plain data: the rows are cut into
// panels (what one thread takes at a time) of about equal nonzeros, and C's columns into tiles whose
// accumulators a row keeps in vector registers; emit_spmm_llvm_ir turns it into code, one function a panel
// (straight-line or rolled).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/plan/spmm_plan.hpp"
#include "sparsecc/target/target.hpp"

namespace sparsecc {

struct SpmmCpuPlan {
  SpmmProblem problem;               // f32, f16 or bf16 (B and C), fixed N
  CpuTarget target;                  // the ISA the code is for
  std::int32_t lanes = 8;            // fp32 lanes a vector
  std::int32_t column_tile = 8;      // columns of C a row accumulates at once (a multiple of lanes)
  std::vector<std::int64_t> panels;  // row bounds: panel p is rows [panels[p], panels[p + 1])
  // false: straight-line code, the pattern in the instructions (their size grows with A's nonzeros);
  // true: each row loops over its nonzeros, reading their columns and values from tables (the code's
  // size grows with the panels only). The same fused multiply-adds in the same order either way.
  bool rolled = false;
  std::int64_t panel_count() const { return static_cast<std::int64_t>(panels.size()) - 1; }
  bool half() const { return problem.dtype != DType::f32; }
};

// The dtypes of CPU SpMM plans.
inline constexpr std::initializer_list<DType> kSpmmCpuDtypes = {DType::f32, DType::f16, DType::bf16};

// A weight as the code uses it: A's value rounded to the plan's dtype (exact in float).
float spmm_cpu_weight(const SpmmCpuPlan& p, double v);

nlohmann::json to_json(const SpmmCpuPlan& p);
// Throws UsageError naming the key for a malformed plan (shape checks are check_cpu_plan's).
SpmmCpuPlan spmm_cpu_plan_from_json(const nlohmann::json& j);
// Every way the plan does not fit A or its own rules; empty when it does.
std::vector<std::string> check_cpu_plan(const SpmmCpuPlan& p, const CsrMatrix& a);

// The fp64 interpreter of a CPU plan: panel by panel, column tile by column tile, each row's
// nonzeros in order with fp32 fused multiply-adds, as the emitted code does (then bias, ReLU):
// the emitted code matches it bit for bit. B is K x N and C M x N, row-major fp32. Throws UsageError
// for a plan whose dtype is not f32.
void interpret_spmm_cpu(const SpmmCpuPlan& p, const CsrMatrix& a, const float* b, const float* bias,
                        float* c);
// The same for a half plan (dtype f16 or bf16): B and C hold the dtype's bits; B's values widened to
// fp32, A's rounded to the dtype (spmm_cpu_weight), the same fp32 fused multiply-adds, bias (fp32) and
// ReLU, then C rounded to the dtype (round to nearest even; a NaN stays a NaN). Throws UsageError for
// a plan whose dtype is not f16 or bf16.
void interpret_spmm_cpu(const SpmmCpuPlan& p, const CsrMatrix& a, const std::uint16_t* b, const float* bias,
                        std::uint16_t* c);

}  // namespace sparsecc
