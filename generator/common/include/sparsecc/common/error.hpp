// Errors raised for bad input. Every reader reports the file and the place inside it (a line for
// text formats, a byte offset for binary ones, the tensor name for containers) so the user can find
// the problem; the CLI turns an InputError into exit status 2.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace sparsecc {

struct SourceLocation {
  std::string file;        // path as the user gave it
  std::string tensor;      // tensor inside a container (npz entry, safetensors name); may be empty
  std::int64_t line = -1;  // 1-based line in a text format; -1 when not applicable
  std::int64_t byte = -1;  // byte offset (in the decompressed stream for .gz); -1 when not applicable

  static SourceLocation at_line(std::string file, std::int64_t line) {
    SourceLocation l;
    l.file = std::move(file);
    l.line = line;
    return l;
  }
  static SourceLocation at_byte(std::string file, std::int64_t byte, std::string tensor = {}) {
    SourceLocation l;
    l.file = std::move(file);
    l.byte = byte;
    l.tensor = std::move(tensor);
    return l;
  }
  static SourceLocation in_file(std::string file) {
    SourceLocation l;
    l.file = std::move(file);
    return l;
  }

  // "file:12", "file: tensor 'w': byte 128", "file"
  std::string describe() const;
};

// A problem with user-supplied input: malformed, inconsistent or unsupported content.
class InputError : public std::runtime_error {
 public:
  InputError(SourceLocation where, const std::string& message);
  const SourceLocation& where() const noexcept { return where_; }
  const std::string& message() const noexcept { return message_; }

 private:
  SourceLocation where_;
  std::string message_;
};

// A problem with the way a library function was called (bad argument combination).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_at_line(const std::string& file, std::int64_t line, const std::string& message);
[[noreturn]] void throw_at_byte(const std::string& file, std::int64_t byte, const std::string& message,
                                const std::string& tensor = {});
[[noreturn]] void throw_in_file(const std::string& file, const std::string& message);

}  // namespace sparsecc
