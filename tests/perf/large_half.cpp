// Large half-precision layers for measuring the input path (a program, not a test):
//
//   sparsecc_large_half write FILE ROWS COLS ZERO_FRACTION [f16|bf16] [SEED]
//       FILE ending in .safetensors (one tensor "weight"), .npz (one stored member "weight.npy") or
//       .deflated.npz (deflated); f16 only for .npz (NumPy has no bfloat16). Written streaming, row by
//       row: the program never holds the matrix.
//   sparsecc_large_half write-model FILE.safetensors LAYERS ROWS COLS ZERO_FRACTION [f16|bf16]
//       A model: LAYERS tensors "layers.<i>.weight" (for `sparsecc compile-model FILE --list`).
//   sparsecc_large_half load SPEC
//       load_matrix(SPEC) as `sparsecc compile` reads it: prints the seconds, the shape and the
//       nonzeros. Run it under `/usr/bin/time -v` for the peak memory.
//
// The measurement of issue 47 (a 50 M-nonzero layer):
//   sparsecc_large_half write /tmp/l.safetensors 8192 28672 0.787
//   /usr/bin/time -v sparsecc_large_half load /tmp/l.safetensors
#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "sparsecc/common/dtype.hpp"
#include "sparsecc/io/load.hpp"

namespace {

using sparsecc::DType;

struct Closer {
  void operator()(std::FILE* f) const {
    if (f) std::fclose(f);
  }
};
using File = std::unique_ptr<std::FILE, Closer>;

void put(std::FILE* f, const void* p, std::size_t n) {
  if (n > 0 && std::fwrite(p, 1, n, f) != n) throw std::runtime_error("write failed");
}

void put_le(std::vector<unsigned char>& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
}

// The rows of the matrix as little-endian half bits: each entry zero with probability `zeros`,
// otherwise one of 4096 nonzero values drawn uniformly from [-1, 1) (random per row, as Wanda-style
// pruning leaves it).
class RowSource {
 public:
  RowSource(std::int64_t cols, double zeros, DType dtype, std::uint64_t seed)
      : row_(static_cast<std::size_t>(cols) * 2), state_(seed * 0x9E3779B97F4A7C15ull + 1) {
    threshold_ = static_cast<std::uint64_t>(zeros * 18446744073709551616.0);
    if (zeros >= 1.0) threshold_ = ~std::uint64_t{0};
    for (auto& v : table_) {
      std::uint16_t bits = 0;
      while ((bits & 0x7fff) == 0) {
        const double x = static_cast<double>(next() >> 11) / 9007199254740992.0 * 2.0 - 1.0;
        bits = dtype == DType::f16 ? sparsecc::double_to_half_bits(x) : sparsecc::double_to_bf16_bits(x);
      }
      v = bits;
    }
  }
  const std::vector<unsigned char>& next_row() {
    for (std::size_t c = 0; c < row_.size(); c += 2) {
      const std::uint64_t r = next();
      const std::uint16_t bits = r < threshold_ ? 0 : table_[r & 4095];
      row_[c] = static_cast<unsigned char>(bits);
      row_[c + 1] = static_cast<unsigned char>(bits >> 8);
      nnz_ += bits != 0;
    }
    return row_;
  }
  std::int64_t nnz() const { return nnz_; }

 private:
  std::uint64_t next() {  // splitmix64
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::vector<unsigned char> row_;
  std::uint64_t state_;
  std::uint64_t threshold_ = 0;
  std::uint16_t table_[4096];
  std::int64_t nnz_ = 0;
};

// `layers` tensors "layers.<i>.weight" of rows x cols (one tensor "weight" when layers is 0).
std::int64_t write_safetensors(const std::string& path, std::int64_t rows, std::int64_t cols, double zeros,
                               DType dtype, std::uint64_t seed, int layers = 0) {
  const std::uint64_t bytes = static_cast<std::uint64_t>(rows * cols) * 2;
  std::string header = "{";
  for (int i = 0; i < std::max(layers, 1); ++i)
    header += fmt::format(R"({}"{}":{{"dtype":"{}","shape":[{},{}],"data_offsets":[{},{}]}})", i ? "," : "",
                          layers ? fmt::format("layers.{}.weight", i) : std::string("weight"),
                          dtype == DType::f16 ? "F16" : "BF16", rows, cols, bytes * i, bytes * (i + 1));
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  File f(std::fopen(path.c_str(), "wb"));
  if (!f) throw std::runtime_error("cannot open " + path);
  std::vector<unsigned char> prefix;
  put_le(prefix, header.size(), 8);
  put(f.get(), prefix.data(), prefix.size());
  put(f.get(), header.data(), header.size());
  RowSource src(cols, zeros, dtype, seed);
  for (std::int64_t r = 0; r < rows * std::max(layers, 1); ++r) {
    const auto& row = src.next_row();
    put(f.get(), row.data(), row.size());
  }
  return src.nnz();
}

// A zip of one member "weight.npy" (stored or deflated; sizes below 4 GiB, no zip64), the local
// header's CRC and sizes patched after the data.
std::int64_t write_npz(const std::string& path, std::int64_t rows, std::int64_t cols, double zeros,
                       std::uint64_t seed, bool deflated) {
  std::string npy_header =
      fmt::format("{{'descr': '<f2', 'fortran_order': False, 'shape': ({}, {}), }}", rows, cols);
  npy_header.append(63 - (10 + npy_header.size()) % 64, ' ');
  npy_header.push_back('\n');
  std::vector<unsigned char> npy_prefix = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  put_le(npy_prefix, npy_header.size(), 2);
  npy_prefix.insert(npy_prefix.end(), npy_header.begin(), npy_header.end());
  const std::uint64_t size = npy_prefix.size() + static_cast<std::uint64_t>(rows * cols) * 2;
  if (size >= 0xFFFFFFFFull) throw std::runtime_error("member too large for a zip without zip64");

  const std::string name = "weight.npy";
  const std::uint16_t method = deflated ? 8 : 0;
  std::vector<unsigned char> local;
  put_le(local, 0x04034b50, 4);
  put_le(local, 20, 2);  // version needed
  put_le(local, 0, 2);   // flags
  put_le(local, method, 2);
  put_le(local, 0, 2);       // time
  put_le(local, 0x2821, 2);  // date: 2000-01-01
  const std::size_t crc_at = local.size();
  put_le(local, 0, 4);  // crc, patched
  put_le(local, 0, 4);  // compressed size, patched
  put_le(local, 0, 4);  // size, patched
  put_le(local, name.size(), 2);
  put_le(local, 0, 2);
  local.insert(local.end(), name.begin(), name.end());

  File f(std::fopen(path.c_str(), "wb"));
  if (!f) throw std::runtime_error("cannot open " + path);
  put(f.get(), local.data(), local.size());
  uLong crc = crc32(0, nullptr, 0);
  std::uint64_t compressed = 0;
  z_stream z{};
  std::vector<unsigned char> out(1 << 20);
  if (deflated && deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2 failed");
  auto emit = [&](const unsigned char* p, std::size_t n, bool last) {
    crc = crc32(crc, p, static_cast<uInt>(n));
    if (!deflated) {
      put(f.get(), p, n);
      compressed += n;
      return;
    }
    z.next_in = const_cast<unsigned char*>(p);
    z.avail_in = static_cast<uInt>(n);
    do {
      z.next_out = out.data();
      z.avail_out = static_cast<uInt>(out.size());
      deflate(&z, last ? Z_FINISH : Z_NO_FLUSH);
      const std::size_t got = out.size() - z.avail_out;
      put(f.get(), out.data(), got);
      compressed += got;
    } while (z.avail_out == 0);
  };
  emit(npy_prefix.data(), npy_prefix.size(), false);
  RowSource src(cols, zeros, DType::f16, seed);
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto& row = src.next_row();
    emit(row.data(), row.size(), r + 1 == rows);
  }
  if (rows == 0) emit(nullptr, 0, true);
  if (deflated) deflateEnd(&z);
  if (compressed >= 0xFFFFFFFFull)
    throw std::runtime_error("compressed member too large for a zip without zip64");

  std::vector<unsigned char> sizes;
  put_le(sizes, crc, 4);
  put_le(sizes, compressed, 4);
  put_le(sizes, size, 4);
  std::vector<unsigned char> central;
  put_le(central, 0x02014b50, 4);
  put_le(central, 20, 2);  // version made by
  put_le(central, 20, 2);  // version needed
  put_le(central, 0, 2);
  put_le(central, method, 2);
  put_le(central, 0, 2);
  put_le(central, 0x2821, 2);
  central.insert(central.end(), sizes.begin(), sizes.end());
  put_le(central, name.size(), 2);
  put_le(central, 0, 2);  // extra
  put_le(central, 0, 2);  // comment
  put_le(central, 0, 2);  // disk
  put_le(central, 0, 2);  // internal attributes
  put_le(central, 0, 4);  // external attributes
  put_le(central, 0, 4);  // local header offset
  central.insert(central.end(), name.begin(), name.end());
  const std::uint64_t central_at = local.size() + compressed;
  std::vector<unsigned char> end;
  put_le(end, 0x06054b50, 4);
  put_le(end, 0, 4);
  put_le(end, 1, 2);
  put_le(end, 1, 2);
  put_le(end, central.size(), 4);
  put_le(end, central_at, 4);
  put_le(end, 0, 2);
  put(f.get(), central.data(), central.size());
  put(f.get(), end.data(), end.size());
  if (std::fseek(f.get(), static_cast<long>(crc_at), SEEK_SET) != 0) throw std::runtime_error("seek failed");
  put(f.get(), sizes.data(), sizes.size());
  return src.nnz();
}

int usage() {
  std::fprintf(
      stderr,
      "usage: sparsecc_large_half write FILE ROWS COLS ZERO_FRACTION [f16|bf16] [SEED]\n"
      "       sparsecc_large_half write-model FILE.safetensors LAYERS ROWS COLS ZERO_FRACTION [f16|bf16]\n"
      "       sparsecc_large_half load SPEC\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 3) return usage();
    const std::string cmd = argv[1], path = argv[2];
    if (cmd == "write" && argc >= 6) {
      const std::int64_t rows = std::stoll(argv[3]), cols = std::stoll(argv[4]);
      const double zeros = std::stod(argv[5]);
      const DType dtype =
          argc > 6 ? sparsecc::require_dtype(argv[6], "dtype", {DType::f16, DType::bf16}) : DType::f16;
      const std::uint64_t seed = argc > 7 ? std::stoull(argv[7]) : 1;
      std::int64_t nnz = 0;
      if (path.ends_with(".safetensors")) {
        nnz = write_safetensors(path, rows, cols, zeros, dtype, seed);
      } else if (path.ends_with(".npz")) {
        if (dtype != DType::f16) throw std::runtime_error(".npz holds f16 only (NumPy has no bfloat16)");
        nnz = write_npz(path, rows, cols, zeros, seed, path.ends_with(".deflated.npz"));
      } else {
        return usage();
      }
      std::printf("%s: %lld x %lld %s, %lld nonzeros\n", path.c_str(), static_cast<long long>(rows),
                  static_cast<long long>(cols), std::string(sparsecc::dtype_name(dtype)).c_str(),
                  static_cast<long long>(nnz));
      return 0;
    }
    if (cmd == "write-model" && argc >= 7) {
      const int layers = std::stoi(argv[3]);
      const std::int64_t rows = std::stoll(argv[4]), cols = std::stoll(argv[5]);
      const DType dtype =
          argc > 7 ? sparsecc::require_dtype(argv[7], "dtype", {DType::f16, DType::bf16}) : DType::f16;
      if (layers < 1 || !path.ends_with(".safetensors")) return usage();
      const std::int64_t nnz = write_safetensors(path, rows, cols, std::stod(argv[6]), dtype, 1, layers);
      std::printf("%s: %d layers of %lld x %lld, %lld nonzeros\n", path.c_str(), layers,
                  static_cast<long long>(rows), static_cast<long long>(cols), static_cast<long long>(nnz));
      return 0;
    }
    if (cmd == "load") {
      const auto t0 = std::chrono::steady_clock::now();
      const sparsecc::CsrMatrix a = sparsecc::load_matrix(path);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("%s: %lld x %lld %s, %lld nonzeros, read in %.2f s\n", path.c_str(),
                  static_cast<long long>(a.rows), static_cast<long long>(a.cols),
                  std::string(sparsecc::dtype_name(a.source_dtype)).c_str(), static_cast<long long>(a.nnz()),
                  s);
      return 0;
    }
    return usage();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparsecc_large_half: %s\n", e.what());
    return 2;
  }
}
