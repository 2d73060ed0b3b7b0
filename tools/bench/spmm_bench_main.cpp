// sparsecc_bench: compiles sparsecc's SpMM executor for every problem of a suite (in parallel on the
// CPU) with the direct-PTX emitter, the CUDA C++ one or both (--emit), verifies each on the GPU
// against the fp64 reference with poisoned outputs (and, with both, that the two executors give the
// same bits), and times one in steady state (CUDA graphs of many launches, median of replays) against
// the vendor baselines in the same run: cuBLAS fp32 (TF32 off), TF32, fp16 tensor cores, and the best
// cuSPARSE SpMM algorithm, after the launch floor (an empty kernel timed the same way). The "pdl us"
// column times the same executor launched programmatically where its bundle takes part
// (programmatic dependent launch: each launch of the graph may start while the one before it ends,
// as consecutive layers would), beside the plain launches every other ratio is taken from; the
// cublas_fp32_vs_programmatic geomean takes it where there is one and the plain time elsewhere.
// "bound us" is the problem's data-movement bound on this device (bench/traffic_bound.hpp: a probe
// kernel moving the bytes every executor must move, and the FMAs at peak rate) and "max xfp32" the
// speedup over cuBLAS fp32 that the bound allows (warm L2 only). "stream us" times the same probe
// moving what the timed plan itself streams from L2 (PlanTraffic in bench/suites.hpp: B once per
// block row that uses a row of it, A's representation once per column tile, C), the bound of that
// plan's design.
// --db FILE builds each problem's executor as `sparsecc compile --db FILE` would (the recorded winner,
// or without a record the predictor's choice; --db-cold takes the records tuned with cold L2 and
// otherwise the automatic plan).
// --network also times whole networks end to end (bench/network_pass.hpp): each network's layers in
// one CUDA graph, sparsecc's executors against every baseline's fastest checked algorithm per layer.
// Prints a table with ratios and geomeans and writes JSON. Plan overrides (--rows-per-block, --n-tile,
// --groups, --max-registers, --balanced, --values) apply to every problem; --sweep also tries a grid
// of plans per problem, verifies each and reports the fastest. --compile-only stops after generation
// and compilation and needs no GPU.
// Exit: 0 ok, 1 a check failed, 2 bad usage, bad input or no GPU.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "bench/baselines.hpp"
#include "bench/blocklet_bench.hpp"
#include "bench/hines_bench.hpp"
#include "bench/network_pass.hpp"
#include "bench/suites.hpp"
#include "bench/traffic_bound.hpp"
#include "bench_main.hpp"
#include "sparsecc/bundle/spmm_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "sparsecc/common/output.hpp"
#include "sparsecc/common/random.hpp"
#include "sparsecc/compile/compile_kernel.hpp"
#include "sparsecc/compile/resource_usage.hpp"
#include "sparsecc/emit/spmm_cuda.hpp"
#include "sparsecc/emit/spmm_ptx.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/pipeline/pipeline.hpp"
#include "sparsecc/reference/spmm.hpp"
#include "sparsecc/runtime/driver.hpp"
#include "sparsecc/runtime/executor.hpp"
#include "sparsecc/tune/lookup.hpp"
#include "spmm_flags.hpp"
#include "target_flags.hpp"

namespace {

using namespace sparsecc;
using namespace sparsecc::bench;

struct Args : flags::SpmmPlanFlags {
  std::string suite = "sparsert";
  double sparsity = 0.9;
  int batch = 1;
  std::string data;
  std::string json;
  int limit = 0;
  int first = 0;
  std::int64_t max_nnz = 40000;
  int jobs = 0;
  std::string arch = "sm_90";
  GpuTarget target;          // --arch's, resolved after parsing
  std::string emit = "ptx";  // ptx | cuda | both
  std::int64_t n = 0;        // > 0: every problem's N
  bool compile_only = false;
  bool sweep = false;
  bool network = false;
  std::string db;        // tuning database: each problem's plan as `compile --db` chooses it
  bool db_cold = false;  // its cold-L2 records
  int cublas_algorithms = BaselineOptions{}.cublas_algorithms;
  TimingOptions timing;
};

// The emitters --emit asks for; the first is the one timed against the baselines.
std::vector<KernelLanguage> emitters(const Args& args) {
  if (args.emit == "both") return {KernelLanguage::ptx, KernelLanguage::cuda};
  return {parse_kernel_language(args.emit)};
}

SpmmOptions plan_options(const Args& args) { return flags::spmm_options(args, "f32"); }

// The plan overrides in words ("automatic" when there are none).
std::string describe_overrides(const Args& args) {
  std::vector<std::string> parts;
  if (args.rows_per_block > 0) parts.push_back(fmt::format("rows per block {}", args.rows_per_block));
  if (args.n_tile > 0) parts.push_back(fmt::format("n tile {}", args.n_tile));
  if (args.groups > 0) parts.push_back(fmt::format("groups {}", args.groups));
  if (args.cols_per_thread > 0) parts.push_back(fmt::format("{} columns a thread", args.cols_per_thread));
  if (args.step_lanes > 0) parts.push_back(fmt::format("{} step lanes", args.step_lanes));
  if (args.max_registers > 0) parts.push_back(fmt::format("max registers {}", args.max_registers));
  if (args.assembler_opt >= 0) parts.push_back(fmt::format("ptxas -O{}", args.assembler_opt));
  if (args.balanced) parts.push_back("balanced rows");
  if (args.equal_rows) parts.push_back("equal row panels");
  if (args.clustered_rows) parts.push_back("clustered rows");
  if (args.stage_dense > 0)
    parts.push_back(fmt::format("staged steps of {} or more nonzeros", args.stage_dense));
  if (args.values != "auto") parts.push_back(args.values + " values");
  if (args.programmatic != "auto") parts.push_back("programmatic " + args.programmatic);
  if (!args.db.empty())
    parts.push_back(fmt::format("plans from {}{}", args.db, args.db_cold ? " (cold-L2 records)" : ""));
  std::string words;
  for (const std::string& part : parts) words += (words.empty() ? "" : ", ") + part;
  return words.empty() ? std::string("automatic") : words;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One emitter's executor for one problem.
struct Build {
  KernelLanguage language = KernelLanguage::ptx;
  rt::Bundle bundle;
  double seconds = 0;          // emission and compilation, wall time
  double emit_seconds = 0;     // the emitter alone
  double compile_seconds = 0;  // NVRTC or nvJitLink alone
  ResourceUsage usage;
};

struct Compiled {
  nlohmann::json plan;  // the plan's parameters (plan_json)
  std::string plan_column;
  double plan_seconds = 0;
  std::int64_t b_loads = 0;       // spmm_plan_loads
  std::int64_t column_tiles = 0;  // grid x at the problem's N
  bool reads_values = false;      // the kernel reads the values array (streamed and rolled plans)
  std::vector<Build> builds;      // in the order of emitters()
  std::string error;              // non-empty: planning, generation or compilation failed
};

nlohmann::json plan_json(const SpmmPlan& plan) {
  return {{"block_rows", plan.block_rows()},
          {"rows_per_block", plan.layout.rows_per_block},
          {"n_tile", plan.layout.n_tile},
          {"groups", plan.layout.groups},
          {"cols_per_thread", plan.layout.cols_per_thread},
          {"step_lanes", plan.step_lanes()},
          {"max_registers", plan.hints.max_registers},
          {"assembler_opt_level", plan.hints.assembler_opt_level},
          {"block_x", plan.layout.block_x},
          {"values", to_string(plan.value_mode())},
          {"row_split", to_string(plan.layout.row_split)},
          {"shared_bytes", plan.layout.shared_bytes},
          {"estimated_instructions", plan.hints.estimated_instructions},
          {"programmatic", !plan.hints.programmatic          ? "off"
                           : plan.hints.programmatic_trigger ? "trigger"
                                                             : "wait"}};
}

// "R4/T128/G1/r32/O3/baked" (rows per block, n tile, groups, register cap, ptxas level, value mode;
// "/L32" for 32 step lanes, "/bal" for balanced rows, "/clu" for clustered rows, "/c2" for two fp32
// columns a thread, "/stN:S" for staged steps of N or more nonzeros in S slots).
std::string plan_column(const SpmmPlan& plan) {
  return fmt::format(
      "R{}/T{}/G{}/r{}/O{}/{}{}{}{}{}", plan.layout.rows_per_block, plan.layout.n_tile, plan.layout.groups,
      plan.hints.max_registers, plan.hints.assembler_opt_level, to_string(plan.value_mode()),
      plan.step_lanes() > 1 ? fmt::format("/L{}", plan.step_lanes()) : "",
      plan.layout.row_split == SpmmRowSplit::balanced    ? "/bal"
      : plan.layout.row_split == SpmmRowSplit::clustered ? "/clu"
                                                         : "",
      plan.fp32_pairs() ? "/c2" : "",
      plan.stage_slots() > 0 ? fmt::format("/st{}:{}", plan.stage_min_entries(), plan.stage_slots()) : "");
}

Compiled compile_problem(const CsrMatrix& a, std::int64_t n, const Args& args, const SpmmOptions& options,
                         const std::vector<KernelLanguage>& languages, const std::string& name) {
  Compiled c;
  try {
    pipeline::SpmmRequest request;
    request.problem.m = a.rows;
    request.problem.k = a.cols;
    request.problem.n = n;
    request.options = options;
    request.long_cuda = pipeline::LongCompile::allow;  // --max-nnz bounds the bench's compiles
    request.name = name;
    request.compile_threads = 1;  // the problems compile in parallel already
    const auto t0 = std::chrono::steady_clock::now();
    SpmmPlan plan = plan_spmm(a, request.problem, options);
    if (const auto problems = check_plan(plan, a); !problems.empty())
      throw std::runtime_error("the inspector produced an invalid plan: " + problems.front());
    c.plan_seconds = seconds_since(t0);
    c.plan = plan_json(plan);
    c.plan_column = plan_column(plan);
    c.b_loads = spmm_plan_loads(plan);
    c.column_tiles = plan.column_tiles(n);
    c.reads_values = plan.value_mode() != SpmmValueMode::baked;
    const GpuTarget& target = args.target;
    for (const KernelLanguage language : languages) {
      Build b;
      b.language = language;
      try {
        request.emit = language;
        pipeline::SpmmArtifact art = pipeline::compile_spmm_plan(plan, a, request, target);
        for (const pipeline::StepCost& step : art.report.steps)
          if (step.step == "emit") b.emit_seconds = step.seconds;
        b.compile_seconds = art.compiled.seconds;
        b.seconds = b.emit_seconds + b.compile_seconds;
        b.usage = art.usage;
        b.bundle = std::move(*art.bundle);
      } catch (const std::exception& e) {
        throw std::runtime_error(fmt::format("{} emitter: {}", to_string(language), e.what()));
      }
      c.builds.push_back(std::move(b));
    }
  } catch (const std::exception& e) {
    c.error = e.what();
  }
  return c;
}

double bytes_per_nonzero(const Build& b, const CsrMatrix& a) {
  return a.nnz() ? static_cast<double>(b.bundle.cubin.size()) / static_cast<double>(a.nnz()) : 0;
}

nlohmann::json build_json(const Build& b, const CsrMatrix& a) {
  return {{"gen_s", b.seconds},
          {"emit_s", b.emit_seconds},
          {"compile_s", b.compile_seconds},
          {"cubin_bytes", b.bundle.cubin.size()},
          {"bytes_per_nnz", bytes_per_nonzero(b, a)},
          {"registers", b.usage.registers},
          {"stack_bytes", b.usage.stack_frame_bytes},
          {"spill_bytes", b.usage.spill_store_bytes + b.usage.spill_load_bytes}};
}

// Runs the executor once on poisoned C and returns C.
std::vector<float> run_once(const rt::SpmmExecutor& exec, const CsrMatrix& a, std::int64_t n,
                            DeviceBuffer& db, DeviceBuffer& dc) {
  SPARSECC_CUDA_CHECK(cudaMemset(dc.get(), 0xff, dc.bytes()));  // 0xffffffff is a NaN
  exec.run(reinterpret_cast<CUdeviceptr>(db.get()), reinterpret_cast<CUdeviceptr>(dc.get()),
           static_cast<int>(n));
  SPARSECC_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> c(static_cast<std::size_t>(a.rows * n));
  dc.download(c.data(), c.size() * sizeof(float));
  return c;
}

// max|C - C_ref| / max|C_ref| (inf on NaN).
double relative_error(const std::vector<float>& c, const DenseMatrix& ref) {
  double max_ref = 0, max_err = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (!std::isfinite(c[i])) return INFINITY;
    max_ref = std::max(max_ref, std::fabs(ref.data[i]));
    max_err = std::max(max_err, std::fabs(c[i] - ref.data[i]));
  }
  return max_ref > 0 ? max_err / max_ref : max_err;
}

// A layer of a --network pass: the timed bundle loaded again with operands of its own, its output
// checked against fp64 once more (and kept, for the pass to reproduce), and the bytes it touches.
PassLayer network_layer(const BenchProblem& p, const CsrMatrix& a, const rt::Bundle& bundle,
                        const rt::Context& ctx, const std::vector<float>& b, const DenseMatrix& ref) {
  PassLayer l;
  l.name = p.name;
  l.network = p.network;
  l.count = p.count;
  l.n = static_cast<int>(p.N);
  l.executor = std::make_shared<const rt::SpmmExecutor>(rt::SpmmExecutor::load(bundle, p.name, ctx));
  l.b = std::make_shared<DeviceBuffer>(b.size() * sizeof(float));
  l.b->upload(b.data(), b.size() * sizeof(float));
  l.c = std::make_shared<DeviceBuffer>(static_cast<std::size_t>(a.rows * p.N) * sizeof(float));
  l.expected = run_once(*l.executor, a, p.N, *l.b, *l.c);
  if (const double err = relative_error(l.expected, ref); !(err <= 1e-5))
    throw std::runtime_error(
        fmt::format("{}: the executor reloaded for the network pass has error {:.2e}", p.name, err));
  l.sparsecc_bytes = rt::spmm_resident_bytes(bundle) + l.b->bytes() + l.c->bytes();
  l.dense_bytes = static_cast<std::size_t>(a.rows * a.cols) * sizeof(float) + l.b->bytes() + l.c->bytes();
  return l;
}

// The steady-state time of an empty kernel (132 blocks of 128 threads) under the same protocol: the
// least any executor or baseline can take per call on this device.
// `programmatic`: the same launches with programmatic stream serialization (each may start while the
// one before it ends).
double launch_floor_us(const TimingOptions& timing, bool programmatic) {
  static const char ptx[] =
      ".version 8.0\n.target sm_50\n.address_size 64\n.visible .entry sparsecc_empty()\n{\n  ret;\n}\n";
  const rt::DriverApi& d = rt::driver();
  CUmodule module = nullptr;
  SPARSECC_CU(d.cuModuleLoadDataEx(&module, ptx, 0, nullptr, nullptr));
  CUfunction f = nullptr;
  SPARSECC_CU(d.cuModuleGetFunction(&f, module, "sparsecc_empty"));
  const double us = time_steady_us(
      [&](cudaStream_t s) {
        if (programmatic)
          rt::launch_programmatic(f, 132, 1, 128, nullptr, reinterpret_cast<CUstream>(s), 0);
        else
          rt::launch(f, 132, 128, nullptr, reinterpret_cast<CUstream>(s));
      },
      timing);
  d.cuModuleUnload(module);
  return us;
}

// One generation and compilation: problem `problem` with the plan options `options`, one build for
// each of `languages` (the first is timed).
struct Task {
  std::size_t problem = 0;
  SpmmOptions options;
  std::vector<KernelLanguage> languages;
};

// The plans --sweep tries for one problem: the automatic plan first, then every combination of
// rows per block, groups and n tile (tiles no wider than N rounded up to a warp), and the automatic
// tiling under a few register caps.
std::vector<SpmmOptions> sweep_options(const Args& args, const BenchProblem& p, const CsrMatrix& a) {
  const SpmmOptions base = plan_options(args);
  std::vector<SpmmOptions> out{base};
  if (!args.sweep) return out;
  const std::int64_t widest = std::max<std::int64_t>(32, (p.N + 31) / 32 * 32);
  for (const std::int32_t r : {2, 4, 8, 16})
    for (const std::int32_t g : {1, 2, 4, 8})
      for (const std::int32_t t : {32, 64, 128}) {
        // The runtime launches with at most 48 KiB of dynamic shared memory.
        if (t > widest || r > std::max<std::int64_t>(a.rows, 1) || t * g > 1024 ||
            std::int64_t{g - 1} * r * t * 4 > 48 * 1024)
          continue;
        SpmmOptions o = base;
        o.rows_per_block = r;
        o.groups = g;
        o.n_tile = t;
        out.push_back(o);
      }
  for (const std::int32_t cap : {64, 128, 255}) {
    SpmmOptions o = base;
    o.max_registers = cap;
    out.push_back(o);
  }
  return out;
}

// Generates and compiles every task on `jobs` threads; over --max-nnz is reported as skipped.
std::vector<Compiled> compile_all(const Args& args, const std::vector<BenchProblem>& problems,
                                  const std::vector<CsrMatrix>& mats, const std::vector<Task>& tasks,
                                  int jobs) {
  std::vector<std::future<Compiled>> futures(tasks.size());
  std::vector<Compiled> compiled(tasks.size());
  std::size_t next = 0, done = 0;
  std::vector<std::size_t> running;
  while (done < tasks.size()) {
    while (running.size() < static_cast<std::size_t>(jobs) && next < tasks.size()) {
      const std::size_t pi = tasks[next].problem;
      if (mats[pi].nnz() <= args.max_nnz) {
        futures[next] = std::async(std::launch::async, compile_problem, std::cref(mats[pi]), problems[pi].N,
                                   std::cref(args), std::cref(tasks[next].options),
                                   std::cref(tasks[next].languages), problems[pi].name);
        running.push_back(next);
      } else {
        compiled[next].error =
            fmt::format("skipped: {} nonzeros > --max-nnz {}", mats[pi].nnz(), args.max_nnz);
        ++done;
      }
      ++next;
    }
    if (running.empty()) continue;
    const std::size_t i = running.front();
    running.erase(running.begin());
    compiled[i] = futures[i].get();
    ++done;
  }
  return compiled;
}

// The per-emitter column headers: "gen s" alone, or "gen s ptx", "gen s cuda" with both.
std::string column(const char* what, KernelLanguage language, bool several) {
  return several ? fmt::format("{} {}", what, to_string(language)) : std::string(what);
}

std::string suite_line(const Args& args, std::size_t count) {
  return fmt::format(
      "suite {} ({} problems{}), {}, emit {}, plan {}", args.suite, count,
      args.suite == "sparsert" ? fmt::format(", sparsity {}, batch {}", args.sparsity, args.batch) : "",
      args.arch, args.emit, describe_overrides(args));
}

// --compile-only: the compile table (no GPU touched).
int report_compile_only(const Args& args, const std::vector<BenchProblem>& problems,
                        const std::vector<CsrMatrix>& mats, const std::vector<Compiled>& compiled, int jobs) {
  const std::vector<KernelLanguage> langs = emitters(args);
  const bool several = langs.size() > 1;
  fmt::print("{}; compile only, {} parallel job(s)\n", suite_line(args, problems.size()), jobs);
  std::string header = fmt::format("{:<34} {:>16} {:>7}", "problem", "MxKxN", "nnz");
  for (const KernelLanguage l : langs) header += fmt::format(" {:>10}", column("gen s", l, several));
  for (const KernelLanguage l : langs) header += fmt::format(" {:>9}", column("B/nz", l, several));
  for (const KernelLanguage l : langs) header += fmt::format(" {:>9}", column("regs", l, several));
  fmt::print("{}  {}\n", header, "plan");
  nlohmann::json out = {{"suite", args.suite},
                        {"arch", args.arch},
                        {"emit", args.emit},
                        {"compile_only", true},
                        {"problems", nlohmann::json::array()}};
  std::map<KernelLanguage, double> total;
  std::vector<double> cuda_over_ptx;
  bool failed = false;
  for (std::size_t i = 0; i < problems.size(); ++i) {
    const auto& p = problems[i];
    const CsrMatrix& a = mats[i];
    const Compiled& c = compiled[i];
    nlohmann::json j = {{"name", p.name}, {"m", p.M}, {"k", p.K}, {"n", p.N}, {"nnz", a.nnz()}};
    if (!c.error.empty()) {
      fmt::print("{:<34} {}\n", p.name, c.error);
      j["error"] = c.error;
      out["problems"].push_back(j);
      if (c.error.rfind("skipped", 0) != 0) failed = true;
      continue;
    }
    std::string row =
        fmt::format("{:<34} {:>16} {:>7}", p.name, fmt::format("{}x{}x{}", p.M, p.K, p.N), a.nnz());
    for (const Build& b : c.builds) row += fmt::format(" {:>10.3f}", b.seconds);
    for (const Build& b : c.builds) row += fmt::format(" {:>9.1f}", bytes_per_nonzero(b, a));
    for (const Build& b : c.builds) row += fmt::format(" {:>9}", b.usage.registers);
    fmt::print("{}  {}\n", row, c.plan_column);
    std::fflush(stdout);
    j["plan"] = c.plan;
    j["plan_s"] = c.plan_seconds;
    for (const Build& b : c.builds) {
      j["emitters"][to_string(b.language)] = build_json(b, a);
      total[b.language] += b.seconds;
    }
    if (several) cuda_over_ptx.push_back(c.builds[1].seconds / c.builds[0].seconds);
    out["problems"].push_back(j);
  }
  fmt::print("generate+compile seconds in total:");
  for (const KernelLanguage l : langs) {
    fmt::print("  {} {:.2f} s", to_string(l), total[l]);
    out["total_gen_s"][to_string(l)] = total[l];
  }
  if (!cuda_over_ptx.empty()) {
    fmt::print("  (geomean cuda / ptx {:.2f}x over {} problems)", geomean(cuda_over_ptx),
               cuda_over_ptx.size());
    out["geomean_gen_cuda_over_ptx"] = geomean(cuda_over_ptx);
  }
  fmt::print("\n");
  if (!args.json.empty()) write_file_atomic(args.json, out.dump(1));
  return failed ? 1 : 0;
}

int run(const Args& args) {
  const std::string data = args.data.empty() ? default_data_dir() : args.data;
  std::vector<BenchProblem> problems =
      args.suite == "dlmc" ? dlmc_suite(data) : sparsert_suite(data, args.sparsity, args.batch);
  if (args.first > 0)
    problems.erase(problems.begin(), problems.begin() + std::min<std::size_t>(args.first, problems.size()));
  if (args.limit > 0 && static_cast<std::size_t>(args.limit) < problems.size()) problems.resize(args.limit);
  if (args.n > 0)
    for (auto& p : problems) p.N = args.n;

  std::vector<CsrMatrix> mats;
  for (const auto& p : problems) mats.push_back(load_problem_matrix(p));

  // Without --compile-only a GPU is needed: fail before compiling when there is none. The primary
  // context is retained before the runtime API touches it.
  std::optional<rt::Context> ctx;
  if (!args.compile_only) ctx.emplace(0);

  // Generate and compile on every core first; the GPU part follows.
  const int jobs =
      args.jobs > 0 ? args.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<Task> tasks;
  std::vector<std::vector<std::size_t>> candidates(problems.size());  // task indices, automatic first
  std::vector<std::string> plan_sources(problems.size());             // --db: where the plan came from
  for (std::size_t i = 0; i < problems.size(); ++i)
    for (const SpmmOptions& o : sweep_options(args, problems[i], mats[i])) {
      candidates[i].push_back(tasks.size());
      tasks.push_back({i, o, emitters(args)});
    }
  if (!args.db.empty()) {
    std::size_t recorded = 0;
    for (std::size_t i = 0; i < problems.size(); ++i) {
      SpmmProblem sp;
      sp.m = problems[i].M, sp.k = problems[i].K, sp.n = problems[i].N;
      Task& first = tasks[candidates[i].front()];
      const tune::TunedChoice choice = tune::choose_tuned_plan(
          args.db, mats[i], sp, first.options, first.languages.front(), args.target, "", args.db_cold);
      first.options = choice.options;
      first.languages = {choice.emitter};
      plan_sources[i] = choice.how;
      recorded += choice.how.starts_with("tuned plan");
    }
    fmt::print("--db {}: {} of {} problems take a recorded{} winner\n", args.db, recorded, problems.size(),
               args.db_cold ? " cold-L2" : "");
  }
  const std::vector<Compiled> all = compile_all(args, problems, mats, tasks, jobs);
  std::vector<Compiled> compiled;  // the automatic plan of every problem
  for (std::size_t i = 0; i < problems.size(); ++i) compiled.push_back(all[candidates[i].front()]);
  if (args.compile_only) return report_compile_only(args, problems, mats, compiled, jobs);

  const std::vector<KernelLanguage> langs = emitters(args);
  const bool several = langs.size() > 1;
  const DeviceInfo device = query_device();
  fmt::print("{}\n{}; {} timed, graphs of {} launches, median of {} replays, {} L2\n", device.describe(),
             suite_line(args, problems.size()),
             args.db.empty() ? to_string(langs.front()) : "each --db plan's emitter",
             args.timing.launches_per_graph, args.timing.repetitions, args.timing.cold_l2 ? "cold" : "warm");
  const double floor_us = launch_floor_us(args.timing, false);
  const double chain_floor_us = launch_floor_us(args.timing, true);
  fmt::print(
      "launch floor: {:.2f} us per call (an empty kernel of 132 blocks of 128 threads, timed the same way); "
      "{:.2f} us with programmatic launches\n",
      floor_us, chain_floor_us);
  // The data-movement bound of each problem (warm L2 only: the probe does not rotate buffers).
  std::optional<TrafficProbe> probe;
  if (!args.timing.cold_l2) probe.emplace(device);
  // Columns 1-11 stay where tools/bench/run_suite.sh reads them ($9-$11: the ratios).
  std::string header =
      fmt::format("{:<34} {:>16} {:>7} {:>8} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>7}", "problem", "MxKxN",
                  "nnz", "ours us", "fp32 us", "tf32 us", "fp16 us", "cusp us", "x fp32", "x tf32", "x cusp");
  for (const KernelLanguage l : langs) header += fmt::format(" {:>10}", column("gen s", l, several));
  for (const KernelLanguage l : langs) header += fmt::format(" {:>9}", column("B/nz", l, several));
  if (several) header += fmt::format(" {:>4}", "bits");
  if (args.sweep) header += fmt::format(" {:>8} {:>5}", "auto us", "plans");
  header += fmt::format(" {:>8} {:>8} {:>8} {:>9}", "pdl us", "bound us", "max xfp32", "stream us");
  fmt::print("{}  {}\n", header, "plan");
  nlohmann::json out = {{"device", device.describe()},
                        {"launch_floor_us", floor_us},
                        {"programmatic_launch_floor_us", chain_floor_us},
                        {"suite", args.suite},
                        {"arch", args.arch},
                        {"emit", args.emit},
                        {"cold_l2", args.timing.cold_l2},
                        {"problems", nlohmann::json::array()}};
  std::map<std::string, std::vector<double>> ratios;
  std::vector<double> bound_over_ours, fp32_over_bound, stream_over_ours;
  std::vector<PassLayer> pass_layers;             // --network
  std::map<std::string, std::string> incomplete;  // network -> a layer that failed or was skipped
  bool failed = false;
  for (std::size_t i = 0; i < problems.size(); ++i) {
    const auto& p = problems[i];
    const CsrMatrix& a = mats[i];
    const Compiled& c = compiled[i];
    nlohmann::json j = {{"name", p.name}, {"m", p.M}, {"k", p.K}, {"n", p.N}, {"nnz", a.nnz()}};
    if (!c.error.empty()) {
      fmt::print("{:<34} {}\n", p.name, c.error);
      std::fflush(stdout);
      j["error"] = c.error;
      out["problems"].push_back(j);
      if (c.error.rfind("skipped", 0) != 0) failed = true;
      incomplete.emplace(p.network, p.name);
      continue;
    }
    j["plan"] = c.plan;
    j["plan_s"] = c.plan_seconds;
    if (!plan_sources[i].empty()) j["plan_source"] = plan_sources[i];
    DenseMatrix b(a.cols, p.N);
    SplitMix64 rng(1234 + i);
    for (double& v : b.data) v = rng.uniform_pm1();
    std::vector<float> bf(b.data.begin(), b.data.end());
    DeviceBuffer db(bf.size() * sizeof(float)), dc(static_cast<std::size_t>(a.rows * p.N) * sizeof(float));
    db.upload(bf.data(), bf.size() * sizeof(float));
    const DenseMatrix ref = spmm(a, b);

    // Every emitter's executor on the same B: each against the reference, and all bit for bit.
    std::vector<rt::SpmmExecutor> execs;
    std::vector<std::vector<float>> outputs;
    bool ok = true;
    std::string problems_found;
    for (const Build& build : c.builds) {
      execs.push_back(rt::SpmmExecutor::load(build.bundle, p.name, *ctx));
      outputs.push_back(run_once(execs.back(), a, p.N, db, dc));
      const double err = relative_error(outputs.back(), ref);
      const bool build_ok = err <= 1e-5;
      j["emitters"][to_string(build.language)] = build_json(build, a);
      j["emitters"][to_string(build.language)]["max_rel_error"] = err;
      j["emitters"][to_string(build.language)]["ok"] = build_ok;
      if (!build_ok)
        problems_found += fmt::format("  FAILED check: {} error {:.2e}", to_string(build.language), err);
      ok = ok && build_ok;
    }
    bool identical = true;
    for (std::size_t e = 1; e < outputs.size(); ++e)
      identical = identical &&
                  std::memcmp(outputs[e].data(), outputs[0].data(), outputs[0].size() * sizeof(float)) == 0;
    if (several) {
      j["bitwise_identical"] = identical;
      if (!identical) problems_found += "  FAILED check: ptx and cuda outputs differ";
    }
    const bool all_ok = ok && identical;
    failed = failed || !all_ok;

    const auto time_exec = [&](const rt::SpmmExecutor& e, bool programmatic = false) {
      rt::RunOptions run_options;
      run_options.programmatic = programmatic;
      return time_steady(
          [&](cudaStream_t s) {
            e.run(reinterpret_cast<CUdeviceptr>(db.get()), reinterpret_cast<CUdeviceptr>(dc.get()),
                  static_cast<int>(p.N), reinterpret_cast<CUstream>(s), run_options);
          },
          args.timing);
    };
    const TimingStats automatic = time_exec(execs.front());
    TimingStats t = automatic;
    const Compiled* best = &c;
    // --sweep: every other candidate plan, verified, then timed; the fastest is reported.
    std::size_t tried = 1;
    for (std::size_t ci = 1; all_ok && ci < candidates[i].size(); ++ci) {
      const Compiled& cand = all[candidates[i][ci]];
      if (!cand.error.empty()) {
        fmt::print("  plan {}: {}\n", ci, cand.error);
        continue;
      }
      std::optional<rt::SpmmExecutor> loaded;
      try {
        loaded.emplace(rt::SpmmExecutor::load(cand.builds.front().bundle, p.name, *ctx));
      } catch (const std::exception& ex) {
        fmt::print("  plan {}: not loaded: {}\n", cand.plan_column, ex.what());
        continue;
      }
      const rt::SpmmExecutor& e = *loaded;
      const double err = relative_error(run_once(e, a, p.N, db, dc), ref);
      if (!(err <= 1e-5)) {
        fmt::print("  plan {}: FAILED check: error {:.2e}\n", cand.plan_column, err);
        failed = true;
        continue;
      }
      const TimingStats ct = time_exec(e);
      ++tried;
      const ResourceUsage& u = cand.builds.front().usage;
      fmt::print("  plan {:<28} {:>8.2f} us  {:>3} regs  stack {}  spill {}  gen {:.2f} s\n",
                 cand.plan_column, ct.median_us, u.registers, u.stack_frame_bytes,
                 u.spill_store_bytes + u.spill_load_bytes, cand.builds.front().seconds);
      j["sweep"].push_back({{"plan", cand.plan}, {"median_us", ct.median_us}, {"registers", u.registers}});
      if (ct.median_us < t.median_us) {
        t = ct;
        best = &cand;
      }
    }
    const Build& timed = best->builds.front();
    // --cold-l2: the chosen executor loaded once per operand set (each load has its own module,
    // values and tables) with its own copies of B and C, rotated launch by launch so that twice the
    // L2 passes between two uses of one set, as the baselines rotate theirs.
    const TimingStats warm = t;
    int cold_sets = 0;
    if (args.timing.cold_l2) {
      const rt::Bundle& bundle = timed.bundle;
      const std::size_t b_bytes = bf.size() * sizeof(float);
      const std::size_t set_bytes = rt::spmm_resident_bytes(bundle) + b_bytes + dc.bytes();
      TimingOptions cold = args.timing;
      cold.buffer_sets = cold_sets =
          rotation_sets(set_bytes, static_cast<std::size_t>(device.l2_bytes), true);
      std::vector<rt::SpmmExecutor> copies;
      std::vector<DeviceBuffer> bs, cs;
      for (int s = 0; s < cold_sets; ++s) {
        copies.push_back(rt::SpmmExecutor::load(bundle, p.name, *ctx));
        bs.emplace_back(b_bytes);
        bs.back().upload(bf.data(), b_bytes);
        cs.emplace_back(dc.bytes());
      }
      int next = 0;
      t = time_steady(
          [&](cudaStream_t s) {
            const auto at = static_cast<std::size_t>(next);
            copies[at].run(reinterpret_cast<CUdeviceptr>(bs[at].get()),
                           reinterpret_cast<CUdeviceptr>(cs[at].get()), static_cast<int>(p.N),
                           reinterpret_cast<CUstream>(s));
            next = (next + 1) % cold_sets;
          },
          cold);
    }
    // The same executor launched programmatically, as consecutive layers of a network would be: each
    // launch may start while the one before it ends (the kernel waits for it before touching B or C).
    // Warm L2 only.
    std::optional<TimingStats> chained;
    if (timed.bundle.metadata.programmatic_launch && !args.timing.cold_l2) {
      const rt::SpmmExecutor chain = rt::SpmmExecutor::load(timed.bundle, p.name, *ctx);
      chained = time_exec(chain, true);
    }
    BaselineOptions bo;
    bo.timing = args.timing;
    bo.cublas_algorithms = args.cublas_algorithms;
    const std::vector<BaselineResult> base = run_baselines(a, p.N, bo);
    const auto* fp32 = find_ok(base, "cublas_fp32");
    const auto* tf32 = find_ok(base, "cublas_tf32");
    const auto* fp16 = find_ok(base, "cublas_fp16");
    const auto* cusp = find_ok(base, "cusparse_best");
    auto us = [](const BaselineResult* r) { return r ? fmt::format("{:.2f}", r->us) : std::string("-"); };
    auto ratio = [&](const BaselineResult* r, const char* key) {
      if (!r || !all_ok) return std::string("-");
      ratios[key].push_back(r->us / t.median_us);
      return fmt::format("{:.2f}", r->us / t.median_us);
    };
    std::string row = fmt::format("{:<34} {:>16} {:>7} {:>8.2f} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>7}",
                                  p.name, fmt::format("{}x{}x{}", p.M, p.K, p.N), a.nnz(), t.median_us,
                                  us(fp32), us(tf32), us(fp16), us(cusp), ratio(fp32, "cublas_fp32"),
                                  ratio(tf32, "cublas_tf32"), ratio(cusp, "cusparse_best"));
    for (const Build& build : c.builds) row += fmt::format(" {:>10.2f}", build.seconds);
    for (const Build& build : c.builds) row += fmt::format(" {:>9.0f}", bytes_per_nonzero(build, a));
    if (several) row += fmt::format(" {:>4}", identical ? "same" : "DIFF");
    if (args.sweep) row += fmt::format(" {:>8.2f} {:>5}", automatic.median_us, tried);
    row += chained ? fmt::format(" {:>8.2f}", chained->median_us) : fmt::format(" {:>8}", "-");
    // What no executor can beat on this device, and the speedup over cuBLAS fp32 that it allows.
    std::optional<TrafficBound> bound;
    if (probe) bound = probe->bound(a, p.N, floor_us, args.timing);
    row += bound ? fmt::format(" {:>8.2f}", bound->bound_us) : fmt::format(" {:>8}", "-");
    row += bound && fp32 ? fmt::format(" {:>8.2f}", fp32->us / bound->bound_us) : fmt::format(" {:>8}", "-");
    if (bound && all_ok) {
      bound_over_ours.push_back(bound->bound_us / t.median_us);
      if (fp32) fp32_over_bound.push_back(fp32->us / bound->bound_us);
    }
    // What the timed plan streams from L2, moved by the same probe.
    std::optional<PlanTraffic> streamed;
    std::optional<double> stream_us;
    if (probe) {
      const std::size_t representation =
          timed.bundle.cubin.size() + (best->reads_values ? timed.bundle.values.size() * sizeof(float) : 0);
      streamed = plan_traffic(p.M, p.K, p.N, best->b_loads, representation, best->column_tiles);
      stream_us = probe->stream_us(*streamed, args.timing);
      if (all_ok) stream_over_ours.push_back(*stream_us / t.median_us);
    }
    row += stream_us ? fmt::format(" {:>9.2f}", *stream_us) : fmt::format(" {:>9}", "-");
    fmt::print("{}  {}{}\n", row, best->plan_column, problems_found);
    std::fflush(stdout);
    if (fp16 && all_ok) ratios["cublas_fp16"].push_back(fp16->us / t.median_us);
    // A stack of layers asking for programmatic launches: programmatic where the bundle takes part,
    // plain otherwise (what SpmmExecutor::run does).
    if (fp32 && all_ok)
      ratios["cublas_fp32_vs_programmatic"].push_back(fp32->us /
                                                      (chained ? chained->median_us : t.median_us));
    j["ours"] = {{"emit", to_string(timed.language)},
                 {"median_us", t.median_us},
                 {"min_us", t.min_us},
                 {"spread", t.spread},
                 {"max_rel_error", j["emitters"][to_string(timed.language)]["max_rel_error"]},
                 {"ok", all_ok},
                 {"gen_s", timed.seconds},
                 {"compile_s", timed.compile_seconds},
                 {"cubin_bytes", timed.bundle.cubin.size()},
                 {"registers", timed.usage.registers},
                 {"spill_bytes", timed.usage.spill_store_bytes + timed.usage.spill_load_bytes},
                 {"plan", timed.bundle.metadata.plan_summary},
                 {"automatic_plan_us", automatic.median_us}};
    if (chained) j["ours"]["programmatic_us"] = chained->median_us;
    if (bound)
      j["bound"] = {{"read_bytes", bound->bytes.read},
                    {"write_bytes", bound->bytes.write},
                    {"probe_us", bound->probe_us},
                    {"fma_us", bound->fma_us},
                    {"bound_us", bound->bound_us}};
    if (stream_us)
      j["stream"] = {{"read_bytes", streamed->read},       {"unique_read_bytes", streamed->unique_read},
                     {"write_bytes", streamed->write},     {"b_loads", best->b_loads},
                     {"column_tiles", best->column_tiles}, {"probe_us", *stream_us}};
    if (args.timing.cold_l2) j["ours"]["warm_us"] = warm.median_us, j["ours"]["cold_sets"] = cold_sets;
    for (const auto& r : base)
      j["baselines"][r.name] = {{"us", r.us}, {"ok", r.ok}, {"rel_error", r.rel_error}, {"note", r.note}};
    out["problems"].push_back(j);
    if (!args.json.empty()) write_file_atomic(args.json, out.dump(1));
    if (args.network && !all_ok) incomplete.emplace(p.network, p.name);
    if (args.network && all_ok) {
      PassLayer l = network_layer(p, a, timed.bundle, *ctx, bf, ref);
      l.alone_us = t.median_us;
      l.alone_programmatic_us = chained ? chained->median_us : t.median_us;
      for (const char* kind : {"cublas_fp32", "cublas_tf32", "cublas_fp16", "cusparse_best"})
        if (const BaselineResult* r = find_ok(base, kind)) l.baselines.emplace(kind, *r);
      pass_layers.push_back(std::move(l));
    }
  }
  if (args.network) {
    std::erase_if(pass_layers, [&](const PassLayer& l) { return incomplete.count(l.network) > 0; });
    for (const auto& [network, layer] : incomplete)
      fmt::print("network {}: no pass timed, layer {} failed or was skipped\n", network, layer);
    const std::vector<PassTiming> passes = time_network_passes(pass_layers, args.timing);
    print_passes(passes);
    for (const PassTiming& pass : passes) out["network_passes"].push_back(to_json(pass));
  }
  fmt::print("geomean speedup of sparsecc over:");
  for (const auto& [k, v] : ratios) {
    fmt::print("  {} {:.2f}x ({} problems)", k, geomean(v), v.size());
    out["geomean"][k] = geomean(v);
  }
  fmt::print("\n");
  if (!bound_over_ours.empty()) {
    fmt::print(
        "data-movement bound (B's used rows, A's weights and C moved by a probe kernel; FMAs at peak): "
        "sparsecc runs at {:.2f}x of it in geomean ({} problems); cuBLAS fp32 / bound {:.2f}x, the most "
        "any executor could gain over cuBLAS fp32 here\n",
        geomean(bound_over_ours), bound_over_ours.size(), geomean(fp32_over_bound));
    out["geomean"]["bound_over_sparsecc"] = geomean(bound_over_ours);
    out["geomean"]["cublas_fp32_over_bound"] = geomean(fp32_over_bound);
  }
  if (!stream_over_ours.empty()) {
    fmt::print(
        "the timed plans' own L2 traffic (B as each plan loads it, A's representation per column tile, C; "
        "the same probe): sparsecc runs at {:.2f}x of it in geomean ({} problems)\n",
        geomean(stream_over_ours), stream_over_ours.size());
    out["geomean"]["stream_over_sparsecc"] = geomean(stream_over_ours);
  }
  if (!args.json.empty()) write_file_atomic(args.json, out.dump(1));
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  sparsecc::bench::print_stack_on_crash("sparsecc_bench");
  if (argc > 1 && std::string(argv[1]) == "hines")
    return sparsecc::bench::hines_bench_main(argc - 1, argv + 1);
  if (argc > 1 && std::string(argv[1]) == "blocklets")
    return sparsecc::bench::blocklet_bench_main(argc - 1, argv + 1);
  Args args;
  CLI::App app{"sparsecc_bench: sparsecc's SpMM executors against cuBLAS and cuSPARSE", "sparsecc_bench"};
  app.add_option("--suite", args.suite, "sparsert or dlmc")->check(CLI::IsMember({"sparsert", "dlmc"}));
  app.add_option("--sparsity", args.sparsity, "SparseRT suite sparsity")->check(CLI::IsMember({0.9, 0.95}));
  app.add_option("--batch", args.batch, "SparseRT suite batch (N multiplier)")->check(CLI::Range(1, 1024));
  app.add_option("--data", args.data, "data folder (default: $SPARSECC_DATA_DIR or ../shared/data)");
  app.add_option("--json", args.json, "write results as JSON");
  app.add_option("--first", args.first, "start at problem I (0-based)");
  app.add_option("--limit", args.limit, "only K problems");
  app.add_option("--max-nnz", args.max_nnz, "skip matrices with more nonzeros (compile time)")
      ->capture_default_str();
  app.add_option("--jobs", args.jobs, "parallel compilations (default: all cores)");
  flags::add_arch_flag(&app, args.arch, "GPU to plan and compile for");
  app.add_option("--emit", args.emit,
                 "emitter whose executor is verified and timed: direct PTX (nvJitLink), CUDA C++ (NVRTC), "
                 "or both (both verified and compared bit for bit, PTX timed)")
      ->check(CLI::IsMember({"ptx", "cuda", "both"}))
      ->capture_default_str();
  flags::add_spmm_plan_flags(&app, args);
  app.add_option("--n", args.n, "every problem's N instead of the suite's (after --batch)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_flag("--sweep", args.sweep,
               "also try a grid of plans per problem (rows per block, groups, n tile, register cap), "
               "verify each, and report the fastest next to the automatic plan");
  app.add_flag("--compile-only", args.compile_only,
               "generate and compile every problem and print the compile table; needs no GPU");
  app.add_option("--repetitions", args.timing.repetitions, "graph replays")->capture_default_str();
  app.add_flag("--cold-l2", args.timing.cold_l2,
               "time every executor and baseline on rotating copies of its operands (and of the executor's "
               "module, values and tables), so that twice the L2 passes between two uses of one copy");
  app.add_option("--cublas-algorithms", args.cublas_algorithms,
                 "cuBLASLt heuristic algorithms timed for each weight layout besides cublasGemmEx's default")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--launches", args.timing.launches_per_graph, "launches per graph")->capture_default_str();
  app.add_option(
      "--db", args.db,
      "tuning database: build each problem's executor as `sparsecc compile --db` would (the recorded "
      "winner, else the predictor's choice)");
  app.add_flag("--db-cold", args.db_cold,
               "with --db: the records tuned with cold L2 (`tune --cold-l2`), else the automatic plan");
  app.add_flag("--network", args.network,
               "also time each network of the suite end to end: its layers (each `count` times, SparseRT "
               "Table 1's instances) in one CUDA graph, sparsecc's executors against each baseline's fastest "
               "checked algorithm a layer (warm L2 only)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    args.target = cli::resolve_gpu_target(args.arch);
    args.arch = args.target.arch;
  } catch (const std::exception& e) {
    fmt::print(stderr, "sparsecc_bench: error: {}\n", e.what());
    return 2;
  }
  if (args.network && args.timing.cold_l2) {
    fmt::print(stderr, "sparsecc_bench: error: --network times passes as they run (warm); drop --cold-l2\n");
    return 2;
  }
  if (!args.db.empty() && (args.sweep || args.emit == "both")) {
    fmt::print(stderr,
               "sparsecc_bench: error: --db times the recorded plan alone; drop --sweep and --emit both\n");
    return 2;
  }
  if (args.db_cold && args.db.empty()) {
    fmt::print(stderr, "sparsecc_bench: error: --db-cold needs --db\n");
    return 2;
  }
  if (args.sweep && args.emit == "both") {
    fmt::print(stderr, "sparsecc_bench: error: --sweep times one emitter; use --emit ptx or --emit cuda\n");
    return 2;
  }
  try {
    if (!args.json.empty()) check_output_file(args.json, {args.db}, "--json");  // before the work
    return run(args);
  } catch (const NoDeviceError& e) {
    fmt::print(stderr,
               "sparsecc_bench: error: {} (this program needs an NVIDIA GPU; --compile-only does not)\n",
               e.what());
    return 2;
  } catch (const rt::DriverUnavailable& e) {
    fmt::print(stderr,
               "sparsecc_bench: error: {} (this program needs an NVIDIA GPU; --compile-only does not)\n",
               e.what());
    return 2;
  } catch (const InputError& e) {
    fmt::print(stderr, "sparsecc_bench: error: {}\n", e.what());
    return 2;
  } catch (const UsageError& e) {
    fmt::print(stderr, "sparsecc_bench: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "sparsecc_bench: error: {}\n", e.what());
    return 1;
  }
}
