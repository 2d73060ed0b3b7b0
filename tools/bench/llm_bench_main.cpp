// sparsecc_llm_bench (issue 47): pruned LLM-shaped layers in fp16 / bf16 at small N, sparsecc's
// executors against cuBLAS, cuSPARSE and (when built with them) SpInfer and Flash-LLM, in one run.
//
// Suite: the layers of bench/llm_suite.hpp (4096x4096 ... 28672x8192) at 50-95 % sparsity, pattern
// `random` (exactly round((1-s) K) nonzeros a row, uniformly placed) or `magnitude` (i.i.d. Gaussian
// weights, global magnitude threshold), N in {1, 8, 16, 32, 64}, fp16 and bf16; plus, with --dlmc DIR,
// the DLMC transformer matrices (.smtx or .smtx.gz) of that folder. Every flag selects a list.
//
// For every configuration (matrix, N, dtype): B from random_half_matrix (the baselines' generator);
// the fp64 reference of the rounded inputs on a deterministic sample of rows (--check-rows, all rows
// when M is smaller); every executor runs once on a NaN-poisoned C and is checked there (relative L2
// error within half_tolerance, no non-finite value anywhere in C) before it is timed; one that fails
// is reported, never timed. Timing: CUDA graphs of many launches, median of replays
// (bench/timing.hpp), with a cold L2 (each executor rotates among enough copies of its weights, B and
// C that twice the L2 passes between two uses of one copy) and warm.
// Executors: cuBLAS (cublasGemmEx's default and cuBLASLt's first --cublas-algorithms heuristics on both
// weight layouts, the fastest; timed once per M, K, N and dtype, since a dense GEMM's time does not
// depend on the values), cuSPARSE CSR (the fastest algorithm), sparsecc's automatic choice, sparsecc
// with value mode compressed, any --variant, and SpInfer and Flash-LLM (fp16; their split-K 1..8
// swept with a short protocol, the best timed in full; N padded to the least N they take).
// Each executor's own memory bound: its bytes (sparsecc: the bundle's resident bytes + B + C; cuBLAS:
// dense A + B + C; cuSPARSE: CSR + B + C; peers: their format + B + C) over the device-to-device copy
// bandwidth measured in the same run, and the fraction of it reached.
// Prints a table per configuration and a summary (geomean over the LLM shapes per pattern, sparsity,
// N and dtype of the speedup over cuBLAS and over the faster peer); --json writes every figure.
// Exit: 0 ok, 1 a sparsecc executor failed its check or did not build, or no GPU; 2 bad usage.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "bench/baselines.hpp"
#include "bench/half_baselines.hpp"
#include "bench/half_layouts.hpp"
#include "bench/llm_suite.hpp"
#include "bench/peer_kernels.hpp"
#include "bench/suites.hpp"
#include "bench/timing.hpp"
#include "bench/vendor_handles.hpp"
#include "bench_main.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "sparsecc/common/output.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/io/load.hpp"
#include "sparsecc/pipeline/pipeline.hpp"
#include "sparsecc/runtime/bundle.hpp"
#include "sparsecc/runtime/driver.hpp"
#include "sparsecc/runtime/executor.hpp"
#include "sparsecc/target/target.hpp"

namespace {

using namespace sparsecc;
using namespace sparsecc::bench;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Args {
  std::string shapes = "all";
  std::string sparsity = "50,70,80,90,95";
  std::string n = "1,16,64";
  std::string dtype = "f16";
  std::string pattern = "random";
  std::string dlmc;
  int dlmc_limit = 0;
  bool quick = false;
  std::string json;
  bool warm_only = false, cold_only = false;
  std::uint64_t seed = 1;
  std::int64_t check_rows = 256;
  int cublas_algorithms = 2;
  bool csr_alg3 = false;
  std::vector<std::string> variants;
  int max_split_k = 8;
  bool no_peers = false;
  bool time_unchecked = false;
  bool no_compressed = false;
  double max_compile_s = 30;
  int compile_jobs = 0;
  TimingOptions timing;
};

double parse_sparsity(const std::string& word) {
  double v = 0;
  try {
    std::size_t used = 0;
    v = std::stod(word, &used);
    if (used != word.size()) throw std::invalid_argument(word);
  } catch (const std::exception&) {
    throw UsageError(fmt::format("--sparsity: '{}' is not a number", word));
  }
  if (v >= 1) v /= 100;  // percent
  if (!(v >= 0 && v < 1)) throw UsageError(fmt::format("--sparsity: {} is not in [0, 100) %", word));
  return v;
}

HalfPrecision parse_precision(const std::string& word) {
  if (word == "f16" || word == "fp16") return HalfPrecision::f16;
  if (word == "bf16") return HalfPrecision::bf16;
  throw UsageError(fmt::format("--dtype: '{}' is not f16 or bf16", word));
}

DType dtype_of(HalfPrecision p) { return p == HalfPrecision::f16 ? DType::f16 : DType::bf16; }

// ---- The configurations ----

struct MatrixSpec {
  std::string label;  // "4096x11008 random 90%" or "dlmc/<file stem>"
  LlmShape shape;     // LLM layers (M, K); DLMC: read from the file
  double sparsity = 0;
  LlmPattern pattern = LlmPattern::random;
  std::string file;  // DLMC: the .smtx file
  bool llm() const { return file.empty(); }
};

struct Config {
  std::size_t matrix = 0;
  std::int64_t n = 0;
  HalfPrecision prec = HalfPrecision::f16;
};

struct Selection {
  std::vector<LlmShape> shapes;
  std::vector<double> sparsities;
  std::vector<LlmPattern> patterns;
  std::vector<std::int64_t> ns;
  std::vector<HalfPrecision> precs;
};

struct Plan {
  std::vector<MatrixSpec> matrices;
  std::vector<Config> configs;  // grouped by matrix, in matrix order
};

void add_selection(Plan& plan, std::map<std::string, std::size_t>& index, std::set<std::string>& seen,
                   const Selection& s) {
  for (const LlmShape& shape : s.shapes)
    for (double sp : s.sparsities)
      for (LlmPattern pat : s.patterns) {
        const std::string label = fmt::format("{} {} {:g}%", shape.name(), llm_pattern_name(pat), sp * 100);
        auto [it, fresh] = index.emplace(label, plan.matrices.size());
        if (fresh) plan.matrices.push_back({label, shape, sp, pat, {}});
        for (std::int64_t n : s.ns)
          for (HalfPrecision p : s.precs) {
            const std::string key = fmt::format("{}|{}|{}", it->second, n, half_precision_name(p));
            if (seen.insert(key).second) plan.configs.push_back({it->second, n, p});
          }
      }
}

Plan make_plan(const Args& args) {
  Plan plan;
  std::map<std::string, std::size_t> index;
  std::set<std::string> seen;
  std::vector<std::int64_t> ns;
  for (const std::string& w : split_list(args.n)) {
    std::int64_t v = 0;
    try {
      v = std::stoll(w);
    } catch (const std::exception&) {
      throw UsageError(fmt::format("--n: '{}' is not a number", w));
    }
    if (v < 1 || v > 4096) throw UsageError(fmt::format("--n: {} is not in 1..4096", w));
    ns.push_back(v);
  }
  std::vector<HalfPrecision> precs;
  for (const std::string& w : split_list(args.dtype)) precs.push_back(parse_precision(w));
  if (args.quick) {
    const std::vector<LlmShape>& all = llm_shapes();
    add_selection(plan, index, seen,
                  {all, {0.5, 0.7, 0.9}, {LlmPattern::random}, {16}, {HalfPrecision::f16}});
    add_selection(plan, index, seen, {{all[0]}, {0.9}, {LlmPattern::random}, {1, 64}, {HalfPrecision::f16}});
    add_selection(plan, index, seen, {all, {0.9}, {LlmPattern::random}, {16}, {HalfPrecision::bf16}});
  } else {
    Selection s;
    if (args.shapes == "all")
      s.shapes = llm_shapes();
    else if (args.shapes != "none")
      for (const std::string& w : split_list(args.shapes)) s.shapes.push_back(parse_llm_shape(w));
    for (const std::string& w : split_list(args.sparsity)) s.sparsities.push_back(parse_sparsity(w));
    for (const std::string& w : split_list(args.pattern)) s.patterns.push_back(parse_llm_pattern(w));
    s.ns = ns;
    s.precs = precs;
    add_selection(plan, index, seen, s);
  }
  if (!args.dlmc.empty()) {
    namespace fs = std::filesystem;
    if (!fs::is_directory(args.dlmc)) {
      fmt::print("DLMC skipped: {} is not a folder\n", args.dlmc);
    } else {
      std::vector<std::string> files;
      for (const auto& e : fs::recursive_directory_iterator(args.dlmc)) {
        const std::string name = e.path().filename().string();
        if (e.is_regular_file() && (name.ends_with(".smtx") || name.ends_with(".smtx.gz")))
          files.push_back(e.path().string());
      }
      std::sort(files.begin(), files.end());
      if (args.dlmc_limit > 0 && files.size() > static_cast<std::size_t>(args.dlmc_limit))
        files.resize(static_cast<std::size_t>(args.dlmc_limit));
      if (files.empty()) fmt::print("DLMC skipped: no .smtx file in {}\n", args.dlmc);
      for (const std::string& f : files) {
        std::string stem = fs::path(f).filename().string();
        stem = stem.substr(0, stem.find(".smtx"));
        MatrixSpec m;
        m.label = "dlmc/" + stem;
        m.file = f;
        m.sparsity = 0.9;
        const std::size_t mi = plan.matrices.size();
        plan.matrices.push_back(m);
        for (std::int64_t n : args.quick ? std::vector<std::int64_t>{1, 16, 64} : ns)
          for (HalfPrecision p : args.quick ? std::vector<HalfPrecision>{HalfPrecision::f16} : precs)
            plan.configs.push_back({mi, n, p});
      }
    }
  }
  std::stable_sort(plan.configs.begin(), plan.configs.end(),
                   [](const Config& a, const Config& b) { return a.matrix < b.matrix; });
  return plan;
}

// ---- Results ----

struct ExecResult {
  std::string name;
  std::string family;  // cublas, cusparse, sparsecc, peer
  bool ok = false;     // checked (and timed)
  bool skipped = false;
  std::string note;
  double rel_error = NAN, tolerance = 0;
  std::optional<TimingStats> cold, warm;
  std::size_t bytes = 0;  // what one launch must move at least: its weights' format + B + C
  nlohmann::json extra = nlohmann::json::object();

  double us() const { return cold ? cold->median_us : warm ? warm->median_us : 0; }
};

std::string join(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + "; " + b;
}

nlohmann::json result_json(const ExecResult& r, double bw_bytes_per_us) {
  nlohmann::json j = {{"name", r.name},           {"family", r.family}, {"ok", r.ok},
                      {"skipped", r.skipped},     {"note", r.note},     {"rel_error", r.rel_error},
                      {"tolerance", r.tolerance}, {"bytes", r.bytes},   {"extra", r.extra}};
  if (r.bytes > 0 && bw_bytes_per_us > 0) j["bound_us"] = static_cast<double>(r.bytes) / bw_bytes_per_us;
  if (r.cold) {
    j["cold"] = timing_json(*r.cold);
    if (r.bytes > 0)
      j["cold_fraction_of_bound"] = static_cast<double>(r.bytes) / bw_bytes_per_us / r.cold->median_us;
  }
  if (r.warm) {
    j["warm"] = timing_json(*r.warm);
    if (r.bytes > 0)
      j["warm_fraction_of_bound"] = static_cast<double>(r.bytes) / bw_bytes_per_us / r.warm->median_us;
  }
  return j;
}

// ---- A small pool for the CPU work of the next configurations (compiles, peer formats) ----

class Pool {
 public:
  explicit Pool(unsigned workers) {
    for (unsigned i = 0; i < std::max(1u, workers); ++i) threads_.emplace_back([this] { loop(); });
  }
  ~Pool() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  template <class F>
  auto submit(F f) -> std::future<decltype(f())> {
    auto task = std::make_shared<std::packaged_task<decltype(f())()>>(std::move(f));
    auto fut = task->get_future();
    {
      std::lock_guard lock(mu_);
      queue_.push_back([task] { (*task)(); });
    }
    cv_.notify_one();
    return fut;
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return done_ || !queue_.empty(); });
        if (queue_.empty()) return;
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      job();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> threads_;
  bool done_ = false;
};

// ---- sparsecc executors ----

struct Variant {
  std::string name;  // sparsecc_<name>
  SpmmOptions options;
  SpmmNMode n_mode = SpmmNMode::fixed;
  bool auto_choice = false;
};

// "[NAME:]key=value,..." with keys values, rows-per-block, n-tile, groups, max-registers,
// cols-per-thread, step-lanes, ptxas-O, the compressed family's warps, strips (16-row strips a warp),
// chunk-k, stages, splits, kept-rounds, formats (bits: 1 bitmap, 2 positions, 4 dense), bitmap-weight,
// position-weight, layout (records, scatter or vector), and n-mode (fixed | runtime).
Variant parse_variant(const std::string& spec) {
  Variant v;
  std::string body = spec;
  if (const auto colon = spec.find(':'); colon != std::string::npos && spec.find('=') > colon) {
    v.name = spec.substr(0, colon);
    body = spec.substr(colon + 1);
  }
  if (v.name.empty()) {
    v.name = body;
    std::replace(v.name.begin(), v.name.end(), ',', '_');
    std::replace(v.name.begin(), v.name.end(), '=', '-');
  }
  for (const std::string& kv : split_list(body)) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos)
      throw UsageError(fmt::format("--variant {}: '{}' is not key=value", spec, kv));
    const std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
    const auto integer = [&] {
      try {
        return static_cast<std::int32_t>(std::stoi(value));
      } catch (const std::exception&) {
        throw UsageError(fmt::format("--variant {}: {} needs a number, not '{}'", spec, key, value));
      }
    };
    if (key == "values")
      v.options.value_mode = parse_value_mode(value, "--variant values");
    else if (key == "rows-per-block")
      v.options.rows_per_block = integer();
    else if (key == "n-tile")
      v.options.n_tile = integer();
    else if (key == "groups")
      v.options.groups = integer();
    else if (key == "max-registers")
      v.options.max_registers = integer();
    else if (key == "cols-per-thread")
      v.options.cols_per_thread = integer();
    else if (key == "step-lanes")
      v.options.step_lanes = integer();
    else if (key == "ptxas-O")
      v.options.assembler_opt_level = integer();
    else if (key == "warps")  // the compressed family's choices (SpmmCompressedOptions)
      v.options.compressed.warps = integer();
    else if (key == "strips")
      v.options.compressed.strips_per_warp = integer();
    else if (key == "chunk-k")
      v.options.compressed.chunk_k = integer();
    else if (key == "splits")
      v.options.compressed.splits = integer();
    else if (key == "stages")
      v.options.compressed.stages = integer();
    else if (key == "kept-rounds")
      v.options.compressed.kept_rounds = integer();
    else if (key == "formats")  // bits: 1 bitmap, 2 positions, 4 dense
      v.options.compressed.formats = static_cast<std::uint32_t>(integer());
    else if (key == "bitmap-weight")
      v.options.compressed.bitmap_weight = integer();
    else if (key == "position-weight")
      v.options.compressed.position_weight = integer();
    else if (key == "layout") {
      if (!set_compressed_layout(v.options.compressed, value))
        throw UsageError(fmt::format("--variant {}: layout is records, scatter or vector", spec));
    } else if (key == "n-mode") {
      if (value != "fixed" && value != "runtime")
        throw UsageError(fmt::format("--variant {}: n-mode is fixed or runtime", spec));
      v.n_mode = value == "runtime" ? SpmmNMode::runtime : SpmmNMode::fixed;
    } else
      throw UsageError(fmt::format(
          "--variant {}: unknown key '{}' (values, rows-per-block, n-tile, groups, max-registers, "
          "cols-per-thread, step-lanes, ptxas-O, warps, strips, chunk-k, stages, splits, kept-rounds, "
          "formats, bitmap-weight, position-weight, layout, n-mode)",
          spec, key));
  }
  return v;
}

struct Compiled {
  std::string variant;
  std::optional<rt::Bundle> bundle;
  std::string error;
  std::string same_as;  // the variant whose build this one reuses (same options in effect)
  nlohmann::json info = nlohmann::json::object();
};

Compiled compile_variant(const CsrMatrix& a, std::int64_t n, HalfPrecision prec, const Variant& v,
                         const GpuTarget& target, const Args& args, unsigned threads,
                         const std::string& label) {
  Compiled c;
  c.variant = v.name;
  try {
    pipeline::SpmmRequest request;
    request.problem = {a.rows, a.cols, n, v.n_mode, false, false, dtype_of(prec)};
    request.options = v.options;
    request.long_cuda = pipeline::LongCompile::refuse;  // a hopeless compile is refused, not waited for
    request.max_cuda_seconds = args.max_compile_s;
    request.name = label;
    request.compile_threads = threads;
    const auto t0 = Clock::now();
    pipeline::SpmmArtifact art = pipeline::compile_spmm(a, request, target);
    c.info["seconds"] = seconds_since(t0);
    for (const pipeline::StepCost& s : art.report.steps) c.info["steps"][s.step] = s.seconds;
    c.info["value_mode"] = to_string(art.plan.value_mode());
    c.info["registers"] = art.usage.registers;
    c.info["spill_bytes"] = art.usage.spill_store_bytes + art.usage.spill_load_bytes;
    c.info["cubin_bytes"] = art.bundle->cubin.size();
    c.info["resident_bytes"] = rt::spmm_resident_bytes(*art.bundle);
    c.info["plan"] = art.bundle->metadata.plan_summary;
    c.info["n_mode"] = v.n_mode == SpmmNMode::runtime ? "runtime" : "fixed";
    c.bundle = std::move(art.bundle);
  } catch (const std::exception& e) {
    c.error = e.what();
  }
  return c;
}

// ---- The run ----

struct RunContext {
  Args args;
  DeviceInfo device;
  GpuTarget target;
  std::unique_ptr<rt::Context> ctx;
  double bw = 0;  // copy bandwidth, bytes per µs
  std::vector<Variant> variants;
  bool cold = true, warm = true;
  // cuBLAS results per "M|K|N|dtype": (cold, warm) best.
  std::map<std::string, ExecResult> cublas_cache;
};

TimingOptions mode_timing(const RunContext& cx, bool cold, int sets) {
  TimingOptions t = cx.args.timing;
  t.cold_l2 = cold;
  t.buffer_sets = sets;
  return t;
}

// time_steady, or events around direct launches when the graph capture fails (note says so).
TimingStats time_checked(const std::function<void(cudaStream_t)>& enqueue, const TimingOptions& t,
                         std::string& note) {
  try {
    return time_steady(enqueue, t);
  } catch (const CudaError& e) {
    cudaGetLastError();
    note = join(note,
                fmt::format("graph capture failed ({}), timed with events around direct launches", e.what()));
    return time_direct(enqueue, t);
  }
}

// The device-to-device copy bandwidth (read + write bytes per µs) of a buffer far larger than the L2.
double copy_bandwidth(const DeviceInfo& device, const TimingOptions& base, double& us, std::size_t& bytes) {
  bytes = std::max<std::size_t>(std::size_t{512} << 20, static_cast<std::size_t>(device.l2_bytes) * 8);
  DeviceBuffer src(bytes), dst(bytes);
  SPARSECC_CUDA_CHECK(cudaMemset(src.get(), 1, bytes));
  TimingOptions t = base;
  t.launches_per_graph = 20;
  t.cold_l2 = false;
  t.buffer_sets = 1;
  us = time_steady(
           [&](cudaStream_t s) {
             SPARSECC_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, s));
           },
           t)
           .median_us;
  return 2.0 * static_cast<double>(bytes) / us;
}

// The inputs of one configuration.
struct Inputs {
  const CsrMatrix* a = nullptr;  // values rounded to the precision
  std::int64_t m = 0, k = 0, n = 0;
  HalfPrecision prec = HalfPrecision::f16;
  std::vector<std::uint16_t> b_bits;  // K x N row-major
  std::vector<std::int64_t> rows;     // checked rows
  std::vector<double> ref;            // their fp64 reference
  double tol = 0;
  std::uint64_t b_seed = 7;
};

// C (row-major M x N half bits) as doubles: the checked rows, NaN first when any value is not finite.
double check_output(const Inputs& in, const std::vector<std::uint16_t>& c_bits) {
  std::vector<double> full(c_bits.size());
  for (std::size_t i = 0; i < full.size(); ++i) full[i] = half_bits_to_double(c_bits[i], in.prec);
  return rel_l2_error(pick_rows(full, in.n, in.rows), in.ref);
}

ExecResult vendor_result(const std::string& name, const std::string& family,
                         const std::vector<BaselineResult>* cold, const std::vector<BaselineResult>* warm,
                         std::size_t bytes) {
  ExecResult r;
  r.name = name;
  r.family = family;
  r.bytes = bytes;
  r.ok = true;
  for (auto [list, is_cold] : {std::pair{cold, true}, std::pair{warm, false}}) {
    if (!list) continue;
    const auto it =
        std::find_if(list->begin(), list->end(), [&](const BaselineResult& b) { return b.name == name; });
    if (it == list->end()) {
      r.ok = false;
      r.note = join(r.note, "missing");
      continue;
    }
    r.tolerance = it->tolerance;
    if (std::isnan(r.rel_error) || it->rel_error > r.rel_error) r.rel_error = it->rel_error;
    r.note = join(r.note, fmt::format("{}: {}", is_cold ? "cold" : "warm", it->note));
    if (!it->ok) {
      r.ok = false;
      r.skipped = it->skipped;
      continue;
    }
    (is_cold ? r.cold : r.warm) = it->timing;
  }
  if (!r.ok) r.cold.reset(), r.warm.reset();
  return r;
}

void run_vendors(RunContext& cx, const Inputs& in, std::vector<ExecResult>& out, nlohmann::json& all) {
  const std::string s(half_precision_name(in.prec));
  const std::string key = fmt::format("{}|{}|{}|{}", in.m, in.k, in.n, s);
  const bool need_cublas = !cx.cublas_cache.count(key);
  std::optional<std::vector<BaselineResult>> lists[2];
  for (int mode = 0; mode < 2; ++mode) {
    const bool cold = mode == 0;
    if ((cold && !cx.cold) || (!cold && !cx.warm)) continue;
    HalfBaselineOptions bo;
    bo.timing = mode_timing(cx, cold, 1);
    bo.seed = in.b_seed;
    bo.cublas_algorithms = cx.args.cublas_algorithms;
    bo.ell_block_sizes.clear();  // Blocked-ELL of an unstructured layer is a dense one
    bo.csr_alg3 = cx.args.csr_alg3;
    bo.cublas = need_cublas;
    bo.check_rows = in.rows;
    lists[mode] = run_half_baselines(*in.a, in.n, in.prec, bo);
    nlohmann::json& j = all[cold ? "cold" : "warm"];
    for (const BaselineResult& b : *lists[mode])
      j[b.name] = {
          {"ok", b.ok}, {"us", b.us}, {"rel_error", b.rel_error}, {"note", b.note}, {"skipped", b.skipped}};
  }
  const std::size_t bc = static_cast<std::size_t>(in.k * in.n + in.m * in.n) * 2;
  const auto* cold = lists[0] ? &*lists[0] : nullptr;
  const auto* warm = lists[1] ? &*lists[1] : nullptr;
  if (need_cublas) {
    cx.cublas_cache[key] =
        vendor_result("cublas_" + s, "cublas", cold, warm, static_cast<std::size_t>(in.m * in.k) * 2 + bc);
  } else {
    all["cublas_note"] =
        "cuBLAS timed at this M, K, N and dtype before (a dense GEMM's time does not depend on the values)";
  }
  ExecResult cub = cx.cublas_cache[key];
  if (!need_cublas) cub.note = join("timed before at this shape", cub.note);
  out.push_back(cub);
  const std::size_t csr_bytes =
      static_cast<std::size_t>(in.a->nnz()) * 6 + static_cast<std::size_t>(in.m + 1) * 4;
  out.push_back(vendor_result("cusparse_csr_best", "cusparse", cold, warm, csr_bytes + bc));
}

// One sparsecc executor: load, check on poisoned C, time warm and cold.
ExecResult run_sparsecc(RunContext& cx, const Inputs& in, const Compiled& c, const std::string& label) {
  ExecResult r;
  r.name = "sparsecc_" + c.variant;
  r.family = "sparsecc";
  r.tolerance = in.tol;
  r.extra = c.info;
  if (!c.same_as.empty()) r.extra["same_build_as"] = "sparsecc_" + c.same_as;
  if (!c.bundle) {
    r.note = "not built: " + c.error;
    return r;
  }
  try {
    const rt::Bundle& bundle = *c.bundle;
    const std::size_t b_bytes = in.b_bits.size() * 2, c_bytes = static_cast<std::size_t>(in.m * in.n) * 2;
    r.bytes = rt::spmm_resident_bytes(bundle) + b_bytes + c_bytes;
    struct Set {
      std::unique_ptr<rt::SpmmExecutor> exec;
      DeviceBuffer b, c;
    };
    std::vector<Set> sets;
    const auto add_set = [&] {
      Set s;
      s.exec = std::make_unique<rt::SpmmExecutor>(rt::SpmmExecutor::load(bundle, label, *cx.ctx));
      s.b = DeviceBuffer(b_bytes);
      s.b.upload(in.b_bits.data(), b_bytes);
      s.c = DeviceBuffer((c_bytes + 15) / 16 * 16);
      sets.push_back(std::move(s));
    };
    add_set();
    SPARSECC_CUDA_CHECK(cudaMemset(sets[0].c.get(), 0xff, sets[0].c.bytes()));  // NaN in fp16 and bf16
    const auto launch = [&](const Set& s, cudaStream_t stream) {
      s.exec->run(reinterpret_cast<CUdeviceptr>(s.b.get()), reinterpret_cast<CUdeviceptr>(s.c.get()),
                  static_cast<int>(in.n), reinterpret_cast<CUstream>(stream));
    };
    launch(sets[0], nullptr);
    SPARSECC_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<std::uint16_t> out(static_cast<std::size_t>(in.m * in.n));
    sets[0].c.download(out.data(), out.size() * 2);
    r.rel_error = check_output(in, out);
    if (!(r.rel_error <= in.tol)) {
      if (!cx.args.time_unchecked) {
        r.note =
            fmt::format("check failed: rel L2 error {:.3g} above {:.0e}; not timed", r.rel_error, in.tol);
        return r;
      }
      r.note =
          fmt::format("UNCHECKED: rel L2 error {:.3g} above {:.0e}, timed on request", r.rel_error, in.tol);
      r.extra["unchecked"] = true;
    }
    if (cx.warm) {
      r.warm = time_checked([&](cudaStream_t s) { launch(sets[0], s); }, mode_timing(cx, false, 1), r.note);
    }
    if (cx.cold) {
      const int n_sets = rotation_sets(r.bytes, static_cast<std::size_t>(cx.device.l2_bytes), true);
      while (static_cast<int>(sets.size()) < n_sets) add_set();
      int next = 0;
      r.cold = time_checked(
          [&](cudaStream_t s) {
            launch(sets[static_cast<std::size_t>(next)], s);
            next = (next + 1) % n_sets;
          },
          mode_timing(cx, true, n_sets), r.note);
      r.extra["cold_sets"] = n_sets;
    }
    r.ok = true;
  } catch (const std::exception& e) {
    r.note = join(r.note, e.what());
    cudaGetLastError();
  }
  return r;
}

// The peers' formats of one matrix (fp16), made on the pool.
struct PeerFormats {
  std::unique_ptr<peers::Format> f[2];
  std::string error[2];
  double seconds[2] = {0, 0};
};

ExecResult run_peer(RunContext& cx, const Inputs& in, peers::Kind kind, PeerFormats* formats) {
  ExecResult r;
  r.name = peers::kind_name(kind);
  r.family = "peer";
  r.tolerance = in.tol;
  const int ki = kind == peers::Kind::spinfer ? 0 : 1;
  if (!peers::available()) {
    r.skipped = true;
    r.note = "peers skipped: " + peers::unavailable_reason();
    return r;
  }
  if (cx.args.no_peers) {
    r.skipped = true;
    r.note = "peers skipped: --no-peers";
    return r;
  }
  if (in.prec != HalfPrecision::f16) {
    r.skipped = true;
    r.note = "fp16 only";
    return r;
  }
  if (const std::string why = peers::shape_problem(kind, in.m, in.k); !why.empty()) {
    r.skipped = true;
    r.note = why;
    return r;
  }
  if (!formats || !formats->f[ki]) {
    r.note = "format not made: " + (formats ? formats->error[ki] : std::string("?"));
    return r;
  }
  peers::Format& f = *formats->f[ki];
  r.extra["format"] = f.describe();
  r.extra["format_seconds"] = formats->seconds[ki];
  try {
    const int np = peers::padded_n(static_cast<int>(in.n));
    if (np != in.n) r.note = fmt::format("N padded to {} (the least N the peer takes)", np);
    r.extra["n_run"] = np;
    // B column-major K x np (zero columns past N), C column-major M x np.
    std::vector<std::uint16_t> b_col(static_cast<std::size_t>(in.k * np), 0);
    for (std::int64_t kk = 0; kk < in.k; ++kk)
      for (std::int64_t j = 0; j < in.n; ++j)
        b_col[static_cast<std::size_t>(j * in.k + kk)] = in.b_bits[static_cast<std::size_t>(kk * in.n + j)];
    const std::size_t b_bytes = b_col.size() * 2, c_bytes = static_cast<std::size_t>(in.m * np) * 2;
    r.bytes = f.bytes() + b_bytes + c_bytes;
    DeviceBuffer workspace(c_bytes * static_cast<std::size_t>(cx.args.max_split_k));
    std::vector<DeviceBuffer> bs, cs;
    const auto ensure = [&](int sets) {
      while (f.device_copies() < sets) f.add_device_copy();
      while (static_cast<int>(bs.size()) < sets) {
        bs.emplace_back(b_bytes);
        bs.back().upload(b_col.data(), b_bytes);
        cs.emplace_back(c_bytes);
      }
    };
    ensure(1);
    // Check every split-K on a poisoned C.
    std::vector<int> passing;
    nlohmann::json checks = nlohmann::json::object();
    for (int sk = 1; sk <= cx.args.max_split_k; ++sk) {
      try {
        SPARSECC_CUDA_CHECK(cudaMemset(cs[0].get(), 0xff, c_bytes));
        f.run(0, bs[0].get(), cs[0].get(), np, workspace.get(), sk, nullptr);
        SPARSECC_CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<std::uint16_t> col(static_cast<std::size_t>(in.m * np)),
            row(static_cast<std::size_t>(in.m * in.n));
        cs[0].download(col.data(), c_bytes);
        for (std::int64_t i = 0; i < in.m; ++i)
          for (std::int64_t j = 0; j < in.n; ++j)
            row[static_cast<std::size_t>(i * in.n + j)] = col[static_cast<std::size_t>(j * in.m + i)];
        const double err = check_output(in, row);
        checks[std::to_string(sk)] = err;
        if (err <= in.tol) passing.push_back(sk);
        if (std::isnan(r.rel_error) || err < r.rel_error) r.rel_error = err;
      } catch (const std::exception& e) {
        cudaGetLastError();
        checks[std::to_string(sk)] = e.what();
      }
    }
    r.extra["check_rel_error_by_split_k"] = checks;
    if (passing.empty()) {
      r.note = join(r.note, fmt::format("check failed at every split-K 1..{} (best rel L2 error {:.3g})",
                                        cx.args.max_split_k, r.rel_error));
      return r;
    }
    if (passing.size() < static_cast<std::size_t>(cx.args.max_split_k))
      r.note =
          join(r.note, fmt::format("{} of {} split-K values passed", passing.size(), cx.args.max_split_k));
    for (int mode = 0; mode < 2; ++mode) {
      const bool cold = mode == 0;
      if ((cold && !cx.cold) || (!cold && !cx.warm)) continue;
      const int sets = cold ? rotation_sets(r.bytes, static_cast<std::size_t>(cx.device.l2_bytes), true) : 1;
      ensure(sets);
      const auto timed = [&](int sk, const TimingOptions& t) {
        int next = 0;
        return time_checked(
            [&](cudaStream_t s) {
              f.run(next, bs[static_cast<std::size_t>(next)].get(), cs[static_cast<std::size_t>(next)].get(),
                    np, workspace.get(), sk, s);
              next = (next + 1) % sets;
            },
            t, r.note);
      };
      // The sweep: a short protocol per split-K, then the best in full.
      TimingOptions quick = mode_timing(cx, cold, sets);
      quick.warmup = 1;
      quick.launches_per_graph = std::max(10, sets);
      quick.repetitions = 3;
      int best = passing.front();
      double best_us = INFINITY;
      nlohmann::json sweep = nlohmann::json::object();
      for (int sk : passing) {
        const double us = timed(sk, quick).median_us;
        sweep[std::to_string(sk)] = us;
        if (us < best_us) best_us = us, best = sk;
      }
      (cold ? r.cold : r.warm) = timed(best, mode_timing(cx, cold, sets));
      r.extra[cold ? "cold_split_k" : "warm_split_k"] = best;
      r.extra[cold ? "cold_sweep_us" : "warm_sweep_us"] = sweep;
      if (cold) r.extra["cold_sets"] = sets;
    }
    r.ok = true;
  } catch (const std::exception& e) {
    cudaGetLastError();
    r.note = join(r.note, e.what());
  }
  return r;
}

std::string cell(double v, const char* format = "{:.2f}") {
  return v > 0 && std::isfinite(v) ? fmt::format(fmt::runtime(format), v) : std::string("-");
}

struct SummaryKey {
  std::string pattern;
  double sparsity = 0;
  std::int64_t n = 0;
  std::string dtype;
  bool operator<(const SummaryKey& o) const {
    return std::tie(pattern, sparsity, n, dtype) < std::tie(o.pattern, o.sparsity, o.n, o.dtype);
  }
};

struct SummaryAcc {
  std::vector<double> x_cublas, x_peer, fraction, x_cublas_warm;
  std::vector<std::string> shapes;
};

int run(RunContext& cx, const Plan& plan) {
  const Args& args = cx.args;
  const auto t_start = Clock::now();
  nlohmann::json jconfigs = nlohmann::json::array();
  // summary[key][executor]
  std::map<SummaryKey, std::map<std::string, SummaryAcc>> summary;
  bool failed = false;
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const unsigned jobs =
      args.compile_jobs > 0 ? static_cast<unsigned>(args.compile_jobs) : std::max(1u, std::min(4u, hw / 2));
  const unsigned threads_per_compile = std::max(1u, hw / jobs);
  Pool pool(jobs);
  std::size_t done = 0;
  const std::string peers_line = !peers::available() ? "peers skipped: " + peers::unavailable_reason()
                                 : args.no_peers     ? std::string("peers skipped: --no-peers")
                                                     : std::string();
  if (!peers_line.empty()) fmt::print("{}\n", peers_line);

  for (std::size_t mi = 0; mi < plan.matrices.size(); ++mi) {
    const MatrixSpec& ms = plan.matrices[mi];
    std::vector<Config> configs;
    for (const Config& c : plan.configs)
      if (c.matrix == mi) configs.push_back(c);
    if (configs.empty()) continue;
    // The matrix, its values rounded to each precision used.
    const auto t0 = Clock::now();
    CsrMatrix a;
    try {
      if (ms.llm()) {
        const std::uint64_t seed = args.seed * 0x100000001B3ull +
                                   static_cast<std::uint64_t>(ms.shape.m * 131 + ms.shape.k) * 1000 +
                                   static_cast<std::uint64_t>(std::llround(ms.sparsity * 1000)) * 2 +
                                   (ms.pattern == LlmPattern::magnitude ? 1 : 0);
        a = make_llm_matrix(ms.shape.m, ms.shape.k, ms.sparsity, ms.pattern, seed);
      } else {
        LoadOptions lo;
        lo.seed = args.seed;
        a = load_matrix(ms.file, lo);
      }
    } catch (const std::exception& e) {
      fmt::print("{}: not made: {}\n", ms.label, e.what());
      done += configs.size();
      continue;
    }
    const double gen_s = seconds_since(t0);
    const double actual_sparsity = 1.0 - static_cast<double>(a.nnz()) / static_cast<double>(a.rows * a.cols);
    fmt::print(stderr, "[{}/{}] {}: {} x {}, {} nonzeros ({:.2f} % sparse), made in {:.1f} s\n", done,
               plan.configs.size(), ms.label, a.rows, a.cols, a.nnz(), 100 * actual_sparsity, gen_s);
    std::map<HalfPrecision, CsrMatrix> rounded;
    for (const Config& c : configs)
      if (!rounded.count(c.prec)) rounded.emplace(c.prec, round_values(a, c.prec));
    a = CsrMatrix();  // the rounded copies are all that is used from here

    // CPU work ahead of the GPU: every configuration's compiles, the peers' formats.
    std::vector<std::future<std::vector<Compiled>>> compiles;
    for (const Config& c : configs) {
      const CsrMatrix* ap = &rounded.at(c.prec);
      const std::string label = fmt::format("{} N={} {}", ms.label, c.n, half_precision_name(c.prec));
      compiles.push_back(pool.submit([&cx, ap, c, label, threads_per_compile] {
        std::vector<Compiled> out;
        for (const Variant& v : cx.variants) {
          // value mode compressed when the automatic choice took it already: the same build.
          if (!v.auto_choice && v.name == "compressed" && !out.empty() && out.front().bundle &&
              out.front().info.value("value_mode", "") == "compressed") {
            Compiled same;
            same.variant = v.name;
            same.same_as = out.front().variant;
            same.info = out.front().info;
            same.bundle = out.front().bundle;
            out.push_back(std::move(same));
            continue;
          }
          out.push_back(compile_variant(*ap, c.n, c.prec, v, cx.target, cx.args, threads_per_compile, label));
        }
        return out;
      }));
    }
    std::shared_ptr<PeerFormats> formats;
    std::future<void> formats_done;
    if (peers::available() && !args.no_peers && rounded.count(HalfPrecision::f16)) {
      formats = std::make_shared<PeerFormats>();
      const CsrMatrix* ap = &rounded.at(HalfPrecision::f16);
      formats_done = std::async(std::launch::async, [formats, ap] {
        if (ap->rows * ap->cols >= (std::int64_t{1} << 31)) return;  // shape_problem says so
        std::vector<std::uint16_t> dense(static_cast<std::size_t>(ap->rows * ap->cols), 0);
        for (std::int64_t r = 0; r < ap->rows; ++r)
          for (std::int64_t p = ap->row_ptr[r]; p < ap->row_ptr[r + 1]; ++p)
            dense[static_cast<std::size_t>(r * ap->cols + ap->col_idx[p])] =
                double_to_half_bits(ap->values[p], HalfPrecision::f16);
        for (int ki = 0; ki < 2; ++ki) {
          const auto kind = ki == 0 ? peers::Kind::spinfer : peers::Kind::flashllm;
          if (!peers::shape_problem(kind, ap->rows, ap->cols).empty()) continue;
          const auto t = Clock::now();
          try {
            formats->f[ki] = peers::make_format(kind, dense.data(), static_cast<int>(ap->rows),
                                                static_cast<int>(ap->cols));
          } catch (const std::exception& e) {
            formats->error[ki] = e.what();
          }
          formats->seconds[ki] = seconds_since(t);
        }
      });
    }

    for (std::size_t ci = 0; ci < configs.size(); ++ci) {
      const Config& c = configs[ci];
      const std::string s(half_precision_name(c.prec));
      const auto t_cfg = Clock::now();
      const double elapsed = seconds_since(t_start);
      fmt::print(
          stderr, "[{}/{}] {} N={} {} (elapsed {:.0f} s{})\n", done, plan.configs.size(), ms.label, c.n, s,
          elapsed,
          done > 0 ? fmt::format(", about {:.0f} s left", elapsed / static_cast<double>(done) *
                                                              static_cast<double>(plan.configs.size() - done))
                   : "");
      Inputs in;
      in.a = &rounded.at(c.prec);
      in.m = in.a->rows, in.k = in.a->cols, in.n = c.n, in.prec = c.prec;
      in.b_seed = args.seed + 6;
      in.b_bits = random_half_matrix(in.k, in.n, c.prec, in.b_seed);
      std::vector<double> b(in.b_bits.size());
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = half_bits_to_double(in.b_bits[i], c.prec);
      in.rows = sample_rows(in.m, args.check_rows);
      in.ref = reference_rows(*in.a, b, in.n, in.rows);
      in.tol = half_tolerance(c.prec);

      std::vector<ExecResult> results;
      nlohmann::json vendor_all = nlohmann::json::object();
      try {
        run_vendors(cx, in, results, vendor_all);
      } catch (const std::exception& e) {
        cudaGetLastError();
        ExecResult r;
        r.name = "vendors";
        r.note = e.what();
        results.push_back(r);
      }
      std::vector<Compiled> built = compiles[ci].get();
      for (const Compiled& cc : built) {
        ExecResult r = run_sparsecc(cx, in, cc, fmt::format("{} N={} {}", ms.label, c.n, s));
        if (!r.ok || r.extra.contains("unchecked")) failed = true;
        results.push_back(std::move(r));
      }
      if (formats_done.valid()) formats_done.wait();
      if (peers::available() && !args.no_peers)  // else said once at the start
        for (const peers::Kind kind : {peers::Kind::spinfer, peers::Kind::flashllm})
          results.push_back(run_peer(cx, in, kind, formats.get()));

      // The table.
      const auto find = [&](const std::string& name) -> const ExecResult* {
        for (const ExecResult& r : results)
          if (r.name == name && r.ok) return &r;
        return nullptr;
      };
      const ExecResult* cublas = find("cublas_" + s);
      const ExecResult* best_peer = nullptr;
      for (const ExecResult& r : results)
        if (r.family == "peer" && r.ok && (!best_peer || r.us() < best_peer->us())) best_peer = &r;
      const bool sampled = in.rows.size() < static_cast<std::size_t>(in.m);
      fmt::print("\n== {}  ({} nnz, {:.2f} % sparse)  N={}  {}  [{} L2; checked on {}]\n", ms.label,
                 in.a->nnz(), 100 * actual_sparsity, c.n, s,
                 cx.cold && cx.warm ? "cold and warm"
                 : cx.cold          ? "cold"
                                    : "warm",
                 sampled ? fmt::format("{} of {} rows, every value finite", in.rows.size(), in.m)
                         : std::string("all rows"));
      fmt::print("{:<24} {:>10} {:>10} {:>9} {:>8} {:>10} {:>9} {:>7}  {}\n", "executor", "cold us",
                 "warm us", "x cuBLAS", "x peer", "bytes MB", "bound us", "%bound", "note");
      nlohmann::json jres = nlohmann::json::array();
      for (const ExecResult& r : results) {
        const double us = r.us();
        const double bound = r.bytes > 0 ? static_cast<double>(r.bytes) / cx.bw : 0;
        const double x_cub = r.ok && cublas ? cublas->us() / us : 0;
        const double x_peer = r.ok && best_peer ? best_peer->us() / us : 0;
        std::string note = r.ok ? r.note : (r.skipped ? "skipped: " : "FAILED: ") + r.note;
        if (r.family == "sparsecc" && r.extra.contains("value_mode"))
          note = join(fmt::format("[{}]", r.extra["value_mode"].get<std::string>()), note);
        if (r.family == "peer" && r.extra.contains("cold_split_k"))
          note = join(fmt::format("split-K {}", r.extra["cold_split_k"].get<int>()), note);
        if (note.size() > 110) note = note.substr(0, 107) + "...";
        fmt::print("{:<24} {:>10} {:>10} {:>9} {:>8} {:>10} {:>9} {:>7}  {}\n", r.name,
                   cell(r.cold ? r.cold->median_us : 0), cell(r.warm ? r.warm->median_us : 0), cell(x_cub),
                   cell(x_peer), cell(static_cast<double>(r.bytes) / 1e6, "{:.1f}"), cell(bound),
                   cell(r.ok && us > 0 ? 100 * bound / us : 0, "{:.0f}"), note);
        jres.push_back(result_json(r, cx.bw));
        if (r.family == "sparsecc" && r.ok && ms.llm()) {
          SummaryAcc& acc = summary[{std::string(llm_pattern_name(ms.pattern)), ms.sparsity, c.n, s}][r.name];
          acc.shapes.push_back(ms.shape.name());
          if (cublas) acc.x_cublas.push_back(x_cub);
          if (best_peer) acc.x_peer.push_back(x_peer);
          if (bound > 0) acc.fraction.push_back(bound / us);
          if (cublas && cublas->warm && r.warm)
            acc.x_cublas_warm.push_back(cublas->warm->median_us / r.warm->median_us);
        }
      }
      std::fflush(stdout);
      jconfigs.push_back({{"matrix", ms.label},
                          {"llm", ms.llm()},
                          {"m", in.m},
                          {"k", in.k},
                          {"n", c.n},
                          {"dtype", s},
                          {"pattern", ms.llm() ? std::string(llm_pattern_name(ms.pattern)) : "dlmc"},
                          {"sparsity", ms.sparsity},
                          {"actual_sparsity", actual_sparsity},
                          {"nnz", in.a->nnz()},
                          {"file", ms.file},
                          {"generate_s", gen_s},
                          {"checked_rows", in.rows.size()},
                          {"config_s", seconds_since(t_cfg)},
                          {"executors", jres},
                          {"vendor_all", vendor_all}});
      ++done;
    }
  }

  // Summary.
  nlohmann::json jsummary = nlohmann::json::array();
  const char* mode = cx.cold ? "cold L2" : "warm L2";
  fmt::print("\nsummary ({}; geomean over the LLM shapes; x = speedup, >1 faster):\n", mode);
  fmt::print("{:<10} {:>6} {:>4} {:<5} {:<24} {:>6} {:>9} {:>9} {:>9} {:>8} {:>10}\n", "pattern", "sparse",
             "N", "dtype", "executor", "shapes", "x cuBLAS", "min xcuB", "x peer", "%bound", "warm xcuB");
  for (const auto& [key, per] : summary)
    for (const auto& [name, acc] : per) {
      const double g = geomean(acc.x_cublas), gp = geomean(acc.x_peer), gf = geomean(acc.fraction),
                   gw = geomean(acc.x_cublas_warm);
      const double mn =
          acc.x_cublas.empty() ? NAN : *std::min_element(acc.x_cublas.begin(), acc.x_cublas.end());
      fmt::print("{:<10} {:>5.0f}% {:>4} {:<5} {:<24} {:>6} {:>9} {:>9} {:>9} {:>8} {:>10}\n", key.pattern,
                 key.sparsity * 100, key.n, key.dtype, name, acc.shapes.size(), cell(g), cell(mn), cell(gp),
                 cell(100 * gf, "{:.0f}"), cell(gw));
      jsummary.push_back({{"pattern", key.pattern},
                          {"sparsity", key.sparsity},
                          {"n", key.n},
                          {"dtype", key.dtype},
                          {"executor", name},
                          {"shapes", acc.shapes},
                          {"timing", mode},
                          {"geomean_x_cublas", g},
                          {"min_x_cublas", mn},
                          {"geomean_x_best_peer", gp},
                          {"peer_shapes", acc.x_peer.size()},
                          {"geomean_fraction_of_bound", gf},
                          {"geomean_x_cublas_warm", gw}});
    }
  fmt::print("total {:.0f} s\n", seconds_since(t_start));
  if (!args.json.empty()) {
    nlohmann::json out = {{"device", cx.device.describe()},
                          {"target", cx.target.arch},
                          {"copy_bandwidth_GBps", cx.bw * 1e6 / 1e9},
                          {"cold", cx.cold},
                          {"warm", cx.warm},
                          {"quick", args.quick},
                          {"seed", args.seed},
                          {"check_rows", args.check_rows},
                          {"timing",
                           {{"warmup", args.timing.warmup},
                            {"launches_per_graph", args.timing.launches_per_graph},
                            {"repetitions", args.timing.repetitions},
                            {"max_seconds", args.timing.max_seconds}}},
                          {"peers", peers::available() ? "built" : peers_line},
                          {"configs", jconfigs},
                          {"summary", jsummary},
                          {"seconds", seconds_since(t_start)}};
    write_file_atomic(args.json, out.dump(1));
  }
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  args.timing.repetitions = 15;
  args.timing.max_seconds = 0.5;
  CLI::App app{
      "sparsecc_llm_bench: pruned LLM layers in fp16/bf16 at small N (issue 47): sparsecc against "
      "cuBLAS, cuSPARSE, SpInfer and Flash-LLM, cold and warm L2",
      "sparsecc_llm_bench"};
  app.add_option("--shapes", args.shapes, "MxK list, 'all' (the 8 LLM layers) or 'none'")
      ->capture_default_str();
  app.add_option("--sparsity", args.sparsity, "sparsity list, in % or as fractions")->capture_default_str();
  app.add_option("--n", args.n, "N list (1..64 in the issue)")->capture_default_str();
  app.add_option("--dtype", args.dtype, "f16, bf16 or both (f16,bf16)")->capture_default_str();
  app.add_option("--pattern", args.pattern, "random, magnitude or both")->capture_default_str();
  app.add_option(
      "--dlmc", args.dlmc,
      "folder of DLMC .smtx(.gz) matrices (e.g. ../shared/data/dlmc/transformer/magnitude_pruning/0.9), "
      "run at every --n and --dtype");
  app.add_option("--dlmc-limit", args.dlmc_limit, "only the first K DLMC matrices (0: all)");
  app.add_flag(
      "--quick", args.quick,
      "the small subset: N=16 fp16 random at 50/70/90 % on the 8 shapes, 4096x4096 90 % at N 1 and 64, "
      "bf16 at 90 % N=16 (replaces --shapes/--sparsity/--n/--dtype/--pattern; 11 replays and --max-seconds "
      "0.3 unless given)");
  app.add_option("--json", args.json, "write every figure as JSON");
  auto* warm = app.add_flag("--warm", args.warm_only, "warm L2 only");
  app.add_flag("--cold", args.cold_only, "cold L2 only (default: both)")->excludes(warm);
  app.add_option("--seed", args.seed, "seed of the matrices (B from seed + 6)")->capture_default_str();
  app.add_option("--check-rows", args.check_rows, "rows of C checked against fp64 (0: all)")
      ->capture_default_str();
  app.add_option("--cublas-algorithms", args.cublas_algorithms,
                 "cuBLASLt heuristic algorithms timed per weight layout besides cublasGemmEx's default")
      ->capture_default_str();
  app.add_flag("--csr-alg3", args.csr_alg3, "also cuSPARSE CSR_ALG3 (destroyed the context once on an H200)");
  app.add_option(
      "--variant", args.variants,
      "an extra sparsecc executor: [NAME:]key=value,... (values, rows-per-block, n-tile, groups, "
      "max-registers, cols-per-thread, step-lanes, ptxas-O, warps, strips, chunk-k, stages, splits, "
      "kept-rounds, formats, bitmap-weight, position-weight, layout, n-mode=fixed|runtime); repeatable");
  app.add_flag("--no-compressed", args.no_compressed,
               "no value-mode-compressed executor (the automatic one only)");
  app.add_option("--max-split-k", args.max_split_k, "the peers' split-K sweep 1..K")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  app.add_flag("--no-peers", args.no_peers, "skip SpInfer and Flash-LLM even when built");
  app.add_flag("--time-unchecked", args.time_unchecked,
               "time a sparsecc executor whose check failed (experiments with modified templates); the run "
               "still exits 1");
  app.add_option("--max-compile-s", args.max_compile_s,
                 "refuse a sparsecc compile estimated longer than this (the driver's estimate)")
      ->capture_default_str();
  app.add_option("--compile-jobs", args.compile_jobs, "configurations compiled at once (0: automatic)");
  app.add_option("--repetitions", args.timing.repetitions, "graph replays per timing")->capture_default_str();
  app.add_option("--launches", args.timing.launches_per_graph, "launches per graph")->capture_default_str();
  app.add_option("--max-seconds", args.timing.max_seconds, "a slow executor's timing is scaled to about this")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (args.quick) {  // a shorter protocol unless asked otherwise: --quick fits a few minutes
    if (app.count("--repetitions") == 0) args.timing.repetitions = 11;
    if (app.count("--max-seconds") == 0) args.timing.max_seconds = 0.3;
  }
  RunContext cx;
  cx.args = args;
  cx.cold = !args.warm_only;
  cx.warm = !args.cold_only;
  try {
    if (!args.json.empty()) check_output_file(args.json, {}, "--json");
    const Plan plan = make_plan(args);
    cx.variants.push_back({"auto", SpmmOptions{}, SpmmNMode::fixed, true});
    if (!args.no_compressed) {
      Variant v;
      v.name = "compressed";
      try {
        v.options.value_mode = parse_value_mode("compressed", "value mode");
        cx.variants.push_back(v);
      } catch (const UsageError& e) {  // a generator without the compressed family
        fmt::print("sparsecc_compressed skipped: {}\n", e.what());
      }
    }
    for (const std::string& spec : args.variants) cx.variants.push_back(parse_variant(spec));
    if (plan.configs.empty()) throw UsageError("nothing selected");
    cx.device = query_device();
    try {
      cx.target = gpu_target(fmt::format("sm_{}{}", cx.device.cc_major, cx.device.cc_minor));
    } catch (const UsageError&) {
      cx.target = gpu_target("sm_90");
    }
    cx.ctx = std::make_unique<rt::Context>(cx.device.ordinal);
    double copy_us = 0;
    std::size_t copy_bytes = 0;
    cx.bw = copy_bandwidth(cx.device, args.timing, copy_us, copy_bytes);
    fmt::print("{}\n", cx.device.describe());
    fmt::print(
        "copy bandwidth {:.0f} GB/s (cudaMemcpy device to device of {} MiB in {:.1f} us, read + write)\n",
        cx.bw * 1e6 / 1e9, copy_bytes >> 20, copy_us);
    fmt::print(
        "{} matrices, {} configurations; graphs of {} launches, median of {} replays, {}; big layers checked "
        "on {} "
        "sampled rows\n",
        plan.matrices.size(), plan.configs.size(), args.timing.launches_per_graph, args.timing.repetitions,
        cx.cold && cx.warm ? "cold and warm L2"
        : cx.cold          ? "cold L2"
                           : "warm L2",
        args.check_rows);
    std::fflush(stdout);
    return run(cx, plan);
  } catch (const UsageError& e) {
    fmt::print(stderr, "sparsecc_llm_bench: error: {}\n", e.what());
    return 2;
  } catch (const NoDeviceError& e) {
    fmt::print(stderr, "sparsecc_llm_bench: error: {} (this program needs an NVIDIA GPU)\n", e.what());
    return 1;
  } catch (const rt::DriverUnavailable& e) {
    fmt::print(stderr, "sparsecc_llm_bench: error: {} (this program needs an NVIDIA GPU)\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "sparsecc_llm_bench: error: {}\n", e.what());
    return 1;
  }
}
