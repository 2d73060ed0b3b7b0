#include "sparsecc/common/error.hpp"

#include <fmt/format.h>

namespace sparsecc {

std::string SourceLocation::describe() const {
  std::string s = file.empty() ? std::string("<input>") : file;
  if (line >= 0) s += fmt::format(":{}", line);
  if (!tensor.empty()) s += fmt::format(": tensor '{}'", tensor);
  if (byte >= 0) s += fmt::format(": byte {}", byte);
  return s;
}

InputError::InputError(SourceLocation where, const std::string& message)
    : std::runtime_error(fmt::format("{}: {}", where.describe(), message)),
      where_(std::move(where)),
      message_(message) {}

void throw_at_line(const std::string& file, std::int64_t line, const std::string& message) {
  throw InputError(SourceLocation::at_line(file, line), message);
}

void throw_at_byte(const std::string& file, std::int64_t byte, const std::string& message,
                   const std::string& tensor) {
  throw InputError(SourceLocation::at_byte(file, byte, tensor), message);
}

void throw_in_file(const std::string& file, const std::string& message) {
  throw InputError(SourceLocation::in_file(file), message);
}

}  // namespace sparsecc
