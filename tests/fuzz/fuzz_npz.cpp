// libFuzzer target for the .npz reader: list the archive, then parse each tensor; any input either
// loads or raises InputError. What loads is written back (stored and deflated) and must read back
// bit for bit.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz_support.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/io/npz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const unsigned char> in(data, size);
  std::vector<sparsecc::Tensor> tensors;
  try {
    for (const auto& name : sparsecc::list_npz(in, "fuzz.npz"))
      tensors.push_back(sparsecc::parse_npz_tensor(in, "fuzz.npz", name));
  } catch (const sparsecc::InputError&) {
    return 0;
  }
  for (bool compress : {false, true})
    if (!sparsecc::fuzz::same_tensors(
            tensors, sparsecc::parse_npz(sparsecc::format_npz(tensors, compress), "fuzz.npz")))
      __builtin_trap();
  return 0;
}
