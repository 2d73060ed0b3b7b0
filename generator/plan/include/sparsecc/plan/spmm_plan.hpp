// The SpMM executor plan: plain data that fully determine one SparseRT-style unrolled kernel for a
// fixed sparse A (M x K) times a dense B (K x N), C = A*B (+bias[row]) (ReLU), fp32 throughout.
//
// Grid (ceil(n / n_tile), blocks.size()): column tiles along x, so that consecutive blocks run the same
// block row's code; block (groups * n_tile). Block row b (blockIdx.y) owns rows
// [row_begin, row_end) of C; inside it thread group g (threadIdx.x / n_tile) owns a contiguous,
// nnz-balanced range of k and thread t of the group owns output column blockIdx.x * n_tile + t. A group
// runs its steps in order: load B[k][col] once, then one FMA per entry into accumulator `row`.
// Groups 1.. hand their partial sums to group 0 through shared memory (added in group order), then
// group 0 adds bias and applies ReLU and stores.
//
// Value order: entry.value_index indexes the CSR value array of A. The emission order is blocks,
// then groups, then steps, then entries; in streamed mode the kernel reads values[p] for the p-th
// entry in that order, and packed_order[p] is the CSR index of that value.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sparsecc/matrix/csr.hpp"

namespace sparsecc {

enum class SpmmNMode { fixed, runtime };       // N compiled in, or read from the kernel's `n` argument
enum class SpmmValueMode { baked, streamed };  // weights as literals, or read from `values`
enum class SpmmRowSplit { equal, balanced };   // equal row panels, or nnz-balanced (SparseRT (b))

struct SpmmProblem {
  std::int64_t m = 0, k = 0, n = 0;  // in runtime-N mode, n is the N the defaults were chosen for
  SpmmNMode n_mode = SpmmNMode::fixed;
  bool bias = false;
  bool relu = false;
  std::string dtype = "f32";
};

struct SpmmEntry {
  std::int32_t row = 0;          // row inside the block row (accumulator index)
  std::int64_t value_index = 0;  // index into A's CSR value (and column) arrays
};

struct SpmmStep {
  std::int32_t k = 0;
  std::vector<SpmmEntry> entries;  // distinct rows, ascending
};

struct SpmmGroup {
  std::vector<SpmmStep> steps;  // strictly ascending k
};

struct SpmmBlockRow {
  std::int64_t row_begin = 0, row_end = 0;
  std::vector<SpmmGroup> groups;  // exactly `groups` entries
};

struct SpmmPlan {
  SpmmProblem problem;
  SpmmValueMode value_mode = SpmmValueMode::baked;
  std::string kernel_name = "sparsecc_spmm";
  SpmmRowSplit row_split = SpmmRowSplit::equal;
  std::int32_t rows_per_block = 0;         // Ny: accumulators per thread (tallest block row)
  std::int32_t n_tile = 0;                 // T: threads per group, one output column each
  std::int32_t groups = 1;                 // Gy: thread groups splitting K
  std::int32_t block_x = 0;                // groups * n_tile
  std::int64_t shared_bytes = 0;           // (groups - 1) * rows_per_block * n_tile * 4
  std::vector<SpmmBlockRow> blocks;        // grid y = blocks.size()
  std::vector<std::int64_t> packed_order;  // streamed mode: CSR index of the p-th emitted value
  std::int32_t estimated_registers = 0;
  std::int32_t max_registers = 255;         // register cap given to the assembler (PTX .maxnreg)
  std::int64_t estimated_instructions = 0;  // B loads + FMAs
  // ptxas optimization level (0..3). -O1 assembles a 105k-nonzero kernel about 15 % faster but
  // made several of them 10-50 % slower on an H100, so automatic plans take -O3.
  std::int32_t assembler_opt_level = 3;

  std::int64_t block_rows() const { return static_cast<std::int64_t>(blocks.size()); }
  std::int64_t column_tiles(std::int64_t n) const { return (n + n_tile - 1) / n_tile; }  // grid x
};

// Accumulators one thread may hold; plans with more rows per block row are rejected.
inline constexpr std::int32_t kSpmmMaxAccumulators = 64;
// Registers a thread needs beside its accumulators (addresses, indices, loads in flight).
inline constexpr std::int32_t kSpmmRegisterOverhead = 24;
// Block rows run along grid y, which CUDA limits to 65535 blocks.
inline constexpr std::int64_t kSpmmMaxBlockRows = 65535;
// The hardware's registers per thread (the largest max_registers).
inline constexpr std::int32_t kSpmmMaxRegisters = 255;

// Emission-order traversal count helpers, filled from the steps.
std::int64_t spmm_plan_loads(const SpmmPlan& plan);
std::int64_t spmm_plan_nnz(const SpmmPlan& plan);

// The `values` array the kernel reads, as float32: in streamed mode A's values in emission order
// (packed_order); in baked mode A's CSR values (the literals the kernel carries).
std::vector<float> spmm_kernel_values(const SpmmPlan& plan, const CsrMatrix& a);

// Every broken invariant, as a sentence (empty when the plan is valid for `a`): shapes and launch
// fields agree, block rows cover 0..M exactly once in order, every nonzero of A appears exactly once
// at its own (row, k), max_registers is in estimated_registers..255, assembler_opt_level in 0..3, steps ascend in k and groups take consecutive k ranges, every group's nnz is
// at most ceil(block nnz / groups) + (nonzeros of the block row in one column) - 1, packed_order is the
// emission order in streamed mode, and the accumulators fit the register budget.
std::vector<std::string> check_plan(const SpmmPlan& plan, const CsrMatrix& a);

nlohmann::json to_json(const SpmmPlan& plan);
// Throws UsageError on a malformed document.
SpmmPlan plan_from_json(const nlohmann::json& j);

}  // namespace sparsecc
