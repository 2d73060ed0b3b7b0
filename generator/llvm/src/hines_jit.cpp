// CpuHinesKernel: the CPU Hines plan's code linked in process (sparsecc/llvm/hines_jit.hpp).
#include "sparsecc/llvm/hines_jit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "sparsecc/common/error.hpp"
#include "sparsecc/emit/hines_llvm.hpp"
#include "sparsecc/llvm/cpu_jit.hpp"
#include "sparsecc/runtime/cpu_executor.hpp"

namespace sparsecc {

// The linked code run through the runtime's executor, as a deployment runs it (its runner and
// workspace).
struct CpuHinesKernel::Impl {
  CpuJit jit;
  HinesCpuPlan plan;
  std::vector<std::int32_t> rows;  // plan.permutation(), which the executor refers to
  rt::CpuHinesExecutor executor;
  CpuCompileStats stats;

  Impl(CpuJit j, const HinesCpuPlan& p, const std::string& prefix)
      : jit(std::move(j)),
        plan(p),
        rows(p.permutation()),
        executor(
            reinterpret_cast<void*>(jit.lookup(prefix + "_solve")),
            {std::string(dtype_name(p.dtype)), p.rows(), static_cast<std::int64_t>(p.cell_offsets.size()) - 1,
             p.rhs, static_cast<std::int64_t>(p.groups.size()), p.workspace_elements()},
            rows) {}
};

CpuHinesKernel::CpuHinesKernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CpuHinesKernel::CpuHinesKernel(CpuHinesKernel&&) noexcept = default;
CpuHinesKernel& CpuHinesKernel::operator=(CpuHinesKernel&&) noexcept = default;
CpuHinesKernel::~CpuHinesKernel() = default;

const HinesCpuPlan& CpuHinesKernel::plan() const { return impl_->plan; }
const CpuCompileStats& CpuHinesKernel::stats() const { return impl_->stats; }

CpuHinesKernel CpuHinesKernel::compile(const std::vector<std::string>& modules, const HinesCpuPlan& plan,
                                       int opt_level, int threads, const std::string& prefix) {
  if (!host_runs(plan.target))
    throw UsageError(fmt::format("this CPU cannot run {} code ({}-bit vectors)", plan.target.isa,
                                 plan.target.vector_bits));
  if (const auto errors = check_hines_cpu_plan(plan); !errors.empty())
    throw UsageError("CpuHinesKernel: the plan does not hold: " + errors.front());
  CpuCompileStats stats;
  std::vector<std::string> objects =
      compile_cpu_objects(modules, plan.target, opt_level, threads, &stats, "sparsecc_cpu_hines");
  const auto t0 = std::chrono::steady_clock::now();
  CpuHinesKernel kernel = link(std::move(objects), plan, prefix);
  stats.compile_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  kernel.impl_->stats = stats;
  return kernel;
}

CpuHinesKernel CpuHinesKernel::link(std::vector<std::string> objects, const HinesCpuPlan& plan,
                                    const std::string& prefix) {
  return CpuHinesKernel(std::make_unique<Impl>(CpuJit::link(std::move(objects), plan.target), plan, prefix));
}

CpuHinesKernel CpuHinesKernel::build(const HinesCpuPlan& plan, int opt_level, int threads) {
  const int t = threads > 0 ? threads : std::max(plan.target.cores, 1);
  return compile(emit_hines_llvm_modules(plan, kCpuHinesPrefix, std::int64_t{kCpuModulesPerThread} * t), plan,
                 opt_level, t, kCpuHinesPrefix);
}

namespace {
template <typename T>
void check_dtype(const HinesCpuPlan& p) {
  if (p.dtype != (sizeof(T) == 8 ? DType::f64 : DType::f32))
    throw UsageError(fmt::format("CpuHinesKernel::run: a {} plan run in {}", dtype_name(p.dtype),
                                 sizeof(T) == 8 ? "f64" : "f32"));
}
}  // namespace

void CpuHinesKernel::run(const double* d, const double* u, const double* l, const double* b, double* x,
                         int threads) {
  check_dtype<double>(impl_->plan);
  impl_->executor.run(d, u, l, b, x, threads > 0 ? threads : std::max(impl_->plan.target.cores, 1));
}

void CpuHinesKernel::run(const float* d, const float* u, const float* l, const float* b, float* x,
                         int threads) {
  check_dtype<float>(impl_->plan);
  impl_->executor.run(d, u, l, b, x, threads > 0 ? threads : std::max(impl_->plan.target.cores, 1));
}

}  // namespace sparsecc
