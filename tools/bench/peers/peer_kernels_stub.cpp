// The peers' entry points when the bench is built without them (SPARSECC_PEERS_SPINFER unset).
#include <stdexcept>

#include "bench/peer_kernels.hpp"

namespace sparsecc::bench::peers {

bool available() { return false; }

std::string unavailable_reason() {
  return "built without the peers' kernels (configure with -DSPARSECC_PEERS_SPINFER=/path/to/spinfer, "
         "e.g. ../shared/peers/spinfer, to build SpInfer and Flash-LLM into the bench)";
}

const char* kind_name(Kind k) { return k == Kind::spinfer ? "spinfer" : "flashllm"; }

std::string shape_problem(Kind, std::int64_t, std::int64_t) { return unavailable_reason(); }

int padded_n(int n) {
  for (int p : {8, 16, 32, 64})
    if (n <= p) return p;
  return (n + 127) / 128 * 128;
}

std::unique_ptr<Format> make_format(Kind, const std::uint16_t*, int, int) {
  throw std::runtime_error(unavailable_reason());
}

}  // namespace sparsecc::bench::peers
