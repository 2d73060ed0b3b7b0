// Little-endian packing of the verification sections (internal to the bundle stage).
#pragma once

#include <fmt/format.h>

#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "sparsecc/common/error.hpp"

namespace sparsecc::section_bytes {

template <typename T>
void append(std::vector<unsigned char>& out, const T* p, std::size_t count) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(p);
  out.insert(out.end(), bytes, bytes + count * sizeof(T));
}

// Copies `count` values from d[at..] and advances `at`; InputError naming `name` and the byte when
// the section ends first.
template <typename T>
void take(std::span<const unsigned char> d, std::size_t& at, T* dst, std::size_t count,
          const std::string& name, const char* what) {
  const std::size_t bytes = count * sizeof(T);
  if (count > d.size() / sizeof(T) || d.size() - at < bytes)
    throw_at_byte(name, static_cast<std::int64_t>(at),
                  fmt::format("verification section: {} truncated", what));
  if (bytes) std::memcpy(dst, d.data() + at, bytes);
  at += bytes;
}

}  // namespace sparsecc::section_bytes
