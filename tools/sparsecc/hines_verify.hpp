// `sparsecc verify` for bundles whose op is "hines".
#pragma once

#include <cstdint>
#include <string>

#include "sparsecc/runtime/bundle.hpp"

namespace sparsecc::cli {

// Returns the exit status (0 ok, 1 above the tolerance). tolerance <= 0: 1e-12 (f64) or 1e-4 (f32).
int verify_hines(const rt::Bundle& bundle, const std::string& path, std::uint64_t seed, double tolerance, bool cpu);

}  // namespace sparsecc::cli
