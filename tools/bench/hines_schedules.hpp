// Host side of the Hines solver baselines (CUDA-free): the data layouts and schedules the GPU kernels
// of hines_baselines.cu read, the permutations between them and Hines order, and the fused serial
// CPU step.
//
// Layouts (the kernels' argument tables are int arrays; every index fits in int32, checked):
// - Interleaved (CoreNEURON cell_permute 1 style, one thread per cell): cells are grouped by identical
//   structure (the same parent array relative to the cell's first row); within a group of m cells,
//   node i of the cell in slot c lives at data_base + i * stride + c, stride = m rounded up to a warp
//   (1 for a group of one cell), so the 32 threads of a warp load consecutive addresses. Right-hand
//   side column k of that node lives at data_base * R + (i * R + k) * stride + c.
// - DHS (Dendritic Hierarchical Scheduling, K threads per cell): per cell shape, Hu's level schedule
//   (each step takes the K deepest ready nodes, ready = every child eliminated; optimal in steps for
//   in-trees of unit tasks), then the cell's nodes are renumbered by schedule position, slot =
//   step * K + lane ("memory boosting": the K lanes of one step load consecutive addresses). Column k
//   of slot s lives at base * R + k * steps * K + s.
// - MIN-TRSV (the thesis's baseline): the minimal decomposition (junctions = branch points), the
//   junction-zeroed tridiagonal T over all rows, the per-row and per-junction tables of stages 2 to 4.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sparsecc/neuron/hines.hpp"
#include "sparsecc/reference/hines_accuracy.hpp"

namespace sparsecc::bench {

// Where each Hines node of a layout lives: value slot[i] in the per-node arrays, and column k of its
// right-hand side / solution at rhs_at[i] + k * rhs_step[i] in the per-column arrays.
struct NodeMap {
  std::int32_t slots = 0;      // per-node array length
  std::int32_t rhs_slots = 0;  // per-column array length (slots * R)
  std::vector<std::int32_t> slot, rhs_at, rhs_step;
};

// Per-node values (diag, upper, lower) in layout order; unused slots are 0.
template <typename T>
std::vector<T> scatter_nodes(const NodeMap& map, std::span<const double> by_hines);
// B (N x R row-major, Hines order) in layout order; unused slots are 0.
template <typename T>
std::vector<T> scatter_rhs(const NodeMap& map, std::span<const double> b, int rhs);
// The layout's solution back in Hines order, N x R row-major.
template <typename T>
std::vector<double> gather_rhs(const NodeMap& map, std::span<const T> x, int rhs);

// Cells of one structure: `parent` relative to the cell's first row, `cells` in ascending order.
struct CellGroup {
  std::vector<std::int32_t> parent;
  std::vector<std::int32_t> cells;
};

// Groups of identical structure, in order of first appearance.
std::vector<CellGroup> group_cells(const HinesSystem& s);

// Per-node code of the interleaved kernel: ((parent + 1) << 3) | flags (parent relative, -1 root).
inline constexpr std::int32_t kHasChildren =
    1;  // eliminated children contribute (the last one through registers)
inline constexpr std::int32_t kMultiChild = 2;  // two or more children: earlier ones accumulate in memory
inline constexpr std::int32_t kFirstChild = 4;  // the first of two or more children (starts the accumulation)
std::vector<std::int32_t> interleaved_codes(const std::vector<std::int32_t>& parent);

struct InterleavedLayout {
  std::vector<std::int32_t> groups;  // 5 per group: nodes, stride, cells, data_base, code_offset
  std::vector<std::int32_t> warps;   // 2 per warp: group, first cell slot (a multiple of 32)
  std::vector<std::int32_t> codes;   // per group node, groups concatenated
  NodeMap map;
  std::int32_t num_groups() const { return static_cast<std::int32_t>(groups.size() / 5); }
  std::int32_t num_warps() const { return static_cast<std::int32_t>(warps.size() / 2); }
};
InterleavedLayout build_interleaved(const HinesSystem& s, int rhs);

// Hu's schedule of one forest (post-order `parent`) for K threads: steps[t] are the nodes eliminated at
// step t (at most K, deepest first, ties by ascending index); each node's children are in earlier
// steps. Back-substitution runs the steps in reverse.
std::vector<std::vector<std::int32_t>> dhs_schedule(const std::vector<std::int32_t>& parent, int k);

struct DhsLayout {
  int k = 0;
  std::vector<std::int32_t> cells;     // 4 per cell, by descending steps: slot base, table offset, steps, 0
  std::vector<std::int32_t> table;     // 4 per slot of each shape: parent slot (-1 root, -2 empty lane),
                                       // first child in `children`, child count, 0
  std::vector<std::int32_t> children;  // child slots (cell relative), by ascending node index
  NodeMap map;
  std::int32_t max_steps = 0, total_steps = 0;  // over cells: the longest cell, and the sum
  std::int32_t num_cells() const { return static_cast<std::int32_t>(cells.size() / 4); }
};
DhsLayout build_dhs(const HinesSystem& s, int k, int rhs);

// MIN-TRSV tables. Rows: 4 ints each: junction index (or -1), parent junction, child junction of the
// row's chain (or -1), flags (kChainFirst, kChainLast). T has m = max(N, 3) rows (cuSPARSE's gtsv
// needs 3); rows N..m-1 are identity padding.
inline constexpr std::int32_t kChainFirst = 1;
inline constexpr std::int32_t kChainLast = 2;
struct MinTrsvLayout {
  std::int32_t n = 0, m = 0;
  std::vector<std::int32_t> rows;            // 4 per row
  std::vector<std::int32_t> junctions;       // 2 per junction: row, direct (parent is a junction)
  std::vector<std::int32_t> chains;          // 4 per chain: begin, end, parent junction, child junction
  std::vector<std::int32_t> gather_offsets;  // junction k gathers chains gather[offsets[k] .. offsets[k+1])
  std::vector<std::int32_t> gather;
  std::vector<std::int32_t> domain_parent;  // per junction
  std::vector<std::int32_t> domain_cells;   // offsets of the domain trees of cells with junctions
  std::int32_t num_junctions() const { return static_cast<std::int32_t>(junctions.size() / 2); }
  std::int32_t num_chains() const { return static_cast<std::int32_t>(chains.size() / 4); }
  std::int32_t num_domain_cells() const { return static_cast<std::int32_t>(domain_cells.size()) - 1; }
};
MinTrsvLayout build_min_trsv(const HinesSystem& s);

// One fp64 time step on one core: factor the current diagonal and solve all R columns of b (N x R
// row-major) into x; `pivot` is N scratch values. The arithmetic of hines_factor + hines_solve_many
// in the same order (bitwise equal results), in two fused sweeps without allocations.
void serial_hines_step(const HinesSystem& s, std::span<const double> b, int rhs, std::span<double> x,
                       std::span<double> pivot);

// The embedded text of hines_baselines.cu (compiled at run time with NVRTC).
const char* hines_kernel_source();

}  // namespace sparsecc::bench
