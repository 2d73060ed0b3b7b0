// sparsecc demo: needs no input. Builds the embedded defaults — a deterministic magnitude-pruned
// 1024x1024 layer at 90 % sparsity and a deterministic branching neuron — inspects both and runs the
// fp64 references, checking each against an independent computation; then compiles the layer's SpMM
// executor (the automatic plan: for this layer at N = 64 a rolled kernel, CUDA C++ through NVRTC; unrolled
// plans go through direct PTX and nvJitLink) and the neuron's Hines executor (CUDA C++, NVRTC) and runs them
// — on the GPU when there is one, else through their plan interpreters, saying which — against the
// references. Exit 1 if a check fails.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "sparsecc/bundle/hines_bundle.hpp"
#include "sparsecc/bundle/spmm_bundle.hpp"
#include "sparsecc/compile/compile_hines.hpp"
#include "sparsecc/compile/compile_kernel.hpp"
#include "sparsecc/compile/resource_usage.hpp"
#include "sparsecc/emit/spmm_ptx.hpp"
#include "sparsecc/inspector/hines_planner.hpp"
#include "sparsecc/inspector/matrix_summary.hpp"
#include "sparsecc/inspector/morphology_summary.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/matrix/prune.hpp"
#include "sparsecc/neuron/hines.hpp"
#include "sparsecc/neuron/morphology.hpp"
#include "sparsecc/pipeline/pipeline.hpp"
#include "sparsecc/pipeline/run.hpp"
#include "sparsecc/plan/hines_interpreter.hpp"
#include "sparsecc/plan/spmm_interpreter.hpp"
#include "sparsecc/reference/hines_accuracy.hpp"
#include "sparsecc/reference/hines_solve.hpp"
#include "sparsecc/reference/spmm.hpp"
#include "sparsecc/runtime/executor.hpp"
#include "sparsecc/runtime/hines_executor.hpp"

namespace sparsecc::cli {

namespace {

constexpr std::uint64_t kLayerSeed = 20261122;
constexpr std::int64_t kLayerSize = 1024;
constexpr double kLayerSparsity = 0.9;
constexpr std::int64_t kBatch = 64;          // N: columns of the activation matrix
constexpr double kSpmmTolerance = 1e-12;     // fp64 reference vs dense fp64 product, relative L2
constexpr double kExecutorTolerance = 1e-5;  // fp32 executor vs fp64 reference, max |error| / max |ref|
constexpr double kHinesTolerance = 1e-12;    // relative residual ||A x - b|| / ||b|| per step
constexpr int kSteps = 400;                  // 10 ms at dt = 0.025 ms
constexpr double kInjectNa = 0.5;            // current step into the soma

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct LayerResult {
  nlohmann::json json;
  bool ok = false;
};

// Compiles the layer's executor (C = relu(A*B + bias), N fixed) and runs it on `b` with NaN-poisoned
// outputs, on the GPU or through the plan interpreter; compares with `ref`.
LayerResult run_executor(const CsrMatrix& a, const DenseMatrix& b, const std::vector<double>& bias,
                         const DenseMatrix& ref, bool quiet) {
  SpmmProblem problem{a.rows, a.cols, b.cols, SpmmNMode::fixed, true, true, DType::f32, std::nullopt};
  pipeline::SpmmRequest request;
  request.problem = problem;
  request.emit = KernelLanguage::ptx;
  request.bias = bias;
  request.name = "demo_layer";
  const pipeline::SpmmArtifact art = pipeline::compile_spmm(a, request, default_gpu_target());
  const SpmmPlan& plan = art.plan;
  const EmittedKernel& kernel = art.kernel;
  const CudaCompileResult& compiled = art.compiled;
  double gen_s = 0;
  for (const pipeline::StepCost& step : art.report.steps)
    if (step.step != "plan" && step.step != "bundle") gen_s += step.seconds;
  const ResourceUsage& usage = art.usage;

  std::vector<double> got;
  std::string how, why;
  if (rt::driver_available(&why)) {
    got = run_spmm_on_gpu(*art.bundle, "demo layer", b, b.cols, how);
  } else {
    got = interpret_spmm(plan, spmm_kernel_values(plan, a), b, &bias).data;
    how = fmt::format("plan interpreter (no GPU: {})", why);
  }
  const SpmmCheck check = compare_spmm(got, ref);
  const double rel = check.rel_error;
  LayerResult r;
  r.ok = check.unwritten == 0 && rel <= kExecutorTolerance && !compiled.cubin.empty();
  r.json = {{"plan",
             {{"rows_per_block", plan.layout.rows_per_block},
              {"n_tile", plan.layout.n_tile},
              {"groups", plan.layout.groups},
              {"value_mode", to_string(plan.value_mode())},
              {"emitter", to_string(kernel.language)}}},
            {"generate_compile_seconds", gen_s},
            {"cubin_bytes", compiled.cubin.size()},
            {"registers", usage.registers},
            {"ran_on", how},
            {"max_rel_error", rel},
            {"tolerance", kExecutorTolerance},
            {"ok", r.ok}};
  if (!quiet)
    fmt::print(
        "   executor: plan R{}/T{}/G{} {}, {} generated and compiled in {:.2f} s, cubin {} bytes ({:.1f} "
        "bytes/nonzero), {} registers;\n   run on the {}: max relative error vs fp64 {:.2e} "
        "(tolerance {:.0e}) {}\n\n",
        plan.layout.rows_per_block, plan.layout.n_tile, plan.layout.groups, to_string(plan.value_mode()),
        kernel.language == KernelLanguage::ptx ? "PTX" : "CUDA C++", gen_s, compiled.cubin.size(),
        static_cast<double>(compiled.cubin.size()) / static_cast<double>(std::max<std::int64_t>(a.nnz(), 1)),
        usage.registers, how, rel, kExecutorTolerance, r.ok ? "ok" : "FAILED");
  return r;
}

LayerResult run_layer(bool quiet) {
  const DenseMatrix dense = random_dense(kLayerSize, kLayerSize, kLayerSeed);
  const CsrMatrix a = magnitude_prune(dense, kLayerSparsity);
  const MatrixSummary summary = summarize_matrix(a);
  if (!quiet)
    fmt::print("== layer: {}x{} magnitude-pruned at {:.0f} % (seed {})\n{}", kLayerSize, kLayerSize,
               100 * kLayerSparsity, kLayerSeed, to_text(summary));

  const DenseMatrix b = random_dense(kLayerSize, kBatch, kLayerSeed + 1);
  std::vector<double> bias(static_cast<std::size_t>(kLayerSize));
  const DenseMatrix bias_src = random_dense(kLayerSize, 1, kLayerSeed + 2);
  for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = 0.1 * bias_src.data[i];

  auto t0 = std::chrono::steady_clock::now();
  const DenseMatrix c = spmm(a, b, &bias, /*relu=*/true);
  const double spmm_s = seconds_since(t0);

  // Independent check: the dense product over all of K with the pruning mask recomputed from the
  // magnitudes (|w| >= the smallest kept magnitude), so the CSR indices are not trusted.
  double threshold = INFINITY;
  for (double w : a.values) threshold = std::min(threshold, std::fabs(w));
  std::int64_t mask_count = 0;
  for (double w : dense.data) mask_count += std::fabs(w) >= threshold;
  double num = 0, den = 0;
  std::int64_t positive = 0;
  for (std::int64_t i = 0; i < kLayerSize; ++i) {
    std::vector<double> acc(static_cast<std::size_t>(kBatch), bias[static_cast<std::size_t>(i)]);
    for (std::int64_t k = 0; k < kLayerSize; ++k) {
      const double w = dense(i, k);
      if (std::fabs(w) < threshold) continue;
      for (std::int64_t j = 0; j < kBatch; ++j) acc[static_cast<std::size_t>(j)] += w * b(k, j);
    }
    for (std::int64_t j = 0; j < kBatch; ++j) {
      const double ref = std::max(acc[static_cast<std::size_t>(j)], 0.0);
      num += (c(i, j) - ref) * (c(i, j) - ref);
      den += ref * ref;
      positive += c(i, j) > 0;
    }
  }
  const double err = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  LayerResult r;
  r.ok = err <= kSpmmTolerance && positive > 0 && mask_count == a.nnz();
  r.json = {{"summary", to_json(summary)},
            {"spmm",
             {{"n", kBatch},
              {"epilogue", "bias+relu"},
              {"seconds", spmm_s},
              {"positive_outputs", positive},
              {"rel_l2_error", err},
              {"tolerance", kSpmmTolerance},
              {"ok", r.ok}}}};
  if (!quiet)
    fmt::print(
        "   reference SpMM C = relu(A*B + bias), N = {}: {:.2f} ms, {} of {} outputs positive, "
        "rel. L2 error vs dense {:.2e} (tolerance {:.0e}) {}\n",
        kBatch, 1e3 * spmm_s, positive, kLayerSize * kBatch, err, kSpmmTolerance, r.ok ? "ok" : "FAILED");
  const LayerResult exec = run_executor(a, b, bias, c, quiet);
  r.json["executor"] = exec.json;
  r.ok = r.ok && exec.ok;
  return r;
}

// Solves one step's system on the executor: the GPU (d, u, l uploaded once) or the plan interpreter.
class NeuronSolver {
 public:
  NeuronSolver(const HinesPlan& plan, const HinesSystem& h, rt::Bundle bundle) : plan_(plan), h_(h) {
    std::string why;
    if (!rt::driver_available(&why)) {
      how_ = fmt::format("plan interpreter (no GPU: {})", why);
      return;
    }
    ctx_ = std::make_unique<rt::Context>(0);
    ex_ =
        std::make_unique<rt::HinesExecutor>(rt::HinesExecutor::load(std::move(bundle), "demo neuron", *ctx_));
    const auto upload = [](const std::vector<double>& v) {
      rt::DeviceBuffer d(v.size() * sizeof(double));
      d.upload(v.data(), v.size() * sizeof(double));
      return d;
    };
    d_ = upload(h.diag), u_ = upload(h.upper), l_ = upload(h.lower);
    b_ = rt::DeviceBuffer(h.diag.size() * sizeof(double));
    x_ = rt::DeviceBuffer(h.diag.size() * sizeof(double));
    how_ = fmt::format("GPU {} ({} image)", ctx_->device().name, ex_->loaded_from());
  }
  const std::string& how() const { return how_; }

  std::vector<double> solve(const std::vector<double>& b) {
    if (!ex_) return interpret_hines(plan_, h_.diag, h_.upper, h_.lower, b);
    b_.upload(b.data(), b.size() * sizeof(double));
    x_.fill32(0x7fc00000u);  // NaN: an unwritten row fails the check
    ex_->run(d_.get(), u_.get(), l_.get(), b_.get(), x_.get());
    ctx_->synchronize();
    std::vector<double> x(b.size());
    x_.download(x.data(), x.size() * sizeof(double));
    return x;
  }

 private:
  const HinesPlan& plan_;
  const HinesSystem& h_;
  std::string how_;
  std::unique_ptr<rt::Context> ctx_;
  std::unique_ptr<rt::HinesExecutor> ex_;
  rt::DeviceBuffer d_, u_, l_, b_, x_;
};

// Plans and compiles the neuron's Hines executor (f64, R = 1) and runs the time loop of the
// reference on it: every step's solution is checked against the accuracy yardstick on that step's
// right-hand side, and the soma trace against the reference's.
LayerResult run_hines_executor(const HinesSystem& h, const std::vector<double>& inject,
                               const std::vector<double>& ref_trace, std::int32_t soma, bool quiet) {
  pipeline::HinesRequest request;
  pipeline::HinesArtifact art = pipeline::compile_hines(h, request, default_gpu_target());
  const HinesPlan& plan = art.plan;
  const CompiledHines& compiled = *art.compiled;
  const double compile_s = compiled.code.seconds;
  NeuronSolver solver(plan, h, std::move(*art.bundle));
  std::vector<double> v(h.diag.size(), h.leak_reversal_mv), trace;
  double worst = 0, tolerance = kF64ToleranceFloor;
  std::int64_t unwritten = 0;
  for (int step = 1; step <= kSteps; ++step) {
    const std::vector<double> b = hines_rhs(h, v, inject);
    std::vector<double> x = solver.solve(b);
    const HinesAccuracy acc = hines_accuracy(h, b, 1);
    for (double xi : x) unwritten += !std::isfinite(xi);
    worst = std::max(worst, hines_max_rel_error(x, acc.ref));
    tolerance = std::max(tolerance, acc.tolerance("f64"));
    v = std::move(x);
    if (step % 80 == 0) trace.push_back(v[static_cast<std::size_t>(soma)]);
  }
  double trace_diff = 0;
  for (std::size_t i = 0; i < trace.size() && i < ref_trace.size(); ++i)
    trace_diff = std::max(trace_diff, std::fabs(trace[i] - ref_trace[i]));
  std::string levels;
  for (const HinesLevel& L : plan.levels) levels += fmt::format("{} -> ", L.size);
  LayerResult r;
  r.ok = unwritten == 0 && worst <= tolerance && trace.size() == ref_trace.size() && trace_diff <= 1e-9 &&
         !compiled.code.cubin.empty();
  r.json = {
      {"plan",
       {{"levels", plan.depth()}, {"base_rows", plan.base_size()}, {"block_threads", plan.block_threads}}},
      {"compile_seconds", compile_s},
      {"cubin_bytes", compiled.code.cubin.size()},
      {"ran_on", solver.how()},
      {"max_rel_error", worst},
      {"tolerance", tolerance},
      {"soma_trace_max_abs_diff_mv", trace_diff},
      {"ok", r.ok}};
  if (!quiet)
    fmt::print(
        "   executor: fine decomposition, {}base {} rows, {} threads; CUDA C++ compiled in {:.2f} s, cubin "
        "{} "
        "bytes;\n   {} steps on the {}: max relative error vs extended-precision reference {:.2e} "
        "(tolerance {:.0e}), soma trace within {:.1e} mV of the reference {}\n",
        levels, plan.base_size(), plan.block_threads, compile_s, compiled.code.cubin.size(), kSteps,
        solver.how(), worst, tolerance, trace_diff, r.ok ? "ok" : "FAILED");
  return r;
}

LayerResult run_neuron(bool quiet) {
  const NeuronModel model = make_demo_neuron();
  const MorphologySummary summary = summarize_morphology(model);
  const CableParams params;
  const HinesSystem h = assemble_hines(model, params);
  if (!quiet) fmt::print("== neuron: built-in branching cell\n{}", to_text(summary));

  const auto problems = validate_hines(h);
  const std::int32_t n = h.size();
  const std::int32_t soma = h.cell_offsets[1] - 1;  // post-order: the root is its cell's last index
  std::vector<double> v(static_cast<std::size_t>(n), params.leak_reversal_mv);
  std::vector<double> inject(static_cast<std::size_t>(n), 0.0);
  inject[static_cast<std::size_t>(soma)] = kInjectNa;

  const HinesFactorization f = hines_factor(h);
  double worst = 0;
  std::vector<double> trace;
  auto t0 = std::chrono::steady_clock::now();
  for (int step = 1; step <= kSteps; ++step) {
    const std::vector<double> b = hines_rhs(h, v, inject);
    std::vector<double> x = b;
    hines_solve_in_place(f, x);
    // Residual r = A x - b from the Hines layout directly.
    std::vector<double> ax(static_cast<std::size_t>(n), 0.0);
    for (std::int32_t i = 0; i < n; ++i) {
      ax[i] += h.diag[i] * x[i];
      if (const std::int32_t p = h.parent[i]; p >= 0) {
        ax[i] += h.upper[i] * x[p];
        ax[p] += h.lower[i] * x[i];
      }
    }
    double rn = 0, bn = 0;
    for (std::int32_t i = 0; i < n; ++i) {
      rn += (ax[i] - b[i]) * (ax[i] - b[i]);
      bn += b[i] * b[i];
    }
    worst = std::max(worst, std::sqrt(rn / bn));
    v = std::move(x);
    if (step % 80 == 0) trace.push_back(v[static_cast<std::size_t>(soma)]);
  }
  const double solve_s = seconds_since(t0);
  LayerResult r;
  r.ok = problems.empty() && worst <= kHinesTolerance && std::isfinite(v[soma]) &&
         v[soma] > params.leak_reversal_mv;  // an inward current depolarises the soma
  r.json = {{"summary", to_json(summary)},
            {"hines",
             {{"compartments", n},
              {"steps", kSteps},
              {"dt_ms", params.dt_ms},
              {"inject_na", kInjectNa},
              {"soma_mv", trace},
              {"max_rel_residual", worst},
              {"tolerance", kHinesTolerance},
              {"validator_issues", problems},
              {"seconds", solve_s},
              {"ok", r.ok}}}};
  if (!quiet) {
    fmt::print(
        "   reference Hines solve: {} implicit Euler steps of {} ms, {:.1f} nA into the soma, {:.2f} ms\n",
        kSteps, params.dt_ms, kInjectNa, 1e3 * solve_s);
    fmt::print("   soma voltage every 2 ms:");
    for (double mv : trace) fmt::print(" {:.3f}", mv);
    fmt::print(" mV\n   max relative residual {:.2e} (tolerance {:.0e}), validator {} {}\n", worst,
               kHinesTolerance, problems.empty() ? "clean" : problems.front(), r.ok ? "ok" : "FAILED");
  }
  if (!problems.empty()) return r;
  const LayerResult exec = run_hines_executor(h, inject, trace, soma, quiet);
  r.json["executor"] = exec.json;
  r.ok = r.ok && exec.ok;
  return r;
}

}  // namespace

void add_demo(CLI::App& app, std::function<int()>& run) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd =
      app.add_subcommand("demo", "Inspect, compile and verify the embedded layer and neuron (no input)");
  cmd->add_flag("--json", *json, "Print JSON instead of text");
  cmd->callback([&run, json] {
    run = [json]() -> int {
      const LayerResult layer = run_layer(*json);
      const LayerResult neuron = run_neuron(*json);
      const bool ok = layer.ok && neuron.ok;
      if (*json)
        fmt::print("{}\n",
                   nlohmann::json{{"layer", layer.json}, {"neuron", neuron.json}, {"ok", ok}}.dump(2));
      else
        fmt::print("\ndemo: {}\n", ok ? "all checks passed" : "a check FAILED");
      return ok ? kExitOk : kExitCheckFailed;
    };
  });
}

}  // namespace sparsecc::cli
