#include "sparsecc/emit/emitted_kernel.hpp"

#include <fmt/format.h>

#include <cctype>

#include "sparsecc/common/error.hpp"

namespace sparsecc {

const char* to_string(KernelLanguage language) { return language == KernelLanguage::ptx ? "ptx" : "cuda"; }

KernelLanguage parse_kernel_language(const std::string& word) {
  if (word == "cuda") return KernelLanguage::cuda;
  if (word == "ptx") return KernelLanguage::ptx;
  throw UsageError(fmt::format("unknown emitter '{}' (expected cuda or ptx)", word));
}

bool is_c_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char ch : s)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_')) return false;
  return true;
}

}  // namespace sparsecc
