// libFuzzer target for the safetensors reader: list the file, then parse each tensor; any input
// either loads or raises InputError. What loads is written back and must read back bit for bit.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz_support.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const unsigned char> in(data, size);
  std::vector<sparsecc::Tensor> tensors;
  try {
    for (const auto& name : sparsecc::list_safetensors(in, "fuzz.safetensors"))
      tensors.push_back(sparsecc::parse_safetensors_tensor(in, "fuzz.safetensors", name));
  } catch (const sparsecc::InputError&) {
    return 0;
  }
  const auto back = sparsecc::parse_safetensors(sparsecc::format_safetensors(tensors), "fuzz.safetensors");
  if (!sparsecc::fuzz::same_tensors(tensors, back)) __builtin_trap();
  return 0;
}
