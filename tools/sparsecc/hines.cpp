// sparsecc hines FILE.swc...: plan the Hines solver of one forest (the cells of every file, repeated
// --cells times; pipeline::compile_hines): junction selection, recursion depth, the plan as JSON, the
// executor's bundle (-o), and a check of the plan through its interpreter against the accuracy
// yardstick (the serial solve in extended precision: pipeline::check_hines_plan_numerics).
#include <fmt/format.h>

#include "cli.hpp"
#include "cpu_target.hpp"
#include "sparsecc/bundle/write_bundle.hpp"
#include "sparsecc/common/output.hpp"
#include "sparsecc/inspector/hines_planner.hpp"
#include "sparsecc/neuron/forest.hpp"
#include "sparsecc/pipeline/pipeline.hpp"
#include "sparsecc/pipeline/verify.hpp"
#include "sparsecc/tune/lookup.hpp"
#include "target_flags.hpp"

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
  std::string cpu_target;  // --target: a CPU executor
};

// --target: the CPU executor of the forest (SIMD across same-shape cells), checked in process
// against the accuracy yardstick before its bundle is written.
int run_hines_cpu(const HinesArgs& a) {
  if (a.output.empty()) throw UsageError("--target: give -o for the CPU executor's bundle");
  const HinesSystem s = load_hines_forest(a.files, a.cells, a.resolution);
  const CpuExecutor ex = compile_cpu_hines(s, a.dtype, a.rhs, a.cpu_target);
  if (a.plan_json) fmt::print("{}\n", ex.plan.dump());
  if (!ex.check_ok) {
    fmt::print(stderr, "sparsecc: the CPU executor failed its check: {}\n", ex.check);
    return kExitCheckFailed;
  }
  write_bundle(a.output, ex.bundle);
  fmt::print(stderr, "wrote {}: {}\n", a.output, ex.text);
  if (!ex.check.empty()) fmt::print(stderr, "  {}\n", ex.check);
  return kExitOk;
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
  cmd->add_option("--rhs", a->rhs, "Right-hand sides per solve (R)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
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
  cmd->add_option(
      "--db", a->db,
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
  add_cpu_target_flag(cmd, a->cpu_target);
  cmd->callback([&run, a, cmd] {
    if (!a->cpu_target.empty()) {
      // The GPU planner's options mean nothing to a CPU executor: refused, not ignored.
      for (const char* o :
           {"--k", "--k-large", "--minimal", "--depth", "--base-rows", "--grid-levels", "--block-threads",
            "--code", "--code-budget", "--shared-workspace", "--arch", "--db", "--gpu", "--check"})
        if (cmd->count(o) > 0)
          throw CLI::ValidationError(o, "a GPU option; --target builds a CPU executor (checked always)");
      run = [a] {
        if (a->output.empty()) throw UsageError("--target: give -o for the CPU executor's bundle");
        check_output_file(a->output, a->files);
        return run_hines_cpu(*a);
      };
      return;
    }
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
        const tune::TunedHines tuned =
            tune::choose_tuned_hines(a->db, s, a->rhs, a->dtype, o, target, a->gpu);
        fmt::print(stderr, "sparsecc: {}\n", tuned.how);
        o = tuned.options;
      }
      pipeline::HinesRequest request;
      request.rhs = a->rhs;
      request.dtype = a->dtype;
      request.options = o;
      request.compile = false;  // the plan first: printed before a compile that may fail
      const pipeline::HinesArtifact art = pipeline::compile_hines(s, request, target);
      const HinesPlan& plan = art.plan;
      if (a->plan_json) fmt::print("{}\n", to_json(plan).dump());
      fmt::print(stderr, "{}\n", art.plan_text());
      if (!a->output.empty()) {
        const pipeline::HinesArtifact built = pipeline::compile_hines_plan(plan, s, target);
        write_bundle(a->output, *built.bundle);
        fmt::print(stderr, "wrote {}: {}\n", a->output, built.compile_text());
      }
      if (!a->check) return kExitOk;
      const pipeline::HinesNumericsCheck c = pipeline::check_hines_plan_numerics(plan, s, a->seed);
      fmt::print(stderr,
                 "plan interpreter vs extended-precision serial reference: max relative error {:.3g} "
                 "(tolerance {:.3g}{}): {}; backward error {:.3g} (the serial fp64 solve's {:.3g})\n",
                 c.error, c.tolerance, c.note.empty() ? "" : "; " + c.note, c.ok() ? "ok" : "FAILED",
                 c.backward, c.ref_backward);
      return c.ok() ? kExitOk : kExitCheckFailed;
    };
  });
}

}  // namespace sparsecc::cli
