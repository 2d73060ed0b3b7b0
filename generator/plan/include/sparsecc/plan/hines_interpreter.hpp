// CPU interpreter of a Hines plan: runs the plan's decomposition levels (stage 1 chain solves,
// stage 2 gathers in plan order, stage 3 the next level, stage 4 back-substitution) and the serial
// base solve exactly as the plan lays them out, in the plan's arithmetic type (fp64 or fp32). CI
// checks every plan with it against the serial fp64 reference; the generated executors follow the
// same order of operations.
#pragma once

#include <span>
#include <vector>

#include "sparsecc/plan/hines_plan.hpp"

namespace sparsecc {

// One level's domain system as stage 2 built it (negated convention), for tests and tools.
struct HinesDomainTrace {
  std::vector<double> diag, upper, lower, rhs;  // rhs: junctions x R
};

// diag, upper (A[i][parent[i]]) and lower (A[parent[i]][i]) in Hines order; b is N x R row-major (the R
// values of row i at b[i*R .. i*R + R)); returns x in the same layout. Throws UsageError when a size
// differs from the plan or the plan is invalid. `trace`, when given, receives each level's domain system.
std::vector<double> interpret_hines(const HinesPlan& plan, std::span<const double> diag,
                                    std::span<const double> upper, std::span<const double> lower,
                                    std::span<const double> b,
                                    std::vector<HinesDomainTrace>* trace = nullptr);
std::vector<float> interpret_hines(const HinesPlan& plan, std::span<const float> diag,
                                   std::span<const float> upper, std::span<const float> lower,
                                   std::span<const float> b, std::vector<HinesDomainTrace>* trace = nullptr);

}  // namespace sparsecc
