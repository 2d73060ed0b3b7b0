// safetensors files: an 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the data buffer. Dtypes F16, BF16, F32 and F64 are read; the format's integer, boolean and
// 8-bit float dtypes are laid out and checked but never decoded (reading such a tensor is an error,
// unless the caller keeps it unread); every offset, size and overlap is checked before any data is
// touched.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sparsecc/common/file.hpp"
#include "sparsecc/matrix/dense.hpp"

namespace sparsecc {

inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// Tensor names in header order. `file` names the input in messages.
std::vector<std::string> list_safetensors(std::span<const unsigned char> data, const std::string& file);
std::vector<std::string> list_safetensors(const std::string& path);

// One tensor; a missing name is an error listing the available ones.
Tensor parse_safetensors_tensor(std::span<const unsigned char> data, const std::string& file,
                                const std::string& name);
Tensor read_safetensors_tensor(const std::string& path, const std::string& name);

// Every tensor, in header order; with `keep_unread`, tensors of the format's other dtypes (BOOL, U8,
// I8, I16, U16, I32, U32, I64, U64, F8_E4M3, F8_E5M2) come back unread (Tensor::unread_dtype; shape
// and data offsets still checked) instead of failing the file, and NaN and Inf values come back as
// they are (the caller checks the tensors it uses with check_finite).
std::vector<Tensor> parse_safetensors(std::span<const unsigned char> data, const std::string& file,
                                      bool keep_unread = false);
std::vector<Tensor> read_safetensors(const std::string& path, bool keep_unread = false);

// Tensors laid out contiguously in the given order, header padded with spaces to a multiple of 8.
// Names must be distinct and not "__metadata__" (UsageError otherwise).
Bytes format_safetensors(const std::vector<Tensor>& tensors);
void write_safetensors(const std::string& path, const std::vector<Tensor>& tensors);

}  // namespace sparsecc
