// libFuzzer target: SWC text -> validated model -> compartments -> Hines system -> one serial solve.
// Only InputError is an acceptable failure; every produced system must validate and solve to finite
// values.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "sparsecc/common/error.hpp"
#include "sparsecc/neuron/hines.hpp"
#include "sparsecc/reference/hines_solve.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sparsecc;
  try {
    const NeuronModel model =
        build_neuron_model(parse_swc(std::span<const unsigned char>(data, size), "fuzz.swc"));
    CompartmentOptions options;
    options.resolution = 1 + static_cast<int>(size % 3);
    const HinesSystem system = assemble_hines(model, CableParams{}, options);
    if (!validate_hines(system).empty()) std::abort();
    std::vector<double> v(system.size(), -65.0), i_ext(system.size(), 0.1);
    const std::vector<double> x = hines_solve(system, hines_rhs(system, v, i_ext));
    for (const double xi : x)
      if (!std::isfinite(xi)) std::abort();
  } catch (const InputError&) {
  }
  return 0;
}
