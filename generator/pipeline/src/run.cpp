#include "sparsecc/pipeline/run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sparsecc/common/dtype.hpp"
#include "sparsecc/common/random.hpp"
#include "sparsecc/reference/spmm.hpp"
#include "sparsecc/runtime/executor.hpp"

namespace sparsecc::pipeline {

SpmmGpuInputs::SpmmGpuInputs(const std::string& dtype, const DenseMatrix& b, std::int64_t m)
    : dtype_(dtype), outputs_(static_cast<std::size_t>(m * b.cols)) {
  if (dtype == "f32") {
    const std::vector<float> bf(b.data.begin(), b.data.end());
    b_ = rt::DeviceBuffer(bf.size() * sizeof(float));
    b_.upload(bf.data(), bf.size() * sizeof(float));
    c_ = rt::DeviceBuffer(outputs_ * sizeof(float));
    return;
  }
  // 16-bit B and C: the bits of each value rounded to the dtype.
  const bool bf16 = dtype == "bf16";
  std::vector<std::uint16_t> bh(b.data.size());
  for (std::size_t i = 0; i < bh.size(); ++i)
    bh[i] = bf16 ? double_to_bf16_bits(b.data[i]) : double_to_half_bits(b.data[i]);
  b_ = rt::DeviceBuffer(bh.size() * 2);
  b_.upload(bh.data(), bh.size() * 2);
  c_ = rt::DeviceBuffer((outputs_ + 1) / 2 * 4);
}

std::vector<double> SpmmGpuInputs::run(const rt::Context& ctx, const rt::SpmmExecutor& exec, std::int64_t n) {
  const std::size_t outputs = static_cast<std::size_t>(exec.metadata().m * n);
  if (outputs > outputs_)
    throw std::invalid_argument("SpmmGpuInputs::run: C is smaller than the executor's output");
  std::vector<double> out(outputs);
  if (dtype_ == "f32") {
    std::vector<float> cf(outputs);
    c_.fill32(0x7fc00000u);  // NaN: unwritten outputs fail
    exec.run(b_.get(), c_.get(), static_cast<int>(n));
    ctx.synchronize();
    c_.download(cf.data(), cf.size() * sizeof(float));
    std::copy(cf.begin(), cf.end(), out.begin());
    return out;
  }
  const bool bf16 = dtype_ == "bf16";
  std::vector<std::uint16_t> ch(outputs);
  c_.fill32(bf16 ? 0x7fc07fc0u : 0x7e007e00u);  // NaN pairs
  exec.run(b_.get(), c_.get(), static_cast<int>(n));
  ctx.synchronize();
  c_.download(ch.data(), ch.size() * 2);
  for (std::size_t i = 0; i < outputs; ++i)
    out[i] = bf16 ? bf16_bits_to_double(ch[i]) : half_bits_to_double(ch[i]);
  return out;
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
