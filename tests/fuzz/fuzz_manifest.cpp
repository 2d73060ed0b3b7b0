// libFuzzer target for the model-manifest reader (sparsecc/model/manifest.hpp): any input either
// yields layers or raises InputError, and every layer's file leads inside the manifest's folder.
#include <cstddef>
#include <cstdint>
#include <span>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/paths.hpp"
#include "sparsecc/model/manifest.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const unsigned char> in(data, size);
  try {
    for (const sparsecc::ManifestLayer& l : sparsecc::parse_model_manifest(in, "fuzz/manifest.json")) {
      if (l.name.empty() || l.file.empty() || l.file.front() == '/' || l.path != "fuzz/" + l.file)
        __builtin_trap();
      if (!sparsecc::path_outside_folder("fuzz", l.file).empty()) __builtin_trap();
    }
  } catch (const sparsecc::InputError&) {
  }
  return 0;
}
