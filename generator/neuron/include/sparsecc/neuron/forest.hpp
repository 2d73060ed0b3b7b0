// Workloads for Hines executors: a forest of cells from SWC files, and the right-hand sides of a
// realistic time step for it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparsecc/neuron/hines.hpp"

namespace sparsecc {

// Every file's cells in order, the whole list `copies` times, at `resolution` compartments per SWC
// segment, as one Hines system. Throws what the SWC reader and the assembly throw (InputError naming
// the file and line for a bad file, UsageError for bad arguments), and UsageError naming the limit
// when the copies would hold more than kMaxCompartments compartments (checked before any copy).
HinesSystem load_hines_forest(const std::vector<std::string>& swc_files, int copies, int resolution);

// N x R right-hand sides of one passive step: per column, potentials uniform in -80..-50 mV and
// injected currents uniform in -0.1..0.1 nA (hines_rhs). Random b of mixed signs would mostly measure
// the matrix's conditioning. Needs an assembled system (UsageError otherwise).
std::vector<double> random_step_rhs(const HinesSystem& system, std::size_t r, std::uint64_t seed);

}  // namespace sparsecc
