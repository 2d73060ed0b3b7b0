#include "sparsecc/io/raw_tensor.hpp"

#include <fmt/format.h>

#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "sparsecc/common/error.hpp"
#include "sparsecc/io/npy.hpp"

namespace sparsecc {

static_assert(std::endian::native == std::endian::little, "the readers assume a little-endian host");

namespace {

// Every f16 bit pattern as a double: one table lookup per element instead of ldexp.
const std::array<double, 65536>& half_table() {
  static const auto table = [] {
    std::array<double, 65536> t{};
    for (std::uint32_t b = 0; b < 65536; ++b) t[b] = half_bits_to_double(static_cast<std::uint16_t>(b));
    return t;
  }();
  return table;
}

// The bits of one element type: what is a zero (either sign), what is NaN or Inf, and the value.
template <DType T>
struct Element;

template <>
struct Element<DType::f16> {
  using Bits = std::uint16_t;
  static bool zero(Bits b) { return (b & 0x7fffu) == 0; }
  static bool nonfinite(Bits b) { return (b & 0x7c00u) == 0x7c00u; }
  static double value(Bits b, const double* table) { return table[b]; }
};
template <>
struct Element<DType::bf16> {
  using Bits = std::uint16_t;
  static bool zero(Bits b) { return (b & 0x7fffu) == 0; }
  static bool nonfinite(Bits b) { return (b & 0x7f80u) == 0x7f80u; }
  static double value(Bits b, const double*) {
    return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16));
  }
};
template <>
struct Element<DType::f32> {
  using Bits = std::uint32_t;
  static bool zero(Bits b) { return (b & 0x7fffffffu) == 0; }
  static bool nonfinite(Bits b) { return (b & 0x7f800000u) == 0x7f800000u; }
  static double value(Bits b, const double*) { return static_cast<double>(std::bit_cast<float>(b)); }
};
template <>
struct Element<DType::f64> {
  using Bits = std::uint64_t;
  static bool zero(Bits b) { return (b & 0x7fffffffffffffffull) == 0; }
  static bool nonfinite(Bits b) { return (b & 0x7ff0000000000000ull) == 0x7ff0000000000000ull; }
  static double value(Bits b, const double*) { return std::bit_cast<double>(b); }
};

template <typename Bits>
Bits swap_bytes(Bits b) {
  if constexpr (sizeof(Bits) == 2)
    return __builtin_bswap16(b);
  else if constexpr (sizeof(Bits) == 4)
    return __builtin_bswap32(b);
  else
    return __builtin_bswap64(b);
}

template <DType T, bool Swap>
typename Element<T>::Bits load_bits(const unsigned char* base, std::int64_t index) {
  typename Element<T>::Bits b;
  std::memcpy(&b, base + static_cast<std::size_t>(index) * sizeof(b), sizeof(b));
  if constexpr (Swap) b = swap_bytes(b);
  return b;
}

// The message decode_tensor_data gives for the first NaN or Inf (flat C-order index, file byte).
[[noreturn]] void nonfinite_at(const RawTensor& t, const std::string& file, std::int64_t c_index,
                               std::int64_t file_index) {
  const std::size_t size = dtype_size(t.dtype);
  const unsigned char* p = t.data.data() + static_cast<std::size_t>(file_index) * size;
  unsigned char e[8];
  for (std::size_t i = 0; i < size; ++i) e[i] = t.big_endian ? p[size - 1 - i] : p[i];
  const double v = load_le(t.dtype, e);
  throw_at_byte(file, t.data_byte + file_index * static_cast<std::int64_t>(size),
                fmt::format("value at flat index {} is {} (non-finite weights are rejected)", c_index,
                            std::isnan(v) ? "NaN" : (v > 0 ? "+Inf" : "-Inf")),
                t.name);
}

// Throws for the first NaN or Inf in C order (the one decode_raw names), if there is one.
template <DType T, bool Swap>
void check_finite_bits(const RawTensor& t, const std::string& file) {
  const unsigned char* base = t.data.data();
  const auto n = static_cast<std::int64_t>(t.data.size() / sizeof(typename Element<T>::Bits));
  bool bad = false;
  for (std::int64_t i = 0; i < n; ++i) bad |= Element<T>::nonfinite(load_bits<T, Swap>(base, i));
  if (!bad) return;
  if (!t.fortran_order || t.shape.size() < 2) {
    for (std::int64_t i = 0; i < n; ++i)
      if (Element<T>::nonfinite(load_bits<T, Swap>(base, i))) nonfinite_at(t, file, i, i);
  }
  decode_tensor_data(t.dtype, t.data, t.shape, t.fortran_order, t.big_endian, file, t.data_byte, t.name);
  throw std::logic_error("check_finite_bits: the non-finite value was not found");
}

template <DType T>
void check_finite_dtype(const RawTensor& t, const std::string& file) {
  if (t.big_endian)
    check_finite_bits<T, true>(t, file);
  else
    check_finite_bits<T, false>(t, file);
}

// Calls tick(fraction) every few rows; turns the ticks into progress lines once a second has passed.
class Ticker {
 public:
  Ticker(const std::function<void(double)>& tick, std::int64_t rows) : tick_(tick), rows_(rows) {}
  void operator()(std::int64_t done_rows, double weight, double offset) const {
    if (tick_ && rows_ > 0 && (done_rows & 63) == 0)
      tick_(offset + weight * static_cast<double>(done_rows) / static_cast<double>(rows_));
  }

 private:
  const std::function<void(double)>& tick_;
  std::int64_t rows_;
};

// Two passes over the element bytes: count each row's nonzeros (and look for NaN and Inf), then fill the
// CSR sized exactly.
template <DType T, bool Swap>
CsrMatrix scan(const RawTensor& t, const std::string& file, std::int64_t rows, std::int64_t cols,
               const std::function<void(double)>& tick) {
  using E = Element<T>;
  const unsigned char* base = t.data.data();
  const double* table = T == DType::f16 ? half_table().data() : nullptr;
  const Ticker ticker(tick, t.fortran_order ? cols : rows);
  CsrMatrix a;
  a.rows = rows;
  a.cols = cols;
  a.source_dtype = t.dtype;
  a.row_ptr.assign(static_cast<std::size_t>(rows) + 1, 0);

  // Pass 1: counts (row_ptr[r + 1] holds row r's count until the prefix sum).
  bool bad = false;
  if (!t.fortran_order) {
    for (std::int64_t r = 0; r < rows; ++r) {
      std::int64_t count = 0;
      const std::int64_t row = r * cols;
      for (std::int64_t c = 0; c < cols; ++c) {
        const auto b = load_bits<T, Swap>(base, row + c);
        count += !E::zero(b);
        bad |= E::nonfinite(b);
      }
      if (bad) check_finite_bits<T, Swap>(t, file);
      a.row_ptr[static_cast<std::size_t>(r) + 1] = count;
      ticker(r, 0.4, 0.0);
    }
  } else {
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::int64_t col = c * rows;
      for (std::int64_t r = 0; r < rows; ++r) {
        const auto b = load_bits<T, Swap>(base, col + r);
        a.row_ptr[static_cast<std::size_t>(r) + 1] += !E::zero(b);
        bad |= E::nonfinite(b);
      }
      if (bad) check_finite_bits<T, Swap>(t, file);
      ticker(c, 0.4, 0.0);
    }
  }
  for (std::size_t r = 1; r < a.row_ptr.size(); ++r) a.row_ptr[r] += a.row_ptr[r - 1];
  const auto nnz = static_cast<std::size_t>(a.row_ptr.back());

  // Pass 2: columns and values. In C order every element is written at the cursor, which moves past
  // the nonzeros only (no branch per element); one slot of slack takes the writes after the last one.
  if (!t.fortran_order) {
    resize_huge(a.col_idx, nnz + 1);
    resize_huge(a.values, nnz + 1);
    std::int32_t* col_idx = a.col_idx.data();
    double* values = a.values.data();
    std::size_t k = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t row = r * cols;
      for (std::int64_t c = 0; c < cols; ++c) {
        const auto b = load_bits<T, Swap>(base, row + c);
        col_idx[k] = static_cast<std::int32_t>(c);
        values[k] = E::value(b, table);
        k += !E::zero(b);
      }
      ticker(r, 0.6, 0.4);
    }
    a.col_idx.resize(nnz);
    a.values.resize(nnz);
  } else {
    resize_huge(a.col_idx, nnz);
    resize_huge(a.values, nnz);
    std::vector<std::int64_t> cursor(a.row_ptr.begin(), a.row_ptr.end() - 1);
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::int64_t col = c * rows;
      for (std::int64_t r = 0; r < rows; ++r) {
        const auto b = load_bits<T, Swap>(base, col + r);
        if (E::zero(b)) continue;
        const auto k = static_cast<std::size_t>(cursor[static_cast<std::size_t>(r)]++);
        a.col_idx[k] = static_cast<std::int32_t>(c);
        a.values[k] = E::value(b, table);
      }
      ticker(c, 0.6, 0.4);
    }
  }
  return a;
}

template <DType T>
CsrMatrix scan_dtype(const RawTensor& t, const std::string& file, std::int64_t rows, std::int64_t cols,
                     const std::function<void(double)>& tick) {
  return t.big_endian ? scan<T, true>(t, file, rows, cols, tick) : scan<T, false>(t, file, rows, cols, tick);
}

void check_shape(const RawTensor& t, const std::string& file) {
  if (!t.unread_dtype.empty())
    throw_at_byte(file, -1,
                  fmt::format("dtype {} is not read (expected a floating-point tensor)", t.unread_dtype),
                  t.name);
  const std::int64_t numel = checked_numel(t.shape, file, t.data_byte, t.name);
  if (static_cast<std::uint64_t>(numel) * dtype_size(t.dtype) != t.data.size())
    throw std::logic_error(
        fmt::format("raw tensor '{}': {} bytes for shape {}", t.name, t.data.size(), shape_string(t.shape)));
}

}  // namespace

std::int64_t RawTensor::numel() const {
  std::int64_t n = 1;
  for (auto s : shape)
    if (s < 0 || __builtin_mul_overflow(n, s, &n)) return -1;
  return n;
}

ProgressClock::ProgressClock(ReadProgress sink, std::string step)
    : sink_(std::move(sink)), step_(std::move(step)), start_(std::chrono::steady_clock::now()) {}

ProgressClock::~ProgressClock() { finish(); }

void ProgressClock::at(double fraction) {
  if (!sink_ || finished_ || fraction <= 0.0) return;
  const auto now = std::chrono::steady_clock::now();
  if (!ticking_) {  // the pace is measured from the first fraction (the file read before it is not one)
    ticking_ = true;
    first_fraction_ = fraction;
    first_tick_ = now;
  }
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double pace_seconds = std::chrono::duration<double>(now - first_tick_).count();
  const double pace_fraction = fraction - first_fraction_;
  if (pace_fraction < 0.01 || fraction >= 1.0) return;  // too little done to extrapolate
  const double left = pace_seconds * (1.0 - fraction) / pace_fraction;
  if (!started_) {
    if (elapsed < 1.0) return;
    started_ = true;
    sink_(step_, 0.0, left);
    return;
  }
  sink_(step_, fraction, left);
}

void ProgressClock::finish() {
  if (!sink_ || finished_) return;
  finished_ = true;
  if (started_) sink_(step_, 1.0, 0.0);
}

std::shared_ptr<const Bytes> read_shared_input(const std::string& path, std::uint64_t* file_bytes) {
  std::uint64_t size = 0;
  auto bytes = std::make_shared<const Bytes>(read_input(path, size));
  if (file_bytes) *file_bytes = size;
  return bytes;
}

Tensor decode_raw(const RawTensor& t, const std::string& file, bool keep_nonfinite) {
  Tensor out;
  out.name = t.name;
  out.dtype = t.dtype;
  out.shape = t.shape;
  out.unread_dtype = t.unread_dtype;
  if (!t.unread_dtype.empty()) return out;
  out.data = decode_tensor_data(t.dtype, t.data, t.shape, t.fortran_order, t.big_endian, file, t.data_byte,
                                t.name, keep_nonfinite);
  return out;
}

CsrMatrix csr_from_raw(const RawTensor& t, const std::string& file, const std::function<void(double)>& tick) {
  check_shape(t, file);
  if (t.shape.size() != 2)
    throw_at_byte(file, -1,
                  fmt::format("shape {} is not a matrix (2 dimensions needed)", shape_string(t.shape)),
                  t.name);
  const std::int64_t rows = t.shape[0], cols = t.shape[1];
  if (cols > std::numeric_limits<std::int32_t>::max())
    throw_at_byte(file, -1, fmt::format("shape {}: too many columns", shape_string(t.shape)), t.name);
  switch (t.dtype) {
    case DType::f16:
      return scan_dtype<DType::f16>(t, file, rows, cols, tick);
    case DType::bf16:
      return scan_dtype<DType::bf16>(t, file, rows, cols, tick);
    case DType::f32:
      return scan_dtype<DType::f32>(t, file, rows, cols, tick);
    case DType::f64:
      return scan_dtype<DType::f64>(t, file, rows, cols, tick);
  }
  throw std::logic_error("csr_from_raw: unknown dtype");
}

void check_raw_finite(const RawTensor& t, const std::string& file) {
  check_shape(t, file);
  switch (t.dtype) {
    case DType::f16:
      return check_finite_dtype<DType::f16>(t, file);
    case DType::bf16:
      return check_finite_dtype<DType::bf16>(t, file);
    case DType::f32:
      return check_finite_dtype<DType::f32>(t, file);
    case DType::f64:
      return check_finite_dtype<DType::f64>(t, file);
  }
}

}  // namespace sparsecc
