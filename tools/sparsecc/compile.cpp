// sparsecc compile MATRIX[:tensor] --n N ... -o OUT.sccb: inspect, plan, emit CUDA C++ (compiled with
// NVRTC) or PTX (assembled with nvJitLink), and write the executor bundle (with the matrix as its
// verification section).
#include <fmt/format.h>

#include <chrono>

#include "cli.hpp"
#include "sparsecc/bundle/spmm_bundle.hpp"
#include "sparsecc/bundle/write_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/output.hpp"
#include "sparsecc/compile/compile_kernel.hpp"
#include "sparsecc/compile/resource_usage.hpp"
#include "sparsecc/emit/spmm_cuda.hpp"
#include "sparsecc/emit/spmm_ptx.hpp"
#include "sparsecc/io/load.hpp"
#include "spmm_options.hpp"
#include "tune_lookup.hpp"

namespace sparsecc::cli {

void add_spmm_options(CLI::App* cmd, SpmmArgs& a) {
  cmd->add_option("matrix", a.matrix,
                  "FILE or FILE:TENSOR (.mtx, .smtx, .npy, .npz, .safetensors; .gz accepted)")
      ->required();
  cmd->add_option("--n", a.n, "Columns of B and C (the batch dimension)")
      ->required()
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_flag("--runtime-n", a.runtime_n,
                "Take N as a kernel argument (any N at run time) instead of fixed");
  cmd->add_option("--bias", a.bias, "Bias vector FILE[:TENSOR] (one value per row of A)");
  cmd->add_flag("--relu", a.relu, "Apply ReLU after the bias");
  cmd->add_option("--values", a.values,
                  "Weights as code literals (baked), read from an array (streamed), a loop over a step table (rolled, fp32), "
                  "or auto")
      ->check(CLI::IsMember({"baked", "streamed", "rolled", "auto"}))
      ->capture_default_str();
  cmd->add_option("--seed", a.seed, "Seed for the values of pattern-only .smtx files")
      ->check(kNotNegative)
      ->capture_default_str();
  cmd->add_option("--rows-per-block", a.rows_per_block, "Rows of A per thread block (0: automatic)")
      ->check(CLI::Range(0, 64));
  cmd->add_option("--n-tile", a.n_tile, "Columns of C per thread group (0: automatic)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--groups", a.groups, "Thread groups splitting K (0: automatic)")->check(CLI::Range(0, 32));
  cmd->add_option("--cols-per-thread", a.cols_per_thread,
                  "Columns of C a thread computes (0: automatic; 2 for fp32 needs a fixed even N)")
      ->check(CLI::Range(0, 2));
  cmd->add_option("--step-lanes", a.step_lanes,
                  "Rolled plans: lanes of a warp that take different steps of a row, 1, 2, 4, 8, 16 or 32 "
                  "(0: automatic, 32 / N rounded up to a power of two for a fixed N of at most 8, else 1)")
      ->check(CLI::IsMember({0, 1, 2, 4, 8, 16, 32}));
  cmd->add_option("--max-registers", a.max_registers,
                  "Register cap per thread for the assembler (0: automatic; PTX route)")
      ->check(CLI::Range(0, 255));
  cmd->add_option("--assembler-opt", a.assembler_opt,
                  "ptxas optimization level 0..3 (-1: automatic, which is 3)")
      ->check(CLI::Range(-1, 3));
  cmd->add_flag("--balanced", a.balanced, "Balance block rows by nonzeros instead of equal row panels");
  cmd->add_flag("--equal-rows", a.equal_rows,
                "Equal row panels even where they are uneven (default: balanced when the heaviest panel "
                "holds 35 % more nonzeros than the mean, fp32 unrolled plans; clustered for 32-row plans at "
                "N > 1024 where that cuts the loads of B by 10 %)");
  cmd->add_flag("--clustered-rows", a.clustered_rows,
                "Equal panels of rows regrouped so that a panel's rows share columns (fewer loads of B; "
                "fp32 unrolled plans)");
  cmd->add_option("--stage-dense", a.stage_dense,
                  "Copy B of the steps with at least this many nonzeros of their block row to shared memory "
                  "with cp.async at the start of each group (ASpT-style dense column segments; fp32 unrolled "
                  "plans; 0: none)")
      ->check(CLI::Range(0, 64));
  cmd->add_option("--dtype", a.dtype, "Element type of B and C (f16 / bf16: weights rounded to it)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--accumulate", a.accumulate,
                  "Accumulation of the unrolled path for f16 / bf16: f32, or the dtype (paired FMAs)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--blocklets", a.blocklets,
                  "Dense tiles on tensor cores (f16 / bf16): off, auto (the inspector's cost estimate) or "
                  "BHxBW[:FILL] with BHxBW one of 16x8, 16x16, 8x8")
      ->capture_default_str();
  cmd->add_option(
         "--programmatic", a.programmatic,
         "Programmatic dependent launch (sm_90 on): wait (wait for the previous kernel), trigger (fp32: "
         "wait, and let the next kernel launch as each block row ends), off, or auto (trigger for fp32 "
         "kernels rolled or unrolled of at most 12k instructions, wait for the others)")
      ->check(CLI::IsMember({"auto", "off", "wait", "trigger"}))
      ->capture_default_str();
}

SpmmOptions spmm_options(const SpmmArgs& a) {
  SpmmOptions o;
  o.rows_per_block = a.rows_per_block;
  o.n_tile = a.n_tile;
  o.groups = a.groups;
  o.cols_per_thread = a.cols_per_thread;
  o.step_lanes = a.step_lanes;
  o.max_registers = a.max_registers;
  if (a.assembler_opt >= 0) o.assembler_opt_level = a.assembler_opt;
  if (a.balanced + a.equal_rows + a.clustered_rows > 1)
    throw UsageError("--balanced, --equal-rows and --clustered-rows exclude each other");
  if (a.balanced) o.row_split = SpmmRowSplit::balanced;
  if (a.equal_rows) o.row_split = SpmmRowSplit::equal;
  if (a.clustered_rows) o.row_split = SpmmRowSplit::clustered;
  if (a.values != "auto") o.value_mode = parse_value_mode(a.values, "--values");
  o.stage_min_entries = a.stage_dense;
  o.accumulate = require_dtype(a.accumulate, "--accumulate", kSpmmDtypes);
  o.programmatic = parse_programmatic(a.programmatic, "--programmatic");
  set_blocklets(o, a.dtype == "f32" && a.blocklets == "auto" ? "off" : a.blocklets);
  return o;
}

std::vector<std::string> input_paths(const std::vector<std::string>& specs) {
  std::vector<std::string> out;
  for (const std::string& spec : specs) {
    if (spec.empty()) continue;
    out.push_back(spec);
    if (const std::string path = parse_input_spec(spec).path; path != spec) out.push_back(path);
  }
  return out;
}

CsrMatrix load_spmm_matrix(const std::string& spec, const LoadOptions& options, const std::string& dtype) {
  CsrMatrix a = load_matrix(spec, options);
  const InputSpec in = parse_input_spec(spec);
  SourceLocation where = SourceLocation::in_file(in.path);
  where.tensor = in.tensor;
  require_spmm_matrix(a, where);
  check_values_fit(a, dtype, in.path, in.tensor);
  return a;
}

std::vector<double> load_bias(const std::string& spec, std::int64_t rows) {
  const Tensor t = load_tensor(spec);
  const std::string path = parse_input_spec(spec).path;
  if (t.numel() != rows)
    throw_at_byte(path, -1, fmt::format("bias has {} values but the matrix has {} rows", t.numel(), rows),
                  t.name);
  check_bias_fits(t.data, path, t.name);
  return t.data;
}

namespace {

struct CompileArgs {
  SpmmArgs spmm;
  std::string arch = "sm_90";
  std::string emit = "ptx";  // fp32; f16 / bf16 plans take cuda unless --emit says otherwise
  bool emit_given = false;
  std::vector<std::string> ptxas;
  std::string output;
  bool plan_json = false;
  std::string db;
  std::string gpu;
  bool cold_l2 = false;
};

int run_compile(const CompileArgs& args) {
  // The output and the assembler options are checked before the work.
  check_output_file(args.output, input_paths({args.spmm.matrix, args.spmm.bias, args.db}));
  if (!args.ptxas.empty()) {
    std::vector<std::string> ptxas;
    for (const auto& o : args.ptxas) ptxas.push_back("-Xptxas=" + o);
    const std::string given_emit = args.spmm.dtype != "f32" && !args.emit_given ? "cuda" : args.emit;
    check_ptxas_options(ptxas, args.arch, parse_kernel_language(given_emit), "--Xptxas");
  }
  LoadOptions load;
  load.seed = args.spmm.seed;
  const CsrMatrix a = load_spmm_matrix(args.spmm.matrix, load, args.spmm.dtype);
  const std::vector<double> bias = args.spmm.bias.empty() ? std::vector<double>{} : load_bias(args.spmm.bias, a.rows);
  SpmmProblem problem;
  problem.m = a.rows;
  problem.k = a.cols;
  problem.n = args.spmm.n;
  problem.n_mode = args.spmm.runtime_n ? SpmmNMode::runtime : SpmmNMode::fixed;
  problem.bias = !bias.empty();
  problem.relu = args.spmm.relu;
  problem.dtype = require_dtype(args.spmm.dtype, "--dtype", kSpmmDtypes);
  SpmmOptions plan_options = spmm_options(args.spmm);
  std::string emit = problem.dtype != DType::f32 && !args.emit_given ? "cuda" : args.emit;
  if (!args.db.empty()) {
    // The tuning database's winner (or the predictor's choice) replaces the automatic tiling.
    TunedChoice choice = choose_tuned_plan(args.db, a, problem, plan_options, parse_kernel_language(emit),
                                           args.arch, args.gpu, args.cold_l2);
    fmt::print(stderr, "sparsecc: {}\n", choice.how);
    plan_options = choice.options;
    emit = to_string(choice.emitter);
  }
  const SpmmPlan plan = plan_spmm(a, problem, plan_options);
  if (const auto problems = check_plan(plan, a); !problems.empty())
    throw std::runtime_error("the inspector produced an invalid plan: " + problems.front());
  if (args.plan_json) fmt::print("{}\n", to_json(plan).dump());

  const auto t0 = std::chrono::steady_clock::now();
  const EmittedKernel kernel = emit_spmm(plan, a, parse_kernel_language(emit), args.arch);
  const double emit_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CudaCompileOptions options;
  options.arch = args.arch;
  options.extra.push_back(kPtxasVerbose);
  for (const auto& o : args.ptxas) options.extra.push_back("-Xptxas=" + o);
  const CudaCompileResult compiled = compile_kernel(kernel, plan.hints.kernel_name, options);
  const ResourceUsage usage = resource_usage(compiled);

  write_bundle(args.output, make_spmm_bundle(plan, a, args.arch, compiled.cubin, compiled.ptx,
                                            kernel.packed_values, kernel.fragment_words, bias));

  fmt::print(
      stderr,
      "compiled {} ({}x{}, {} nonzeros) for N = {}{}: {} block rows x {} rows ({}), n_tile {}, {} group(s), "
      "{} values{}; emitted {} in {:.2f} s, {} {:.2f} s, cubin {} bytes ({:.1f} bytes/nonzero), {} "
      "registers, "
      "stack {} B, spills {} -> {}\n",
      args.spmm.matrix, a.rows, a.cols, a.nnz(), args.spmm.n, args.spmm.runtime_n ? " (runtime N)" : "",
      plan.block_rows(), plan.layout.rows_per_block, to_string(plan.layout.row_split), plan.layout.n_tile, plan.layout.groups,
      to_string(plan.value_mode()),
      plan.step_lanes() > 1
          ? fmt::format(" ({} step lanes of {} columns)", plan.step_lanes(), plan.block_columns())
          : "",
      to_string(kernel.language), emit_seconds,
      kernel.language == KernelLanguage::ptx ? "nvJitLink" : "NVRTC", compiled.seconds, compiled.cubin.size(),
      a.nnz() ? static_cast<double>(compiled.cubin.size()) / static_cast<double>(a.nnz()) : 0.0,
      usage.registers, usage.stack_frame_bytes,
      usage.spill_store_bytes < 0 ? std::string("unknown (no ptxas report; they lie in the stack frame)")
                                  : fmt::format("{} B", usage.spill_store_bytes + usage.spill_load_bytes),
      args.output);
  if (plan.half())
    fmt::print(stderr, "  {} ({} accumulation), blocklets {}\n", plan.problem.dtype, plan.epilogue.accumulate,
               plan.blocklets().shape.empty()
                   ? std::string("off")
                   : fmt::format("{} fill >= {:.3g} ({}): {} tiles in {} fragments of k {}, {} of {} nonzeros "
                                 "({:.1f} %), {} explicit zeros",
                                 plan.blocklets().shape, plan.blocklets().fill_threshold, plan.blocklets().chosen_by,
                                 plan.blocklets().tiles, plan.fragment_count(), plan.fragment_k(),
                                 plan.blocklets().nnz_covered, a.nnz(),
                                 a.nnz() ? 100.0 * static_cast<double>(plan.blocklets().nnz_covered) / static_cast<double>(a.nnz()) : 0.0,
                                 plan.blocklets().explicit_zeros));
  if (usage.spill_store_bytes + usage.spill_load_bytes > 0 || usage.stack_frame_bytes > 0)
    fmt::print(stderr, "sparsecc: warning: the kernel uses local memory (spills or a stack frame)\n");
  return kExitOk;
}

}  // namespace

void add_compile(CLI::App& app, std::function<int()>& run) {
  auto args = std::make_shared<CompileArgs>();
  CLI::App* cmd =
      app.add_subcommand("compile", "Compile an SpMM executor for a fixed sparse matrix into a bundle");
  add_spmm_options(cmd, args->spmm);
  cmd->add_option("--arch", args->arch, "GPU architecture of the cubin (PTX is included for others)")
      ->check(CLI::IsMember({"sm_90", "sm_90a", "sm_80", "sm_86", "sm_89", "sm_100", "sm_120"}))
      ->capture_default_str();
  cmd->add_option("--emit", args->emit,
                  "Emitter: direct PTX assembled with nvJitLink (fast; fp32 only), or CUDA C++ compiled with "
                  "NVRTC (the default for f16 / bf16)")
      ->check(CLI::IsMember({"ptx", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--Xptxas", args->ptxas,
                  "Pass an option to ptxas (e.g. -O1 for faster assembly of very large kernels); repeatable");
  cmd->add_flag("--plan-json", args->plan_json, "Print the executor plan as JSON on stdout");
  cmd->add_option("--db", args->db,
                  "Tuning database: compile its recorded winner for this matrix, problem and GPU, or else the "
                  "predictor's choice");
  cmd->add_option("--gpu", args->gpu,
                  "Target GPU name for --db lookups (default: this machine's GPU, or any of --arch's compute "
                  "capability)");
  cmd->add_flag(
      "--cold-l2", args->cold_l2,
      "--db: look up the winner tuned with cold L2 (`tune --cold-l2`), for deployments whose launches "
      "find the executor's code and operands out of L2");
  cmd->add_option("-o,--output", args->output, "Bundle file to write (.sccb)")
      ->check(kOutputPath)
      ->required();
  cmd->callback([&run, args, cmd] {
    args->emit_given = cmd->count("--emit") > 0;
    run = [args] { return run_compile(*args); };
  });
}

}  // namespace sparsecc::cli
