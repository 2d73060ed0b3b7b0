// libFuzzer target for the .npy reader: any input either parses or raises InputError; what parses
// survives format_npy (C and Fortran order, every header version) and parses back bit for bit.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_support.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/io/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sparsecc::Tensor t;
  try {
    t = sparsecc::parse_npy(std::span<const unsigned char>(data, size), "fuzz.npy");
  } catch (const sparsecc::InputError&) {
    return 0;
  }
  for (bool fortran : {false, true})
    for (int version = 1; version <= 3; ++version)
      if (!sparsecc::fuzz::same_tensor(
              t, sparsecc::parse_npy(sparsecc::format_npy(t, fortran, version), "fuzz.npy")))
        __builtin_trap();
  return 0;
}
