#include "sparsecc/model/manifest.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <string_view>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "sparsecc/common/json_input.hpp"
#include "sparsecc/common/paths.hpp"

namespace sparsecc {

namespace fs = std::filesystem;

namespace {

// `s` for a message: control characters (a NUL would end the message early) as \xNN.
std::string printable(const std::string& s) {
  std::string out;
  for (const char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    else
      out += c;
  return out;
}

}  // namespace

std::vector<ManifestLayer> parse_model_manifest(std::span<const unsigned char> bytes,
                                                const std::string& path) {
  const nlohmann::json j =
      parse_json_input(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path,
                       kMaxManifestBytes, "manifest");
  const auto layers = j.is_object() ? j.find("layers") : j.end();
  if (!j.is_object() || layers == j.end() || !layers->is_array())
    throw_in_file(path, "not a sparsecc manifest: no \"layers\" array");
  const fs::path dir = fs::path(path).parent_path();
  std::vector<ManifestLayer> out;
  for (std::size_t i = 0; i < layers->size(); ++i) {
    const nlohmann::json& l = (*layers)[i];
    for (const char* key : {"name", "file"}) {
      const auto v = l.is_object() ? l.find(key) : l.end();
      if (!l.is_object() || v == l.end() || !v->is_string() || v->get_ref<const std::string&>().empty())
        throw_in_file(path, fmt::format("layer {} of the manifest has no \"{}\" string", i, key));
    }
    ManifestLayer layer;
    layer.name = l["name"].get<std::string>();
    layer.file = l["file"].get<std::string>();
    if (const std::string why = path_outside_folder(dir, layer.file); !why.empty())
      throw_in_file(
          path, fmt::format("layer {} ('{}'): file '{}' {}; a manifest's files must be inside its folder", i,
                            printable(layer.name), printable(layer.file), why));
    layer.path = (dir / layer.file).string();
    out.push_back(std::move(layer));
  }
  if (out.empty()) throw_in_file(path, "the manifest lists no layers");
  return out;
}

std::vector<ManifestLayer> read_model_manifest(const std::string& path) {
  const Bytes bytes = read_json_bytes(path, kMaxManifestBytes, "manifest");
  return parse_model_manifest(bytes, path);
}

}  // namespace sparsecc
