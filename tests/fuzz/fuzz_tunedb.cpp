// libFuzzer target for the tuning-database reader (sparsecc/tune/database.hpp): any input either
// reads or raises InputError, and what reads writes back to text that reads back to the same text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "sparsecc/common/error.hpp"
#include "sparsecc/tune/database.hpp"

namespace {

std::string text_of(const sparsecc::tune::TuningDatabase& db) {
  return sparsecc::tune::to_json(db).dump(1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sparsecc::tune::TuningDatabase db;
  try {
    db = sparsecc::tune::parse_database(std::string_view(reinterpret_cast<const char*>(data), size),
                                        "fuzz.json");
  } catch (const sparsecc::InputError&) {
    return 0;
  }
  const std::string text = text_of(db);
  if (text_of(sparsecc::tune::parse_database(text, "fuzz.json")) != text) __builtin_trap();
  return 0;
}
