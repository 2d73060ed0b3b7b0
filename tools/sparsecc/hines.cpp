// sparsecc hines FILE.swc...: plan the Hines solver of one forest (the cells of every file, repeated
// --cells times): junction selection, recursion depth, the plan as JSON, and a check of the plan
// through its interpreter against the accuracy yardstick (the serial solve in extended precision).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "cli.hpp"
#include "sparsecc/bundle/hines_bundle.hpp"
#include "sparsecc/bundle/write_bundle.hpp"
#include "sparsecc/common/output.hpp"
#include "sparsecc/compile/compile_hines.hpp"
#include "sparsecc/inspector/hines_planner.hpp"
#include "sparsecc/neuron/forest.hpp"
#include "sparsecc/plan/hines_interpreter.hpp"
#include "sparsecc/reference/hines_accuracy.hpp"
#include "sparsecc/reference/hines_solve.hpp"
#include "target_flags.hpp"
#include "tune_lookup.hpp"

namespace sparsecc::cli {

namespace {

struct HinesArgs {
  std::vector<std::string> files;
  int cells = 1;
  int resolution = 1;
  std::string dtype = "f64";
  int rhs = 1;
  HinesOptions plan;  // --k, --k-large, --depth, --base-rows, --grid-levels, --block-threads, --code, ...
  bool minimal = false;
  bool plan_json = false;
  bool check = false;
  std::uint64_t seed = 1;
  std::string output;
  std::string arch = "sm_90";
  std::string db;
  std::string gpu;
};

// Componentwise backward error of x for A x = b (N x R): max over rows of |A x - b| over
// |A| |x| + |b|. It is independent of the conditioning, unlike the error against the reference.
double backward_error(const HinesSystem& s, const std::vector<double>& x, const std::vector<double>& b, std::size_t r) {
  const auto n = static_cast<std::size_t>(s.size());
  std::vector<double> ax(n * r, 0.0), mag(n * r, 0.0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t c = 0; c < r; ++c) {
      ax[i * r + c] += s.diag[i] * x[i * r + c];
      mag[i * r + c] += std::fabs(s.diag[i] * x[i * r + c]) + std::fabs(b[i * r + c]);
      const std::int32_t p = s.parent[i];
      if (p < 0) continue;
      const auto q = static_cast<std::size_t>(p);
      ax[i * r + c] += s.upper[i] * x[q * r + c];
      mag[i * r + c] += std::fabs(s.upper[i] * x[q * r + c]);
      ax[q * r + c] += s.lower[i] * x[i * r + c];
      mag[q * r + c] += std::fabs(s.lower[i] * x[i * r + c]);
    }
  double eta = 0;
  for (std::size_t j = 0; j < n * r; ++j)
    if (mag[j] > 0) eta = std::max(eta, std::fabs(ax[j] - b[j]) / mag[j]);
  return eta;
}

struct CheckResult {
  double error = 0;           // max |x - x_ref| / max |x_ref|
  double tolerance = 0;       // the accuracy yardstick's bound
  std::string note;           // why the bound is above its floor, when it is
  double backward = 0;        // of the plan's x
  double ref_backward = 0;    // of the serial fp64 x_ref
};

// Interprets the plan on fresh right-hand sides of one time step (each column from random membrane
// potentials in -80..-50 mV and injected currents in -0.1..0.1 nA); returns
// the errors. Random b of mixed signs would mostly measure the matrix's conditioning.
CheckResult check_plan_numerics(const HinesPlan& plan, const HinesSystem& s, std::uint64_t seed) {
  const auto r = static_cast<std::size_t>(plan.problem.rhs);
  const std::vector<double> b = random_step_rhs(s, r, seed);
  const HinesAccuracy acc = hines_accuracy(s, b, plan.problem.rhs);
  const std::vector<double>& ref = acc.ref;
  std::vector<double> x;
  if (plan.problem.dtype == "f64") {
    x = interpret_hines(plan, s.diag, s.upper, s.lower, b);
  } else {
    const auto f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
    const auto xf = interpret_hines(plan, f(s.diag), f(s.upper), f(s.lower), f(b));
    x.assign(xf.begin(), xf.end());
  }
  return {hines_max_rel_error(x, ref), acc.tolerance(plan.problem.dtype), acc.note(plan.problem.dtype),
          backward_error(s, x, b, r), backward_error(s, hines_solve_many(s, b, r), b, r)};
}

}  // namespace

void add_hines(CLI::App& app, std::function<int()>& run) {
  auto a = std::make_shared<HinesArgs>();
  CLI::App* cmd = app.add_subcommand("hines", "Plan the Hines solver of one or more neuron morphologies");
  cmd->add_option("files", a->files, "SWC files; their cells form one forest")->required();
  cmd->add_option("--cells", a->cells, "Copies of the forest (many cells of one morphology)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--resolution", a->resolution, "Compartments per SWC segment")
      ->check(CLI::Range(1, kMaxResolution))
      ->capture_default_str();
  cmd->add_option("--dtype", a->dtype, "Arithmetic of the executor")
      ->check(CLI::IsMember({"f64", "f32"}))
      ->capture_default_str();
  cmd->add_option("--rhs", a->rhs, "Right-hand sides per solve (R)")->check(CLI::Range(1, 1024))->capture_default_str();
  // K = 1 would cut every row: no decomposition. 0 asks for the planner's rule.
  const CLI::Validator not_one(
      [](const std::string& v) {
        return v == "1" ? std::string("K = 1 is no decomposition (0: the rule, or 2..1024)") : std::string();
      },
      "", "not 1");
  cmd->add_option(
         "--k", a->plan.k,
         "Chain length K of the fine decomposition on the levels the block kernel runs (0: the rule, 6 "
         "for R 1, else 3)")
      ->check(CLI::Range(0, 1024) & not_one)
      ->capture_default_str();
  cmd->add_option("--k-large", a->plan.k_large,
                  "K on levels whose largest cell exceeds 12,288 rows (the grid-kernel levels; 0: --k)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  cmd->add_flag("--minimal", a->minimal, "Minimal decomposition (branch points only) instead of fine");
  cmd->add_option("--depth", a->plan.depth, "Decomposition levels (-1: the threshold rule)")
      ->check(CLI::Range(-1, kHinesMaxDepth))
      ->capture_default_str();
  cmd->add_option("--base-rows", a->plan.base_rows,
                  "Per-cell base threshold of the depth rule (0: max(8, 64/R))")
      ->check(CLI::Range(0, 1 << 28));
  cmd->add_option("--grid-levels", a->plan.grid_levels,
                  "Levels run by grid-wide kernels (-1: the execution rule)")
      ->check(CLI::Range(-1, kHinesMaxDepth));
  cmd->add_option("--block-threads", a->plan.block_threads,
                  "Threads of the per-cell block kernel (0: automatic)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option(
         "--code", a->plan.code,
         "Where the block kernel finds each cell's base: tables, unrolled (straight-line code, parent "
         "offsets as immediates), or auto (unrolled within --code-budget)")
      ->check(CLI::IsMember({"auto", "tables", "unrolled"}))
      ->capture_default_str();
  cmd->add_option("--code-budget", a->plan.code_budget,
                  "Estimated instructions auto may spend on unrolled bases")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40))
      ->capture_default_str();
  cmd->add_option(
         "--shared-workspace", a->plan.shared_workspace,
         "Bytes of shared memory a cell's block may keep the workspace of its deepest levels in (-1: the "
         "rule, an SM's shared memory divided among the blocks it holds; 0: all in global memory)")
      ->check(CLI::Range(std::int64_t{-1}, kHinesSharedWorkspaceMax))
      ->capture_default_str();
  cmd->add_option("-o,--output", a->output, "Compile the executor and write its bundle (.sccb)")
      ->check(kOutputPath);
  flags::add_arch_flag(cmd, a->arch, "GPU the plan and the cubin are for");
  cmd->add_option("--db", a->db,
                  "Tuning database (sparsecc tune FILE.swc ...): plan with its recorded winner for this forest, "
                  "R, dtype and GPU; otherwise the rules");
  cmd->add_option("--gpu", a->gpu,
                  "Target GPU name for --db lookups (default: this machine's GPU, or any of --arch's compute "
                  "capability)");
  cmd->add_flag("--plan-json", a->plan_json, "Print the plan as JSON");
  cmd->add_flag("--check", a->check,
                "Run the plan's interpreter on the right-hand sides of a time step from random potentials "
                "and currents against the serial reference in extended precision (tolerance 1e-12 in f64, "
                "1e-4 in f32, raised to 16x the serial solver's own error on ill-conditioned systems; "
                "exit 1 above it)");
  cmd->add_option("--seed", a->seed, "Seed of the --check right-hand sides")
      ->check(kNotNegative)
      ->capture_default_str();
  cmd->callback([&run, a] {
    run = [a]() -> int {
      if (!a->output.empty()) {  // before the work
        std::vector<std::string> inputs = a->files;
        inputs.push_back(a->db);
        check_output_file(a->output, inputs);
      }
      const GpuTarget target = resolve_gpu_target(a->arch);
      const HinesSystem s = load_hines_forest(a->files, a->cells, a->resolution);
      HinesOptions o = a->plan;
      o.decomposition = a->minimal ? HinesDecomposition::minimal : HinesDecomposition::fine;
      if (!a->db.empty()) {
        const TunedHines tuned = choose_tuned_hines(a->db, s, a->rhs, a->dtype, o, target, a->gpu);
        fmt::print(stderr, "sparsecc: {}\n", tuned.how);
        o = tuned.options;
      }
      const HinesPlan plan = plan_hines(s, a->rhs, a->dtype, o, target);
      if (const auto errors = check_hines_plan(plan); !errors.empty())
        throw std::runtime_error("the planner produced an invalid plan: " + errors.front());
      if (a->plan_json) fmt::print("{}\n", to_json(plan).dump());
      std::string levels;
      for (const HinesLevel& L : plan.levels)
        levels += a->minimal ? fmt::format("{} rows ({} chains, {} junctions) -> ", L.size, L.chains.size(), L.junctions.size())
                             : fmt::format("{} rows (K {}: {} chains, {} junctions) -> ", L.size, L.k, L.chains.size(),
                                           L.junctions.size());
      fmt::print(stderr,
                 "planned {} compartments in {} cells, R = {}, {}: {} decomposition, depth {}: {}base {} rows "
                 "(one thread per cell, {} code); {} grid levels, {} threads per cell block\n",
                 plan.problem.n, plan.problem.cells, plan.problem.rhs, plan.problem.dtype, to_string(plan.decomposition),
                 plan.depth(), levels, plan.base_size(), to_string(plan.code),
                 plan.grid_levels, plan.block_threads);
      if (!a->output.empty()) {
        CudaCompileOptions co;
        co.arch = target.arch;
        const CompiledHines c = compile_hines(plan, co);
        const rt::Bundle bundle = hines_bundle(plan, c.schedule, s, c.code.cubin, c.code.ptx, target.arch);
        write_bundle(a->output, bundle);
        const std::string shared =
            c.schedule.shared_from < plan.depth()
                ? fmt::format(", levels {}..{} in {} KiB of shared memory per block", c.schedule.shared_from,
                              plan.depth() - 1, (c.schedule.shared_bytes() + 1023) / 1024)
                : "";
        fmt::print(stderr,
                   "wrote {}: {} launches per step, {} segment types, {} KiB of tables, {} MiB workspace{} "
                   "({:.1f} s to compile)\n",
                   a->output, c.schedule.launches.size(), c.schedule.segment_types,
                   c.schedule.tables.size() * 4 / 1024, c.schedule.workspace_bytes() >> 20, shared,
                   c.code.seconds);
      }
      if (!a->check) return kExitOk;
      const CheckResult c = check_plan_numerics(plan, s, a->seed);
      fmt::print(stderr,
                 "plan interpreter vs extended-precision serial reference: max relative error {:.3g} "
                 "(tolerance {:.3g}{}): {}; backward error {:.3g} (the serial fp64 solve's {:.3g})\n",
                 c.error, c.tolerance, c.note.empty() ? "" : "; " + c.note, c.error <= c.tolerance ? "ok" : "FAILED",
                 c.backward, c.ref_backward);
      return c.error <= c.tolerance ? kExitOk : kExitCheckFailed;
    };
  });
}

}  // namespace sparsecc::cli
