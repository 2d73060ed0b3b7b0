#include "cpu_target.hpp"

#include <fmt/format.h>

#include "sparsecc/common/error.hpp"
#include "sparsecc/target/target.hpp"
#if SPARSECC_HAVE_LLVM
#include "sparsecc/llvm/cpu_pipeline.hpp"
#include "sparsecc/llvm/cpu_tune.hpp"
#endif

namespace sparsecc::cli {

CLI::Option* add_cpu_target_flag(CLI::App* cmd, std::string& target) {
  return cmd
      ->add_option("--target", target,
                   "Build a CPU executor through LLVM for this CPU (x86-64-avx512, x86-64-avx2, native) "
                   "instead of a GPU one; embed links it into a program")
      ->check(CLI::IsMember(known_cpu_targets()));
}

#if SPARSECC_HAVE_LLVM

SpmmCpuOptions tuned_cpu_spmm_options(const std::string& db, const CsrMatrix& a, const SpmmProblem& problem,
                                      const std::string& target, std::string* how) {
  const CpuTunedChoice choice = choose_tuned_cpu_plan(db, a, problem, cpu_target(target));
  if (how) *how = choice.how;
  return choice.options;
}

CpuExecutor compile_cpu_spmm(const CsrMatrix& a, const SpmmProblem& problem, const std::vector<double>& bias,
                             const std::string& target, const SpmmCpuOptions& options) {
  CpuSpmmRequest request;
  request.problem = problem;
  request.options = options;
  request.bias = bias;
  const CpuSpmmArtifact art = compile_spmm_cpu(a, request, cpu_target(target));
  CpuExecutor out{art.bundle, art.text(), {}, true, art.json(), to_json(art.plan)};
  if (host_runs(art.plan.target)) {
    const CpuSpmmCheck check = check_spmm_cpu(art, a, bias);
    out.check_ok = check.ok();
    out.check = fmt::format("checked on this CPU: max relative error {:.3g} (tolerance {:.3g}){}",
                            check.rel_error, check.tolerance,
                            check.unwritten ? fmt::format(", {} outputs unwritten", check.unwritten) : "");
    out.json["check"] = {{"rel_error", check.rel_error},
                         {"tolerance", check.tolerance},
                         {"unwritten", check.unwritten},
                         {"ok", check.ok()}};
  }
  return out;
}

CpuExecutor compile_cpu_hines(const HinesSystem& system, const std::string& dtype, std::int32_t rhs,
                              const std::string& target) {
  const CpuHinesArtifact art = compile_hines_cpu(
      system, require_dtype(dtype, "--dtype", {DType::f64, DType::f32}), rhs, cpu_target(target));
  CpuExecutor out{art.bundle, art.text(), {}, true, art.json(), to_json(art.plan)};
  if (host_runs(art.plan.target)) {
    const CpuHinesCheck check = check_hines_cpu(art, system);
    out.check_ok = check.ok();
    out.check = fmt::format(
        "checked on this CPU: max relative error {:.3g} against the extended-precision serial "
        "solve (tolerance {:.3g})",
        check.rel_error, check.tolerance);
    out.json["check"] = {{"rel_error", check.rel_error}, {"tolerance", check.tolerance}, {"ok", check.ok()}};
  }
  return out;
}

#else

namespace {
[[noreturn]] void no_llvm() {
  throw UsageError(
      "--target: this sparsecc was built without the CPU backend (LLVM 14 was not found at "
      "configure time; tools/setup.sh installs it)");
}
}  // namespace

CpuExecutor compile_cpu_hines(const HinesSystem&, const std::string&, std::int32_t, const std::string&) {
  no_llvm();
}

CpuExecutor compile_cpu_spmm(const CsrMatrix&, const SpmmProblem&, const std::vector<double>&,
                             const std::string&, const SpmmCpuOptions&) {
  no_llvm();
}

SpmmCpuOptions tuned_cpu_spmm_options(const std::string&, const CsrMatrix&, const SpmmProblem&,
                                      const std::string&, std::string*) {
  no_llvm();
}

#endif

}  // namespace sparsecc::cli
