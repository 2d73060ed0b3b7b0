#include "sparsecc/io/load.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>

#include "sparsecc/common/dtype.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/io/mtx.hpp"
#include "sparsecc/io/npy.hpp"
#include "sparsecc/io/npz.hpp"
#include "sparsecc/io/safetensors.hpp"
#include "sparsecc/io/smtx.hpp"

namespace sparsecc {

namespace {

std::optional<InputFormat> format_of(const std::string& path) {
  std::string base = std::filesystem::path(path).filename().string();
  std::transform(base.begin(), base.end(), base.begin(), [](unsigned char c) { return std::tolower(c); });
  if (base.ends_with(".gz")) base.resize(base.size() - 3);
  const std::pair<const char*, InputFormat> known[] = {{".mtx", InputFormat::mtx},
                                                       {".smtx", InputFormat::smtx},
                                                       {".npy", InputFormat::npy},
                                                       {".npz", InputFormat::npz},
                                                       {".safetensors", InputFormat::safetensors},
                                                       {".swc", InputFormat::swc}};
  for (const auto& [ext, f] : known)
    if (base.size() > std::string_view(ext).size() && base.ends_with(ext)) return f;
  return std::nullopt;
}

// The spec split into path and tensor. When the part before the last ':' has no known extension but
// the whole spec has one, the whole spec is the path (a missing file then reads as "cannot open").
InputSpec resolve(const std::string& spec) {
  InputSpec s = parse_input_spec(spec);
  if (!s.tensor.empty() && !format_of(s.path) && format_of(spec)) return {spec, {}};
  return s;
}

std::string joined(const std::vector<std::string>& names) {
  return names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "));
}

// The tensor a spec names, its data left as the file's bytes. Without a name, the only floating-point
// tensor (2-D when `matrix`) is chosen; tensors of other dtypes or ranks are ignored, and no tensor's
// values are looked at (a NaN beside the chosen tensor does not fail the choice). Of an .npz, one member
// is held at a time.
RawTensor select_raw(const InputSpec& s, InputFormat f, bool matrix) {
  if (f == InputFormat::npy) {
    RawTensor t = read_npy_raw(s.path);
    if (!s.tensor.empty() && s.tensor != t.name)
      throw_in_file(s.path,
                    fmt::format("a .npy file holds one tensor ('{}'); ':{}' names none", t.name, s.tensor));
    return t;
  }
  if (!s.tensor.empty())
    return f == InputFormat::npz ? read_npz_raw_tensor(s.path, s.tensor)
                                 : read_safetensors_raw_tensor(s.path, s.tensor);
  std::vector<std::string> candidates;
  RawTensor pick;
  auto consider = [&](RawTensor&& t) {
    if (!t.unread_dtype.empty() || (matrix && t.shape.size() != 2)) return;
    candidates.push_back(t.name);
    if (candidates.size() == 1) pick = std::move(t);
  };
  if (f == InputFormat::npz)
    visit_npz_raw(s.path, true, consider);
  else
    for (RawTensor& t : read_safetensors_raw(s.path, true)) consider(std::move(t));
  if (candidates.size() != 1)
    throw_in_file(s.path,
                  fmt::format("holds {} {}; name one as '{}:NAME' (candidates: {})", candidates.size(),
                              matrix ? "2-D tensors" : "tensors", s.path, joined(candidates)));
  return pick;
}

[[noreturn]] void not_a_container(const std::string& path, InputFormat f) {
  if (f == InputFormat::swc) throw_in_file(path, "is a morphology, not a tensor container");
  throw_in_file(path, "is a matrix file, not a tensor container (expected .npy, .npz or .safetensors)");
}

}  // namespace

InputSpec parse_input_spec(std::string_view spec) {
  std::string whole(spec);
  std::error_code ec;
  if (std::filesystem::exists(whole, ec)) return {whole, {}};
  const auto colon = whole.rfind(':');
  if (colon == std::string::npos) return {whole, {}};
  return {whole.substr(0, colon), whole.substr(colon + 1)};
}

InputFormat detect_format(const std::string& path) {
  if (auto f = format_of(path)) return *f;
  throw_in_file(path,
                "unknown format (expected .mtx, .smtx, .npy, .npz, .safetensors or .swc, optionally .gz)");
}

CsrMatrix load_matrix(const std::string& spec, const LoadOptions& options) {
  const InputSpec s = resolve(spec);
  const InputFormat f = detect_format(s.path);
  if (f == InputFormat::swc) throw_in_file(s.path, "is a morphology, not a matrix");
  std::error_code ec;
  if ((f == InputFormat::mtx || f == InputFormat::smtx) && !s.tensor.empty() &&
      std::filesystem::exists(s.path, ec))
    throw_in_file(s.path, fmt::format("holds a single matrix; ':{}' names none", s.tensor));
  if (f == InputFormat::mtx) return read_mtx(s.path);
  if (f == InputFormat::smtx) return read_smtx(s.path, options.seed);
  ProgressClock clock(options.progress, fmt::format("read {}", s.path));
  const RawTensor t = select_raw(s, f, true);
  return matrix_from_raw(t, s.path, [&](double fraction) { clock.at(fraction); });
}

namespace {

void check_matrix_shape(const std::vector<std::int64_t>& shape, const std::string& file,
                        const std::string& name) {
  if (shape.size() != 2)
    throw_at_byte(file, -1,
                  fmt::format("shape {} is not a matrix (2 dimensions needed)", shape_string(shape)), name);
  if (shape[0] > kMaxMatrixDimension || shape[1] > kMaxMatrixDimension)
    throw_at_byte(file, -1,
                  fmt::format("shape {} exceeds the matrix dimension limit of {}", shape_string(shape),
                              kMaxMatrixDimension),
                  name);
}

}  // namespace

CsrMatrix matrix_from_raw(const RawTensor& t, const std::string& file,
                          const std::function<void(double)>& tick) {
  if (t.unread_dtype.empty()) check_matrix_shape(t.shape, file, t.name);
  return csr_from_raw(t, file, tick);
}

CsrMatrix matrix_from_tensor(Tensor t, const std::string& file) {
  check_matrix_shape(t.shape, file, t.name);
  DenseMatrix d;
  d.rows = t.shape[0];
  d.cols = t.shape[1];
  d.data = std::move(t.data);
  return csr_from_dense(d, t.dtype);
}

void check_values_fit(const CsrMatrix& a, const std::string& dtype, const std::string& file,
                      const std::string& tensor) {
  const DType t = parse_dtype(dtype).value_or(DType::f32);
  // Values below the type's largest finite value in magnitude fit; only the rest are rounded.
  const double largest = t == DType::f16    ? 65504.0
                         : t == DType::bf16 ? bf16_bits_to_double(0x7f7f)
                         : t == DType::f32  ? static_cast<double>(std::numeric_limits<float>::max())
                                            : std::numeric_limits<double>::max();
  for (std::int64_t r = 0; r < a.rows; ++r)
    for (std::int64_t k = a.row_ptr[static_cast<std::size_t>(r)];
         k < a.row_ptr[static_cast<std::size_t>(r) + 1]; ++k) {
      const double v = a.values[static_cast<std::size_t>(k)];
      if (std::fabs(v) <= largest) continue;
      if (!std::isfinite(round_to(t, v)))
        throw_at_byte(file, -1,
                      fmt::format("the weight {} at row {}, column {} overflows {}", v, r + 1,
                                  a.col_idx[static_cast<std::size_t>(k)] + 1, dtype),
                      tensor);
    }
}

void check_bias_fits(const std::vector<double>& bias, const std::string& file, const std::string& tensor) {
  for (std::size_t i = 0; i < bias.size(); ++i)
    if (!std::isfinite(round_to(DType::f32, bias[i])))
      throw_at_byte(file, -1, fmt::format("the bias value {} at index {} overflows f32", bias[i], i), tensor);
}

Tensor load_tensor(const std::string& spec) {
  const InputSpec s = resolve(spec);
  const InputFormat f = detect_format(s.path);
  if (f != InputFormat::npy && f != InputFormat::npz && f != InputFormat::safetensors)
    not_a_container(s.path, f);
  return decode_raw(select_raw(s, f, false), s.path);
}

std::vector<std::string> list_tensors(const std::string& path) {
  const InputFormat f = detect_format(path);
  switch (f) {
    case InputFormat::npy:
      return {tensor_name_from_path(path)};
    case InputFormat::npz:
      return list_npz(path);
    case InputFormat::safetensors:
      return list_safetensors(path);
    default:
      not_a_container(path, f);
  }
}

}  // namespace sparsecc
