// The bundle stage: packs a compiled executor (metadata, cubin, PTX, streamed values, bias) into one
// bundle file for the runtime. The format lives in sparsecc/runtime/bundle.hpp.
#pragma once

#include <string>

#include "sparsecc/runtime/bundle.hpp"

namespace sparsecc {

// Validates the bundle (rt::BundleError when inconsistent) and writes it atomically: on failure the
// file at `path` is left as it was and no partial file remains. Bundles are never compressed, so a
// ".gz" path is a UsageError.
void write_bundle(const std::string& path, const rt::Bundle& bundle);

}  // namespace sparsecc
