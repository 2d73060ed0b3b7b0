// libFuzzer target for the executor bundle reader: any input either parses or raises BundleError,
// and what parses writes back to an equal bundle. Each input is parsed as given and again with its
// checksum repaired, so mutations reach the section table and the metadata behind the checksum.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "sparsecc/runtime/bundle.hpp"

namespace {

void check(std::span<const unsigned char> bytes) {
  using namespace sparsecc::rt;
  Bundle b;
  try {
    b = parse_bundle(bytes, "fuzz.spcc");
  } catch (const BundleError&) {
    return;
  }
  if (!(parse_bundle(bundle_bytes(b), "fuzz.spcc") == b)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  check({data, size});
  if (size < sparsecc::rt::kBundleHeaderBytes) return 0;
  std::vector<unsigned char> fixed(data, data + size);
  const std::uint64_t sum = sparsecc::rt::fnv1a64(std::span(fixed).subspan(sparsecc::rt::kBundleHeaderBytes));
  std::memcpy(fixed.data() + 24, &sum, sizeof sum);
  check(fixed);
  return 0;
}
