// A CPU Hines plan (the LLVM backend): one implicit step H x = b for R right-hand sides of a fixed
// forest of cells, in f64 or f32, with cells of the same shape solved side by side, one cell a SIMD
// lane. Plain data: the distinct cell shapes (parent arrays), and the groups of cells the code solves
// at once (a shape and a width: the target's lanes, or 1 for the cells left over); emit_hines_llvm
// turns it into straight-line code, one function a shape and width.
//
// Row order (the executor's): the groups' rows one after the other, and within a group of width W,
// node i of lane j at row first_row + i * W + j (lane-interleaved: a node's W lanes are one vector).
// Full-width groups come first, so each starts at a multiple of its width. permutation() maps the
// plan's rows to the system's Hines rows (as HinesExecutor::permutation maps Hines rows to
// compartments); d, u, l, b and x are all in the plan's row order, b and x rows x R row-major.
//
// The arithmetic, for every lane and right-hand side (children before parents, a parent's children
// in increasing order), as interpret_hines_cpu and the emitted code do it:
//   forward:  D = d[i] updated by i's children; inv[i] = 1 / D (stored in the workspace);
//             for p = parent[i] >= 0: D[p] = fma(-(l[i] * u[i]), inv[i], D[p]);
//             f = l[i] * inv[i]; B[p] = fma(-f, B[i], B[p]) (B starts as b; final B[i] stored in x)
//   backward: x[root] = B[root] * inv[root]; x[i] = fma(-u[i], x[p], B[i]) * inv[i], parents first.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "sparsecc/common/dtype.hpp"
#include "sparsecc/target/target.hpp"

namespace sparsecc {

struct HinesCpuGroup {
  std::int32_t shape = 0;           // index into HinesCpuPlan::shapes
  std::int32_t width = 1;           // lanes: the plan's lanes, or 1
  std::int64_t first_row = 0;       // the plan row of node 0 of lane 0
  std::vector<std::int32_t> cells;  // the system's cells, lane by lane (width of them)
};

struct HinesCpuPlan {
  CpuTarget target;          // the ISA the code is for
  DType dtype = DType::f64;  // f64 or f32
  std::int32_t rhs = 1;      // R right-hand sides sharing the matrix
  std::int32_t lanes = 8;    // the target's vector lanes of dtype
  // One parent array a distinct cell shape, relative to the cell's first row: post-order
  // (parent[i] > i), the root last with -1.
  std::vector<std::vector<std::int32_t>> shapes;
  std::vector<HinesCpuGroup> groups;
  std::vector<std::int32_t> cell_offsets;  // the system's: cell c is Hines rows [c_o[c], c_o[c + 1])

  std::int64_t rows() const { return cell_offsets.empty() ? 0 : cell_offsets.back(); }
  // Values of the workspace (the reciprocal pivots): one a row.
  std::int64_t workspace_elements() const { return rows(); }
  // For each row in the plan's order, the system's Hines row it holds.
  std::vector<std::int32_t> permutation() const;
};

// The target's vector lanes of `dtype` (f64 or f32).
std::int32_t hines_cpu_lanes(const CpuTarget& target, DType dtype);

nlohmann::json to_json(const HinesCpuPlan& p);
// Throws UsageError naming the key for a malformed plan (structural checks are check_hines_cpu_plan's).
HinesCpuPlan hines_cpu_plan_from_json(const nlohmann::json& j);
// Every way the plan breaks its own rules (dtype, lanes, shapes in post-order, groups in order and
// covering every cell once, each cell of its group's shape size); with `parent` (the system's, in
// Hines order) also each cell's structure against its group's shape. Empty when it fits.
std::vector<std::string> check_hines_cpu_plan(const HinesCpuPlan& p,
                                              std::span<const std::int32_t> parent = {});

// The plan's arithmetic (above) group by group, in T = double (f64) or float (f32): the emitted code
// matches it bit for bit. Arrays in the plan's row order; x may equal b; work holds
// workspace_elements() values and is written. Throws UsageError when T is not the plan's dtype.
template <typename T>
void interpret_hines_cpu(const HinesCpuPlan& p, const T* d, const T* u, const T* l, const T* b, T* x,
                         T* work);
extern template void interpret_hines_cpu<double>(const HinesCpuPlan&, const double*, const double*,
                                                 const double*, const double*, double*, double*);
extern template void interpret_hines_cpu<float>(const HinesCpuPlan&, const float*, const float*, const float*,
                                                const float*, float*, float*);

}  // namespace sparsecc
