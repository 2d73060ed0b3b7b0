// The consumer's check of its embedded executors against the fp64 reference, on fresh random inputs
// with outputs poisoned with NaN: on the GPU when there is one, else through the generator's plan
// interpreter (which executes what the kernel does), saying which. Exit 0 when every layer passes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "consumer_kernels.hpp"
#include "sparsecc/bundle/hines_bundle.hpp"
#include "sparsecc/bundle/spmm_bundle.hpp"
#include "sparsecc/neuron/forest.hpp"
#include "sparsecc/plan/hines_interpreter.hpp"
#include "sparsecc/plan/spmm_interpreter.hpp"
#include "sparsecc/reference/hines_accuracy.hpp"
#include "sparsecc/reference/spmm.hpp"
#include "sparsecc/runtime/device.hpp"
#include "sparsecc/runtime/driver.hpp"

namespace {

namespace k = consumer::kernels;
using namespace sparsecc;

struct Error {
  double rel = 0;
  std::size_t unwritten = 0;
};
Error compare(const std::vector<double>& got, const std::vector<double>& ref) {
  Error e;
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    scale = std::max(scale, std::fabs(ref[i]));
    if (!std::isfinite(got[i])) {
      ++e.unwritten;
      continue;
    }
    diff = std::max(diff, std::fabs(got[i] - ref[i]));
  }
  e.rel = scale > 0 ? diff / scale : diff;
  return e;
}

bool check_spmm(const rt::Bundle& bundle, const std::string& name, const rt::SpmmExecutor* exec,
                const rt::Context* ctx) {
  const rt::BundleMetadata& md = bundle.metadata;
  const CsrMatrix a = csr_from_reference_bytes(bundle.reference, name);
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  DenseMatrix b(md.k, md.n);
  for (double& v : b.data) v = u(rng);  // float values: exact inputs of the fp32 executor
  const std::vector<double> bias(bundle.bias.begin(), bundle.bias.end());
  const DenseMatrix ref = spmm(a, b, md.bias ? &bias : nullptr, md.relu);
  std::vector<double> got;
  if (exec) {
    const std::vector<float> bf(b.data.begin(), b.data.end());
    rt::DeviceBuffer db(bf.size() * sizeof(float)), dc(static_cast<std::size_t>(md.m * md.n) * sizeof(float));
    db.upload(bf.data(), bf.size() * sizeof(float));
    dc.fill32(0x7fc00000u);
    exec->run(db.get(), dc.get(), static_cast<int>(md.n));
    ctx->synchronize();
    std::vector<float> cf(static_cast<std::size_t>(md.m * md.n));
    dc.download(cf.data(), cf.size() * sizeof(float));
    got.assign(cf.begin(), cf.end());
  } else {
    const SpmmPlan plan = spmm_bundle_plan(bundle, a, name);
    got = interpret_spmm(plan, spmm_kernel_values(plan, a), b, md.bias ? &bias : nullptr,
                         spmm_fragment_words(plan, a))
              .data;
  }
  const Error e = compare(got, ref.data);
  std::int64_t longest = 0;
  for (std::int64_t row = 0; row < a.rows; ++row) longest = std::max(longest, a.row_nnz(row));
  const double tol = spmm_tolerance(md.dtype, md.accumulate, longest);
  const bool ok = e.unwritten == 0 && e.rel <= tol;
  std::printf("  %s: SpMM %lldx%lld x N=%lld: max relative error %.3e (tolerance %.0e), %zu unwritten  %s\n",
              name.c_str(), static_cast<long long>(md.m), static_cast<long long>(md.k),
              static_cast<long long>(md.n), e.rel, tol, e.unwritten, ok ? "ok" : "FAILED");
  return ok;
}

bool check_hines(const rt::Bundle& bundle, const std::string& name, const rt::HinesExecutor* exec,
                 const rt::Context* ctx) {
  const rt::BundleMetadata& md = bundle.metadata;
  const HinesSystem s = hines_system_from_reference_bytes(bundle.reference, name);
  const auto r = static_cast<std::size_t>(md.hines.rhs);
  const std::vector<double> b = random_step_rhs(s, r, 5);
  const HinesAccuracy acc = hines_accuracy(s, b, md.hines.rhs);
  std::vector<double> got;
  if (exec) {
    auto upload = [](const std::vector<double>& v) {
      rt::DeviceBuffer d(v.size() * sizeof(double));
      d.upload(v.data(), v.size() * sizeof(double));
      return d;
    };
    rt::DeviceBuffer d = upload(s.diag), uu = upload(s.upper), l = upload(s.lower), db = upload(b);
    rt::DeviceBuffer x(b.size() * sizeof(double));
    x.fill32(0x7fc00000u);
    exec->run(d.get(), uu.get(), l.get(), db.get(), x.get());
    ctx->synchronize();
    got.resize(b.size());
    x.download(got.data(), got.size() * sizeof(double));
  } else {
    got = interpret_hines(hines_bundle_plan(bundle, s, name), s.diag, s.upper, s.lower, b);
  }
  const Error e = compare(got, acc.ref);
  const double tol = acc.tolerance(md.dtype);
  const bool ok = e.unwritten == 0 && e.rel <= tol;
  std::printf("  %s: Hines, %lld compartments: max relative error %.3e (tolerance %.0e), %zu unwritten  %s\n",
              name.c_str(), static_cast<long long>(md.hines.rows), e.rel, tol, e.unwritten,
              ok ? "ok" : "FAILED");
  return ok;
}

}  // namespace

int main() {
  try {
    std::string why;
    const bool gpu = rt::driver_available(&why) && !rt::list_devices().empty();
    std::unique_ptr<rt::Context> ctx;
    std::unique_ptr<k::Kernels> kernels;
    if (gpu) {
      ctx = std::make_unique<rt::Context>(0);
      kernels = std::make_unique<k::Kernels>(*ctx);
    }
    std::printf(
        "consumer_check: %zu embedded executors, checked %s\n", k::kLayerCount,
        gpu ? ("on the GPU (" + ctx->device().name + ")").c_str()
            : ("by the plan interpreter (no GPU: " + (why.empty() ? std::string("no device") : why) + ")")
                  .c_str());
    bool ok = true;
    for (std::size_t i = 0; i < k::kLayerCount; ++i) {
      const std::string name = k::layers()[i].name;
      const rt::Bundle bundle = rt::parse_bundle(k::bundle_bytes(i), name);
      std::printf("  loaded %s (%s, %zu bytes)\n", name.c_str(), bundle.metadata.op.c_str(),
                  k::bundle_bytes(i).size());
      if (bundle.metadata.op == "spmm")
        ok = check_spmm(bundle, name, gpu ? &(name == "fc1" ? kernels->fc1() : kernels->fc2()) : nullptr,
                        ctx.get()) &&
             ok;
      else
        ok = check_hines(bundle, name, gpu ? &kernels->example_cell() : nullptr, ctx.get()) && ok;
    }
    std::printf("consumer_check: %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer_check: error: %s\n", e.what());
    return 1;
  }
}
