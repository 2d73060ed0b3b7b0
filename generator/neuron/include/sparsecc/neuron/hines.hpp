// The Hines system of one implicit (backward) Euler step of the passive cable equation, in post-order
// numbering, with the permutations to and from the user's compartment order.
//
// Units: V in mV, t in ms, conductance in uS, capacitance in nF (so C/dt is in uS), current in nA
// (uS * mV = nA). With lengths and radii in um, Ra in Ohm*cm, cm in uF/cm^2, g_leak in S/cm^2:
//   area a_i [um^2] (compartments.hpp)         C_i/dt = cm * a_i * 1e-5 / dt   [uS]
//   g_i = g_leak * a_i * 1e-2                   [uS]
//   Ga = 1/R, R = Ra * L / (pi r1 r2) (frustum), Ga = 100 * pi * r1 * r2 / (Ra * L)   [uS]
// Ga is capped at kMaxCouplingRatio times the smaller membrane term C/dt + g of its two compartments:
// such an edge is a short circuit either way (the voltages across it differ by < 1e-9 relative), and
// the cap bounds the cancellation in the elimination, so very short, thick edges cannot make the pivots
// meaningless.
// Matrix (notes section 1.3, sign erratum fixed), for compartment i with parent p:
//   A_ii = C_i/dt + g_i + sum of Ga over the neighbours of i,   A_ip = A_pi = -Ga_ip,
// a symmetric, strictly diagonally dominant M-matrix (row sum C_i/dt + g_i > 0). Right-hand side:
//   b_i = C_i/dt * V_old_i + g_i * E_leak + I_ext_i   [nA]   (I_ext positive = inward, into the cell).
//
// Numbering: post-order DFS (children in increasing key order), every child before its parent
// (parent[i] > i), each cell's root last in its block, branches consecutive (notes section 1.2); cells
// are concatenated in increasing order of their root's key. All traversals are iterative.
// Parent-first numbering (NEURON's convention) reverses each cell's block in place: Hines index i of
// cell [b, e) is parent-first index b + e - 1 - i, so cell blocks keep their positions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sparsecc/neuron/compartments.hpp"

namespace sparsecc {

inline constexpr double kMaxCouplingRatio = 1e9;

struct CableParams {
  double axial_resistivity_ohm_cm = 100;  // Ra
  double capacitance_uf_per_cm2 = 1;      // cm
  double leak_s_per_cm2 = 1e-4;           // g_leak
  double leak_reversal_mv = -65;          // E_leak
  double dt_ms = 0.025;
};

struct HinesSystem {
  std::vector<std::int32_t> parent;          // parent[i] > i, or -1 for a cell root
  std::vector<double> diag;                  // A[i][i]
  std::vector<double> upper;                 // A[i][parent[i]] (0 for roots)
  std::vector<double> lower;                 // A[parent[i]][i] (0 for roots)
  std::vector<std::int32_t> cell_offsets;    // cell c is [cell_offsets[c], cell_offsets[c+1])
  std::vector<std::int32_t> hines_of;        // compartment index -> Hines index
  std::vector<std::int32_t> compartment_of;  // Hines index -> compartment index
  // Passive-step terms in Hines order, filled by assemble_hines (empty for hand-built systems).
  std::vector<double> cap_over_dt;  // C_i/dt [uS]
  std::vector<double> leak;         // g_i [uS]
  double leak_reversal_mv = 0;

  std::int32_t size() const { return static_cast<std::int32_t>(parent.size()); }
  std::int32_t num_cells() const { return static_cast<std::int32_t>(cell_offsets.size()) - 1; }
};

// Post-order numbering of a forest given in any order: parent[c] is the parent of node c or -1, key[c]
// orders siblings and roots. Fills parent (Hines order), cell_offsets, hines_of and compartment_of of
// the result (values empty). Throws UsageError when `parent` is not a forest.
HinesSystem number_hines(std::span<const std::int32_t> parent, std::span<const std::int64_t> key);

HinesSystem assemble_hines(const Compartments& compartments, const CableParams& params = {});
HinesSystem assemble_hines(const NeuronModel& model, const CableParams& params = {},
                           const CompartmentOptions& options = {});

// b for one step; v_old_mv and i_ext_na in Hines order, result in Hines order. Needs an assembled
// system (cap_over_dt and leak filled).
std::vector<double> hines_rhs(const HinesSystem& system, std::span<const double> v_old_mv,
                              std::span<const double> i_ext_na);

// One system of all the cells of `parts`, in order (a forest: rows, cells and permutations offset;
// leak_reversal_mv from the first part). Throws UsageError when parts is empty, the parts disagree
// on whether the passive-step terms are filled or on E_leak, or the rows exceed kMaxCompartments.
HinesSystem concatenate_hines(const std::vector<HinesSystem>& parts);

// Vector permutations (sizes must equal system.size(); UsageError otherwise).
std::vector<double> to_hines_order(const HinesSystem& system, std::span<const double> by_compartment);
std::vector<double> from_hines_order(const HinesSystem& system, std::span<const double> by_hines);
std::int32_t parent_first_index(const HinesSystem& system, std::int32_t hines_index);
std::vector<std::int32_t> parent_first_parents(const HinesSystem& system);  // parent[j] < j or -1
std::vector<double> hines_to_parent_first(const HinesSystem& system, std::span<const double> by_hines);
std::vector<double> parent_first_to_hines(const HinesSystem& system, std::span<const double> by_parent_first);

// Checks sizes, the post-order forest structure (parent[i] > i within the cell, exactly one root as
// the last node of each cell), finite values, zero upper/lower at roots, a positive diagonal, row
// diagonal dominance (|upper[i]| + sum over children c of |lower[c]| <= diag[i], up to 1e-12 relative
// rounding), and that the permutations, when present, are inverse permutations. Returns the problems
// found (at most max_issues); empty means valid.
std::vector<std::string> validate_hines(const HinesSystem& system, std::size_t max_issues = 16);

}  // namespace sparsecc
