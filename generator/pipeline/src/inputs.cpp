#include "sparsecc/pipeline/inputs.hpp"

#include <fmt/format.h>

#include "sparsecc/common/error.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"

namespace sparsecc::pipeline {

std::vector<std::string> input_paths(const std::vector<std::string>& specs) {
  std::vector<std::string> out;
  for (const std::string& spec : specs) {
    if (spec.empty()) continue;
    out.push_back(spec);
    if (const std::string path = parse_input_spec(spec).path; path != spec) out.push_back(path);
  }
  return out;
}

CsrMatrix load_spmm_matrix(const std::string& spec, const LoadOptions& options, const std::string& dtype) {
  CsrMatrix a = load_matrix(spec, options);
  const InputSpec in = parse_input_spec(spec);
  SourceLocation where = SourceLocation::in_file(in.path);
  where.tensor = in.tensor;
  require_spmm_matrix(a, where);
  check_values_fit(a, dtype, in.path, in.tensor);
  return a;
}

std::vector<double> load_bias(const std::string& spec, std::int64_t rows) {
  const Tensor t = load_tensor(spec);
  const std::string path = parse_input_spec(spec).path;
  if (t.numel() != rows)
    throw_at_byte(path, -1, fmt::format("bias has {} values but the matrix has {} rows", t.numel(), rows),
                  t.name);
  check_bias_fits(t.data, path, t.name);
  return t.data;
}

}  // namespace sparsecc::pipeline
