// libFuzzer target for the .npy reader: any input either parses or raises InputError; what parses
// survives format_npy (C and Fortran order, every header version) and parses back bit for bit.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

#include "sparsecc/common/error.hpp"
#include "sparsecc/io/npy.hpp"

namespace {

bool same(const sparsecc::Tensor& a, const sparsecc::Tensor& b) {
  if (a.name != b.name || a.dtype != b.dtype || a.shape != b.shape || a.data.size() != b.data.size())
    return false;
  for (std::size_t i = 0; i < a.data.size(); ++i)
    if (std::bit_cast<std::uint64_t>(a.data[i]) != std::bit_cast<std::uint64_t>(b.data[i])) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sparsecc::Tensor t;
  try {
    t = sparsecc::parse_npy(std::span<const unsigned char>(data, size), "fuzz.npy");
  } catch (const sparsecc::InputError&) {
    return 0;
  }
  for (bool fortran : {false, true})
    for (int version = 1; version <= 3; ++version)
      if (!same(t, sparsecc::parse_npy(sparsecc::format_npy(t, fortran, version), "fuzz.npy")))
        __builtin_trap();
  return 0;
}
