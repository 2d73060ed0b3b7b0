// NumPy .npy tensors (format versions 1.0, 2.0 and 3.0), plus the checks every tensor container
// shares: shape limits, overflow-safe sizes, and decoding of element data that rejects NaN and Inf.
// Byte order: '<', '=' and '|' are read as little-endian, '>' (big-endian) is byte-swapped.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sparsecc/common/file.hpp"
#include "sparsecc/matrix/dense.hpp"

namespace sparsecc {

inline constexpr std::size_t kMaxTensorRank = 4;
inline constexpr std::int64_t kMaxTensorDim = 2147483647;  // column indices are int32

// Element count of `shape` after checking rank <= kMaxTensorRank and 0 <= dim <= kMaxTensorDim.
// Throws InputError at `byte` of `file` naming `tensor`.
std::int64_t checked_numel(const std::vector<std::int64_t>& shape, const std::string& file, std::int64_t byte,
                           const std::string& tensor);

// "(64, 32)", "(5,)", "()": shapes as NumPy prints them, for messages.
std::string shape_string(const std::vector<std::int64_t>& shape);

// Decodes the elements of `t` that fill `data` exactly (little-endian unless big_endian; C order
// unless fortran_order) into C-order doubles; the caller has checked the size against `shape`.
// A NaN or Inf throws InputError naming the flat (C-order) index and the element's byte, counted
// from `data_byte`, the position of `data` in the file, unless `keep_nonfinite` (the caller then
// checks what it uses with check_finite).
std::vector<double> decode_tensor_data(DType t, std::span<const unsigned char> data,
                                       const std::vector<std::int64_t>& shape, bool fortran_order,
                                       bool big_endian, const std::string& file, std::int64_t data_byte,
                                       const std::string& tensor, bool keep_nonfinite = false);

// Throws InputError in `file` naming `tensor` and the flat index of the first NaN or Inf in `values`.
void check_finite(const std::vector<double>& values, const std::string& file, const std::string& tensor);

// Throws UsageError when the tensor cannot be written faithfully: data size differs from the shape,
// a value is not finite or overflows its dtype, or the shape breaks the limits above.
void check_writable(const Tensor& t);

// Parses a whole .npy file. `file` names it in messages; the tensor is called `tensor`, or the file's
// stem when that is empty. bfloat16 does not exist in NumPy, so the dtype is f16, f32 or f64.
// With `keep_unread`, a well-formed tensor of another NumPy dtype (bool, integers, complex, other
// float widths, fixed-size strings, datetimes and timedeltas, and object arrays, whose pickled data
// is never read) comes back with `unread_dtype` set and no data instead of an error, and NaN and Inf
// values come back as they are (the caller checks the tensors it uses with check_finite).
Tensor parse_npy(std::span<const unsigned char> data, const std::string& file, const std::string& tensor = {},
                 bool keep_unread = false);
Tensor read_npy(const std::string& path);  // gzip-transparent

// Formats a .npy file (version 1, 2 or 3). bf16 tensors are written as float32, which holds them
// exactly (NumPy has no bfloat16).
Bytes format_npy(const Tensor& t, bool fortran_order = false, int major_version = 1);
void write_npy(const std::string& path, const Tensor& t, bool fortran_order = false);

// "w" for "dir/w.npy" or "dir/w.npy.gz": the name a standalone file gives its tensor.
std::string tensor_name_from_path(const std::string& path);

}  // namespace sparsecc
