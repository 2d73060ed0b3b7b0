#include "sparsecc/io/safetensors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/json_input.hpp"
#include "sparsecc/io/npy.hpp"
#include "sparsecc/io/raw_tensor.hpp"

namespace sparsecc {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::int64_t kHeaderByte = 8;  // where the JSON starts

struct Info {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::string unread;  // one of the format's other dtypes: laid out and checked, never decoded
};

// The format's dtypes that are not read, with their bytes per element.
std::int64_t unread_size(const std::string& tag) {
  static const std::map<std::string, std::int64_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I16", 2},
      {"U16", 2},  {"I32", 4}, {"U32", 4}, {"I64", 8},     {"U64", 8}};
  const auto it = sizes.find(tag);
  return it == sizes.end() ? 0 : it->second;
}

struct Layout {
  std::vector<Info> tensors;
  std::int64_t data_byte = 0;  // file offset of the data buffer
  std::span<const unsigned char> buffer;
};

std::string_view dtype_tag(DType t) {
  switch (t) {
    case DType::f16:
      return "F16";
    case DType::bf16:
      return "BF16";
    case DType::f32:
      return "F32";
    case DType::f64:
      return "F64";
  }
  return "?";
}

// A non-negative integer JSON value, or -1.
std::int64_t as_index(const Json& v, std::uint64_t limit) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    return u <= limit ? static_cast<std::int64_t>(u) : -1;
  }
  if (v.is_number_integer()) {
    const auto i = v.get<std::int64_t>();
    return i >= 0 && static_cast<std::uint64_t>(i) <= limit ? i : -1;
  }
  return -1;
}

Info parse_entry(const std::string& name, const Json& v, const std::string& file, std::uint64_t buffer_size) {
  auto fail = [&](const std::string& msg) { throw_at_byte(file, kHeaderByte, msg, name); };
  if (!v.is_object()) fail("header entry must be an object with dtype, shape and data_offsets");
  Info info;
  info.name = name;
  const auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string()) fail("'dtype' missing or not a string");
  const auto& tag = dt->get_ref<const std::string&>();
  if (tag == "F16")
    info.dtype = DType::f16;
  else if (tag == "BF16")
    info.dtype = DType::bf16;
  else if (tag == "F32")
    info.dtype = DType::f32;
  else if (tag == "F64")
    info.dtype = DType::f64;
  else if (unread_size(tag) > 0)
    info.unread = tag;  // an error only when the tensor itself is read (see decode)
  else
    fail(fmt::format("unsupported dtype '{}' (expected F16, BF16, F32 or F64)", tag));

  const auto sh = v.find("shape");
  if (sh == v.end() || !sh->is_array()) fail("'shape' missing or not an array");
  if (sh->size() > kMaxTensorRank)
    fail(fmt::format("{} dimensions; at most {} are supported", sh->size(), kMaxTensorRank));
  for (const auto& d : *sh) {
    const std::int64_t x = as_index(d, static_cast<std::uint64_t>(kMaxTensorDim));
    if (x < 0) fail(fmt::format("shape entry {} is not an integer in [0, {}]", d.dump(), kMaxTensorDim));
    info.shape.push_back(x);
  }
  const auto off = v.find("data_offsets");
  if (off == v.end() || !off->is_array() || off->size() != 2)
    fail("'data_offsets' missing or not a [begin, end] pair");
  const std::int64_t b = as_index((*off)[0], buffer_size), e = as_index((*off)[1], buffer_size);
  if (b < 0 || e < 0 || b > e)
    fail(fmt::format("data_offsets {} outside the {} byte data buffer", off->dump(), buffer_size));
  info.begin = static_cast<std::uint64_t>(b);
  info.end = static_cast<std::uint64_t>(e);

  const std::int64_t numel = checked_numel(info.shape, file, kHeaderByte, name);
  std::int64_t nbytes = 0;
  const std::int64_t element =
      info.unread.empty() ? static_cast<std::int64_t>(dtype_size(info.dtype)) : unread_size(info.unread);
  if (__builtin_mul_overflow(numel, element, &nbytes) ||
      static_cast<std::uint64_t>(nbytes) != info.end - info.begin)
    fail(fmt::format("shape {} of {} needs {} bytes, data_offsets {} span {}", shape_string(info.shape), tag,
                     nbytes, off->dump(), info.end - info.begin));
  return info;
}

std::string json_error(const Json::exception& e) { return "header JSON: " + json_error_message(e.what()); }

Layout parse_layout(std::span<const unsigned char> d, const std::string& file) {
  if (d.size() < 8)
    throw_at_byte(file, 0, fmt::format("{} bytes is too short for the 8-byte header length", d.size()));
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | d[static_cast<std::size_t>(i)];
  if (n > kMaxSafetensorsHeaderBytes)
    throw_at_byte(file, 0,
                  fmt::format("header length {} exceeds the {} byte limit", n, kMaxSafetensorsHeaderBytes));
  if (n > d.size() - 8)
    throw_at_byte(file, 0, fmt::format("header length {} exceeds the {} bytes after it", n, d.size() - 8));
  const auto text = d.subspan(8, n);
  check_json_input(text, file, kMaxSafetensorsHeaderBytes, "header JSON", kHeaderByte);

  std::set<std::string> keys;
  std::string duplicate;
  Json j;
  try {
    j = Json::parse(text.begin(), text.end(), [&](int depth, Json::parse_event_t ev, Json& parsed) {
      if (depth == 1 && ev == Json::parse_event_t::key && !keys.insert(parsed.get<std::string>()).second &&
          duplicate.empty())
        duplicate = parsed.get<std::string>();
      return true;
    });
  } catch (const Json::parse_error& e) {
    throw_at_byte(file, kHeaderByte + static_cast<std::int64_t>(e.byte > 0 ? e.byte - 1 : 0), json_error(e));
  } catch (const Json::exception& e) {  // e.g. a number too large for a double: no position given
    throw_at_byte(file, kHeaderByte, json_error(e));
  }
  if (!j.is_object()) throw_at_byte(file, kHeaderByte, "header JSON must be an object");
  if (!duplicate.empty()) throw_at_byte(file, kHeaderByte, "duplicate header key", duplicate);

  Layout out;
  out.data_byte = kHeaderByte + static_cast<std::int64_t>(n);
  out.buffer = d.subspan(8 + n);
  for (const auto& [key, v] : j.items()) {
    if (key == "__metadata__") {
      if (!v.is_object()) throw_at_byte(file, kHeaderByte, "__metadata__ must be an object");
      for (const auto& [mk, mv] : v.items())
        if (!mv.is_string())
          throw_at_byte(file, kHeaderByte, fmt::format("__metadata__ value of '{}' is not a string", mk));
      continue;
    }
    out.tensors.push_back(parse_entry(key, v, file, out.buffer.size()));
  }

  std::vector<const Info*> by_offset;
  for (const auto& t : out.tensors)
    if (t.end > t.begin) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (std::size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->begin < by_offset[i - 1]->end)
      throw_at_byte(file, out.data_byte + static_cast<std::int64_t>(by_offset[i]->begin),
                    fmt::format("data overlaps tensor '{}'", by_offset[i - 1]->name), by_offset[i]->name);
  return out;
}

RawTensor raw_of(const Layout& l, const Info& info, const std::string& file,
                 const std::shared_ptr<const Bytes>& storage, bool keep_unread = false) {
  RawTensor t;
  t.name = info.name;
  t.dtype = info.dtype;
  t.shape = info.shape;
  t.data_byte = l.data_byte + static_cast<std::int64_t>(info.begin);
  if (!info.unread.empty()) {
    if (!keep_unread)
      throw_at_byte(file, kHeaderByte,
                    fmt::format("unsupported dtype '{}' (expected F16, BF16, F32 or F64)", info.unread),
                    info.name);
    t.unread_dtype = info.unread;
    return t;
  }
  t.data = l.buffer.subspan(info.begin, info.end - info.begin);
  t.storage = storage;
  return t;
}

Tensor decode(const Layout& l, const Info& info, const std::string& file, bool keep_unread = false) {
  return decode_raw(raw_of(l, info, file, nullptr, keep_unread), file, keep_unread);
}

[[noreturn]] void not_in_file(const Layout& l, const std::string& file, const std::string& name);

std::vector<std::string> names_of(const Layout& l) {
  std::vector<std::string> out;
  for (const auto& t : l.tensors) out.push_back(t.name);
  return out;
}

void not_in_file(const Layout& l, const std::string& file, const std::string& name) {
  const auto names = names_of(l);
  throw_at_byte(file, -1,
                fmt::format("not in the file (available: {})",
                            names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))),
                name);
}

}  // namespace

std::vector<std::string> list_safetensors(std::span<const unsigned char> data, const std::string& file) {
  return names_of(parse_layout(data, file));
}

std::vector<std::string> list_safetensors(const std::string& path) {
  return list_safetensors(read_input(path), path);
}

Tensor parse_safetensors_tensor(std::span<const unsigned char> data, const std::string& file,
                                const std::string& name) {
  const Layout l = parse_layout(data, file);
  for (const auto& info : l.tensors)
    if (info.name == name) return decode(l, info, file);
  not_in_file(l, file, name);
}

Tensor read_safetensors_tensor(const std::string& path, const std::string& name) {
  return parse_safetensors_tensor(read_input(path), path, name);
}

std::vector<Tensor> parse_safetensors(std::span<const unsigned char> data, const std::string& file,
                                      bool keep_unread) {
  const Layout l = parse_layout(data, file);
  std::vector<Tensor> out;
  for (const auto& info : l.tensors) out.push_back(decode(l, info, file, keep_unread));
  return out;
}

std::vector<Tensor> read_safetensors(const std::string& path, bool keep_unread) {
  return parse_safetensors(read_input(path), path, keep_unread);
}

std::vector<RawTensor> parse_safetensors_raw(std::shared_ptr<const Bytes> storage, const std::string& file,
                                             bool keep_unread) {
  const Layout l = parse_layout(*storage, file);
  std::vector<RawTensor> out;
  for (const auto& info : l.tensors) out.push_back(raw_of(l, info, file, storage, keep_unread));
  return out;
}

std::vector<RawTensor> read_safetensors_raw(const std::string& path, bool keep_unread) {
  return parse_safetensors_raw(read_shared_input(path), path, keep_unread);
}

RawTensor read_safetensors_raw_tensor(const std::string& path, const std::string& name) {
  const auto storage = read_shared_input(path);
  const Layout l = parse_layout(*storage, path);
  for (const auto& info : l.tensors)
    if (info.name == name) return raw_of(l, info, path, storage);
  not_in_file(l, path, name);
}

Bytes format_safetensors(const std::vector<Tensor>& tensors) {
  Json header = Json::object();
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name == "__metadata__")
      throw UsageError("safetensors writer: a tensor cannot be called __metadata__");
    if (header.contains(t.name))
      throw UsageError(fmt::format("safetensors writer: duplicate tensor '{}'", t.name));
    check_writable(t);
    const std::uint64_t nbytes = t.data.size() * dtype_size(t.dtype);
    header[t.name] = {
        {"dtype", dtype_tag(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const Json::type_error& e) {
    throw UsageError(fmt::format("safetensors writer: tensor names must be UTF-8 ({})", e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  Bytes out(8 + text.size() + offset);
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<unsigned char>(text.size() >> (8 * i));
  std::copy(text.begin(), text.end(), out.begin() + 8);
  unsigned char* p = out.data() + 8 + text.size();
  for (const auto& t : tensors)
    for (double v : t.data) {
      store_le(t.dtype, v, p);
      p += dtype_size(t.dtype);
    }
  return out;
}

void write_safetensors(const std::string& path, const std::vector<Tensor>& tensors) {
  write_file_atomic(path, format_safetensors(tensors));
}

}  // namespace sparsecc
