// libFuzzer target for the safetensors reader: list the file, then parse each tensor; any input
// either loads or raises InputError. What loads is written back and must read back bit for bit.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sparsecc/common/error.hpp"
#include "sparsecc/io/safetensors.hpp"

namespace {

bool same(const std::vector<sparsecc::Tensor>& a, const std::vector<sparsecc::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t k = 0; k < a.size(); ++k) {
    const auto &x = a[k], &y = b[k];
    if (x.name != y.name || x.dtype != y.dtype || x.shape != y.shape || x.data.size() != y.data.size())
      return false;
    for (std::size_t i = 0; i < x.data.size(); ++i)
      if (std::bit_cast<std::uint64_t>(x.data[i]) != std::bit_cast<std::uint64_t>(y.data[i])) return false;
  }
  return true;
}

}  // namespace

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
  if (!same(tensors, back)) __builtin_trap();
  return 0;
}
