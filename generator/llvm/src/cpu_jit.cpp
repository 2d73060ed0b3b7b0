// CpuSpmmKernel: LLJIT over the LLVM emitter's IR text (sparsecc/llvm/cpu_jit.hpp).
#include "sparsecc/llvm/cpu_jit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "sparsecc/common/error.hpp"
#include "sparsecc/emit/spmm_llvm.hpp"
#include "sparsecc/llvm/cpu_compile.hpp"
#include "sparsecc/runtime/cpu_executor.hpp"

namespace sparsecc {

struct CpuSpmmKernel::Impl {
  CpuJit jit;
  void* tile = nullptr;  // rt::CpuSpmmTile for f32 plans, rt::CpuSpmmHalfTile for half ones
  SpmmCpuPlan plan;
  CpuCompileStats stats;
};

CpuSpmmKernel::CpuSpmmKernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CpuSpmmKernel::CpuSpmmKernel(CpuSpmmKernel&&) noexcept = default;
CpuSpmmKernel& CpuSpmmKernel::operator=(CpuSpmmKernel&&) noexcept = default;
CpuSpmmKernel::~CpuSpmmKernel() = default;

const CpuCompileStats& CpuSpmmKernel::stats() const { return impl_->stats; }

CpuSpmmKernel CpuSpmmKernel::compile(const std::string& ir, const SpmmCpuPlan& plan, int opt_level) {
  return compile(std::vector<std::string>{ir}, plan, opt_level, 1);
}

CpuSpmmKernel CpuSpmmKernel::compile(const std::vector<std::string>& modules, const SpmmCpuPlan& plan,
                                     int opt_level, int threads) {
  if (!host_runs(plan.target))
    throw UsageError(fmt::format("this CPU cannot run {} code ({}-bit vectors)", plan.target.isa,
                                 plan.target.vector_bits));
  CpuCompileStats stats;
  std::vector<std::string> objects =
      compile_cpu_objects(modules, plan.target, opt_level, threads, &stats, "sparsecc_cpu_spmm");
  const auto t0 = std::chrono::steady_clock::now();
  CpuJit jit = CpuJit::link(std::move(objects), plan.target);
  void* const tile = reinterpret_cast<void*>(jit.lookup(kCpuTileSymbol));
  stats.compile_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return CpuSpmmKernel(std::make_unique<Impl>(Impl{std::move(jit), tile, plan, stats}));
}

CpuSpmmKernel CpuSpmmKernel::link(std::vector<std::string> objects, const SpmmCpuPlan& plan,
                                  const std::string& symbol) {
  CpuSpmmKernel::Impl impl{CpuJit::link(std::move(objects), plan.target), nullptr, plan, {}};
  impl.tile = reinterpret_cast<void*>(impl.jit.lookup(symbol + "_tile"));
  return CpuSpmmKernel(std::make_unique<Impl>(std::move(impl)));
}

CpuSpmmKernel CpuSpmmKernel::build(const CsrMatrix& a, const SpmmCpuPlan& plan, int opt_level, int threads) {
  const int t = threads > 0 ? threads : std::max(plan.target.cores, 1);
  return compile(emit_spmm_llvm_modules(plan, a, std::int64_t{kCpuModulesPerThread} * t), plan, opt_level, t);
}

namespace {
rt::CpuSpmmShape runtime_shape(const SpmmCpuPlan& p) {
  return {p.problem.m,
          p.problem.k,
          p.problem.n,
          p.panel_count(),
          p.column_tile,
          p.problem.relu,
          std::string(dtype_name(p.problem.dtype))};
}
}  // namespace

void CpuSpmmKernel::run(const float* b, float* c, const float* bias, int threads) const {
  const SpmmCpuPlan& p = impl_->plan;
  if (p.half())
    throw std::invalid_argument(
        fmt::format("CpuSpmmKernel::run: float arrays for a plan of {}", p.problem.dtype));
  const rt::CpuSpmmExecutor executor(reinterpret_cast<rt::CpuSpmmTile>(impl_->tile), runtime_shape(p), bias);
  executor.run(b, c, threads > 0 ? threads : p.target.cores);
}

void CpuSpmmKernel::run(const std::uint16_t* b, std::uint16_t* c, const float* bias, int threads) const {
  const SpmmCpuPlan& p = impl_->plan;
  if (!p.half())
    throw std::invalid_argument(
        fmt::format("CpuSpmmKernel::run: 16-bit arrays for a plan of {}", p.problem.dtype));
  const rt::CpuSpmmExecutor executor(reinterpret_cast<rt::CpuSpmmHalfTile>(impl_->tile), runtime_shape(p),
                                     bias);
  executor.run(b, c, threads > 0 ? threads : p.target.cores);
}

}  // namespace sparsecc
