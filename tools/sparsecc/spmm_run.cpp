#include "spmm_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sparsecc/runtime/executor.hpp"

namespace sparsecc::cli {

std::vector<double> run_spmm_on_gpu(const rt::Bundle& bundle, const std::string& name, const DenseMatrix& b,
                                    std::int64_t n, std::string& how) {
  rt::Context ctx(0);
  const rt::SpmmExecutor exec = rt::SpmmExecutor::load(bundle, name, ctx);
  std::vector<float> bf(b.data.begin(), b.data.end());
  std::vector<float> cf(static_cast<std::size_t>(bundle.metadata.m * n));
  rt::DeviceBuffer db(bf.size() * sizeof(float)), dc(cf.size() * sizeof(float));
  db.upload(bf.data(), bf.size() * sizeof(float));
  dc.fill32(0x7fc00000u);  // NaN: unwritten outputs fail
  exec.run(db.get(), dc.get(), static_cast<int>(n));
  ctx.synchronize();
  dc.download(cf.data(), cf.size() * sizeof(float));
  how = fmt::format("GPU {} ({} image)", ctx.device().name, exec.loaded_from());
  return {cf.begin(), cf.end()};
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
