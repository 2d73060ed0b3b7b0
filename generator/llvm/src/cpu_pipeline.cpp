// The CPU pipeline driver (sparsecc/llvm/cpu_pipeline.hpp).
#include "sparsecc/llvm/cpu_pipeline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include "sparsecc/bundle/cpu_bundle.hpp"
#include "sparsecc/emit/spmm_llvm.hpp"
#include "sparsecc/llvm/cpu_jit.hpp"
#include "sparsecc/reference/spmm.hpp"

namespace sparsecc {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

CpuSpmmArtifact compile_spmm_cpu(const CsrMatrix& a, const CpuSpmmRequest& request, const CpuTarget& target) {
  CpuSpmmArtifact art;
  auto t0 = std::chrono::steady_clock::now();
  art.plan = plan_spmm_cpu(a, request.problem, target, request.options);
  art.symbol = cpu_spmm_symbol(art.plan, a);
  art.plan_seconds = seconds_since(t0);
  const int threads = request.threads > 0 ? request.threads : std::max(target.cores, 1);
  t0 = std::chrono::steady_clock::now();
  const std::vector<std::string> modules =
      emit_spmm_llvm_modules(art.plan, a, std::int64_t{kCpuModulesPerThread} * threads, art.symbol);
  art.emit_seconds = seconds_since(t0);
  art.objects = compile_cpu_objects(modules, target, request.opt_level, threads, &art.stats, art.symbol);
  std::vector<std::pair<std::string, std::string>> members;
  for (std::size_t i = 0; i < art.objects.size(); ++i)
    members.emplace_back(fmt::format("{}_{}.o", art.symbol, i), art.objects[i]);
  art.bundle = make_cpu_spmm_bundle(art.plan, a, art.symbol, write_cpu_archive(members), request.bias);
  return art;
}

std::string CpuSpmmArtifact::text() const {
  const SpmmProblem& p = plan.problem;
  return fmt::format(
      "{} x {} ({} nonzeros), N = {}: CPU executor for {} ({} lanes), {} panels, column tile {}, {} code; "
      "{} module{} compiled in {:.2f} s ({:.1f} MB of IR, {:.1f} MB of objects)",
      p.m, p.k, bundle.metadata.nnz, p.n, plan.target.isa, plan.lanes, plan.panel_count(),
      bundle.metadata.n_tile, plan.rolled ? "rolled" : "straight-line", stats.modules,
      stats.modules == 1 ? "" : "s", stats.compile_seconds, static_cast<double>(stats.ir_bytes) / 1e6,
      static_cast<double>(stats.object_bytes) / 1e6);
}

nlohmann::json CpuSpmmArtifact::json() const {
  return {{"target", to_json(plan.target)},
          {"symbol", symbol},
          {"m", plan.problem.m},
          {"k", plan.problem.k},
          {"n", plan.problem.n},
          {"nnz", bundle.metadata.nnz},
          {"panels", plan.panel_count()},
          {"column_tile", bundle.metadata.n_tile},
          {"rolled", plan.rolled},
          {"seconds",
           {{"plan", plan_seconds}, {"emit", emit_seconds}, {"compile", stats.compile_seconds}}},
          {"modules", stats.modules},
          {"ir_bytes", stats.ir_bytes},
          {"object_bytes", stats.object_bytes}};
}

CpuSpmmCheck check_spmm_cpu(const CpuSpmmArtifact& artifact, const CsrMatrix& a, const std::vector<double>& bias,
                            std::uint64_t seed) {
  const SpmmProblem& p = artifact.plan.problem;
  const CpuSpmmKernel kernel = CpuSpmmKernel::link(artifact.objects, artifact.plan, artifact.symbol);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  DenseMatrix b(p.k, p.n);
  std::vector<float> b32(static_cast<std::size_t>(p.k * p.n));
  for (std::size_t i = 0; i < b32.size(); ++i) b.data[i] = b32[i] = uniform(rng);
  std::vector<float> c(static_cast<std::size_t>(p.m * p.n), std::numeric_limits<float>::quiet_NaN());
  const std::vector<float> bias32(bias.begin(), bias.end());
  kernel.run(b32.data(), c.data(), bias32.empty() ? nullptr : bias32.data());
  const DenseMatrix want = spmm(round_values(a, "f32"), b, bias.empty() ? nullptr : &bias, p.relu);
  CpuSpmmCheck out;
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    scale = std::max(scale, std::abs(want.data[i]));
    if (std::isnan(c[i]))
      ++out.unwritten;
    else
      worst = std::max(worst, std::abs(static_cast<double>(c[i]) - want.data[i]));
  }
  out.rel_error = scale > 0 ? worst / scale : worst;
  std::int64_t longest = 0;
  for (std::int64_t r = 0; r < a.rows; ++r)
    longest = std::max(longest, a.row_ptr[static_cast<std::size_t>(r + 1)] - a.row_ptr[static_cast<std::size_t>(r)]);
  out.tolerance = spmm_tolerance(DType::f32, DType::f32, longest);
  return out;
}

}  // namespace sparsecc
