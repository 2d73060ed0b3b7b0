#include "sparsecc/io/npy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <string_view>

#include "sparsecc/common/error.hpp"
#include "sparsecc/io/raw_tensor.hpp"

namespace sparsecc {

namespace {

constexpr unsigned char kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

// Calls fn(c_index, fortran_index) for every element of a tensor of `shape`, in C order.
template <typename Fn>
void for_each_fortran_offset(const std::vector<std::int64_t>& shape, std::int64_t numel, Fn fn) {
  if (numel == 0) return;  // strides of an empty tensor may overflow
  const std::size_t r = shape.size();
  std::vector<std::int64_t> stride(r, 1), idx(r, 0);
  for (std::size_t k = 1; k < r; ++k) stride[k] = stride[k - 1] * shape[k - 1];
  std::int64_t off = 0;
  for (std::int64_t i = 0; i < numel; ++i) {
    fn(i, off);
    for (std::size_t k = r; k-- > 0;) {
      if (++idx[k] < shape[k]) {
        off += stride[k];
        break;
      }
      off -= stride[k] * (shape[k] - 1);
      idx[k] = 0;
    }
  }
}

struct NpyHeader {
  DType dtype = DType::f32;
  std::string unread;            // a dtype kept unread (parse_npy's keep_unread), else empty
  std::int64_t unread_size = 0;  // its bytes per element
  bool big_endian = false;
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
};

// Strict parser for the Python dict literal NumPy writes:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (64, 32), }
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& file, std::int64_t base, const std::string& tensor,
               bool keep_unread)
      : s_(text), file_(file), base_(base), tensor_(tensor), keep_unread_(keep_unread) {}

  NpyHeader parse() {
    NpyHeader h;
    bool have_descr = false, have_order = false, have_shape = false;
    skip_ws();
    expect('{', "header must be a dict literal starting with '{'");
    for (;;) {
      skip_ws();
      if (eat('}')) break;
      const std::size_t key_at = pos_;
      const std::string key = parse_string();
      skip_ws();
      expect(':', "expected ':' after a header key");
      skip_ws();
      if (key == "descr") {
        mark(have_descr, key, key_at);
        parse_descr(h);
      } else if (key == "fortran_order") {
        mark(have_order, key, key_at);
        h.fortran_order = parse_bool();
      } else if (key == "shape") {
        mark(have_shape, key, key_at);
        h.shape = parse_shape();
      } else {
        fail_at(key_at,
                fmt::format("unexpected header key '{}' (expected descr, fortran_order, shape)", key));
      }
      skip_ws();
      if (eat(',')) continue;
      expect('}', "expected ',' or '}' in the header dict");
      break;
    }
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected text after the header dict");
    if (!have_descr) fail("header lacks 'descr'");
    if (!have_order) fail("header lacks 'fortran_order'");
    if (!have_shape) fail("header lacks 'shape'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const { fail_at(pos_, msg); }
  [[noreturn]] void fail_at(std::size_t at, const std::string& msg) const {
    throw_at_byte(file_, base_ + static_cast<std::int64_t>(at), "npy header: " + msg, tensor_);
  }
  void mark(bool& seen, const std::string& key, std::size_t at) const {
    if (seen) fail_at(at, fmt::format("duplicate header key '{}'", key));
    seen = true;
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c, const char* msg) {
    if (!eat(c)) fail(msg);
  }
  bool starts_with(std::string_view w) const { return s_.substr(pos_).starts_with(w); }

  std::string parse_string() {
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) fail("expected a quoted string");
    const char q = s_[pos_++];
    const std::size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != q) {
      if (s_[pos_] == '\\' || s_[pos_] == '\n')
        fail("escapes and newlines are not supported in header strings");
      ++pos_;
    }
    if (pos_ >= s_.size()) fail_at(start - 1, "unterminated string");
    return std::string(s_.substr(start, pos_++ - start));
  }

  bool parse_bool() {
    if (starts_with("True")) {
      pos_ += 4;
      return true;
    }
    if (starts_with("False")) {
      pos_ += 5;
      return false;
    }
    fail("fortran_order must be True or False");
  }

  void parse_descr(NpyHeader& h) {
    if (pos_ < s_.size() && s_[pos_] == '[')
      fail("unsupported dtype: structured arrays (expected float16, float32 or float64)");
    const std::size_t at = pos_;
    const std::string d = parse_string();
    const std::string_view order = "<>=|";
    if (d.size() == 3 && order.find(d[0]) != std::string_view::npos && d[1] == 'f') {
      h.big_endian = d[0] == '>';
      if (d[2] == '2')
        h.dtype = DType::f16;
      else if (d[2] == '4')
        h.dtype = DType::f32;
      else if (d[2] == '8')
        h.dtype = DType::f64;
      else if (!keep_unread(h, d))
        fail_at(at, fmt::format("unsupported dtype '{}' (expected float16, float32 or float64)", d));
      return;
    }
    if (!keep_unread(h, d))
      fail_at(at, fmt::format("unsupported dtype '{}' (expected float16, float32 or float64)", d));
  }

  // A NumPy dtype other than float16/32/64, kept unread when asked: fixed-size ones ("<i8", "|b1",
  // "<c8", "<U10", "|S4", "<f16", datetimes "<M8[ns]" and timedeltas "<m8[s]") with their element
  // size, so that the data size can still be checked; object arrays ("|O"), whose data is a pickle
  // of unknown length, with size -1 (never unpickled, not checked).
  bool keep_unread(NpyHeader& h, const std::string& d) const {
    if (!keep_unread_ || d.size() < 2 || std::string_view("<>|=").find(d[0]) == std::string_view::npos)
      return false;
    if (d[1] == 'O' && (d.size() == 2 || d.substr(2) == "8")) {
      h.unread = d;
      h.unread_size = -1;
      return true;
    }
    if (std::string_view("biucfUSMm").find(d[1]) == std::string_view::npos) return false;
    std::string_view width = std::string_view(d).substr(2);
    // A datetime's or timedelta's unit: "[ns]", "[D]", "[25s]".
    if ((d[1] == 'M' || d[1] == 'm') && !width.empty() && width.back() == ']') {
      const std::size_t open = width.find('[');
      if (open == std::string_view::npos || open + 2 >= width.size()) return false;
      for (const char c : width.substr(open + 1, width.size() - open - 2))
        if (!std::isalnum(static_cast<unsigned char>(c))) return false;
      width = width.substr(0, open);
    }
    if (width.empty()) return false;
    std::int64_t n = 0;
    for (const char c : width) {
      if (c < '0' || c > '9' || n > 1'000'000) return false;
      n = n * 10 + (c - '0');
    }
    if (n < 1) return false;
    h.unread = d;
    h.unread_size = d[1] == 'U' ? 4 * n : n;
    return true;
  }

  std::int64_t parse_int() {
    const std::size_t start = pos_;
    std::int64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      v = v * 10 + (s_[pos_++] - '0');
      if (v > kMaxTensorDim) fail_at(start, fmt::format("dimension exceeds the limit of {}", kMaxTensorDim));
    }
    if (pos_ == start) fail("expected a non-negative integer dimension");
    eat('L');  // Python 2 long literals, written by old NumPy
    return v;
  }

  std::vector<std::int64_t> parse_shape() {
    expect('(', "shape must be a tuple");
    std::vector<std::int64_t> shape;
    skip_ws();
    if (eat(')')) return shape;
    for (;;) {
      skip_ws();
      if (shape.size() == kMaxTensorRank)
        fail(fmt::format("more than {} dimensions are not supported", kMaxTensorRank));
      shape.push_back(parse_int());
      skip_ws();
      const bool comma = eat(',');
      skip_ws();
      if (eat(')')) {
        if (shape.size() == 1 && !comma) fail("a 1-element shape needs a trailing comma: (n,)");
        return shape;
      }
      if (!comma) fail("expected ',' or ')' in the shape tuple");
    }
  }

  std::string_view s_;
  const std::string& file_;
  std::int64_t base_;
  const std::string& tensor_;
  bool keep_unread_ = false;
  std::size_t pos_ = 0;
};

std::uint32_t read_u32le(const unsigned char* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

}  // namespace

std::string shape_string(const std::vector<std::int64_t>& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

std::int64_t checked_numel(const std::vector<std::int64_t>& shape, const std::string& file, std::int64_t byte,
                           const std::string& tensor) {
  if (shape.size() > kMaxTensorRank)
    throw_at_byte(file, byte,
                  fmt::format("{} dimensions; at most {} are supported", shape.size(), kMaxTensorRank),
                  tensor);
  for (auto d : shape)
    if (d < 0 || d > kMaxTensorDim)
      throw_at_byte(file, byte, fmt::format("dimension {} out of range [0, {}]", d, kMaxTensorDim), tensor);
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;  // empty, however large the rest
  std::int64_t n = 1;
  for (auto d : shape) {
    if (__builtin_mul_overflow(n, d, &n))
      throw_at_byte(file, byte, fmt::format("shape {} has too many elements", shape_string(shape)), tensor);
  }
  return n;
}

std::vector<double> decode_tensor_data(DType t, std::span<const unsigned char> data,
                                       const std::vector<std::int64_t>& shape, bool fortran_order,
                                       bool big_endian, const std::string& file, std::int64_t data_byte,
                                       const std::string& tensor, bool keep_nonfinite) {
  const std::size_t size = dtype_size(t);
  const std::int64_t numel = static_cast<std::int64_t>(data.size() / size);
  std::vector<double> out(static_cast<std::size_t>(numel));
  auto load = [&](std::int64_t c_index, std::int64_t file_index) {
    const unsigned char* p = data.data() + static_cast<std::size_t>(file_index) * size;
    unsigned char swapped[8];
    if (big_endian) {
      std::reverse_copy(p, p + size, swapped);
      p = swapped;
    }
    const double v = load_le(t, p);
    if (!keep_nonfinite && !std::isfinite(v))
      throw_at_byte(file, data_byte + file_index * static_cast<std::int64_t>(size),
                    fmt::format("value at flat index {} is {} (non-finite weights are rejected)", c_index,
                                std::isnan(v) ? "NaN" : (v > 0 ? "+Inf" : "-Inf")),
                    tensor);
    out[static_cast<std::size_t>(c_index)] = v;
  };
  if (fortran_order && shape.size() > 1) {
    for_each_fortran_offset(shape, numel, load);
  } else {
    for (std::int64_t i = 0; i < numel; ++i) load(i, i);
  }
  return out;
}

void check_writable(const Tensor& t) {
  if (t.shape.size() > kMaxTensorRank)
    throw UsageError(fmt::format("tensor '{}': {} dimensions; at most {} are supported", t.name,
                                 t.shape.size(), kMaxTensorRank));
  const bool empty = std::find(t.shape.begin(), t.shape.end(), 0) != t.shape.end();
  std::int64_t n = empty ? 0 : 1;
  for (auto d : t.shape) {
    if (d < 0 || d > kMaxTensorDim || (!empty && __builtin_mul_overflow(n, d, &n)))
      throw UsageError(fmt::format("tensor '{}': invalid shape {}", t.name, shape_string(t.shape)));
  }
  if (static_cast<std::uint64_t>(n) != t.data.size())
    throw UsageError(fmt::format("tensor '{}': shape {} needs {} values, data has {}", t.name,
                                 shape_string(t.shape), n, t.data.size()));
  unsigned char buf[8];
  for (std::size_t i = 0; i < t.data.size(); ++i) {
    store_le(t.dtype, t.data[i], buf);
    if (!std::isfinite(load_le(t.dtype, buf)))
      throw UsageError(fmt::format("tensor '{}': value {} at flat index {} is not a finite {}", t.name,
                                   t.data[i], i, dtype_name(t.dtype)));
  }
}

RawTensor parse_npy_raw(std::shared_ptr<const Bytes> storage, std::span<const unsigned char> d,
                        const std::string& file, const std::string& tensor, bool keep_unread) {
  const std::string name = tensor.empty() ? tensor_name_from_path(file) : tensor;
  const std::int64_t size = static_cast<std::int64_t>(d.size());
  if (d.size() < 6 || !std::equal(kMagic, kMagic + 6, d.begin()))
    throw_at_byte(file, 0, "not a .npy file (missing the \\x93NUMPY magic)", name);
  if (d.size() < 8) throw_at_byte(file, size, "truncated .npy header", name);
  const int major = d[6], minor = d[7];
  if (major < 1 || major > 3 || minor != 0)
    throw_at_byte(file, 6,
                  fmt::format("unsupported .npy version {}.{} (expected 1.0, 2.0 or 3.0)", major, minor),
                  name);
  const std::size_t prefix = major == 1 ? 10 : 12;
  if (d.size() < prefix) throw_at_byte(file, size, "truncated .npy header", name);
  const std::uint64_t header_len = major == 1 ? (d[8] | (d[9] << 8)) : read_u32le(d.data() + 8);
  if (header_len > d.size() - prefix)
    throw_at_byte(
        file, 8,
        fmt::format("header length {} exceeds the {} bytes present after it", header_len, d.size() - prefix),
        name);
  const std::string_view text(reinterpret_cast<const char*>(d.data() + prefix), header_len);
  const NpyHeader h = HeaderParser(text, file, static_cast<std::int64_t>(prefix), name, keep_unread).parse();

  const std::int64_t data_byte = static_cast<std::int64_t>(prefix + header_len);
  const std::int64_t numel = checked_numel(h.shape, file, data_byte, name);
  RawTensor t;
  t.name = name;
  t.shape = h.shape;
  t.data_byte = data_byte;
  if (h.unread_size < 0) {  // an object array: its pickle is left alone
    t.unread_dtype = h.unread;
    return t;
  }
  std::int64_t nbytes = 0;
  const std::int64_t element =
      h.unread.empty() ? static_cast<std::int64_t>(dtype_size(h.dtype)) : h.unread_size;
  if (__builtin_mul_overflow(numel, element, &nbytes))
    throw_at_byte(file, data_byte, fmt::format("shape {} is too large", shape_string(h.shape)), name);
  const std::int64_t present = size - data_byte;
  if (nbytes > present)
    throw_at_byte(
        file, data_byte,
        fmt::format("shape {} needs {} bytes of data, {} present", shape_string(h.shape), nbytes, present),
        name);
  if (nbytes < present)
    throw_at_byte(file, data_byte + nbytes,
                  fmt::format("{} unexpected bytes after the data of shape {}", present - nbytes,
                              shape_string(h.shape)),
                  name);
  t.dtype = h.dtype;
  if (!h.unread.empty()) {
    t.unread_dtype = h.unread;
    return t;
  }
  t.fortran_order = h.fortran_order;
  t.big_endian = h.big_endian;
  t.data = d.subspan(static_cast<std::size_t>(data_byte));
  t.storage = std::move(storage);
  return t;
}

Tensor parse_npy(std::span<const unsigned char> d, const std::string& file, const std::string& tensor,
                 bool keep_unread) {
  return decode_raw(parse_npy_raw(nullptr, d, file, tensor, keep_unread), file, keep_unread);
}

RawTensor read_npy_raw(const std::string& path) {
  auto bytes = read_shared_input(path);
  const std::span<const unsigned char> d(*bytes);
  return parse_npy_raw(std::move(bytes), d, path);
}

void check_finite(const std::vector<double>& values, const std::string& file, const std::string& tensor) {
  for (std::size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(values[i]))
      throw_at_byte(file, -1,
                    fmt::format("value at flat index {} is {} (non-finite weights are rejected)", i,
                                std::isnan(values[i]) ? "NaN" : (values[i] > 0 ? "+Inf" : "-Inf")),
                    tensor);
}

Tensor read_npy(const std::string& path) { return parse_npy(read_input(path), path); }

Bytes format_npy(const Tensor& t, bool fortran_order, int major_version) {
  if (major_version < 1 || major_version > 3)
    throw UsageError(fmt::format("npy version {} does not exist (expected 1, 2 or 3)", major_version));
  check_writable(t);
  const DType stored = t.dtype == DType::bf16 ? DType::f32 : t.dtype;
  const char* descr = stored == DType::f16 ? "<f2" : stored == DType::f32 ? "<f4" : "<f8";
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': {}, 'shape': {}, }}", descr,
                                   fortran_order ? "True" : "False", shape_string(t.shape));
  const std::size_t prefix = major_version == 1 ? 10 : 12;
  header.append(63 - (prefix + header.size()) % 64, ' ');  // data starts 64-byte aligned
  header.push_back('\n');

  const std::size_t size = dtype_size(stored);
  Bytes out(prefix + header.size() + t.data.size() * size);
  std::copy(kMagic, kMagic + 6, out.begin());
  out[6] = static_cast<unsigned char>(major_version);
  out[7] = 0;
  for (std::size_t i = 0; i < prefix - 8; ++i)
    out[8 + i] = static_cast<unsigned char>(header.size() >> (8 * i));
  std::copy(header.begin(), header.end(), out.begin() + static_cast<std::ptrdiff_t>(prefix));
  unsigned char* data = out.data() + prefix + header.size();
  auto put = [&](std::int64_t c_index, std::int64_t file_index) {
    store_le(stored, t.data[static_cast<std::size_t>(c_index)],
             data + static_cast<std::size_t>(file_index) * size);
  };
  const auto numel = static_cast<std::int64_t>(t.data.size());  // == the shape's, checked above
  if (fortran_order && t.shape.size() > 1) {
    for_each_fortran_offset(t.shape, numel, put);
  } else {
    for (std::int64_t i = 0; i < numel; ++i) put(i, i);
  }
  return out;
}

void write_npy(const std::string& path, const Tensor& t, bool fortran_order) {
  write_file_atomic(path, format_npy(t, fortran_order));
}

std::string tensor_name_from_path(const std::string& path) {
  std::string base = std::filesystem::path(path).filename().string();
  if (base.size() > 3 && base.ends_with(".gz")) base.resize(base.size() - 3);
  const auto dot = base.rfind('.');
  return dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
}

}  // namespace sparsecc
