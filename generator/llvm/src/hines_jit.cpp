// CpuHinesKernel: the CPU Hines plan's code linked in process (sparsecc/llvm/hines_jit.hpp).
#include "sparsecc/llvm/hines_jit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <stdexcept>

#include "sparsecc/common/error.hpp"
#include "sparsecc/emit/hines_llvm.hpp"
#include "sparsecc/llvm/cpu_jit.hpp"
#include "sparsecc/runtime/cpu_executor.hpp"

namespace sparsecc {

namespace {

template <typename T>
using SolveFn = void (*)(std::int64_t, const T*, const T*, const T*, const T*, T*, T*);

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

}  // namespace

struct CpuHinesKernel::Impl {
  CpuJit jit;
  std::uintptr_t solve = 0;
  HinesCpuPlan plan;
  CpuCompileStats stats;
  std::unique_ptr<void, FreeDeleter> work;  // workspace_elements() values, 64-byte aligned
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
  CpuJit jit = CpuJit::link(std::move(objects), plan.target);
  const std::uintptr_t solve = jit.lookup(prefix + "_solve");
  const std::size_t bytes =
      static_cast<std::size_t>(std::max<std::int64_t>(plan.workspace_elements(), 1)) * dtype_size(plan.dtype);
  std::unique_ptr<void, FreeDeleter> work(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
  if (!work) throw std::bad_alloc();
  return CpuHinesKernel(std::make_unique<Impl>(Impl{std::move(jit), solve, plan, {}, std::move(work)}));
}

CpuHinesKernel CpuHinesKernel::build(const HinesCpuPlan& plan, int opt_level, int threads) {
  const int t = threads > 0 ? threads : std::max(plan.target.cores, 1);
  return compile(emit_hines_llvm_modules(plan, kCpuHinesPrefix, std::int64_t{kCpuModulesPerThread} * t), plan,
                 opt_level, t, kCpuHinesPrefix);
}

namespace {

template <typename T>
void run_items(const HinesCpuPlan& p, std::uintptr_t solve, void* work, const T* d, const T* u, const T* l,
               const T* b, T* x, int threads) {
  if (p.dtype != (sizeof(T) == 8 ? DType::f64 : DType::f32))
    throw UsageError(fmt::format("CpuHinesKernel::run: a {} plan run in {}", dtype_name(p.dtype),
                                 sizeof(T) == 8 ? "f64" : "f32"));
  if (!d || !u || !l || !b || !x) throw std::invalid_argument("CpuHinesKernel::run: a null array");
  struct Call {
    SolveFn<T> fn;
    const T *d, *u, *l, *b;
    T *x, *w;
  };
  const Call call{reinterpret_cast<SolveFn<T>>(solve), d, u, l, b, x, static_cast<T*>(work)};
  // Items in any order: each touches only its group's rows (the runtime's runner, as deployments).
  rt::cpu_parallel_for(
      static_cast<std::int64_t>(p.groups.size()), threads > 0 ? threads : std::max(p.target.cores, 1),
      [](std::int64_t item, const void* ctx) {
        const Call& c = *static_cast<const Call*>(ctx);
        c.fn(item, c.d, c.u, c.l, c.b, c.x, c.w);
      },
      &call);
}

}  // namespace

void CpuHinesKernel::run(const double* d, const double* u, const double* l, const double* b, double* x,
                         int threads) {
  run_items(impl_->plan, impl_->solve, impl_->work.get(), d, u, l, b, x, threads);
}

void CpuHinesKernel::run(const float* d, const float* u, const float* l, const float* b, float* x,
                         int threads) {
  run_items(impl_->plan, impl_->solve, impl_->work.get(), d, u, l, b, x, threads);
}

}  // namespace sparsecc
