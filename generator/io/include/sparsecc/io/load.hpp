// Loading inputs by name: the one place the CLI and later stages turn `file` or `file.npz:tensor`
// into a matrix or a tensor, whatever the format (chosen by extension, ignoring a trailing .gz).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "sparsecc/io/raw_tensor.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/matrix/dense.hpp"

namespace sparsecc {

struct InputSpec {
  std::string path;
  std::string tensor;  // empty when the spec names no tensor
};

// `file.npz:name`. A spec that names an existing file is the path whole (paths may contain ':');
// otherwise it is split at the last ':'.
InputSpec parse_input_spec(std::string_view spec);

enum class InputFormat { mtx, smtx, npy, npz, safetensors, swc };

// By extension, ignoring a trailing ".gz"; an unknown extension is an InputError.
InputFormat detect_format(const std::string& path);

struct LoadOptions {
  std::uint64_t seed = 1;  // values for pattern-only .smtx files
  // Progress lines (step "read FILE") when reading a tensor into a matrix takes more than a second.
  ReadProgress progress = {};
};

// A matrix from .mtx, .smtx, or a 2-D tensor of .npy/.npz/.safetensors (zeros dropped, -0.0 with them;
// the tensor's dtype kept as source_dtype; rows and columns at most kMaxMatrixDimension). A container
// holding exactly one 2-D tensor may omit `:name`. Tensors are scanned from the file's bytes straight
// into the CSR (csr_from_raw): memory is the file's bytes (of an .npz, the archive and then the one
// member) plus the CSR; f16 and bf16 values are never widened to a dense copy.
CsrMatrix load_matrix(const std::string& spec, const LoadOptions& options = {});

// A 2-D tensor as a matrix: zeros dropped, the tensor's dtype kept as source_dtype. An InputError in
// `file` naming the tensor when it is not 2-D or a dimension exceeds kMaxMatrixDimension.
CsrMatrix matrix_from_tensor(Tensor t, const std::string& file);
// The same from a tensor's bytes (csr_from_raw), without a dense copy; `tick` as csr_from_raw's.
CsrMatrix matrix_from_raw(const RawTensor& t, const std::string& file,
                          const std::function<void(double)>& tick = {});

// Throws InputError in `file` (naming `tensor` when given) and the entry (1-based row and column) of
// the first value of `a` that overflows `dtype` ("f32", "f16" or "bf16") when rounded to it.
void check_values_fit(const CsrMatrix& a, const std::string& dtype, const std::string& file,
                      const std::string& tensor = {});

// Throws InputError in `file` naming `tensor` and the index of the first bias value that overflows
// f32 (the precision biases are applied in).
void check_bias_fits(const std::vector<double>& bias, const std::string& file, const std::string& tensor);

// A tensor of any rank from .npy, .npz or .safetensors. A container holding exactly one tensor may
// omit `:name`.
Tensor load_tensor(const std::string& spec);

// The tensor names of a .npy (its stem), .npz or .safetensors file.
std::vector<std::string> list_tensors(const std::string& path);

}  // namespace sparsecc
