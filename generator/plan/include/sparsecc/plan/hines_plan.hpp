// The Hines executor plan: plain data that fully determine the recursive exact domain decomposition
// (EDD) of one fixed forest of cells, solving H x = b for R right-hand sides per time step.
//
// Level 0 is the system itself (post-order numbering, parent[i] > i, see neuron/hines.hpp). Every
// level cuts its matrix at a sorted junction set: the remaining rows fall into chains, maximal runs
// s..e of consecutive non-junction rows with parent[r] = r + 1. A chain couples to at most two
// junctions: its parent junction (parent[e], the chain's last row) and its child junction (s - 1, when
// that is a junction whose parent is s). The junction rows form the level's domain matrix, which is
// again a Hines matrix (domain_parent[k] > k), and level l + 1 decomposes it. After the last level the
// remaining domain (the base) is solved serially, one thread per cell.
//
// Execution: levels 0 .. grid_levels - 1 run as grid-wide kernels (one launch per stage and level);
// the remaining levels, the base and their back-substitution run in one launch with one thread block
// of block_threads threads per cell, which works through its cell's part of every level with block
// barriers between the stages (each cell's rows stay contiguous at every level).
//
// Per level and right-hand side the executor runs the four stages of the notes (section 3.4, in
// the general non-symmetric form, negated domain convention):
//   1. per chain: T = tridiag(lower, diag, upper) over rows s..e, R = T^-1 b, P = T^-1 (upper[e] e_last)
//      when the chain has a parent junction, Q = T^-1 (lower[s-1] e_first) when it has a child junction;
//   2. per junction k, in gather order: Md[k] = -d[J_k] + sum of lower[e] P_last (chains whose parent
//      junction is k) + upper[s-1] Q_first (the chain whose child junction is k), Mrhs alike with R;
//      its domain off-diagonals are -upper/-lower[J_k] when its parent is a junction, else
//      upper[s-1] P_first and lower[e] Q_last of that chain;
//   3. the domain system: the next level, or the base;
//   4. x[J_k] = Mx[k]; per chain x = R - Mx[parent junction] P - Mx[child junction] Q.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sparsecc {

enum class HinesDecomposition { minimal, fine };  // branch points only, or also every K-th row of a branch

// Where the block kernel finds the structure of a cell's base (the serial part one thread runs
// alone): read from the int32 tables, or unrolled into straight-line code with the parent offsets as
// immediates, one function per distinct base structure (the levels' chain and gather lists stay
// tables in both modes: they differ from lane to lane, and immediates there would split warps).
enum class HinesCode { tables, unrolled };

// The block kernel stages a segment's base in shared memory (one thread eliminates it there) when
// hines_base_shared_bytes(rows, R, real bytes) <= kHinesBaseSharedLimit; unrolled code needs it.
inline constexpr std::int64_t kHinesBaseSharedLimit = 24576;
constexpr std::int64_t hines_base_shared_bytes(std::int64_t rows, std::int64_t rhs, std::int64_t real_bytes) {
  return rows * ((4 + 2 * rhs) * real_bytes + 4);  // d u l piv, b and x per column, the parent
}

// What the block kernel may hold at most of its levels' workspace in shared memory (see
// HinesPlan::shared_workspace_limit; what an SM gives its blocks comes from the target, see
// hines_shared_workspace_rule).
inline constexpr std::int64_t kHinesSharedWorkspaceMax = 200 * 1024;

struct HinesProblem {
  std::int32_t n = 0;         // compartments of the whole forest
  std::int32_t cells = 0;     // trees in the forest
  std::int32_t rhs = 1;       // R right-hand sides sharing the matrix
  std::string dtype = "f64";  // f64 or f32
};

struct HinesChain {
  std::int32_t begin = 0, end = 0;    // rows [begin, end] of the level's matrix, inclusive
  std::int32_t parent_junction = -1;  // domain index of junction parent[end], -1 at a cell's root
  std::int32_t child_junction = -1;   // domain index of junction begin - 1, -1 when there is none
};

struct HinesLevel {
  std::int32_t size = 0;                    // rows of this level's matrix
  std::int32_t k = 0;                       // K of the fine decomposition, 0 for minimal
  std::vector<std::int32_t> junctions;      // ascending rows; position = domain index
  std::vector<std::int32_t> domain_parent;  // per junction: domain parent, -1 for a domain root
  std::vector<std::uint8_t> direct;         // per junction: 1 when parent[J_k] is itself a junction
  std::vector<HinesChain> chains;           // ascending rows
  // Stage 2 gathers: junction k adds the chains gather[gather_offsets[k] .. gather_offsets[k + 1]),
  // ascending (those below it, whose parent junction it is, then the one above, whose child it is).
  std::vector<std::int32_t> gather_offsets;
  std::vector<std::int32_t> gather;

  std::int32_t domain_size() const { return static_cast<std::int32_t>(junctions.size()); }
};

struct HinesPlan {
  HinesProblem problem;
  HinesDecomposition decomposition = HinesDecomposition::fine;
  std::string kernel_name = "sparsecc_hines";
  std::vector<std::int32_t> parent;         // level 0's parents (the system's, Hines order)
  std::vector<std::int32_t> cell_offsets;   // cell c is rows [cell_offsets[c], cell_offsets[c + 1])
  std::vector<HinesLevel> levels;           // D = levels.size() decomposition levels
  std::vector<std::int32_t> base_parent;    // parents of the base system (the last domain)
  std::int32_t threads_per_block = 256;     // grid kernels: one thread per chain / junction / row
  std::int32_t grid_levels = 0;             // G: levels run by grid kernels, 0 .. depth()
  std::int32_t block_threads = 256;         // threads of the per-cell block kernel
  std::int64_t estimated_instructions = 0;  // of an executor unrolling every level and the base
  HinesCode code = HinesCode::tables;
  std::int64_t unrolled_instructions = 0;  // of the base code in unrolled mode (0 in tables mode)
  // Bytes of dynamic shared memory the block kernel may keep its levels' workspace in (0: none, all
  // of it in global memory). The deepest block levels whose per-cell arrays fit go there (see
  // HinesSchedule::shared_from): they are written and read by the cell's own block only.
  std::int64_t shared_workspace_limit = 0;

  std::int32_t depth() const { return static_cast<std::int32_t>(levels.size()); }
  std::int32_t base_size() const { return static_cast<std::int32_t>(base_parent.size()); }
};

// Row offsets of every cell at every level: result[l][c] is cell c's first row of level l's matrix
// (l = 0 .. depth(), the last being the base), result[l][cells] the level's size. Cells keep their
// order and stay contiguous because junctions are ascending and never shared between trees.
std::vector<std::vector<std::int32_t>> hines_cell_offsets_by_level(const HinesPlan& plan);

// Base rows of the largest cell the block kernel runs (one with rows below the grid levels).
std::int32_t hines_block_base_max(const HinesPlan& plan);

// The level that cuts the Hines forest `parent` (post-order) at `junctions` (ascending rows, every
// row with two or more children among them): chains, their junctions, the domain parents and the
// gathers. Throws UsageError when the junctions are not sorted, out of range or miss a branch point.
HinesLevel build_hines_level(const std::vector<std::int32_t>& parent, std::vector<std::int32_t> junctions,
                             std::int32_t k);

// Every broken invariant, as a sentence (empty when valid): sizes agree; at every level each row is
// in exactly one chain or is a junction, chains are maximal runs with parent[r] = r + 1 whose
// parent/child junctions are the ones the structure implies, junction parents are as stated
// (direct or through a chain), the domain parent array is a Hines (post-order) forest and the next
// level's matrix; gather lists hold exactly the chains touching each junction, ascending; the base
// is the last domain.
std::vector<std::string> check_hines_plan(const HinesPlan& plan);

nlohmann::json to_json(const HinesPlan& plan);
// Throws UsageError on a malformed document.
HinesPlan hines_plan_from_json(const nlohmann::json& j);

const char* to_string(HinesDecomposition d);
const char* to_string(HinesCode c);

}  // namespace sparsecc
