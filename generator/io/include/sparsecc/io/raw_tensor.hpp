// Tensors as the file holds them, before decoding: the container readers (npy, npz, safetensors) check a
// tensor's header, shape and size and hand back its element bytes; a caller then decodes them to doubles
// (decode_raw) or scans them straight into a CsrMatrix (csr_from_raw), which is how large pruned layers
// are read: no dense copy in doubles, no detour through float32 for f16/bf16, memory bounded by the
// file's bytes plus the CSR.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sparsecc/common/file.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/matrix/dense.hpp"

namespace sparsecc {

// Progress of a read that runs longer than a second, in the pipeline's ProgressSink form: the step's
// name, the fraction done (0 at the start, 1 at the end) and the estimated seconds left.
using ReadProgress = std::function<void(const std::string& step, double fraction, double seconds_left)>;

// Turns a read's fractions into ReadProgress calls: nothing until a second has passed since the clock
// was made (the file's read counts), then a start line (fraction 0, with the seconds left extrapolated
// from the pace since the first fraction), the fractions, and 1 from finish() (or the destructor) when a
// start line was given.
class ProgressClock {
 public:
  ProgressClock(ReadProgress sink, std::string step);
  ~ProgressClock();
  ProgressClock(const ProgressClock&) = delete;
  ProgressClock& operator=(const ProgressClock&) = delete;
  void at(double fraction);
  void finish();

 private:
  ReadProgress sink_;
  std::string step_;
  std::chrono::steady_clock::time_point start_, first_tick_;
  double first_fraction_ = 0;
  bool ticking_ = false;
  bool started_ = false;
  bool finished_ = false;
};

struct RawTensor {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  bool fortran_order = false;  // .npy only: the file lists the elements in Fortran (column-major) order
  bool big_endian = false;     // .npy only: '>' byte order
  // Where `data` starts, counted in the file (for .npz members: in the member), for messages.
  std::int64_t data_byte = 0;
  // As Tensor::unread_dtype: a dtype the reader was asked to keep unread; `data` is then empty.
  std::string unread_dtype;
  // Exactly numel * dtype_size bytes (the reader checked), inside `storage`.
  std::span<const unsigned char> data;
  std::shared_ptr<const Bytes> storage;  // keeps `data` alive (a whole file, or one .npz member)

  std::int64_t numel() const;
};

// The bytes of `file` (read_input: gzip-transparent) as shared storage for RawTensors.
std::shared_ptr<const Bytes> read_shared_input(const std::string& path, std::uint64_t* file_bytes = nullptr);

// The tensor decoded to C-order doubles (Tensor::data). NaN and Inf throw InputError naming the file,
// the tensor, the flat index and the byte, unless keep_nonfinite.
Tensor decode_raw(const RawTensor& t, const std::string& file, bool keep_nonfinite = false);

// A 2-D tensor straight to CSR, row by row from the file's element bytes: zeros dropped (+0 and -0
// alike: a -0.0 weight is a zero of the mask), values exact (f16/bf16/f32 widened to double), the
// tensor's dtype kept as source_dtype. NaN and Inf throw InputError naming the file, the tensor, the
// flat index and the byte of the first (as decode_raw does); a tensor that is not 2-D or is kept unread
// is an InputError naming both. Memory: the CSR (sized exactly by a counting pass; a column cursor per
// row for Fortran order). `tick`, when given, is called with the fraction done every 64 rows.
CsrMatrix csr_from_raw(const RawTensor& t, const std::string& file,
                       const std::function<void(double)>& tick = {});

// Throws InputError in `file` naming the tensor, the flat index and the byte of the first NaN or Inf;
// reads the bytes only (no copy).
void check_raw_finite(const RawTensor& t, const std::string& file);

// The readers' raw forms (see npy.hpp, npz.hpp and safetensors.hpp for the checks each makes).
// .npy: one tensor; `tensor` names it (the file's stem when empty).
RawTensor parse_npy_raw(std::shared_ptr<const Bytes> storage, std::span<const unsigned char> data,
                        const std::string& file, const std::string& tensor = {}, bool keep_unread = false);
RawTensor read_npy_raw(const std::string& path);
// .safetensors: every tensor in header order, sharing the file's bytes.
std::vector<RawTensor> read_safetensors_raw(const std::string& path, bool keep_unread = false);
std::vector<RawTensor> parse_safetensors_raw(std::shared_ptr<const Bytes> storage, const std::string& file,
                                             bool keep_unread = false);
RawTensor read_safetensors_raw_tensor(const std::string& path, const std::string& name);
// .npz: members are read one at a time; `visit` gets each in archive order and may keep it (each owns its
// member's bytes), so that a caller that keeps one tensor holds one member at a time.
void visit_npz_raw(const std::string& path, bool keep_unread, const std::function<void(RawTensor&&)>& visit);
RawTensor read_npz_raw_tensor(const std::string& path, const std::string& name);

}  // namespace sparsecc
