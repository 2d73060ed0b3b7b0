#include "sparsecc/pipeline/pipeline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "sparsecc/bundle/hines_bundle.hpp"
#include "sparsecc/bundle/spmm_bundle.hpp"
#include "sparsecc/bundle/write_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/compile/compile_kernel.hpp"
#include "sparsecc/emit/spmm_ptx.hpp"
#include "sparsecc/inspector/spmm_decisions.hpp"

namespace sparsecc::pipeline {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Runs `work` as step `name`; with a sink and an estimate above a second, reports the start, the
// progress once a second (by the estimate) and the end.
template <class Work>
auto run_step(const std::string& name, double estimate, const ProgressSink& sink,
              std::vector<StepCost>& steps, Work&& work) {
  const auto t0 = Clock::now();
  const bool report = sink && estimate > 1.0;
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::thread ticker;
  if (report) {
    sink(name, 0.0, estimate);
    ticker = std::thread([&] {
      std::unique_lock lock(m);
      while (!cv.wait_for(lock, std::chrono::seconds(1), [&] { return done; })) {
        const double elapsed = seconds_since(t0);
        sink(name, std::min(0.99, elapsed / estimate), std::max(0.0, estimate - elapsed));
      }
    });
  }
  const auto finish = [&] {
    if (!report) return;
    {
      std::lock_guard lock(m);
      done = true;
    }
    cv.notify_all();
    ticker.join();
  };
  try {
    auto result = work();
    finish();
    steps.push_back({name, estimate, seconds_since(t0)});
    if (report) sink(name, 1.0, 0.0);
    return result;
  } catch (...) {
    finish();
    throw;
  }
}

std::string duration_words(double s) {
  if (s < 600) return fmt::format("{:.0f} s", s);
  if (s < 5400) return fmt::format("{:.0f} min", s / 60);
  return fmt::format("{:.1f} h", s / 3600);
}

}  // namespace

double estimate_spmm_plan(const CsrMatrix& a) { return 2e-8 * static_cast<double>(a.nnz()); }

// Seconds a byte of the bundle steps on the build machine, one core
// (docs/performance/2026-11-28-compressed-scatter.md, "Compile time of a 50 M-nonzero layer").
double estimate_bundle_pack(std::int64_t bytes) { return 2.3e-9 * static_cast<double>(bytes); }
double estimate_bundle_write(std::int64_t bytes) { return 4.5e-9 * static_cast<double>(bytes); }

std::int64_t bundle_section_bytes(const rt::Bundle& b) {
  const auto size = [](const auto& v) { return static_cast<std::int64_t>(v.size() * sizeof(v[0])); };
  return size(b.cubin) + static_cast<std::int64_t>(b.ptx.size()) + size(b.values) + size(b.bias) +
         size(b.reference) + size(b.tables) + size(b.permutation) + size(b.fragments) +
         static_cast<std::int64_t>(b.plan.size()) + size(b.objects);
}

void write_bundle_file(const std::string& path, const rt::Bundle& bundle, const ProgressSink& progress) {
  std::vector<StepCost> steps;
  run_step("write", estimate_bundle_write(bundle_section_bytes(bundle)), progress, steps, [&] {
    write_bundle(path, bundle);
    return true;
  });
}

namespace {

// The compressed body for the report (its split table left out: one row block's line per row block).
nlohmann::json compressed_summary(const SpmmPlan& plan) {
  if (!plan.compressed()) return nullptr;
  nlohmann::json body = to_json(plan)["body"];
  body.erase("split_chunks");
  return body;
}

}  // namespace

namespace {

// Whether the PTX emitter takes the problem's kind (for fp32): SpMM, and convolutions of up to
// kSpmmConvTapPointers taps (larger kernels test a mask a thread, which only CUDA C++ writes).
bool ptx_takes(const SpmmProblem& problem) { return !problem.conv || spmm_conv_tap_pointers(problem); }

}  // namespace

KernelLanguage emitter_default(const SpmmProblem& problem) {
  return problem.dtype == DType::f32 && ptx_takes(problem) ? KernelLanguage::ptx : KernelLanguage::cuda;
}

// The compile model: seconds = a * instructions^p per route, fitted to compiles of random matrices of
// 2k-40k nonzeros on a 2-core build machine (docs/performance/2026-11-27-compile-cost.md). Rolled
// kernels are one loop whatever the matrix.
CompileEstimate estimate_spmm_compile(const SpmmPlan& plan, KernelLanguage language) {
  CompileEstimate e;
  const double instructions =
      static_cast<double>(std::max<std::int64_t>(plan.hints.estimated_instructions, 1)) +
      64.0 * static_cast<double>(plan.fragment_count());
  e.emit = 2e-7 * instructions;
  if (plan.compressed()) {
    // The kernel is one template whatever the matrix; emitting builds the stream, linear in the nonzeros.
    e.emit = 6e-8 * static_cast<double>(plan.compressed()->stream_words);
    e.compile = 1.5;
  } else if (plan.value_mode() == SpmmValueMode::rolled) {
    e.compile = 1.5;
  } else if (language == KernelLanguage::ptx) {
    e.compile = 3.85e-5 * std::pow(instructions, 1.106);
  } else if (plan.half()) {
    e.compile = 8.7e-5 * std::pow(instructions, 1.286);
  } else {
    e.compile = 4.25e-5 * std::pow(instructions, 1.246);
  }
  return e;
}

SpmmArtifact compile_spmm_plan(SpmmPlan plan, const CsrMatrix& a, const SpmmRequest& request,
                               const GpuTarget& target, std::vector<StepCost> steps) {
  SpmmArtifact art;
  art.target = target;
  KernelLanguage language = request.emit.value_or(emitter_default(plan.problem));
  // Rolled and compressed kernels are loops (CUDA C++ always); convolutions of more taps than the PTX
  // emitter's tap pointers take CUDA C++ too.
  if (plan.value_mode() == SpmmValueMode::rolled || plan.compressed() || !ptx_takes(plan.problem))
    language = KernelLanguage::cuda;
  CompileEstimate estimate = estimate_spmm_compile(plan, language);
  if (language == KernelLanguage::cuda && estimate.compile > request.max_cuda_seconds &&
      request.long_cuda != LongCompile::allow) {
    const bool ptx_possible =
        !plan.half() && plan.value_mode() != SpmmValueMode::rolled && ptx_takes(plan.problem);
    if (request.long_cuda == LongCompile::take_ptx && ptx_possible) {
      const CompileEstimate ptx = estimate_spmm_compile(plan, KernelLanguage::ptx);
      art.report.emit_note = fmt::format(
          "CUDA C++ would compile for about {} ({} estimated instructions); took the PTX route "
          "(about {})",
          duration_words(estimate.compile), plan.hints.estimated_instructions, duration_words(ptx.compile));
      language = KernelLanguage::ptx;
      estimate = ptx;
    } else {
      throw UsageError(fmt::format(
          "the CUDA C++ compile of this executor ({} estimated instructions) would take about {} on this "
          "machine, above the limit of {}: {}or pass --allow-long-compile to run it",
          plan.hints.estimated_instructions, duration_words(estimate.compile),
          duration_words(request.max_cuda_seconds),
          ptx_possible ? "take the PTX route (--emit ptx, seconds), " : "use a smaller matrix, "));
    }
  }
  art.kernel = run_step("emit", estimate.emit, request.progress, steps,
                        [&] { return emit_spmm(plan, a, language, target); });
  CudaCompileOptions options;
  options.arch = target.arch;
  options.extra.push_back(kPtxasVerbose);
  for (const auto& o : request.ptxas) options.extra.push_back("-Xptxas=" + o);
  options.threads = request.compile_threads;
  const std::string name = request.name.empty() ? plan.hints.kernel_name : request.name;
  art.compiled =
      run_step(language == KernelLanguage::ptx ? "assemble (nvJitLink)" : "compile (NVRTC)", estimate.compile,
               request.progress, steps, [&] { return compile_kernel(art.kernel, name, options); });
  art.usage = resource_usage(art.compiled);
  if (request.bundle) {
    // The sections: the code, the values or the stream, and the CSR reference (8 bytes a nonzero).
    const std::int64_t bytes =
        static_cast<std::int64_t>(art.compiled.cubin.size() + art.compiled.ptx.size() +
                                  4 * (art.kernel.packed_values.size() + art.kernel.fragment_words.size())) +
        8 * a.nnz();
    art.bundle = run_step("bundle", estimate_bundle_pack(bytes), request.progress, steps, [&] {
      return make_spmm_bundle(plan, a, target, art.compiled.cubin, art.compiled.ptx, art.kernel.packed_values,
                              art.kernel.fragment_words, request.bias);
    });
  }
  art.plan = std::move(plan);
  art.report.rows = a.rows;
  art.report.cols = a.cols;
  art.report.nnz = a.nnz();
  art.report.steps = std::move(steps);
  return art;
}

SpmmArtifact compile_spmm(const CsrMatrix& a, const SpmmRequest& request, const GpuTarget& target) {
  std::vector<StepCost> steps;
  SpmmPlan plan = run_step("plan", estimate_spmm_plan(a), request.progress, steps, [&] {
    SpmmPlan p = plan_spmm(a, request.problem, request.options, target);
    if (const auto problems = check_plan(p, a, target); !problems.empty())
      throw std::runtime_error("the inspector produced an invalid plan: " + problems.front());
    return p;
  });
  const bool asked = request.options.value_mode.has_value();
  std::string family = to_string(plan.family());
  SpmmArtifact art = compile_spmm_plan(std::move(plan), a, request, target, std::move(steps));
  art.report.family_note =
      asked ? family + " (asked for)"
      : art.plan.compressed()
          ? fmt::format(
                "compressed (the automatic rule: {} layers of at least {} nonzeros at N <= {}; {} layout{})",
                art.plan.problem.dtype, spmm_rules::kCompressedMinNnz, spmm_rules::kCompressedColumns,
                spmm_compressed_layout(*art.plan.compressed()),
                request.options.compressed.scatter || request.options.compressed.vector ? " as asked"
                : art.plan.compressed()->vector
                    ? fmt::format(" at a fixed N up to {}", spmm_rules::kCompressedVectorMaxN)
                    : fmt::format(", the scatter layout for layers at most {:.0f} % dense",
                                  100 * spmm_rules::kCompressedScatterDensity))
          : family + " (the automatic rule)";
  return art;
}

namespace {

const StepCost* find_step(const std::vector<StepCost>& steps, std::string_view prefix) {
  for (const StepCost& s : steps)
    if (s.step.starts_with(prefix)) return &s;
  return nullptr;
}

}  // namespace

std::string SpmmReport::text(const SpmmArtifact& art) const {
  const SpmmPlan& plan = art.plan;
  const ResourceUsage& usage = art.usage;
  const StepCost* emit = find_step(steps, "emit");
  const std::string layout =
      plan.compressed()
          ? fmt::format("{} row blocks of {} rows x {} split(s), compressed {}", plan.layout.block_rows(),
                        plan.layout.rows_per_block, plan.compressed()->splits,
                        plan.compressed()->scatter || plan.compressed()->vector
                            ? fmt::format("{} layout", spmm_compressed_layout(*plan.compressed()))
                            : std::string("records"))
          : fmt::format("{} block rows x {} rows ({}), n_tile {}, {} group(s), {} values{}",
                        plan.block_rows(), plan.layout.rows_per_block, to_string(plan.layout.row_split),
                        plan.layout.n_tile, plan.layout.groups, to_string(plan.value_mode()),
                        plan.step_lanes() > 1 ? fmt::format(" ({} step lanes of {} columns)",
                                                            plan.step_lanes(), plan.block_columns())
                                              : "");
  std::string out = fmt::format(
      "compiled {} ({}x{}, {} nonzeros) for N = {}{}: {}; emitted {} in {:.2f} s, {} {:.2f} s, cubin {} "
      "bytes "
      "({:.1f} bytes/nonzero), {} registers, stack {} B, spills {}",
      matrix, rows, cols, nnz, plan.problem.n,
      plan.problem.n_mode == SpmmNMode::runtime ? " (runtime N)" : "", layout, to_string(art.kernel.language),
      emit ? emit->seconds : 0.0, art.kernel.language == KernelLanguage::ptx ? "nvJitLink" : "NVRTC",
      art.compiled.seconds, art.compiled.cubin.size(),
      nnz ? static_cast<double>(art.compiled.cubin.size()) / static_cast<double>(nnz) : 0.0, usage.registers,
      usage.stack_frame_bytes,
      usage.spill_store_bytes < 0 ? std::string("unknown (no ptxas report; they lie in the stack frame)")
                                  : fmt::format("{} B", usage.spill_store_bytes + usage.spill_load_bytes));
  if (const SpmmCompressedBody* c = plan.compressed(); c && c->vector)
    out += fmt::format(
        "\nfamily {}: blocks of {} warps over {} rows (a warp a row), on CUDA cores; stream {:.1f} MB "
        "({:.2f} "
        "bytes/nonzero)",
        family_note.empty() ? "compressed" : family_note, c->warps, plan.layout.rows_per_block,
        4e-6 * static_cast<double>(c->stream_words),
        nnz ? 4.0 * static_cast<double>(c->stream_words) / static_cast<double>(nnz) : 0.0);
  else if (c)
    out += fmt::format(
        "\nfamily {}: blocks of {} warps x {} strips ({} rows) over chunks of {} columns ({} stages), {} "
        "split(s) a row block (cluster), {} columns a block; {}; "
        "stream {:.1f} MB ({:.2f} bytes/nonzero), {} bytes of shared memory a block",
        family_note.empty() ? "compressed" : family_note, c->warps, c->strips_per_warp,
        plan.layout.rows_per_block, c->chunk_k, c->stages, c->splits, c->n_tile,
        c->scatter
            ? fmt::format("scatter layout (each warp scatters its strips' nonzeros of a chunk into the "
                          "tile, {} round(s) of its list kept)",
                          c->kept_rounds)
            : fmt::format("records: {} bitmap, {} positions, {} dense", c->records[0], c->records[1],
                          c->records[2]),
        4e-6 * static_cast<double>(c->stream_words),
        nnz ? 4.0 * static_cast<double>(c->stream_words) / static_cast<double>(nnz) : 0.0,
        plan.layout.shared_bytes);
  else if (!family_note.empty())
    out += "\nfamily " + family_note;
  return out;
}

nlohmann::json SpmmReport::json(const SpmmArtifact& art) const {
  nlohmann::json steps_json = nlohmann::json::array();
  for (const StepCost& s : steps)
    steps_json.push_back({{"step", s.step}, {"estimated_s", s.estimated}, {"seconds", s.seconds}});
  const SpmmPlan& plan = art.plan;
  return {{"matrix", matrix},
          {"rows", rows},
          {"cols", cols},
          {"nnz", nnz},
          {"chosen_by", chosen_by},
          {"target", art.target.arch},
          {"gpu", art.target.name},
          {"n", plan.problem.n},
          {"n_mode", plan.problem.n_mode == SpmmNMode::runtime ? "runtime" : "fixed"},
          {"dtype", dtype_name(plan.problem.dtype)},
          {"block_rows", plan.block_rows()},
          {"rows_per_block", plan.layout.rows_per_block},
          {"row_split", to_string(plan.layout.row_split)},
          {"n_tile", plan.layout.n_tile},
          {"groups", plan.layout.groups},
          {"value_mode", to_string(plan.value_mode())},
          {"family", to_string(plan.family())},
          {"family_note", family_note},
          {"body", compressed_summary(plan)},
          {"step_lanes", plan.step_lanes()},
          {"fragments", plan.fragment_count()},
          {"estimated_instructions", plan.hints.estimated_instructions},
          {"emitter", to_string(art.kernel.language)},
          {"emit_note", emit_note},
          {"cubin_bytes", art.compiled.cubin.size()},
          {"registers", art.usage.registers},
          {"stack_bytes", art.usage.stack_frame_bytes},
          {"spill_bytes", art.usage.spill_store_bytes < 0
                              ? nlohmann::json(nullptr)
                              : nlohmann::json(art.usage.spill_store_bytes + art.usage.spill_load_bytes)},
          {"steps", steps_json}};
}

HinesArtifact compile_hines_plan(HinesPlan plan, const HinesSystem& system, const GpuTarget& target,
                                 const ProgressSink& progress, std::vector<StepCost> steps) {
  HinesArtifact art;
  art.target = target;
  art.plan = std::move(plan);
  art.steps = std::move(steps);
  CudaCompileOptions co;
  co.arch = target.arch;
  art.compiled = run_step("compile (NVRTC)", -1, progress, art.steps,
                          [&] { return sparsecc::compile_hines(art.plan, co); });
  art.bundle = run_step("bundle", -1, progress, art.steps, [&] {
    return hines_bundle(art.plan, art.compiled->schedule, system, art.compiled->code.cubin,
                        art.compiled->code.ptx, target.arch);
  });
  return art;
}

HinesArtifact compile_hines(const HinesSystem& system, const HinesRequest& request, const GpuTarget& target) {
  std::vector<StepCost> steps;
  HinesPlan plan = run_step("plan", -1, request.progress, steps, [&] {
    HinesPlan p = plan_hines(system, request.rhs, request.dtype, request.options, target);
    if (const auto errors = check_hines_plan(p); !errors.empty())
      throw std::runtime_error("the planner produced an invalid plan: " + errors.front());
    return p;
  });
  if (request.compile)
    return compile_hines_plan(std::move(plan), system, target, request.progress, std::move(steps));
  HinesArtifact art;
  art.target = target;
  art.plan = std::move(plan);
  art.steps = std::move(steps);
  return art;
}

std::string HinesArtifact::plan_text() const {
  std::string levels;
  const bool minimal = plan.decomposition == HinesDecomposition::minimal;
  for (const HinesLevel& L : plan.levels)
    levels += minimal ? fmt::format("{} rows ({} chains, {} junctions) -> ", L.size, L.chains.size(),
                                    L.junctions.size())
                      : fmt::format("{} rows (K {}: {} chains, {} junctions) -> ", L.size, L.k,
                                    L.chains.size(), L.junctions.size());
  return fmt::format(
      "planned {} compartments in {} cells, R = {}, {}: {} decomposition, depth {}: {}base {} rows (one "
      "thread "
      "per cell, {} code); {} grid levels, {} threads per cell block",
      plan.problem.n, plan.problem.cells, plan.problem.rhs, plan.problem.dtype, to_string(plan.decomposition),
      plan.depth(), levels, plan.base_size(), to_string(plan.code), plan.grid_levels, plan.block_threads);
}

std::string HinesArtifact::compile_text() const {
  if (!compiled) return {};
  const CompiledHines& c = *compiled;
  const std::string shared =
      c.schedule.shared_from < plan.depth()
          ? fmt::format(", levels {}..{} in {} KiB of shared memory per block", c.schedule.shared_from,
                        plan.depth() - 1, (c.schedule.shared_bytes() + 1023) / 1024)
          : "";
  return fmt::format(
      "{} launches per step, {} segment types, {} KiB of tables, {} MiB workspace{} ({:.1f} s to compile)",
      c.schedule.launches.size(), c.schedule.segment_types, c.schedule.tables.size() * 4 / 1024,
      c.schedule.workspace_bytes() >> 20, shared, c.code.seconds);
}

nlohmann::json HinesArtifact::json() const {
  nlohmann::json steps_json = nlohmann::json::array();
  for (const StepCost& s : steps)
    steps_json.push_back({{"step", s.step}, {"estimated_s", s.estimated}, {"seconds", s.seconds}});
  nlohmann::json j = {{"target", target.arch},
                      {"cells", plan.problem.cells},
                      {"rows", plan.problem.n},
                      {"rhs", plan.problem.rhs},
                      {"dtype", plan.problem.dtype},
                      {"decomposition", to_string(plan.decomposition)},
                      {"depth", plan.depth()},
                      {"base_rows", plan.base_size()},
                      {"code", to_string(plan.code)},
                      {"grid_levels", plan.grid_levels},
                      {"block_threads", plan.block_threads},
                      {"steps", steps_json}};
  if (compiled) {
    j["launches_per_step"] = compiled->schedule.launches.size();
    j["workspace_bytes"] = compiled->schedule.workspace_bytes();
    j["cubin_bytes"] = compiled->code.cubin.size();
    j["compile_seconds"] = compiled->code.seconds;
  }
  return j;
}

}  // namespace sparsecc::pipeline
