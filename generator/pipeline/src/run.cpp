#include "sparsecc/pipeline/run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sparsecc/common/dtype.hpp"
#include "sparsecc/common/random.hpp"
#include "sparsecc/reference/spmm.hpp"
#include "sparsecc/runtime/executor.hpp"

namespace sparsecc::pipeline {

rt::DeviceBuffer upload_values(const std::vector<double>& values, DType dtype) {
  const std::size_t size = dtype_size(dtype);
  std::vector<unsigned char> bytes(values.size() * size);
  for (std::size_t i = 0; i < values.size(); ++i) store_le(dtype, values[i], bytes.data() + i * size);
  rt::DeviceBuffer b(bytes.size());
  b.upload(bytes.data(), bytes.size());
  return b;
}

void poison(rt::DeviceBuffer& buffer, DType dtype) {
  buffer.fill32(dtype == DType::f32 ? 0x7fc00000u : dtype == DType::bf16 ? 0x7fc07fc0u : 0x7e007e00u);
}

rt::DeviceBuffer poisoned_outputs(std::size_t count, DType dtype) {
  rt::DeviceBuffer b((count * dtype_size(dtype) + 3) / 4 * 4);
  poison(b, dtype);
  return b;
}

std::vector<double> download_values(const rt::DeviceBuffer& buffer, std::size_t count, DType dtype) {
  const std::size_t size = dtype_size(dtype);
  std::vector<unsigned char> bytes(count * size);
  buffer.download(bytes.data(), bytes.size());
  std::vector<double> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = load_le(dtype, bytes.data() + i * size);
  return out;
}

SpmmGpuInputs::SpmmGpuInputs(const std::string& dtype, const DenseMatrix& b, std::int64_t m)
    : dtype_(require_dtype(dtype, "SpmmGpuInputs", {DType::f32, DType::f16, DType::bf16})),
      outputs_(static_cast<std::size_t>(m * b.cols)),
      b_(upload_values(b.data, dtype_)),
      c_(poisoned_outputs(outputs_, dtype_)) {}

std::vector<double> SpmmGpuInputs::run(const rt::Context& ctx, const rt::SpmmExecutor& exec, std::int64_t n) {
  const std::size_t outputs = static_cast<std::size_t>(exec.metadata().m * n);
  if (outputs > outputs_)
    throw std::invalid_argument("SpmmGpuInputs::run: C is smaller than the executor's output");
  poison(c_, dtype_);  // NaN: unwritten outputs fail
  exec.run(b_.get(), c_.get(), static_cast<int>(n));
  ctx.synchronize();
  return download_values(c_, outputs, dtype_);
}

std::vector<double> run_spmm_on_gpu(const rt::Bundle& bundle, const std::string& name, const DenseMatrix& b,
                                    std::int64_t n, std::string& how) {
  rt::Context ctx(0);
  const rt::SpmmExecutor exec = rt::SpmmExecutor::load(bundle, name, ctx);
  how = fmt::format("GPU {} ({} image)", ctx.device().name, exec.loaded_from());
  SpmmGpuInputs inputs(bundle.metadata.dtype, b, bundle.metadata.m);
  return inputs.run(ctx, exec, n);
}

DenseMatrix random_check_input(std::int64_t k, std::int64_t n, std::uint64_t seed, const std::string& dtype) {
  DenseMatrix b(k, n);
  SplitMix64 rng(seed);
  for (double& v : b.data) v = rng.uniform_pm1();
  round_values(b, dtype);
  return b;
}

double spmm_check_tolerance(const CsrMatrix& a, const std::string& dtype, const std::string& accumulate) {
  std::int64_t max_row_nnz = 0;
  for (std::int64_t r = 0; r < a.rows; ++r) max_row_nnz = std::max(max_row_nnz, a.row_nnz(r));
  return spmm_tolerance(dtype, accumulate, max_row_nnz);
}

SpmmCheck compare_spmm(const std::vector<double>& got, const DenseMatrix& ref) {
  double max_ref = 0, max_err = 0;
  SpmmCheck c;
  for (std::size_t i = 0; i < got.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(ref.data[i]));
    if (std::isfinite(got[i]))
      max_err = std::max(max_err, std::fabs(got[i] - ref.data[i]));
    else
      ++c.unwritten;
  }
  c.rel_error = max_ref > 0 ? max_err / max_ref : max_err;
  return c;
}

}  // namespace sparsecc::pipeline
