#include "spmm_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sparsecc/common/dtype.hpp"
#include "sparsecc/runtime/executor.hpp"

namespace sparsecc::cli {

std::vector<double> run_spmm_on_gpu(const rt::Bundle& bundle, const std::string& name, const DenseMatrix& b,
                                    std::int64_t n, std::string& how) {
  rt::Context ctx(0);
  const rt::SpmmExecutor exec = rt::SpmmExecutor::load(bundle, name, ctx);
  const std::string& dtype = bundle.metadata.dtype;
  const auto outputs = static_cast<std::size_t>(bundle.metadata.m * n);
  how = fmt::format("GPU {} ({} image)", ctx.device().name, exec.loaded_from());
  if (dtype == "f32") {
    std::vector<float> bf(b.data.begin(), b.data.end());
    std::vector<float> cf(outputs);
    rt::DeviceBuffer db(bf.size() * sizeof(float)), dc(cf.size() * sizeof(float));
    db.upload(bf.data(), bf.size() * sizeof(float));
    dc.fill32(0x7fc00000u);  // NaN: unwritten outputs fail
    exec.run(db.get(), dc.get(), static_cast<int>(n));
    ctx.synchronize();
    dc.download(cf.data(), cf.size() * sizeof(float));
    return {cf.begin(), cf.end()};
  }
  // 16-bit B and C: the bits of each value rounded to the dtype; C is poisoned with NaN pairs.
  const bool bf16 = dtype == "bf16";
  std::vector<std::uint16_t> bh(b.data.size());
  for (std::size_t i = 0; i < bh.size(); ++i)
    bh[i] = bf16 ? double_to_bf16_bits(b.data[i]) : double_to_half_bits(b.data[i]);
  std::vector<std::uint16_t> ch(outputs);
  rt::DeviceBuffer db(bh.size() * 2), dc((ch.size() + 1) / 2 * 4);
  db.upload(bh.data(), bh.size() * 2);
  dc.fill32(bf16 ? 0x7fc07fc0u : 0x7e007e00u);
  exec.run(db.get(), dc.get(), static_cast<int>(n));
  ctx.synchronize();
  dc.download(ch.data(), ch.size() * 2);
  std::vector<double> out(outputs);
  for (std::size_t i = 0; i < outputs; ++i) out[i] = bf16 ? bf16_bits_to_double(ch[i]) : half_bits_to_double(ch[i]);
  return out;
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

}  // namespace sparsecc::cli
