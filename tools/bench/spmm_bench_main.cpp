// sparsecc_bench: compiles sparsecc's SpMM executor for every problem of a suite (in parallel on the
// CPU), verifies each on the GPU against the fp64 reference with poisoned outputs, and times it in
// steady state (CUDA graphs of many launches, median of replays) against the vendor baselines in the
// same run: cuBLAS fp32 (TF32 off), TF32, fp16 tensor cores, and the best cuSPARSE SpMM algorithm.
// Prints a table with ratios and geomeans and writes JSON. Exit: 0 ok, 1 a check failed, 2 bad usage,
// bad input or no GPU.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench/baselines.hpp"
#include "bench/suites.hpp"
#include "sparsecc/bundle/spmm_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "sparsecc/common/random.hpp"
#include "sparsecc/compile/nvrtc.hpp"
#include "sparsecc/compile/resource_usage.hpp"
#include "sparsecc/emit/spmm_cuda.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/reference/spmm.hpp"
#include "sparsecc/runtime/executor.hpp"

namespace {

using namespace sparsecc;
using namespace sparsecc::bench;

struct Args {
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
  TimingOptions timing;
};

struct Compiled {
  rt::Bundle bundle;
  double seconds = 0;
  ResourceUsage usage;
  std::string error;  // non-empty: generation or compilation failed
};

Compiled compile_problem(const CsrMatrix& a, std::int64_t n, const std::string& arch,
                         const std::string& name) {
  Compiled c;
  try {
    SpmmProblem p;
    p.m = a.rows;
    p.k = a.cols;
    p.n = n;
    const SpmmPlan plan = plan_spmm(a, p);
    const EmittedKernel k = emit_spmm_cuda(plan, a);
    CudaCompileOptions o;
    o.arch = arch;
    o.extra.push_back(kPtxasVerbose);
    const CudaCompileResult r = compile_cuda(k.source, name + ".cu", o);
    c.seconds = r.seconds;
    c.usage = parse_ptxas_log(r.log);
    c.bundle.metadata = spmm_bundle_metadata(plan, a, arch);
    c.bundle.cubin = r.cubin;
    c.bundle.ptx = r.ptx;
    c.bundle.values = k.packed_values;
  } catch (const std::exception& e) {
    c.error = e.what();
  }
  return c;
}

// Runs the executor once on poisoned C and returns max|C - C_ref| / max|C_ref| (inf on NaN).
double check_executor(const rt::SpmmExecutor& exec, const CsrMatrix& a, std::int64_t n, DeviceBuffer& db,
                      DeviceBuffer& dc, const DenseMatrix& b) {
  SPARSECC_CUDA_CHECK(cudaMemset(dc.get(), 0xff, dc.bytes()));  // 0xffffffff is a NaN
  exec.run(reinterpret_cast<CUdeviceptr>(db.get()), reinterpret_cast<CUdeviceptr>(dc.get()),
           static_cast<int>(n));
  SPARSECC_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> c(static_cast<std::size_t>(a.rows * n));
  dc.download(c.data(), c.size() * sizeof(float));
  const DenseMatrix ref = spmm(a, b);
  double max_ref = 0, max_err = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (!std::isfinite(c[i])) return INFINITY;
    max_ref = std::max(max_ref, std::fabs(ref.data[i]));
    max_err = std::max(max_err, std::fabs(c[i] - ref.data[i]));
  }
  return max_ref > 0 ? max_err / max_ref : max_err;
}

double geomean(const std::vector<double>& v) {
  if (v.empty()) return NAN;
  double s = 0;
  for (double x : v) s += std::log(x);
  return std::exp(s / static_cast<double>(v.size()));
}

const BaselineResult* find(const std::vector<BaselineResult>& rs, const std::string& name) {
  for (const auto& r : rs)
    if (r.name == name && r.ok) return &r;
  return nullptr;
}

int run(const Args& args) {
  const std::string data = args.data.empty() ? default_data_dir() : args.data;
  std::vector<BenchProblem> problems =
      args.suite == "dlmc" ? dlmc_suite(data) : sparsert_suite(data, args.sparsity, args.batch);
  if (args.first > 0)
    problems.erase(problems.begin(), problems.begin() + std::min<std::size_t>(args.first, problems.size()));
  if (args.limit > 0 && static_cast<std::size_t>(args.limit) < problems.size()) problems.resize(args.limit);

  std::vector<CsrMatrix> mats;
  for (const auto& p : problems) mats.push_back(load_problem_matrix(p));

  // Generate and compile on every core first; the GPU part follows.
  const int jobs = args.jobs > 0 ? args.jobs : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::future<Compiled>> futures(problems.size());
  std::vector<Compiled> compiled(problems.size());
  std::size_t next = 0, done = 0;
  std::vector<std::size_t> running;
  while (done < problems.size()) {
    while (running.size() < static_cast<std::size_t>(jobs) && next < problems.size()) {
      if (mats[next].nnz() <= args.max_nnz) {
        futures[next] = std::async(std::launch::async, compile_problem, std::cref(mats[next]),
                                   problems[next].N, args.arch, problems[next].name);
        running.push_back(next);
      } else {
        compiled[next].error =
            fmt::format("skipped: {} nonzeros > --max-nnz {}", mats[next].nnz(), args.max_nnz);
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

  rt::Context ctx(0);  // retain the primary context before the runtime API touches it
  const DeviceInfo device = query_device();
  fmt::print(
      "{}\nsuite {} ({} problems{}), graphs of {} launches, median of {} replays\n", device.describe(),
      args.suite, problems.size(),
      args.suite == "sparsert" ? fmt::format(", sparsity {}, batch {}", args.sparsity, args.batch) : "",
      args.timing.launches_per_graph, args.timing.repetitions);
  fmt::print("{:<34} {:>16} {:>7} {:>8} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>7} {:>6} {:>5}\n", "problem",
             "MxKxN", "nnz", "ours us", "fp32 us", "tf32 us", "fp16 us", "cusp us", "x fp32", "x tf32",
             "x cusp", "gen s", "B/nz");
  nlohmann::json out = {
      {"device", device.describe()}, {"suite", args.suite}, {"problems", nlohmann::json::array()}};
  std::map<std::string, std::vector<double>> ratios;
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
      continue;
    }
    const rt::SpmmExecutor exec = rt::SpmmExecutor::load(c.bundle, p.name, ctx);
    DenseMatrix b(a.cols, p.N);
    SplitMix64 rng(1234 + i);
    for (double& v : b.data) v = rng.uniform_pm1();
    std::vector<float> bf(b.data.begin(), b.data.end());
    DeviceBuffer db(bf.size() * sizeof(float)), dc(static_cast<std::size_t>(a.rows * p.N) * sizeof(float));
    db.upload(bf.data(), bf.size() * sizeof(float));
    const double err = check_executor(exec, a, p.N, db, dc, b);
    const bool ok = err <= 1e-5;
    failed = failed || !ok;
    const TimingStats t = time_steady(
        [&](cudaStream_t s) {
          exec.run(reinterpret_cast<CUdeviceptr>(db.get()), reinterpret_cast<CUdeviceptr>(dc.get()),
                   static_cast<int>(p.N), reinterpret_cast<CUstream>(s));
        },
        args.timing);
    BaselineOptions bo;
    bo.timing = args.timing;
    const std::vector<BaselineResult> base = run_baselines(a, p.N, bo);
    const auto* fp32 = find(base, "cublas_fp32");
    const auto* tf32 = find(base, "cublas_tf32");
    const auto* fp16 = find(base, "cublas_fp16");
    const auto* cusp = find(base, "cusparse_best");
    auto us = [](const BaselineResult* r) { return r ? fmt::format("{:.2f}", r->us) : std::string("-"); };
    auto ratio = [&](const BaselineResult* r, const char* key) {
      if (!r || !ok) return std::string("-");
      ratios[key].push_back(r->us / t.median_us);
      return fmt::format("{:.2f}", r->us / t.median_us);
    };
    const double bpn =
        a.nnz() ? static_cast<double>(c.bundle.cubin.size()) / static_cast<double>(a.nnz()) : 0;
    fmt::print("{:<34} {:>16} {:>7} {:>8.2f} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>7} {:>6.1f} {:>5.0f}{}\n",
               p.name, fmt::format("{}x{}x{}", p.M, p.K, p.N), a.nnz(), t.median_us, us(fp32), us(tf32),
               us(fp16), us(cusp), ratio(fp32, "cublas_fp32"), ratio(tf32, "cublas_tf32"),
               ratio(cusp, "cusparse_best"), c.seconds, bpn,
               ok ? "" : fmt::format("  FAILED check: error {:.2e}", err));
    std::fflush(stdout);
    if (fp16 && ok) ratios["cublas_fp16"].push_back(fp16->us / t.median_us);
    j["ours"] = {{"median_us", t.median_us},
                 {"min_us", t.min_us},
                 {"spread", t.spread},
                 {"max_rel_error", err},
                 {"ok", ok},
                 {"compile_s", c.seconds},
                 {"cubin_bytes", c.bundle.cubin.size()},
                 {"registers", c.usage.registers},
                 {"spill_bytes", c.usage.spill_store_bytes + c.usage.spill_load_bytes},
                 {"plan", c.bundle.metadata.plan_summary}};
    for (const auto& r : base)
      j["baselines"][r.name] = {{"us", r.us}, {"ok", r.ok}, {"rel_error", r.rel_error}, {"note", r.note}};
    out["problems"].push_back(j);
    if (!args.json.empty()) write_file_atomic(args.json, out.dump(1));
  }
  fmt::print("geomean speedup of sparsecc over:");
  for (const auto& [k, v] : ratios) {
    fmt::print("  {} {:.2f}x ({} problems)", k, geomean(v), v.size());
    out["geomean"][k] = geomean(v);
  }
  fmt::print("\n");
  if (!args.json.empty()) write_file_atomic(args.json, out.dump(1));
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
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
  app.add_option("--arch", args.arch, "architecture to compile for")->capture_default_str();
  app.add_option("--repetitions", args.timing.repetitions, "graph replays")->capture_default_str();
  app.add_option("--launches", args.timing.launches_per_graph, "launches per graph")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    return run(args);
  } catch (const NoDeviceError& e) {
    fmt::print(stderr, "sparsecc_bench: error: {} (this program needs an NVIDIA GPU)\n", e.what());
    return 2;
  } catch (const InputError& e) {
    fmt::print(stderr, "sparsecc_bench: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "sparsecc_bench: error: {}\n", e.what());
    return 1;
  }
}
