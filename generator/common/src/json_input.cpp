#include "sparsecc/common/json_input.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include "sparsecc/common/error.hpp"

namespace sparsecc {

void check_json_input(std::string_view text, const std::string& file, std::uint64_t max_bytes,
                      std::string_view what, std::int64_t base) {
  if (text.size() > max_bytes)
    throw_at_byte(file, base,
                  fmt::format("{} is {} bytes, over the {} byte limit", what, text.size(), max_bytes));
  // Brackets outside strings, as nlohmann's lexer sees them: up to the first syntax error the two
  // agree, and the parser stops there, so it never nests deeper than counted here.
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        throw_at_byte(file, base + static_cast<std::int64_t>(i),
                      fmt::format("{} nests arrays and objects deeper than {} levels", what, kMaxJsonDepth));
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

std::string json_error_message(const char* what) {
  std::string s = what;
  if (!s.empty() && s.front() == '[') {
    const auto end = s.find("] ");
    if (end != std::string::npos) s.erase(0, end + 2);
  }
  return s;
}

nlohmann::json parse_json_input(std::string_view text, const std::string& file, std::uint64_t max_bytes,
                                std::string_view what, std::int64_t base) {
  check_json_input(text, file, max_bytes, what, base);
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    throw_at_byte(file, base + static_cast<std::int64_t>(e.byte > 0 ? e.byte - 1 : 0),
                  fmt::format("not valid JSON: {}", json_error_message(e.what())));
  } catch (const nlohmann::json::exception& e) {  // e.g. a number too large for a double
    throw_at_byte(file, base, fmt::format("not valid JSON: {}", json_error_message(e.what())));
  }
}

Bytes read_json_bytes(const std::string& path, std::uint64_t max_bytes, std::string_view what) {
  const auto too_large = [&](std::uint64_t size) {
    throw_at_byte(path, 0, fmt::format("{} is {} bytes, over the {} byte limit", what, size, max_bytes));
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
      static_cast<std::uint64_t>(st.st_size) > max_bytes)
    too_large(static_cast<std::uint64_t>(st.st_size));
  Bytes bytes = read_file(path);
  if (bytes.size() > max_bytes) too_large(bytes.size());
  return bytes;
}

nlohmann::json read_json_file(const std::string& path, std::uint64_t max_bytes, std::string_view what) {
  const Bytes bytes = read_json_bytes(path, max_bytes, what);
  return parse_json_input(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path,
                          max_bytes, what);
}

}  // namespace sparsecc
