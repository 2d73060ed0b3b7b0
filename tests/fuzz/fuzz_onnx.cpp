// libFuzzer target for the ONNX reader (built where libonnx is installed): any input either parses or
// raises InputError. What parses holds floating initializers whose values fill their shapes, and a
// second read with shape inference (the inputs' symbolic batch bound to 2) must succeed too, giving
// the same initializers and nodes and shapes whose dimensions are sizes or -1 (unknown). Inference is
// bounded well below libFuzzer's unit timeout: a model libonnx cannot finish on is abandoned, as the
// reader promises, and only a reader that overruns its own bound is a finding.
#include <cstddef>
#include <cstdint>
#include <span>

#include "sparsecc/common/error.hpp"
#include "sparsecc/io/onnx.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const unsigned char> in(data, size);
  sparsecc::OnnxGraph plain;
  try {
    plain = sparsecc::parse_onnx(in, "fuzz.onnx");
  } catch (const sparsecc::InputError&) {
    return 0;
  }
  for (const auto& init : plain.initializers)
    if (init.floating && static_cast<std::int64_t>(init.tensor.data.size()) != init.tensor.numel())
      __builtin_trap();
  const sparsecc::OnnxGraph shaped =
      sparsecc::parse_onnx(in, "fuzz.onnx", {.infer_shapes = true, .batch = 2, .inference_seconds = 3});
  if (shaped.initializers.size() != plain.initializers.size() || shaped.nodes.size() != plain.nodes.size())
    __builtin_trap();
  for (std::size_t i = 0; i < plain.initializers.size(); ++i)
    if (shaped.initializers[i].tensor.name != plain.initializers[i].tensor.name ||
        shaped.initializers[i].tensor.shape != plain.initializers[i].tensor.shape)
      __builtin_trap();
  for (const auto& [name, dims] : shaped.shapes)
    for (const std::int64_t d : dims)
      if (d < -1) __builtin_trap();
  return 0;
}
