// The pipeline's inputs as commands read them: the sparse matrix an SpMM executor takes and its bias,
// checked where they are read so that errors name the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparsecc/io/load.hpp"
#include "sparsecc/matrix/csr.hpp"

namespace sparsecc::pipeline {

// The matrix FILE[:TENSOR] (load_matrix), or an InputError naming the file when an SpMM executor cannot
// take its shape (require_spmm_matrix) or a weight does not fit `dtype` (check_values_fit).
CsrMatrix load_spmm_matrix(const std::string& spec, const LoadOptions& options, const std::string& dtype);

// The bias vector FILE[:TENSOR], one value per row: InputError naming the file when the count differs
// or a value does not fit.
std::vector<double> load_bias(const std::string& spec, std::int64_t rows);

// The files named by input specs FILE or FILE:TENSOR (both readings where they differ), for the
// output checks (sparsecc/common/output.hpp); empty specs are left out.
std::vector<std::string> input_paths(const std::vector<std::string>& specs);

}  // namespace sparsecc::pipeline
