// The manifest `sparsecc compile-model` writes beside a model's bundles (manifest.json):
//   {"format": "sparsecc-model-manifest", "layers": [{"name": ..., "file": ..., ...}, ...], ...}
// Only "layers" and each layer's "name" and "file" are read here; other fields are ignored.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace sparsecc {

struct ManifestLayer {
  std::string name;  // the layer's name
  std::string file;  // as the manifest writes it, relative to the manifest's folder
  std::string path;  // the manifest's folder joined with `file`
};

// The layers of the manifest held in `bytes`, read from `path` (which places its folder). The JSON is
// bounded by kMaxManifestBytes and kMaxJsonDepth (common/json_input.hpp). Each layer's file must lead
// inside the manifest's folder (path_outside_folder in common/paths.hpp: no absolute path, no '..'
// out of it, no symbolic link out of it). Throws InputError naming `path`, and the layer by index
// and name, on any violation, a missing or empty "name" or "file", or no layers at all.
std::vector<ManifestLayer> parse_model_manifest(std::span<const unsigned char> bytes,
                                                const std::string& path);

// Reads the manifest file at `path` (a regular file over kMaxManifestBytes is refused unread).
std::vector<ManifestLayer> read_model_manifest(const std::string& path);

}  // namespace sparsecc
