// sparsecc_bench blocklets: half-precision SpMM with tensor-core blocklets, in steady state against
// the vendor libraries in the same precision.
//
// Suites (N multiplied by --batch, default 16):
//   rmb   the real MobileNet v1 1x1 layers of the SparseRT table (problems 12-19) and the ResNet-50 3x3
//         filters of block groups 1-3 (N = 3136, 784, 196), RMB-pruned to 90 % with 16x8 blocklets
//         (sparsecc/matrix/prune.hpp, rmb:16x8: every 16-row block row keeps its strongest 16x8
//         blocklets, 10 % of its entries). The stored weights are already 90 % magnitude-pruned, so the
//         kept blocklets are mostly zeros; refill_kept_tiles stands in for the retraining the thesis
//         does after RMB pruning (the zeros of kept blocklets get values resampled from the layer's
//         nonzeros), giving the dense blocklets an RMB-trained layer has. --no-refill keeps them sparse.
//   dlmc  the DLMC rn50 magnitude-pruning 0.9 matrices (unstructured), N from rn50_batchsizes.txt.
// For each problem: sparsecc with blocklets auto (and off, unless --no-off), each compiled with NVRTC,
// verified on the GPU against the fp64 product of the rounded inputs with NaN-poisoned outputs
// (spmm_tolerance), then timed (CUDA graph of many launches, median of replays); then
// run_half_baselines (cuBLAS: the fastest of GemmEx and cuBLASLt's first --cublas-algorithms heuristic
// algorithms on each weight layout; cuSPARSE CSR every algorithm, Blocked-ELL 16 and 32). Prints a table
// with ratios and geomeans and writes JSON. The auto executor is timed once more launched with
// programmatic dependent launch where its bundle takes part (JSON programmatic_us; the summary's
// gain over the same executor's plain launches), as consecutive layers would run it.
#include "bench/blocklet_bench.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench/half_baselines.hpp"
#include "bench/suites.hpp"
#include "sparsecc/bundle/spmm_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "sparsecc/common/output.hpp"
#include "sparsecc/compile/compile_kernel.hpp"
#include "sparsecc/compile/resource_usage.hpp"
#include "sparsecc/emit/spmm_cuda.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/io/load.hpp"
#include "sparsecc/matrix/prune.hpp"
#include "sparsecc/pipeline/pipeline.hpp"
#include "sparsecc/reference/spmm.hpp"
#include "sparsecc/runtime/driver.hpp"
#include "sparsecc/runtime/executor.hpp"

namespace sparsecc::bench {

namespace {

struct Args {
  std::string suite = "rmb";
  int batch = 16;
  std::string dtype = "f16";
  std::string data;
  std::string json;
  std::int64_t max_nnz = 30000;  // unrolled nonzeros above which an executor is not built
  bool no_off = false;
  bool no_refill = false;
  int limit = 0;
  int groups = 0;  // 0: automatic
  int n_tile = 0;  // 0: automatic
  int cublas_algorithms = HalfBaselineOptions{}.cublas_algorithms;
  TimingOptions timing;
};

struct Problem {
  std::string name;
  CsrMatrix a;
  std::int64_t n = 0;
  std::string values;
};

std::vector<Problem> rmb_suite(const std::string& data, int batch, bool refill) {
  std::vector<Problem> out;
  const PrunePattern rmb = parse_prune_pattern("rmb:16x8");
  const auto prune = [&](const CsrMatrix& a) {
    const DenseMatrix pruned = prune_dense(dense_from_csr(a), rmb, 0.9);
    return csr_from_dense(refill ? refill_kept_tiles(pruned, rmb, 0x5eed) : pruned, DType::f32);
  };
  for (const BenchProblem& p : sparsert_suite(data, 0.9, batch))
    if (p.matrix.find("mobilenet") != std::string::npos)
      out.push_back(
          {p.name + "_rmb16x8", prune(load_problem_matrix(p)), p.N, "MobileNet v1, rmb:16x8 at 90 %"});
  const std::string npz = (std::filesystem::path(data) / "sparsert" / "resnet50_3x3_sparse90.npz").string();
  const std::int64_t hw[] = {3136, 784, 196};
  for (int g = 1; g <= 3; ++g) {
    const CsrMatrix a = load_matrix(fmt::format("{}:filter_bg{}", npz, g));
    out.push_back({fmt::format("rn50_3x3_bg{}_{}x{}x{}_rmb16x8", g, a.rows, a.cols, hw[g - 1] * batch),
                   prune(a), hw[g - 1] * batch, "ResNet-50 3x3 (im2col), rmb:16x8 at 90 %"});
  }
  return out;
}

std::vector<Problem> dlmc_rn50_suite(const std::string& data, int batch) {
  std::vector<Problem> out;
  for (const BenchProblem& p : dlmc_suite(data))
    if (p.name.rfind("rn50/", 0) == 0) out.push_back({p.name, load_problem_matrix(p), p.N * batch, p.values});
  return out;
}

struct Built {
  std::string config;  // "auto" or "off"
  SpmmPlan plan;
  rt::Bundle bundle;
  double compile_s = 0;
  ResourceUsage usage;
  std::string skipped;  // why it was not built
};

Built build(const Problem& p, const Args& args, const std::string& blocklets) {
  const std::string& dtype = args.dtype;
  const std::int64_t max_nnz = args.max_nnz;
  Built b;
  b.config = blocklets;
  SpmmProblem pr{
      p.a.rows, p.a.cols, p.n, SpmmNMode::fixed, false, false, require_dtype(dtype, "--dtype", kSpmmDtypes)};
  SpmmOptions o;
  set_blocklets(o, blocklets);
  o.groups = args.groups;
  o.n_tile = args.n_tile;
  b.plan = plan_spmm(p.a, pr, o);
  const std::int64_t unrolled = spmm_plan_nnz(b.plan);
  if (unrolled > max_nnz) {
    b.skipped = fmt::format("{} unrolled nonzeros > --max-nnz {}", unrolled, max_nnz);
    return b;
  }
  pipeline::SpmmRequest request;
  request.problem = pr;
  request.emit = KernelLanguage::cuda;
  request.long_cuda = pipeline::LongCompile::allow;  // --max-nnz bounds the bench's compiles
  request.name = p.name;
  request.compile_threads = 1;
  const auto t0 = std::chrono::steady_clock::now();
  pipeline::SpmmArtifact art = pipeline::compile_spmm_plan(b.plan, p.a, request, gpu_target("sm_90"));
  b.compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  b.usage = art.usage;
  b.bundle = std::move(*art.bundle);
  return b;
}

}  // namespace

int blocklet_bench_main(int argc, char** argv) {
  Args args;
  CLI::App app{
      "sparsecc_bench blocklets: fp16/bf16 executors with tensor-core blocklets vs cuBLAS and cuSPARSE",
      "sparsecc_bench blocklets"};
  app.add_option("--suite", args.suite, "rmb (RMB-pruned real weights) or dlmc (DLMC rn50 0.9)")
      ->check(CLI::IsMember({"rmb", "dlmc"}))
      ->capture_default_str();
  app.add_option("--batch", args.batch, "N multiplier")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--dtype", args.dtype, "f16 or bf16")
      ->check(CLI::IsMember({"f16", "bf16"}))
      ->capture_default_str();
  app.add_option("--data", args.data, "data folder (default: $SPARSECC_DATA_DIR or ../shared/data)");
  app.add_option("--json", args.json, "write results as JSON");
  app.add_option("--max-nnz", args.max_nnz, "build no executor with more unrolled nonzeros (compile time)")
      ->capture_default_str();
  app.add_flag("--no-off", args.no_off, "only blocklets auto (skip the blocklets-off executor)");
  app.add_flag("--no-refill", args.no_refill,
               "rmb suite: keep the kept blocklets as sparse as the stored weights (no retraining stand-in)");
  app.add_option("--limit", args.limit, "only the first K problems");
  app.add_option("--groups", args.groups, "thread groups of every executor (0: automatic)")
      ->check(CLI::Range(0, 32));
  app.add_option("--n-tile", args.n_tile, "threads per group (0: automatic; whole warps with blocklets)")
      ->check(CLI::Range(0, 1024));
  app.add_option("--repetitions", args.timing.repetitions, "graph replays per timing")->capture_default_str();
  app.add_option("--cublas-algorithms", args.cublas_algorithms,
                 "cuBLASLt heuristic algorithms timed for each weight layout besides cublasGemmEx's default")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    if (!args.json.empty()) check_output_file(args.json, {}, "--json");  // before the work
    const std::string data = args.data.empty() ? default_data_dir() : args.data;
    std::vector<Problem> problems = args.suite == "rmb" ? rmb_suite(data, args.batch, !args.no_refill)
                                                        : dlmc_rn50_suite(data, args.batch);
    if (args.limit > 0 && static_cast<std::size_t>(args.limit) < problems.size()) problems.resize(args.limit);
    rt::Context ctx(0);
    const HalfPrecision prec = args.dtype == "bf16" ? HalfPrecision::bf16 : HalfPrecision::f16;
    const std::string s = std::string(half_precision_name(prec));

    // Compile everything on every core first.
    std::vector<std::string> configs = {"auto"};
    if (!args.no_off) configs.push_back("off");
    const unsigned jobs = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::pair<std::size_t, std::string>> work;
    for (std::size_t i = 0; i < problems.size(); ++i)
      for (const auto& c : configs) work.emplace_back(i, c);
    std::vector<Built> built(work.size());
    std::atomic<std::size_t> next{0};
    std::vector<std::future<void>> pool;
    std::vector<std::string> errors(work.size());
    for (unsigned w = 0; w < std::min<std::size_t>(jobs, work.size()); ++w)
      pool.push_back(std::async(std::launch::async, [&] {
        for (std::size_t j; (j = next.fetch_add(1)) < work.size();) {
          try {
            built[j] = build(problems[work[j].first], args, work[j].second);
          } catch (const std::exception& e) {
            errors[j] = e.what();
          }
        }
      }));
    for (auto& f : pool) f.get();

    const DeviceInfo device = query_device();
    fmt::print("{}\nblocklets suite {} ({}), batch {}, graphs of {} launches, median of {} replays\n",
               device.describe(), args.suite, args.dtype, args.batch, args.timing.launches_per_graph,
               args.timing.repetitions);
    fmt::print("{:<44} {:>5} {:>5} {:>7} {:>6} {:<17} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>7}\n",
               "problem", "M", "K", "N", "nnz", "blocklets (cover)", "auto us", "off us", "cublas", "csr",
               "bell", "xCSR", "xBELL", "xcuBLAS");
    nlohmann::json results = nlohmann::json::array();
    std::vector<double> r_csr, r_bell, r_cublas, r_off_cublas, pdl_gain;
    bool failed = false;
    for (std::size_t i = 0; i < problems.size(); ++i) {
      const Problem& p = problems[i];
      nlohmann::json jp = {{"problem", p.name}, {"m", p.a.rows},    {"k", p.a.cols},
                           {"n", p.n},          {"nnz", p.a.nnz()}, {"values", p.values}};
      std::map<std::string, double> us;
      std::string cover = "-";
      // Inputs shared by the executors: B from the baselines' generator, rounded A for the reference.
      const std::vector<std::uint16_t> hb = random_half_matrix(p.a.cols, p.n, prec, 7);
      DenseMatrix b(p.a.cols, p.n);
      for (std::size_t e = 0; e < hb.size(); ++e) b.data[e] = half_bits_to_double(hb[e], prec);
      const DenseMatrix ref = spmm(round_values(p.a, args.dtype), b);
      double max_ref = 0;
      for (double v : ref.data) max_ref = std::max(max_ref, std::fabs(v));
      std::int64_t max_row = 0;
      for (std::int64_t r = 0; r < p.a.rows; ++r) max_row = std::max(max_row, p.a.row_nnz(r));
      const auto outputs = static_cast<std::size_t>(p.a.rows * p.n);
      DeviceBuffer db(hb.size() * 2), dc((outputs + 1) / 2 * 4);
      db.upload(hb.data(), hb.size() * 2);
      for (std::size_t j = 0; j < work.size(); ++j) {
        if (work[j].first != i) continue;
        const std::string& cfg = work[j].second;
        const Built& bt = built[j];
        nlohmann::json jc = {{"config", cfg}};
        if (!errors[j].empty() || !bt.skipped.empty()) {
          jc["skipped"] = errors[j].empty() ? bt.skipped : errors[j];
          if (!errors[j].empty()) {
            fmt::print(stderr, "{} {}: {}\n", p.name, cfg, errors[j]);
            failed = true;
          }
          jp[cfg] = jc;
          continue;
        }
        const rt::SpmmExecutor ex = rt::SpmmExecutor::load(bt.bundle, p.name, ctx);
        SPARSECC_CUDA_CHECK(cudaMemset(dc.get(), 0xff, dc.bytes()));  // 0xffff: NaN in fp16 and bf16
        ex.run(reinterpret_cast<CUdeviceptr>(db.get()), reinterpret_cast<CUdeviceptr>(dc.get()),
               static_cast<int>(p.n));
        SPARSECC_CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<std::uint16_t> hc(outputs);
        dc.download(hc.data(), hc.size() * 2);
        double err = 0;
        for (std::size_t e = 0; e < outputs; ++e) {
          const double g = half_bits_to_double(hc[e], prec);
          err = std::isfinite(g) ? std::max(err, std::fabs(g - ref.data[e])) : INFINITY;
        }
        const double rel = max_ref > 0 ? err / max_ref : err;
        const double tol = spmm_tolerance(args.dtype, "f32", max_row);
        jc["rel_error"] = rel;
        jc["tolerance"] = tol;
        jc["compile_s"] = bt.compile_s;
        jc["cubin_bytes"] = bt.bundle.cubin.size();
        jc["registers"] = bt.usage.registers;
        jc["plan"] = bt.bundle.metadata.plan_summary;
        if (!(rel <= tol)) {
          fmt::print(stderr, "{} {}: max relative error {:.3e} above {:.1e}; not timed\n", p.name, cfg, rel,
                     tol);
          failed = true;
          jp[cfg] = jc;
          continue;
        }
        const TimingStats t = time_steady(
            [&](cudaStream_t st) {
              ex.run(reinterpret_cast<CUdeviceptr>(db.get()), reinterpret_cast<CUdeviceptr>(dc.get()),
                     static_cast<int>(p.n), reinterpret_cast<CUstream>(st));
            },
            args.timing);
        us[cfg] = t.median_us;
        jc["timing"] = timing_json(t);
        if (cfg == "auto" && bt.bundle.metadata.programmatic_launch) {
          rt::RunOptions programmatic;
          programmatic.programmatic = true;
          const TimingStats tp = time_steady(
              [&](cudaStream_t st) {
                ex.run(reinterpret_cast<CUdeviceptr>(db.get()), reinterpret_cast<CUdeviceptr>(dc.get()),
                       static_cast<int>(p.n), reinterpret_cast<CUstream>(st), programmatic);
              },
              args.timing);
          jc["programmatic_us"] = tp.median_us;
          pdl_gain.push_back(t.median_us / tp.median_us);
        }
        if (cfg == "auto")
          cover = bt.plan.blocklets().shape.empty()
                      ? "off"
                      : fmt::format("{} {:.0f}%", bt.plan.blocklets().shape,
                                    100.0 * static_cast<double>(bt.plan.blocklets().nnz_covered) /
                                        static_cast<double>(std::max<std::int64_t>(p.a.nnz(), 1)));
        jp[cfg] = jc;
      }
      if (us.empty()) {  // nothing built or passed: the baselines would be timed for nothing
        fmt::print("{:<44} {:>5} {:>5} {:>7} {:>6} no executor timed (see above or --max-nnz)\n", p.name,
                   p.a.rows, p.a.cols, p.n, p.a.nnz());
        results.push_back(std::move(jp));
        continue;
      }
      HalfBaselineOptions bo;
      bo.timing = args.timing;
      bo.cublas_algorithms = args.cublas_algorithms;
      const std::vector<BaselineResult> base = run_half_baselines(p.a, p.n, prec, bo);
      nlohmann::json jb = nlohmann::json::object();
      for (const auto& r : base)
        jb[r.name] = {
            {"ok", r.ok}, {"us", r.us}, {"rel_error", r.rel_error}, {"note", r.note}, {"skipped", r.skipped}};
      jp["baselines"] = jb;
      const BaselineResult* cublas = find_ok(base, "cublas_" + s);
      const BaselineResult* csr = find_ok(base, "cusparse_csr_best");
      const BaselineResult* bell = find_ok(base, "cusparse_bell_best");
      const auto cell = [](double v) { return v > 0 ? fmt::format("{:.2f}", v) : std::string("-"); };
      const double a_us = us.count("auto") ? us["auto"] : 0, o_us = us.count("off") ? us["off"] : 0;
      const auto ratio = [&](const BaselineResult* r, std::vector<double>& acc) {
        if (!r || a_us <= 0) return std::string("-");
        acc.push_back(r->us / a_us);
        return fmt::format("{:.2f}", r->us / a_us);
      };
      const std::string x_csr = ratio(csr, r_csr), x_bell = ratio(bell, r_bell),
                        x_cublas = ratio(cublas, r_cublas);
      if (cublas && o_us > 0) r_off_cublas.push_back(cublas->us / o_us);
      fmt::print("{:<44} {:>5} {:>5} {:>7} {:>6} {:<17} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>7}\n",
                 p.name, p.a.rows, p.a.cols, p.n, p.a.nnz(), cover, cell(a_us), cell(o_us),
                 cell(cublas ? cublas->us : 0), cell(csr ? csr->us : 0), cell(bell ? bell->us : 0), x_csr,
                 x_bell, x_cublas);
      std::fflush(stdout);
      results.push_back(std::move(jp));
    }
    fmt::print(
        "geomean speedup of blocklets auto: {:.2f}x over cuSPARSE CSR {} ({} problems), {:.2f}x over "
        "Blocked-ELL "
        "({}), {:.2f}x over cuBLAS {} ({}); blocklets off: {:.2f}x over cuBLAS ({})\n",
        geomean(r_csr), s, r_csr.size(), geomean(r_bell), r_bell.size(), geomean(r_cublas), s,
        r_cublas.size(), geomean(r_off_cublas), r_off_cublas.size());
    if (!pdl_gain.empty())
      fmt::print(
          "blocklets auto launched programmatically: {:.2f}x the plain launches in geometric mean, "
          "{:.2f}-{:.2f}x "
          "({} problems)\n",
          geomean(pdl_gain), *std::min_element(pdl_gain.begin(), pdl_gain.end()),
          *std::max_element(pdl_gain.begin(), pdl_gain.end()), pdl_gain.size());
    if (!args.json.empty()) {
      const nlohmann::json out = {{"device", device.describe()},
                                  {"suite", args.suite},
                                  {"dtype", args.dtype},
                                  {"batch", args.batch},
                                  {"results", results},
                                  {"geomean",
                                   {{"auto_over_csr", geomean(r_csr)},
                                    {"auto_over_bell", geomean(r_bell)},
                                    {"auto_over_cublas", geomean(r_cublas)},
                                    {"off_over_cublas", geomean(r_off_cublas)},
                                    {"auto_programmatic_gain", geomean(pdl_gain)}}}};
      write_file_atomic(args.json, out.dump(1));
    }
    return failed ? 1 : 0;
  } catch (const UsageError& e) {
    fmt::print(stderr, "sparsecc_bench blocklets: error: {}\n", e.what());
    return 2;
  } catch (const InputError& e) {
    fmt::print(stderr, "sparsecc_bench blocklets: error: {}\n", e.what());
    return 2;
  } catch (const NoDeviceError& e) {
    fmt::print(stderr, "sparsecc_bench blocklets: error: {} (this program needs an NVIDIA GPU)\n", e.what());
    return 2;
  } catch (const rt::DriverUnavailable& e) {
    fmt::print(stderr, "sparsecc_bench blocklets: error: {} (this program needs an NVIDIA GPU)\n", e.what());
    return 2;
  } catch (const std::exception& e) {  // a failed CUDA or library call during the run
    fmt::print(stderr, "sparsecc_bench blocklets: error: {}\n", e.what());
    return 1;
  }
}

}  // namespace sparsecc::bench
