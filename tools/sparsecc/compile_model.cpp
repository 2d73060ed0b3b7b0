// sparsecc compile-model MODEL -o OUTDIR: every sparse weight matrix of a .npz, .safetensors or .onnx
// model compiled to an SpMM executor bundle (layers in parallel), plus manifest.json naming each
// layer, its shapes, op, file, fingerprint and plan. The folder is built beside OUTDIR and renamed
// into place only when every layer compiled, so a failure leaves no half-written output.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli.hpp"
#include "cpu_target.hpp"
#include "sparsecc/bundle/spmm_bundle.hpp"
#include "sparsecc/bundle/write_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "sparsecc/common/output.hpp"
#include "sparsecc/common/version.hpp"
#include "sparsecc/io/load.hpp"
#include "sparsecc/model/layers.hpp"
#include "sparsecc/model/model.hpp"
#include "sparsecc/pipeline/conv.hpp"
#include "sparsecc/pipeline/pipeline.hpp"
#include "sparsecc/tune/lookup.hpp"
#include "spmm_options.hpp"
#include "target_flags.hpp"

namespace sparsecc::cli {

namespace {

namespace fs = std::filesystem;

struct CompileModelArgs {
  std::string model;
  // --select, --max-density, --n, --layer-n(-file), --n-from-shapes, --batch, --relu, --relu-select
  ModelLayerArgs layers;
  SpmmArgs spmm;  // values, dtype, accumulate, blocklets
  std::string emit = "ptx";
  bool emit_given = false;
  bool allow_long = false;
  std::string arch = "sm_90";
  std::string db;
  std::string gpu;
  bool cold_l2 = false;
  int jobs = 0;
  bool list = false;
  std::string output;
  std::string cpu_target;     // --target: CPU executors
  bool conv_as_gemm = false;  // --conv-as-gemm: Conv layers as SpMMs of their im2col matrix
};

struct LayerResult {
  std::string file;  // relative to the output folder
  nlohmann::json entry;
  std::string report;
};

// A file name for layer `index`: its position (keeps names distinct and in model order) and its name
// reduced to [A-Za-z0-9_.-].
std::string layer_file_name(std::size_t index, const std::string& name) {
  std::string safe;
  for (char c : name)
    safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') ? c : '_';
  if (safe.size() > 80) safe.resize(80);
  return fmt::format("{:03d}_{}.sccb", index, safe);
}

// The manifest entry every layer has, from its bundle's metadata.
nlohmann::json layer_entry(const ModelLayer& layer, const rt::BundleMetadata& md, const std::string& n_from,
                           const std::string& file) {
  return {{"name", layer.name},
          {"tensor", layer.tensor},
          {"op", layer.op},
          {"layout", layer.layout},
          {"stored_shape", layer.stored_shape},
          {"m", md.m},
          {"k", md.k},
          {"n", md.n},
          {"n_mode", md.n_mode},
          {"n_from", n_from},
          {"nnz", md.nnz},
          {"density", layer.density},
          {"dtype", md.dtype},
          {"bias", md.bias},
          {"relu", md.relu},
          {"file", file},
          {"fingerprint", md.fingerprint},
          {"kernel", md.kernel},
          {"plan", md.plan_summary}};
}

// A convolution layer's manifest fields: the geometry (and its SPEC) and the in-process check.
void add_conv_entry(nlohmann::json& entry, const rt::ConvGeometry& g, const pipeline::ConvCheck& check) {
  entry["conv"] = rt::to_json(g);
  entry["conv"]["spec"] = conv_spec_string(g);
  entry["check"] = {{"how", "plan interpreter"},
                    {"images", check.batch},
                    {"seed", check.seed},
                    {"rel_error", check.rel_error},
                    {"tolerance", check.tolerance}};
}

// --target: the layer's CPU executor, checked in process where this CPU runs it.
LayerResult compile_cpu_layer(const CompileModelArgs& args, const ModelLayer& layer,
                              const SpmmProblem& problem, const std::string& n_from, std::size_t index,
                              const fs::path& folder) {
  if (problem.n_mode != SpmmNMode::fixed)
    throw UsageError(fmt::format("layer {}: CPU executors are compiled for a fixed N (give --n or --layer-n)",
                                 layer.name));
  const auto t0 = std::chrono::steady_clock::now();
  const CpuExecutor ex = compile_cpu_spmm(layer.a, problem, layer.bias, args.cpu_target);
  if (!ex.check_ok) throw std::runtime_error(fmt::format("layer {}: {}", layer.name, ex.check));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  LayerResult r;
  r.file = layer_file_name(index, layer.name);
  write_bundle((folder / r.file).string(), ex.bundle);
  r.entry = layer_entry(layer, ex.bundle.metadata, n_from, r.file);
  r.entry.update({{"emitter", "llvm"}, {"plan_choice", "automatic plan"}, {"compile_seconds", seconds}});
  r.report = fmt::format("  {}: {} in {:.2f} s -> {}{}", layer.name, ex.text, seconds, r.file,
                         ex.check.empty() ? "" : "\n    " + ex.check);
  return r;
}

LayerResult compile_layer(const CompileModelArgs& args, const ModelLayer& layer, std::int64_t n,
                          const std::string& n_from, std::size_t index, const fs::path& folder) {
  const bool conv = model_layer_is_conv(layer, args.layers);
  const SpmmProblem problem = model_layer_problem(layer, n, args.layers, args.spmm.dtype);
  if (!args.cpu_target.empty()) return compile_cpu_layer(args, layer, problem, n_from, index, folder);
  const GpuTarget target = resolve_gpu_target(args.arch);
  pipeline::SpmmRequest request;
  request.problem = problem;
  request.options = spmm_options(args.spmm);
  request.bias = layer.bias;
  if (args.emit_given) request.emit = parse_kernel_language(args.emit);
  request.long_cuda = long_compile_rule(args.allow_long, args.emit_given);
  std::string choice = "automatic plan";
  if (conv && !args.db.empty()) {
    choice = "automatic plan (convolution: the tuning database holds SpMM problems)";
  } else if (!args.db.empty()) {
    const tune::TunedChoice tuned = tune::choose_tuned_plan(
        args.db, layer.a, problem, request.options, request.emit.value_or(pipeline::emitter_default(problem)),
        target, args.gpu, args.cold_l2);
    request.options = tuned.options;
    request.emit = tuned.emitter;
    choice = tuned.how;
  }
  const auto t0 = std::chrono::steady_clock::now();
  pipeline::SpmmArtifact art;
  try {
    art = pipeline::compile_spmm(layer.a, request, target);
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("layer {}: {}", layer.name, e.what()));
  }
  std::optional<pipeline::ConvCheck> check;
  if (conv) {
    // The plan's interpreter on random images against the fp64 convolution, before the bundle is kept.
    check = pipeline::check_conv_plan(art.plan, layer.a, layer.bias);
    if (!check->ok())
      throw std::runtime_error(fmt::format("the convolution executor failed its check: {}", check->text()));
    if (!art.bundle->metadata.conv) art.bundle->metadata.conv = *layer.conv;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const rt::Bundle& bundle = *art.bundle;
  const std::string emit = to_string(art.kernel.language);

  LayerResult r;
  r.file = layer_file_name(index, layer.name);
  write_bundle((folder / r.file).string(), bundle);
  const rt::BundleMetadata& md = bundle.metadata;
  r.entry = layer_entry(layer, md, n_from, r.file);
  r.entry.update({{"emitter", emit},
                  {"plan_choice", choice},
                  {"cubin_bytes", bundle.cubin.size()},
                  {"compile_seconds", seconds}});
  r.report = fmt::format(
      "  {} ({} {}, {}x{}, {} nonzeros, density {:.3f}{}{}): {} block rows x {} rows, n_tile {}, "
      "{} group(s), {} values, {} in {:.2f} s -> {}",
      layer.name, layer.op, layer.layout, md.m, md.k, md.nnz, layer.density, md.bias ? ", bias" : "",
      md.relu ? ", ReLU" : "", md.block_rows, art.plan.layout.rows_per_block, md.n_tile,
      art.plan.layout.groups, md.values_mode, emit, seconds, r.file);
  if (conv) {
    add_conv_entry(r.entry, *layer.conv, *check);
    r.report +=
        fmt::format("\n    convolution {}, batch at run time; {}", rt::describe(*layer.conv), check->text());
  }
  if (!args.db.empty()) r.report += fmt::format("\n    {}", choice);
  return r;
}

// Removes the staging folder this command created (exclusively, so it holds only what this command
// wrote), on every path out of run_compile_model that does not keep it.
struct TemporaryFolder {
  fs::path path;
  bool keep = false;
  ~TemporaryFolder() {
    if (keep || path.empty()) return;
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// --list: the layers as they would be compiled (shape, nonzeros, epilogue, N and where it came from),
// one a line on stdout; nothing is compiled or written.
int list_layers(const CompileModelArgs& args, const ModelLayerSet& layers) {
  fmt::print("{:<4} {:<32} {:<22} {:>12} {:>9} {:>8} {:<9} {:>9}  {}\n", "#", "layer", "op", "M x K",
             "nonzeros", "density", "epilogue", "N", "N from");
  for (std::size_t i = 0; i < layers.model.layers.size(); ++i) {
    const ModelLayer& l = layers.model.layers[i];
    const SpmmProblem p = model_layer_problem(l, layers.n[i], args.layers, args.spmm.dtype);
    const std::string epilogue = p.bias && p.relu ? "bias+relu" : p.bias ? "bias" : p.relu ? "relu" : "-";
    fmt::print("{:<4} {:<32} {:<22} {:>12} {:>9} {:>8.4f} {:<9} {:>9}  {}\n", i, l.name,
               l.op + " " + l.layout, fmt::format("{}x{}", l.a.rows, l.a.cols), l.a.nnz(), l.density,
               epilogue, p.n_mode == SpmmNMode::fixed ? fmt::format("{}", p.n) : "run time",
               p.conv ? fmt::format("{} ({})", layers.n_from[i], rt::describe(*p.conv)) : layers.n_from[i]);
  }
  return kExitOk;
}

int run_compile_model(const CompileModelArgs& args) {
  // The output folder, before the work: nothing there, an empty folder, or one sparsecc wrote
  // (sparsecc/common/output.hpp), holding none of the inputs.
  std::string output = args.output;
  while (output.size() > 1 && output.back() == '/') output.pop_back();
  const std::vector<std::string> inputs = {args.model, args.db, args.layers.layer_n_file};
  if (!args.list) check_output_folder(args.output, inputs);

  const ModelLayerSet layers = read_model_layers(
      args.model, args.layers, "compile", [](const std::string& line) { fmt::print(stderr, "{}\n", line); },
      progress_printer());
  const ModelContents& model = layers.model;
  if (args.list) return list_layers(args, layers);
  // Every weight and bias must fit the executor's precision before any layer is compiled.
  for (const ModelLayer& layer : model.layers) {
    check_values_fit(layer.a, args.spmm.dtype, args.model, layer.tensor);
    check_bias_fits(layer.bias, args.model, layer.tensor + " (its bias)");
  }

  TemporaryFolder staging{make_staging_folder(output)};

  const auto own_n =
      std::count_if(layers.n.begin(), layers.n.end(), [&](std::int64_t n) { return n != args.layers.n; });
  fmt::print(stderr, "{}: {} layer(s) to compile ({} format), N = {}{}\n", args.model, model.layers.size(),
             model.format,
             args.layers.n > 0 ? fmt::format("{}", args.layers.n)
                               : fmt::format("run-time (planned for {})", kModelPlanningN),
             own_n > 0 ? fmt::format(" ({} with their own N)", own_n) : "");

  // Layers in parallel: each worker takes the next layer; the first failure stops new work.
  std::vector<LayerResult> results(model.layers.size());
  std::vector<std::string> errors(model.layers.size());
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex print;
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t jobs =
      std::min<std::size_t>(args.jobs > 0 ? static_cast<std::size_t>(args.jobs) : hw, model.layers.size());
  auto worker = [&] {
    for (std::size_t i; !failed && (i = next++) < model.layers.size();) {
      try {
        results[i] = compile_layer(args, model.layers[i], layers.n[i], layers.n_from[i], i, staging.path);
        std::lock_guard lock(print);
        fmt::print(stderr, "{}\n", results[i].report);
      } catch (const std::exception& e) {
        errors[i] = e.what();
        failed = true;
      }
    }
  };
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t + 1 < jobs; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  for (std::size_t i = 0; i < errors.size(); ++i)
    if (!errors[i].empty())
      throw UsageError(fmt::format("{}: layer {} (tensor {}): {}", args.model, model.layers[i].name,
                                   model.layers[i].tensor, errors[i]));

  nlohmann::json manifest = {
      {"format", std::string(kModelManifestFormat)},
      {"version", kModelManifestVersion},
      {"model", fs::absolute(args.model).string()},
      {"model_format", model.format},
      {"generator_version", std::string(kVersion)},
      {"arch", args.cpu_target.empty() ? resolve_gpu_target(args.arch).arch : args.cpu_target},
      {"n", args.layers.n > 0 ? args.layers.n : kModelPlanningN},
      {"n_mode", args.layers.n > 0 ? "fixed" : "runtime"},
      {"layers", nlohmann::json::array()},
      {"skipped", nlohmann::json::array()}};
  for (const LayerResult& r : results) manifest["layers"].push_back(r.entry);
  for (const SkippedTensor& s : model.skipped)
    manifest["skipped"].push_back({{"tensor", s.tensor}, {"reason", s.reason}});
  write_file_atomic((staging.path / "manifest.json").string(), manifest.dump(2) + "\n");

  // Swap the finished folder in. What is there now is checked again (it may have changed during the
  // compile): an empty folder or one of ours moves aside first and is removed after, file by file.
  const OutputFolder state = check_output_folder(args.output, inputs);
  std::string old;
  if (state != OutputFolder::absent) old = move_aside(output);
  try {
    rename_without_replacing(staging.path.string(), output);
  } catch (...) {
    if (!old.empty()) rename_without_replacing(old, output);  // put the previous output back
    throw;
  }
  staging.keep = true;
  if (!old.empty()) {
    try {
      if (state == OutputFolder::ours)
        remove_model_folder(old);
      else
        fs::remove(old);
    } catch (const std::exception& e) {
      fmt::print(stderr, "sparsecc: warning: the previous output was moved to {} and not removed: {}\n", old,
                 e.what());
    }
  }
  fmt::print(stderr, "wrote {} bundle(s) and manifest.json to {}\n", results.size(), args.output);
  return kExitOk;
}

}  // namespace

void add_compile_model(CLI::App& app, std::function<int()>& run) {
  auto args = std::make_shared<CompileModelArgs>();
  CLI::App* cmd = app.add_subcommand(
      "compile-model",
      "Compile every sparse weight matrix of a .npz, .safetensors or .onnx model into bundles");
  cmd->add_option("model", args->model, "MODEL (.npz, .safetensors, .onnx)")->required();
  cmd->add_option("--select", args->layers.select,
                  "Only layers whose name or tensor name matches this regular expression (ECMAScript)");
  cmd->add_option("--max-density", args->layers.max_density,
                  "Weights denser than this are left to dense libraries")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--n", args->layers.n,
                  "Columns of B and C (the batch) the executors are compiled for; without it N is a run-time "
                  "argument")
      ->check(CLI::Range(std::int64_t{1}, kModelMaxN));
  cmd->add_option("--layer-n", args->layers.layer_n,
                  "REGEX=N: the layers whose name or tensor name matches are compiled for this fixed N "
                  "(repeatable; the first that matches counts)");
  cmd->add_option("--layer-n-file", args->layers.layer_n_file,
                  "A file of lines \"NAME,N\" or \"NAME N\": these layers are compiled for their N (before "
                  "any --layer-n)");
  cmd->add_flag("--n-from-shapes", args->layers.n_from_shapes,
                "ONNX: compile each layer for the N its product has in the model (shape inference), where "
                "the shapes give one (--layer-n rules come first, --n or run-time N is the fallback)");
  cmd->add_option("--batch", args->layers.batch,
                  "ONNX: the size of the model inputs' symbolic leading dimension, for --n-from-shapes "
                  "(implies it)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_flag("--relu", args->layers.relu,
                "Apply ReLU after every layer (ONNX: layers followed by a Relu get it anyway)");
  cmd->add_option("--relu-select", args->layers.relu_select,
                  "Apply ReLU after the layers whose name matches this regular expression");
  flags::add_values_flag(cmd, args->spmm);
  cmd->add_option("--dtype", args->spmm.dtype, "Element type of B and C")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  flags::add_half_flags(cmd, args->spmm);
  flags::add_programmatic_flag(cmd, args->spmm);
  cmd->add_option("--emit", args->emit, "Emitter: ptx (fp32) or cuda")
      ->check(CLI::IsMember({"ptx", "cuda"}))
      ->capture_default_str();
  flags::add_arch_flag(cmd, args->arch, "GPU the plans and the cubins are for (PTX is included for others)");
  add_allow_long_compile_flag(cmd, args->allow_long);
  cmd->add_option("--db", args->db, "Tuning database: recorded winners, else the predictor's choice");
  cmd->add_option("--gpu", args->gpu, "Target GPU name for --db lookups");
  cmd->add_flag("--cold-l2", args->cold_l2,
                "--db: look up the winners tuned with cold L2 (`tune --cold-l2`)");
  cmd->add_option("--jobs", args->jobs, "Layers compiled at once (0: one per core)")
      ->check(CLI::Range(0, 1024));
  cmd->add_flag(
      "--list", args->list,
      "List the layers as they would be compiled (shape, nonzeros, epilogue, N and its source) and stop");
  cmd->add_flag("--conv-as-gemm", args->conv_as_gemm,
                "Compile Conv layers as SpMMs of their im2col matrix (N = batch x output pixels, from the N "
                "rules) instead of as convolution executors (the batch at run time)");
  cmd->add_option("--layer-conv", args->layers.layer_conv,
                  "REGEX=SPEC: .npz/.safetensors 4-D weights (O, I, kh, kw) whose name matches become "
                  "convolution layers of this geometry ([IxHxW or HxW],kK,sS,pP; repeatable, the first that "
                  "matches counts)");
  add_cpu_target_flag(cmd, args->cpu_target);
  cmd->add_option("-o,--output", args->output, "Output folder (bundles and manifest.json)")
      ->check(kOutputPath);
  cmd->callback([&run, args, cmd] {
    if (!args->list && args->output.empty()) throw CLI::RequiredError("--output");
    if (!args->cpu_target.empty()) {
      // The GPU's options mean nothing to CPU executors: refused, not ignored.
      static const std::vector<std::string> kGpuOptions = {
          "--values", "--emit", "--arch", "--db", "--gpu", "--cold-l2", "--allow-long-compile"};
      for (const std::string& o : kGpuOptions)
        if (cmd->count(o) > 0) throw CLI::ValidationError(o, "a GPU option; --target builds CPU executors");
    }
    args->emit_given = cmd->count("--emit") > 0;
    // Convolution executors are GPU executors: with --target, Conv layers are SpMMs of their im2col matrix.
    args->layers.conv = !args->conv_as_gemm && args->cpu_target.empty();
    run = [args] { return run_compile_model(*args); };
  });
}

}  // namespace sparsecc::cli
