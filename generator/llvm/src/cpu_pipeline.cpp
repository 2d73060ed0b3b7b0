// The CPU pipeline driver (sparsecc/llvm/cpu_pipeline.hpp).
#include "sparsecc/llvm/cpu_pipeline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include "sparsecc/bundle/cpu_bundle.hpp"
#include "sparsecc/emit/hines_llvm.hpp"
#include "sparsecc/emit/spmm_llvm.hpp"
#include "sparsecc/inspector/hines_cpu_planner.hpp"
#include "sparsecc/llvm/cpu_jit.hpp"
#include "sparsecc/llvm/hines_jit.hpp"
#include "sparsecc/neuron/forest.hpp"
#include "sparsecc/pipeline/run.hpp"
#include "sparsecc/reference/hines_accuracy.hpp"
#include "sparsecc/reference/spmm.hpp"

namespace sparsecc {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
// The objects as the static archive a bundle holds, members named by the symbol prefix.
std::vector<unsigned char> archive_of(const std::vector<std::string>& objects, const std::string& symbol) {
  std::vector<std::pair<std::string, std::string>> members;
  for (std::size_t i = 0; i < objects.size(); ++i)
    members.emplace_back(fmt::format("{}_{}.o", symbol, i), objects[i]);
  const std::string archive = write_cpu_archive(members);
  return {archive.begin(), archive.end()};
}
}  // namespace

CpuSpmmArtifact compile_spmm_cpu(const CsrMatrix& a, const CpuSpmmRequest& request, const CpuTarget& target) {
  CpuSpmmArtifact art;
  auto t0 = std::chrono::steady_clock::now();
  art.plan = plan_spmm_cpu(a, request.problem, target, request.options);
  art.bundle = make_cpu_spmm_bundle(art.plan, a, request.bias);
  art.symbol = art.bundle.metadata.kernel;
  art.plan_seconds = seconds_since(t0);
  const int threads = request.threads > 0 ? request.threads : std::max(target.cores, 1);
  t0 = std::chrono::steady_clock::now();
  const std::vector<std::string> modules =
      emit_spmm_llvm_modules(art.plan, a, std::int64_t{kCpuModulesPerThread} * threads, art.symbol);
  art.emit_seconds = seconds_since(t0);
  art.objects = compile_cpu_objects(modules, target, request.opt_level, threads, &art.stats, art.symbol);
  art.bundle.objects = archive_of(art.objects, art.symbol);
  return art;
}

std::string CpuSpmmArtifact::text() const {
  const SpmmProblem& p = plan.problem;
  return fmt::format(
      "{} x {} ({} nonzeros), N = {}{}: CPU executor for {} ({} lanes), {} panels, column tile {}, {} code; "
      "{} module{} compiled in {:.2f} s ({:.1f} MB of IR, {:.1f} MB of objects)",
      p.m, p.k, bundle.metadata.nnz, p.n,
      plan.half() ? fmt::format(", {} (fp32 accumulation)", p.dtype) : std::string(), plan.target.isa,
      plan.lanes, plan.panel_count(), bundle.metadata.n_tile, plan.rolled ? "rolled" : "straight-line",
      stats.modules, stats.modules == 1 ? "" : "s", stats.compile_seconds,
      static_cast<double>(stats.ir_bytes) / 1e6, static_cast<double>(stats.object_bytes) / 1e6);
}

nlohmann::json CpuSpmmArtifact::json() const {
  return {{"target", to_json(plan.target)},
          {"symbol", symbol},
          {"m", plan.problem.m},
          {"k", plan.problem.k},
          {"n", plan.problem.n},
          {"dtype", bundle.metadata.dtype},
          {"nnz", bundle.metadata.nnz},
          {"panels", plan.panel_count()},
          {"column_tile", bundle.metadata.n_tile},
          {"rolled", plan.rolled},
          {"seconds", {{"plan", plan_seconds}, {"emit", emit_seconds}, {"compile", stats.compile_seconds}}},
          {"modules", stats.modules},
          {"ir_bytes", stats.ir_bytes},
          {"object_bytes", stats.object_bytes}};
}

CpuHinesArtifact compile_hines_cpu(const HinesSystem& system, DType dtype, std::int32_t rhs,
                                   const CpuTarget& target, int opt_level, int threads) {
  CpuHinesArtifact art;
  auto t0 = std::chrono::steady_clock::now();
  art.plan = plan_hines_cpu(system, target, dtype, rhs);
  art.bundle = make_cpu_hines_bundle(art.plan, system);
  art.symbol = art.bundle.metadata.kernel;
  art.plan_seconds = seconds_since(t0);
  const int t = threads > 0 ? threads : std::max(target.cores, 1);
  t0 = std::chrono::steady_clock::now();
  const std::vector<std::string> modules =
      emit_hines_llvm_modules(art.plan, art.symbol, std::int64_t{kCpuModulesPerThread} * t);
  art.emit_seconds = seconds_since(t0);
  art.objects = compile_cpu_objects(modules, target, opt_level, t, &art.stats, art.symbol);
  art.bundle.objects = archive_of(art.objects, art.symbol);
  rt::validate_bundle(art.bundle, "CPU Hines bundle");
  return art;
}

std::string CpuHinesArtifact::text() const {
  const rt::BundleMetadata& md = bundle.metadata;
  return fmt::format(
      "{} compartments in {} cells, R = {}, {}: CPU executor for {} ({} lanes), {} shape{} in {} groups; "
      "{} module{} compiled in {:.2f} s ({:.1f} MB of IR, {:.1f} MB of objects)",
      md.hines.rows, md.hines.cells, md.hines.rhs, md.dtype, plan.target.isa, plan.lanes, plan.shapes.size(),
      plan.shapes.size() == 1 ? "" : "s", plan.groups.size(), stats.modules, stats.modules == 1 ? "" : "s",
      stats.compile_seconds, static_cast<double>(stats.ir_bytes) / 1e6,
      static_cast<double>(stats.object_bytes) / 1e6);
}

nlohmann::json CpuHinesArtifact::json() const {
  const rt::BundleMetadata& md = bundle.metadata;
  return {{"target", to_json(plan.target)},
          {"symbol", symbol},
          {"rows", md.hines.rows},
          {"cells", md.hines.cells},
          {"rhs", md.hines.rhs},
          {"dtype", md.dtype},
          {"shapes", plan.shapes.size()},
          {"groups", plan.groups.size()},
          {"seconds", {{"plan", plan_seconds}, {"emit", emit_seconds}, {"compile", stats.compile_seconds}}},
          {"modules", stats.modules},
          {"ir_bytes", stats.ir_bytes},
          {"object_bytes", stats.object_bytes}};
}

namespace {
template <typename T>
std::vector<double> run_hines_step(CpuHinesKernel& kernel, const HinesSystem& s,
                                   const std::vector<double>& b_hines, std::size_t r) {
  const std::vector<std::int32_t> rows = kernel.plan().permutation();
  const std::size_t n = rows.size();
  std::vector<T> d(n), u(n), l(n), b(n * r), x(n * r, std::numeric_limits<T>::quiet_NaN());
  for (std::size_t i = 0; i < n; ++i) {
    const auto h = static_cast<std::size_t>(rows[i]);
    d[i] = static_cast<T>(s.diag[h]);
    u[i] = static_cast<T>(s.upper[h]);
    l[i] = static_cast<T>(s.lower[h]);
    for (std::size_t j = 0; j < r; ++j) b[i * r + j] = static_cast<T>(b_hines[h * r + j]);
  }
  kernel.run(d.data(), u.data(), l.data(), b.data(), x.data());
  std::vector<double> out(n * r);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < r; ++j)
      out[static_cast<std::size_t>(rows[i]) * r + j] = static_cast<double>(x[i * r + j]);
  return out;
}
}  // namespace

CpuHinesCheck check_hines_cpu(const CpuHinesArtifact& artifact, const HinesSystem& system,
                              std::uint64_t seed) {
  CpuHinesKernel kernel = CpuHinesKernel::link(artifact.objects, artifact.plan, artifact.symbol);
  const auto r = static_cast<std::size_t>(artifact.plan.rhs);
  std::vector<double> b;
  if (!system.cap_over_dt.empty()) {
    b = random_step_rhs(system, r, seed);
  } else {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> uniform(-1.0, 1.0);
    b.resize(static_cast<std::size_t>(system.size()) * r);
    for (double& v : b) v = uniform(rng);
  }
  const std::vector<double> x = artifact.plan.dtype == DType::f32
                                    ? run_hines_step<float>(kernel, system, b, r)
                                    : run_hines_step<double>(kernel, system, b, r);
  const HinesAccuracy accuracy = hines_accuracy(system, b, static_cast<int>(r));
  const std::string dtype(dtype_name(artifact.plan.dtype));
  return {hines_max_rel_error(x, accuracy.ref), accuracy.tolerance(dtype)};
}

CpuSpmmCheck check_spmm_cpu(const CpuSpmmArtifact& artifact, const CsrMatrix& a,
                            const std::vector<double>& bias, std::uint64_t seed) {
  const SpmmProblem& p = artifact.plan.problem;
  const CpuSpmmKernel kernel = CpuSpmmKernel::link(artifact.objects, artifact.plan, artifact.symbol);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const std::size_t size_b = static_cast<std::size_t>(p.k * p.n),
                    size_c = static_cast<std::size_t>(p.m * p.n);
  DenseMatrix b(p.k, p.n);
  std::vector<double> c(size_c);
  const std::vector<float> bias32(bias.begin(), bias.end());
  const float* bias_p = bias32.empty() ? nullptr : bias32.data();
  if (artifact.plan.half()) {
    // B's values rounded to the dtype; C poisoned with 0xFFFF, a NaN in f16 and bf16 both.
    const bool f16 = p.dtype == DType::f16;
    std::vector<std::uint16_t> b16(size_b), c16(size_c, 0xFFFF);
    for (std::size_t i = 0; i < size_b; ++i) {
      b16[i] = f16 ? double_to_half_bits(uniform(rng)) : double_to_bf16_bits(uniform(rng));
      b.data[i] = f16 ? half_bits_to_double(b16[i]) : bf16_bits_to_double(b16[i]);
    }
    kernel.run(b16.data(), c16.data(), bias_p);
    for (std::size_t i = 0; i < size_c; ++i)
      c[i] = f16 ? half_bits_to_double(c16[i]) : bf16_bits_to_double(c16[i]);
  } else {
    std::vector<float> b32(size_b), c32(size_c, std::numeric_limits<float>::quiet_NaN());
    for (std::size_t i = 0; i < size_b; ++i) b.data[i] = b32[i] = uniform(rng);
    kernel.run(b32.data(), c32.data(), bias_p);
    c.assign(c32.begin(), c32.end());
  }
  const DenseMatrix want = spmm(round_values(a, p.dtype), b, bias.empty() ? nullptr : &bias, p.relu);
  const pipeline::SpmmCheck check = pipeline::compare_spmm(c, want);
  return {check.rel_error, check.unwritten,
          pipeline::spmm_check_tolerance(a, std::string(dtype_name(p.dtype)), "f32")};
}

}  // namespace sparsecc
