// JSON read from a user's file (safetensors headers, model manifests, tuning databases, predictors):
// bounded in size and nesting before nlohmann sees it, so that no file can exhaust the stack (copies,
// comparisons and dump() of a parsed value recurse once per level) or memory. Every violation is an
// InputError naming the file and the byte.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "sparsecc/common/file.hpp"

namespace sparsecc {

// The deepest nesting of arrays and objects accepted in JSON from a file; no file sparsecc writes
// comes near it.
inline constexpr int kMaxJsonDepth = 64;

// Size limits per kind of JSON file.
inline constexpr std::uint64_t kMaxManifestBytes = std::uint64_t{16} << 20;         // model manifest
inline constexpr std::uint64_t kMaxTuningDatabaseBytes = std::uint64_t{256} << 20;  // tuning database
inline constexpr std::uint64_t kMaxPredictorBytes = std::uint64_t{16} << 20;        // predictor

// Refuses `text` when it is longer than `max_bytes` or when arrays and objects nest deeper than
// kMaxJsonDepth outside strings. The InputError names `file` and the byte (`base` plus the offset in
// `text`, `base` being where the JSON starts in the file); `what` names the JSON in messages
// ("header JSON", "manifest").
void check_json_input(std::string_view text, const std::string& file, std::uint64_t max_bytes,
                      std::string_view what = "JSON", std::int64_t base = 0);
inline void check_json_input(std::span<const unsigned char> text, const std::string& file,
                             std::uint64_t max_bytes, std::string_view what = "JSON", std::int64_t base = 0) {
  check_json_input(std::string_view(reinterpret_cast<const char*>(text.data()), text.size()), file, max_bytes,
                   what, base);
}

// nlohmann's message without its "[json.exception.parse_error.101] " prefix.
std::string json_error_message(const char* what);

// check_json_input, then parses; a syntax error becomes an InputError at its byte,
// "not valid JSON: <nlohmann's message>".
nlohmann::json parse_json_input(std::string_view text, const std::string& file, std::uint64_t max_bytes,
                                std::string_view what = "JSON", std::int64_t base = 0);

// The bytes of the file at `path`, refused (InputError at byte 0) when they are more than
// `max_bytes`; a regular file larger than that is refused before it is read.
Bytes read_json_bytes(const std::string& path, std::uint64_t max_bytes, std::string_view what = "JSON");

// read_json_bytes, then parse_json_input.
nlohmann::json read_json_file(const std::string& path, std::uint64_t max_bytes,
                              std::string_view what = "JSON");

}  // namespace sparsecc
