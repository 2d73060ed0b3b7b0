// NumPy .npz archives: a zip of `<name>.npy` entries, stored (np.savez) or deflated
// (np.savez_compressed), read from memory through libzip. Entries that are not `*.npy`, duplicate
// names, encryption and compression methods other than store/deflate are rejected.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sparsecc/common/file.hpp"
#include "sparsecc/matrix/dense.hpp"

namespace sparsecc {

// Largest entry (uncompressed) an archive may hold. Deflated entries that are read may together expand
// to at most gunzip_limit of the file's size (less what an .npz.gz already expanded to); stored
// entries are bounded by the file itself.
inline constexpr std::uint64_t kMaxNpzEntryBytes = kMaxInputBytes;

// Tensor names (entry names without ".npy") in archive order. `file` names the archive in messages.
std::vector<std::string> list_npz(std::span<const unsigned char> data, const std::string& file);
std::vector<std::string> list_npz(const std::string& path);

// One tensor; a missing name is an error listing the available ones.
Tensor parse_npz_tensor(std::span<const unsigned char> data, const std::string& file,
                        const std::string& name);
Tensor read_npz_tensor(const std::string& path, const std::string& name);

// Every tensor, in archive order; with `keep_unread`, tensors of dtypes other than float16/32/64 come
// back unread (Tensor::unread_dtype, see parse_npy) instead of failing the archive, and NaN and Inf
// values come back as they are (the caller checks the tensors it uses with check_finite).
std::vector<Tensor> parse_npz(std::span<const unsigned char> data, const std::string& file,
                              bool keep_unread = false);
std::vector<Tensor> read_npz(const std::string& path, bool keep_unread = false);

// An archive of `<name>.npy` entries (C order), deflated when `compress`. Names must be non-empty
// and distinct (UsageError otherwise). write_npz replaces `path` atomically.
Bytes format_npz(const std::vector<Tensor>& tensors, bool compress);
void write_npz(const std::string& path, const std::vector<Tensor>& tensors, bool compress);

}  // namespace sparsecc
