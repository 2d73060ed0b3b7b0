// sparsecc verify OUT.sccb: runs the bundle's executor on the GPU on fresh random B and compares with
// the fp64 reference (Hines bundles: pipeline::verify_hines_bundle); without a GPU it re-plans from the
// bundle and runs the plan interpreter (which executes exactly what the emitter emitted), saying so. Exit 1
// when the error exceeds the tolerance.
#include "sparsecc/pipeline/verify.hpp"

#include <fmt/format.h>

#include <cmath>
#include <random>

#include "cli.hpp"
#include "sparsecc/bundle/spmm_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/pipeline/conv.hpp"
#include "sparsecc/pipeline/run.hpp"
#include "sparsecc/plan/spmm_interpreter.hpp"
#include "sparsecc/reference/spmm.hpp"
#include "sparsecc/runtime/executor.hpp"

namespace sparsecc::cli {

namespace {

struct VerifyArgs {
  std::string bundle;
  std::int64_t n = 0;
  std::uint64_t seed = 0;
  double tolerance = 0;  // 0: 1e-5 for SpMM; for Hines the accuracy yardstick (1e-12 f64 / 1e-4 f32, raised
                         // on ill-conditioned systems)
  bool cpu = false;
};

// A Hines bundle (pipeline::verify_hines_bundle): its result line; exit 1 above the tolerance.
int verify_hines(const rt::Bundle& bundle, const std::string& path, std::uint64_t seed, double tolerance,
                 bool cpu) {
  const pipeline::HinesVerifyResult r = pipeline::verify_hines_bundle(bundle, path, seed, tolerance, cpu);
  fmt::print(
      "{}: Hines, {} compartments in {} cells, R = {}, {}, {}, seed {}: max relative error {:.3e} (tolerance "
      "{:.3g}){}{} {}\n",
      path, r.rows, r.cells, r.rhs, r.dtype, r.how, seed, r.rel_error, r.tolerance, r.note,
      r.unwritten ? fmt::format(", {} outputs not written", r.unwritten) : "", r.ok() ? "ok" : "FAILED");
  return r.ok() ? kExitOk : kExitCheckFailed;
}

// A convolution bundle (metadata.conv): two random images through run_conv on the GPU, or through the
// plan's interpreter, against the fp64 convolution.
int verify_conv(const rt::Bundle& bundle, const CsrMatrix& a, const VerifyArgs& args) {
  const rt::BundleMetadata& md = bundle.metadata;
  if (args.n > 0)
    throw UsageError(
        fmt::format("--n: a convolution's N is its {} output pixels (the batch is given at run time)", md.n));
  const std::uint64_t seed = args.seed ? args.seed : std::random_device{}();
  constexpr std::int64_t kImages = 2;
  std::string why;
  pipeline::ConvCheck check;
  if (!args.cpu && rt::driver_available(&why)) {
    check = pipeline::check_conv_bundle_on_gpu(bundle, args.bundle, a, kImages, seed, args.tolerance);
  } else {
    const SpmmPlan plan = spmm_bundle_plan(bundle, a, args.bundle);
    const std::vector<double> bias(bundle.bias.begin(), bundle.bias.end());
    check = pipeline::check_conv_plan(plan, a, bias, kImages, seed);
    check.how = args.cpu ? "plan interpreter (--cpu)" : fmt::format("plan interpreter (no GPU: {})", why);
    if (args.tolerance > 0) check.tolerance = args.tolerance;
  }
  fmt::print("{}: convolution {}, {} filters ({} nonzeros), {} {}\n", args.bundle, rt::describe(*md.conv),
             md.m, md.nnz, check.text(), check.ok() ? "ok" : "FAILED");
  return check.ok() ? kExitOk : kExitCheckFailed;
}

int run_verify(const VerifyArgs& args) {
  const rt::Bundle bundle = rt::read_bundle_file(args.bundle);  // rt::BundleError names the file
  const rt::BundleMetadata& md = bundle.metadata;
  if (md.op == "hines")
    return verify_hines(bundle, args.bundle, args.seed ? args.seed : std::random_device{}(), args.tolerance,
                        args.cpu);
  if (md.op != "spmm") throw InputError(SourceLocation::in_file(args.bundle), "not an SpMM bundle: " + md.op);
  if (bundle.reference.empty())
    throw InputError(SourceLocation::in_file(args.bundle), "the bundle carries no verification section");
  const CsrMatrix a = csr_from_reference_bytes(bundle.reference, args.bundle);
  if (matrix_fingerprint(a) != md.fingerprint)
    throw InputError(SourceLocation::in_file(args.bundle),
                     "the verification matrix does not match the fingerprint");
  check_spmm_bundle_matrix(md, a, args.bundle);
  if (md.conv) return verify_conv(bundle, a, args);
  const double tolerance =
      args.tolerance > 0 ? args.tolerance : spmm_check_tolerance(a, md.dtype, md.accumulate);

  const std::int64_t n = args.n > 0 ? args.n : md.n;
  if (md.n_mode == "fixed" && n != md.n)
    throw UsageError(
        fmt::format("the bundle is compiled for N = {}; --n {} needs a runtime-N bundle", md.n, n));
  const std::uint64_t seed = args.seed ? args.seed : std::random_device{}();
  const DenseMatrix b = random_check_input(md.k, n, seed, md.dtype);
  const std::vector<double> bias(bundle.bias.begin(), bundle.bias.end());
  const std::vector<double>* bias_ptr = md.bias ? &bias : nullptr;
  const DenseMatrix ref = spmm(round_values(a, md.dtype), b, bias_ptr, md.relu);

  std::vector<double> got;
  std::string how;
  std::string why;
  if (!args.cpu && rt::driver_available(&why)) {
    got = run_spmm_on_gpu(bundle, args.bundle, b, n, how);
  } else {
    const SpmmPlan plan = spmm_bundle_plan(bundle, a, args.bundle);
    got = interpret_spmm(plan, spmm_kernel_values(plan, a), b, bias_ptr, spmm_fragment_words(plan, a)).data;
    how = args.cpu ? "plan interpreter (--cpu)" : fmt::format("plan interpreter (no GPU: {})", why);
  }

  const SpmmCheck check = compare_spmm(got, ref);
  const double rel = check.rel_error;
  const std::int64_t bad = check.unwritten;
  const bool ok = bad == 0 && rel <= tolerance;
  const std::string precision =
      md.dtype == "f32" ? ""
                        : fmt::format(" {} ({} accumulation{})", md.dtype, md.accumulate,
                                      md.tile_nnz ? fmt::format(", {} nonzeros {}", md.tile_nnz,
                                                                md.plan_summary.value("vector", 0) == 1
                                                                    ? "in the vector layout (CUDA cores)"
                                                                    : "on tensor cores")
                                                  : "");
  fmt::print(
      "{}: {}x{} x N={} ({} nonzeros){}, {}, seed {}: max relative error {:.3e} (tolerance {:.1e}){} {}\n",
      args.bundle, md.m, md.k, n, md.nnz, precision, how, seed, rel, tolerance,
      bad ? fmt::format(", {} outputs not written", bad) : "", ok ? "ok" : "FAILED");
  return ok ? kExitOk : kExitCheckFailed;
}

}  // namespace

void add_verify(CLI::App& app, std::function<int()>& run) {
  auto args = std::make_shared<VerifyArgs>();
  CLI::App* cmd = app.add_subcommand("verify", "Check a bundle's executor against the fp64 reference");
  cmd->add_option("bundle", args->bundle, "Bundle file (.sccb)")->required();
  cmd->add_option("--n", args->n, "N to run (runtime-N bundles; default: the compiled N)")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--seed", args->seed, "Seed for B (default: fresh)")->check(kNotNegative);
  cmd->add_option("--tolerance", args->tolerance,
                  "Largest accepted max relative error (default: SpMM 1e-5 f32, 2u f16/bf16 with f32 "
                  "accumulation, u(2 + 2 sqrt(row nonzeros)) otherwise; Hines: 1e-12 f64, 1e-4 f32, raised "
                  "to 16x the serial solver's own error on ill-conditioned systems)");
  cmd->add_flag("--cpu", args->cpu, "Use the plan interpreter even when a GPU is present");
  cmd->callback([&run, args] { run = [args] { return run_verify(*args); }; });
}

}  // namespace sparsecc::cli
