// sparsecc compile MATRIX[:tensor] --n N ... -o OUT.sccb: the pipeline driver (sparsecc/pipeline) from
// the command line: read the matrix, pick the options (flags, or --db), compile, write the bundle,
// print the report.
#include <fmt/format.h>
#include <unistd.h>

#include "cli.hpp"
#include "cpu_target.hpp"
#include "sparsecc/bundle/write_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/output.hpp"
#include "sparsecc/compile/compile_kernel.hpp"
#include "sparsecc/io/npy.hpp"
#include "sparsecc/model/conv_spec.hpp"
#include "sparsecc/pipeline/conv.hpp"
#include "sparsecc/pipeline/inputs.hpp"
#include "sparsecc/pipeline/pipeline.hpp"
#include "sparsecc/plan/spmm_cpu_plan.hpp"
#include "sparsecc/tune/lookup.hpp"
#include "spmm_options.hpp"
#include "target_flags.hpp"

namespace sparsecc::cli {

void add_spmm_options(CLI::App* cmd, SpmmArgs& a) {
  cmd->add_option("matrix", a.matrix,
                  "FILE or FILE:TENSOR (.mtx, .smtx, .npy, .npz, .safetensors; .gz accepted)")
      ->required();
  cmd->add_option("--n", a.n, "Columns of B and C (the batch dimension; required, except with --conv)")
      ->required()
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_flag("--runtime-n", a.runtime_n,
                "Take N as a kernel argument (any N at run time) instead of fixed");
  cmd->add_option("--bias", a.bias, "Bias vector FILE[:TENSOR] (one value per row of A)");
  cmd->add_flag("--relu", a.relu, "Apply ReLU after the bias");
  cmd->add_option("--seed", a.seed, "Seed for the values of pattern-only .smtx files")
      ->check(kNotNegative)
      ->capture_default_str();
  cmd->add_option("--dtype", a.dtype, "Element type of B and C (f16 / bf16: weights rounded to it)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  flags::add_spmm_plan_flags(cmd, a);
  flags::add_half_flags(cmd, a);
}

SpmmOptions spmm_options(const SpmmArgs& a) { return flags::spmm_options(a, a.dtype); }

void add_allow_long_compile_flag(CLI::App* cmd, bool& allow) {
  cmd->add_flag("--allow-long-compile", allow,
                "Run CUDA C++ compiles estimated to take minutes instead of refusing them (or, without "
                "--emit, taking the PTX route)");
}

pipeline::LongCompile long_compile_rule(bool allow, bool emit_given) {
  if (allow) return pipeline::LongCompile::allow;
  return emit_given ? pipeline::LongCompile::refuse : pipeline::LongCompile::take_ptx;
}

pipeline::ProgressSink progress_printer() {
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  return [tty, last = -1.0](const std::string& step, double fraction, double left) mutable {
    if (fraction <= 0.0) {
      fmt::print(stderr, "sparsecc: {}: about {:.0f} s{}", step, left, tty ? "" : "\n");
      last = 0.0;
    } else if (fraction >= 1.0) {
      if (tty) fmt::print(stderr, "\r\033[K");
    } else if (tty) {
      fmt::print(stderr, "\r\033[Ksparsecc: {}: {:.0f} % (about {:.0f} s left)", step, 100 * fraction, left);
    } else if (fraction - last >= 0.25) {
      fmt::print(stderr, "sparsecc: {}: {:.0f} % (about {:.0f} s left)\n", step, 100 * fraction, left);
      last = fraction;
    }
  };
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
  bool json = false;
  bool allow_long = false;
  std::string db;
  std::string gpu;
  bool cold_l2 = false;
  std::string cpu_target;  // --target: a CPU executor
  std::string conv;        // --conv SPEC: a convolution executor (sparsecc/model/conv_spec.hpp)
  std::string layout = "nchw";
};

// --conv: the filter bank (a matrix or a 4-D OIHW tensor) and the geometry, compiled as a convolution
// executor (fp32, fixed N = output pixels, the batch at run time), checked in process through the
// plan's interpreter (interpret_conv on random images against the fp64 conv2d) before it is written.
int run_compile_conv(const CompileArgs& args) {
  check_output_file(args.output, pipeline::input_paths({args.spmm.matrix, args.spmm.bias}));
  const ConvSpec spec = parse_conv_spec(args.conv, "--conv");
  rt::ConvLayout layout;
  try {
    layout = rt::parse_conv_layout(args.layout, "--layout");
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  const GpuTarget target = resolve_gpu_target(args.arch);
  LoadOptions load;
  load.seed = args.spmm.seed;
  load.progress = progress_printer();
  const pipeline::ConvWeights w = pipeline::load_conv_weights(args.spmm.matrix, load, args.spmm.dtype);
  const InputSpec in = parse_input_spec(args.spmm.matrix);
  const rt::ConvGeometry g =
      conv_geometry_for(spec, layout, w.a.rows, w.a.cols, w.stored_shape, in.path, in.tensor, "--conv");
  pipeline::SpmmRequest request;
  if (!args.spmm.bias.empty()) request.bias = pipeline::load_bias(args.spmm.bias, w.a.rows);
  request.problem = conv_problem(g, w.a.rows, !request.bias.empty(), args.spmm.relu,
                                 require_dtype(args.spmm.dtype, "--dtype", kSpmmDtypes));
  request.options = spmm_options(args.spmm);
  if (args.emit_given) request.emit = parse_kernel_language(args.emit);
  if (!args.ptxas.empty()) {
    std::vector<std::string> ptxas;
    for (const auto& o : args.ptxas) ptxas.push_back("-Xptxas=" + o);
    check_ptxas_options(ptxas, target.arch, request.emit.value_or(pipeline::emitter_default(request.problem)),
                        "--Xptxas");
  }
  request.ptxas = args.ptxas;
  request.long_cuda = long_compile_rule(args.allow_long, args.emit_given);
  request.progress = progress_printer();
  pipeline::SpmmArtifact art = pipeline::compile_spmm(w.a, request, target);
  art.report.matrix = args.spmm.matrix;
  if (args.plan_json) fmt::print("{}\n", to_json(art.plan).dump());
  if (!art.report.emit_note.empty()) fmt::print(stderr, "sparsecc: {}\n", art.report.emit_note);
  const pipeline::ConvCheck check = pipeline::check_conv_plan(art.plan, w.a, request.bias);
  if (!check.ok()) {
    fmt::print(stderr, "sparsecc: {}: the convolution executor failed its check: {}\n", args.spmm.matrix,
               check.text());
    return kExitCheckFailed;
  }
  if (art.bundle && !art.bundle->metadata.conv) art.bundle->metadata.conv = g;
  pipeline::write_bundle_file(args.output, *art.bundle, progress_printer());
  if (args.json) {
    nlohmann::json j = art.report.json(art);
    j["conv"] = rt::to_json(g);
    j["conv"]["spec"] = conv_spec_string(g);
    j["conv"]["out_channels"] = w.a.rows;
    j["conv"]["stored_shape"] = w.stored_shape;
    j["check"] = {{"how", "plan interpreter"},
                  {"images", check.batch},
                  {"seed", check.seed},
                  {"rel_error", check.rel_error},
                  {"tolerance", check.tolerance}};
    fmt::print("{}\n", j.dump());
  }
  fmt::print(stderr, "{} -> {}\n", art.report.text(art), args.output);
  fmt::print(stderr, "  convolution {} ({} filters of {}, {}x{} outputs an image), batch at run time: {}\n",
             rt::describe(g), w.a.rows, shape_string(w.stored_shape), g.out_height(), g.out_width(),
             check.text());
  if (art.usage.spill_store_bytes + art.usage.spill_load_bytes > 0 || art.usage.stack_frame_bytes > 0)
    fmt::print(stderr, "sparsecc: warning: the kernel uses local memory (spills or a stack frame)\n");
  return kExitOk;
}

// --target: the CPU pipeline (f32, f16 or bf16 with fp32 accumulation; fixed N) with the planner's
// options (--db: the tuned winner's), its in-process check, the bundle.
int run_compile_cpu(const CompileArgs& args) {
  check_output_file(args.output, pipeline::input_paths({args.spmm.matrix, args.spmm.bias, args.db}));
  if (args.spmm.runtime_n)
    throw UsageError("--target: CPU executors are compiled for a fixed N (no --runtime-n)");
  const DType dtype = require_dtype(args.spmm.dtype, "--dtype", kSpmmCpuDtypes);
  if (dtype != DType::f32 && !args.db.empty())
    throw UsageError("--db: the CPU tuner's records are of fp32 executors; no --db with --dtype f16/bf16");
  LoadOptions load;
  load.seed = args.spmm.seed;
  load.progress = progress_printer();
  const CsrMatrix a = pipeline::load_spmm_matrix(args.spmm.matrix, load, args.spmm.dtype);
  std::vector<double> bias;
  if (!args.spmm.bias.empty()) bias = pipeline::load_bias(args.spmm.bias, a.rows);
  const SpmmProblem problem{a.rows,        a.cols,         args.spmm.n, SpmmNMode::fixed,
                            !bias.empty(), args.spmm.relu, dtype,       std::nullopt};
  SpmmCpuOptions options;
  if (!args.db.empty()) {
    std::string how;
    options = tuned_cpu_spmm_options(args.db, a, problem, args.cpu_target, &how);
    fmt::print(stderr, "sparsecc: {}\n", how);
  }
  const CpuExecutor ex = compile_cpu_spmm(a, problem, bias, args.cpu_target, options);
  if (args.plan_json) fmt::print("{}\n", ex.plan.dump());
  if (!ex.check_ok) {
    fmt::print(stderr, "sparsecc: {}: the CPU executor failed its check: {}\n", args.spmm.matrix, ex.check);
    return kExitCheckFailed;
  }
  write_bundle(args.output, ex.bundle);
  if (args.json) fmt::print("{}\n", ex.json.dump());
  fmt::print(stderr, "{}: {} -> {}\n", args.spmm.matrix, ex.text, args.output);
  if (!ex.check.empty()) fmt::print(stderr, "  {}\n", ex.check);
  return kExitOk;
}

int run_compile(const CompileArgs& args) {
  // The output and the assembler options are checked before the work.
  check_output_file(args.output, pipeline::input_paths({args.spmm.matrix, args.spmm.bias, args.db}));
  const GpuTarget target = resolve_gpu_target(args.arch);
  if (!args.ptxas.empty()) {
    std::vector<std::string> ptxas;
    for (const auto& o : args.ptxas) ptxas.push_back("-Xptxas=" + o);
    const std::string given_emit = args.spmm.dtype != "f32" && !args.emit_given ? "cuda" : args.emit;
    check_ptxas_options(ptxas, target.arch, parse_kernel_language(given_emit), "--Xptxas");
  }
  LoadOptions load;
  load.seed = args.spmm.seed;
  load.progress = progress_printer();
  const CsrMatrix a = pipeline::load_spmm_matrix(args.spmm.matrix, load, args.spmm.dtype);
  pipeline::SpmmRequest request;
  if (!args.spmm.bias.empty()) request.bias = pipeline::load_bias(args.spmm.bias, a.rows);
  request.problem = {a.rows,
                     a.cols,
                     args.spmm.n,
                     args.spmm.runtime_n ? SpmmNMode::runtime : SpmmNMode::fixed,
                     !request.bias.empty(),
                     args.spmm.relu,
                     require_dtype(args.spmm.dtype, "--dtype", kSpmmDtypes),
                     std::nullopt};
  request.options = spmm_options(args.spmm);
  if (args.emit_given) request.emit = parse_kernel_language(args.emit);
  request.ptxas = args.ptxas;
  request.long_cuda = long_compile_rule(args.allow_long, args.emit_given);
  request.progress = progress_printer();
  std::string chosen_by;
  if (!args.db.empty()) {
    // The tuning database's winner (or the predictor's choice) replaces the automatic tiling.
    tune::TunedChoice choice = tune::choose_tuned_plan(
        args.db, a, request.problem, request.options,
        request.emit.value_or(pipeline::emitter_default(request.problem)), target, args.gpu, args.cold_l2);
    fmt::print(stderr, "sparsecc: {}\n", choice.how);
    request.options = choice.options;
    request.emit = choice.emitter;
    chosen_by = choice.how;
  }
  pipeline::SpmmArtifact art = pipeline::compile_spmm(a, request, target);
  art.report.matrix = args.spmm.matrix;
  art.report.chosen_by = chosen_by;
  if (args.plan_json) fmt::print("{}\n", to_json(art.plan).dump());
  if (!art.report.emit_note.empty()) fmt::print(stderr, "sparsecc: {}\n", art.report.emit_note);
  pipeline::write_bundle_file(args.output, *art.bundle, progress_printer());
  if (args.json) fmt::print("{}\n", art.report.json(art).dump());

  const SpmmPlan& plan = art.plan;
  fmt::print(stderr, "{} -> {}\n", art.report.text(art), args.output);
  if (plan.half())
    fmt::print(
        stderr, "  {} ({} accumulation), blocklets {}\n", plan.problem.dtype, plan.epilogue.accumulate,
        plan.blocklets().shape.empty()
            ? std::string("off")
            : fmt::format("{} fill >= {:.3g} ({}): {} tiles in {} fragments of k {}, {} of {} nonzeros "
                          "({:.1f} %), {} explicit zeros",
                          plan.blocklets().shape, plan.blocklets().fill_threshold, plan.blocklets().chosen_by,
                          plan.blocklets().tiles, plan.fragment_count(), plan.fragment_k(),
                          plan.blocklets().nnz_covered, a.nnz(),
                          a.nnz() ? 100.0 * static_cast<double>(plan.blocklets().nnz_covered) /
                                        static_cast<double>(a.nnz())
                                  : 0.0,
                          plan.blocklets().explicit_zeros));
  if (art.usage.spill_store_bytes + art.usage.spill_load_bytes > 0 || art.usage.stack_frame_bytes > 0)
    fmt::print(stderr, "sparsecc: warning: the kernel uses local memory (spills or a stack frame)\n");
  return kExitOk;
}

}  // namespace

void add_compile(CLI::App& app, std::function<int()>& run) {
  auto args = std::make_shared<CompileArgs>();
  CLI::App* cmd =
      app.add_subcommand("compile", "Compile an SpMM executor for a fixed sparse matrix into a bundle");
  add_spmm_options(cmd, args->spmm);
  flags::add_arch_flag(cmd, args->arch, "GPU the plan and the cubin are for (PTX is included for others)");
  cmd->add_option("--emit", args->emit,
                  "Emitter: direct PTX assembled with nvJitLink (fast; fp32 only), or CUDA C++ compiled with "
                  "NVRTC (the default for f16 / bf16)")
      ->check(CLI::IsMember({"ptx", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--Xptxas", args->ptxas,
                  "Pass an option to ptxas (e.g. -O1 for faster assembly of very large kernels); repeatable");
  cmd->add_flag("--plan-json", args->plan_json, "Print the executor plan as JSON on stdout");
  cmd->add_flag("--json", args->json,
                "Print the compile report as JSON on stdout (after --plan-json's line)");
  add_allow_long_compile_flag(cmd, args->allow_long);
  cmd->add_option(
      "--db", args->db,
      "Tuning database: compile its recorded winner for this matrix, problem and GPU, or else the "
      "predictor's choice (with --target: the winner for this CPU model, or else the automatic plan)");
  cmd->add_option("--gpu", args->gpu,
                  "Target GPU name for --db lookups (default: this machine's GPU, or any of --arch's compute "
                  "capability)");
  cmd->add_flag(
      "--cold-l2", args->cold_l2,
      "--db: look up the winner tuned with cold L2 (`tune --cold-l2`), for deployments whose launches "
      "find the executor's code and operands out of L2");
  add_cpu_target_flag(cmd, args->cpu_target);
  cmd->add_option("--conv", args->conv,
                  "A convolution executor of this geometry: [IxHxW or HxW],kK[xK],sS[xS],pP[xP] or pT:L:B:R "
                  "(e.g. 64x56x56,k3,s1,p1); MATRIX is the filter bank O x (I*kh*kw) or a 4-D OIHW tensor");
  cmd->add_option("--layout", args->layout, "--conv: the layout of the images X and Y")
      ->check(CLI::IsMember({"nchw", "nhwc"}))
      ->capture_default_str();
  cmd->get_option("--n")->required(false);
  cmd->add_option("-o,--output", args->output, "Bundle file to write (.sccb)")
      ->check(kOutputPath)
      ->required();
  cmd->callback([&run, args, cmd] {
    args->emit_given = cmd->count("--emit") > 0;
    if (cmd->count("--layout") > 0 && cmd->count("--conv") == 0)
      throw CLI::ValidationError("--layout", "the layout of a convolution's images: give --conv too");
    if (cmd->count("--conv") > 0) {
      // A convolution's N is its output pixels (the batch is given at run time).
      static const std::vector<std::pair<std::string, std::string>> kRefused = {
          {"--n", "a convolution's N is its output pixels, fixed by --conv (the batch is given at run time)"},
          {"--runtime-n", "a convolution's N is its output pixels, fixed by --conv"},
          {"--target", "convolution executors are GPU executors (no CPU target yet)"},
          {"--db", "the tuning database holds SpMM problems, not convolutions"},
          {"--gpu", "for --db, which --conv does not take"},
          {"--cold-l2", "for --db, which --conv does not take"}};
      for (const auto& [name, why] : kRefused)
        if (cmd->count(name) > 0) throw CLI::ValidationError(name, "not with --conv: " + why);
      run = [args] { return run_compile_conv(*args); };
      return;
    }
    if (cmd->count("--n") == 0) throw CLI::RequiredError("--n");
    if (!args->cpu_target.empty()) {
      // The GPU's options mean nothing to a CPU executor: refused, not ignored.
      static const std::vector<std::string> kCpuOptions = {
          "matrix",   "--n",      "--bias", "--relu",      "--seed", "--dtype",
          "--target", "--output", "--json", "--plan-json", "--db",   "--runtime-n"};
      for (const CLI::Option* o : cmd->get_options())
        if (o->count() > 0 &&
            std::find(kCpuOptions.begin(), kCpuOptions.end(), o->get_name()) == kCpuOptions.end())
          throw CLI::ValidationError(o->get_name(), "a GPU option; --target builds a CPU executor");
      run = [args] { return run_compile_cpu(*args); };
      return;
    }
    run = [args] { return run_compile(*args); };
  });
}

}  // namespace sparsecc::cli
