#pragma once

namespace sparsecc {

// Generator version; recorded in every bundle and tuning-database key.
inline constexpr const char* kVersion = SPARSECC_VERSION_STRING;

}  // namespace sparsecc
