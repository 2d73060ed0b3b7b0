// Writes a forged copy of a bundle for the CLI tests: one metadata value replaced (a JSON pointer and
// a JSON value) and the size and checksum recomputed, as a deliberate edit would be.
//   sparsecc_forge_bundle IN OUT POINTER VALUE     e.g.  small.sccb forged.sccb /m 2
#include "forge_bundle.hpp"

#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s IN OUT POINTER VALUE\n", argv[0]);
    return 2;
  }
  try {
    std::ifstream in(argv[1], std::ios::binary);
    const std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)),
                                           std::istreambuf_iterator<char>());
    const nlohmann::json::json_pointer at(argv[3]);
    const nlohmann::json value = nlohmann::json::parse(argv[4]);
    const auto forged = sparsecc::test::forge_bundle(bytes, [&](nlohmann::json& j) { j[at] = value; });
    std::ofstream out(argv[2], std::ios::binary);
    out.write(reinterpret_cast<const char*>(forged.data()), static_cast<std::streamsize>(forged.size()));
    return out ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
