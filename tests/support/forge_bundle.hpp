// Forged bundles for the tests: a bundle's metadata edited and the file put together again with a
// recomputed size and checksum, as a deliberate edit would be. No validation on the way: the result
// is what an attacker could write.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <stdexcept>
#include <vector>

#include "sparsecc/runtime/bundle.hpp"

namespace sparsecc::test {

// The sections of `bundle` (a well-formed file), with `edit` applied to the metadata JSON and the
// sections' bytes to `edit_section` (kind, bytes) when given; laid out as the writer does.
inline std::vector<unsigned char> forge_bundle(
    std::span<const unsigned char> bundle, const std::function<void(nlohmann::json&)>& edit,
    const std::function<void(std::uint32_t, std::vector<unsigned char>&)>& edit_section = {}) {
  const auto u32 = [&](std::size_t at) {
    std::uint32_t v;
    std::memcpy(&v, bundle.data() + at, 4);
    return v;
  };
  const auto u64 = [&](std::size_t at) {
    std::uint64_t v;
    std::memcpy(&v, bundle.data() + at, 8);
    return v;
  };
  if (bundle.size() < rt::kBundleHeaderBytes) throw std::invalid_argument("forge_bundle: not a bundle");
  const std::uint32_t count = u32(12);
  std::vector<std::pair<std::uint32_t, std::vector<unsigned char>>> sections;
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::size_t e = rt::kBundleHeaderBytes + rt::kBundleEntryBytes * i;
    const std::uint64_t offset = u64(e + 8), size = u64(e + 16);
    if (offset > bundle.size() || size > bundle.size() - offset)
      throw std::invalid_argument("forge_bundle: bad section");
    std::vector<unsigned char> data(bundle.begin() + std::ptrdiff_t(offset),
                                    bundle.begin() + std::ptrdiff_t(offset + size));
    const std::uint32_t kind = u32(e);
    if (kind == static_cast<std::uint32_t>(rt::SectionKind::metadata)) {
      nlohmann::json j = nlohmann::json::parse(data.begin(), data.end());
      if (edit) edit(j);
      const std::string text = j.dump();
      data.assign(text.begin(), text.end());
    }
    if (edit_section) edit_section(kind, data);
    sections.emplace_back(kind, std::move(data));
  }
  const auto align8 = [](std::size_t x) { return (x + 7) / 8 * 8; };
  std::size_t at = align8(rt::kBundleHeaderBytes + rt::kBundleEntryBytes * sections.size());
  std::vector<unsigned char> out(at, 0);
  const auto put = [&](std::size_t where, const void* p, std::size_t n) {
    std::memcpy(out.data() + where, p, n);
  };
  for (std::size_t i = 0; i < sections.size(); ++i) {
    const std::size_t e = rt::kBundleHeaderBytes + rt::kBundleEntryBytes * i;
    const std::uint64_t offset = at, size = sections[i].second.size();
    put(e, &sections[i].first, 4);
    put(e + 8, &offset, 8);
    put(e + 16, &size, 8);
    out.insert(out.end(), sections[i].second.begin(), sections[i].second.end());
    at = align8(out.size());
    out.resize(at, 0);
  }
  std::memcpy(out.data(), bundle.data(), 16);  // magic, version, section count
  const std::uint64_t total = out.size();
  put(16, &total, 8);
  const std::uint64_t sum = rt::fnv1a64(std::span(out).subspan(rt::kBundleHeaderBytes));
  put(24, &sum, 8);
  return out;
}

}  // namespace sparsecc::test
