// libFuzzer target for the DLMC .smtx reader: any input either parses into a valid CsrMatrix that
// survives a round trip through the writer, or raises InputError. Anything else is a finding.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "sparsecc/common/error.hpp"
#include "sparsecc/io/smtx.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sparsecc::CsrMatrix a;
  try {
    a = sparsecc::parse_smtx(std::span<const unsigned char>(data, size), "fuzz.smtx", 7);
  } catch (const sparsecc::InputError&) {
    return 0;
  }
  sparsecc::validate(a);
  for (const double v : a.values)
    if (v == 0.0 || v < -1.0 || v >= 1.0 || static_cast<double>(static_cast<float>(v)) != v) std::abort();
  const std::string text = sparsecc::format_smtx(a);
  const sparsecc::CsrMatrix b = sparsecc::parse_smtx(
      std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(text.data()), text.size()),
      "again.smtx", 7);
  if (b.rows != a.rows || b.cols != a.cols || b.row_ptr != a.row_ptr || b.col_idx != a.col_idx ||
      b.values != a.values)
    std::abort();
  return 0;
}
