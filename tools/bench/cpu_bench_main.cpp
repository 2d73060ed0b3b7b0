// sparsecc_cpu_bench: the LLVM backend's SpMM executors (--dtype f32, or f16 / bf16 B and C with fp32
// accumulation) on DLMC matrices against dense OpenBLAS SGEMM, one thread and all threads. The
// baselines stay fp32 whatever the dtype (SGEMM and MKL over the same values, rounded to the dtype,
// as fp32). A program, not a test: every executor is first
// checked against the fp64 reference on NaN-poisoned outputs (on --check-rows rows), then timed as
// the median of --reps runs after a warm-up run. Reports the generate / parse / code-generation
// seconds, µs, GFLOP/s of useful work (2 nnz N), and the ratio to SGEMM on the dense matrix.
// Exit: 0 ok, 1 an executor failed its check, 2 bad usage.
#include <cblas.h>
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "bench/cpu_timing.hpp"
#include "bench/suites.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/random.hpp"
#include "sparsecc/emit/spmm_llvm.hpp"
#include "sparsecc/inspector/spmm_cpu_planner.hpp"
#include "sparsecc/io/smtx.hpp"
#include "sparsecc/llvm/cpu_jit.hpp"
#include "sparsecc/reference/spmm.hpp"

#ifndef SPARSECC_HAVE_LIBXSMM
#define SPARSECC_HAVE_LIBXSMM 0
#endif
#if SPARSECC_HAVE_LIBXSMM
#include <libxsmm.h>
#endif
#ifndef SPARSECC_HAVE_MKL
#define SPARSECC_HAVE_MKL 0
#endif
#if SPARSECC_HAVE_MKL
#include <mkl_service.h>  // not mkl.h: its CBLAS declarations clash with OpenBLAS's
#include <mkl_spblas.h>
#endif

extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_config(void);

using namespace sparsecc;
namespace fs = std::filesystem;

namespace {

using bench::now_s;

template <class F>
double median_us(F&& f, int reps) {
  return bench::cpu_median_us(f, reps);
}

// Max relative error of C's rows `rows` against the fp64 reference, each output's error relative to
// the sum of its products' magnitudes (A's values as the executor takes them), less `floor`: half
// the least subnormal of C's type, the rounding error of an output among the subnormals, which no
// relative bound covers.
double check(const CsrMatrix& a, const std::vector<float>& b, std::int64_t n, const std::vector<float>& c,
             const std::vector<std::int64_t>& rows, double floor = 0) {
  double worst = 0;
  for (const std::int64_t r : rows) {
    for (std::int64_t j = 0; j < n; ++j) {
      double want = 0, scale = 0;
      for (std::int64_t e = a.row_ptr[r]; e < a.row_ptr[r + 1]; ++e) {
        const double x = a.values[e] * b[static_cast<std::size_t>(a.col_idx[e] * n + j)];
        want += x;
        scale += std::abs(x);
      }
      const double got = c[static_cast<std::size_t>(r * n + j)];
      if (!std::isfinite(got)) return INFINITY;
      worst = std::max(worst, std::max(std::abs(got - want) - floor, 0.0) / std::max(scale, 1e-30));
    }
  }
  return worst;
}

#if SPARSECC_HAVE_MKL
// MKL's inspector-executor on A (CSR, fp32): hinted for `n` columns, optimized once, then timed.
struct MklSpmm {
  sparse_matrix_t h = nullptr;
  std::vector<MKL_INT> ptr, col;
  std::vector<float> val;
  matrix_descr descr{SPARSE_MATRIX_TYPE_GENERAL, SPARSE_FILL_MODE_FULL, SPARSE_DIAG_NON_UNIT};
  MklSpmm(const CsrMatrix& a, std::int64_t n) {
    for (const std::int64_t p : a.row_ptr) ptr.push_back(static_cast<MKL_INT>(p));
    for (const std::int32_t c : a.col_idx) col.push_back(c);
    for (const double v : a.values) val.push_back(static_cast<float>(v));
    if (mkl_sparse_s_create_csr(&h, SPARSE_INDEX_BASE_ZERO, static_cast<MKL_INT>(a.rows),
                                static_cast<MKL_INT>(a.cols), ptr.data(), ptr.data() + 1, col.data(),
                                val.data()) != SPARSE_STATUS_SUCCESS)
      throw std::runtime_error("mkl_sparse_s_create_csr failed");
    mkl_sparse_set_mm_hint(h, SPARSE_OPERATION_NON_TRANSPOSE, descr, SPARSE_LAYOUT_ROW_MAJOR,
                           static_cast<MKL_INT>(n), 1000);
    if (mkl_sparse_optimize(h) != SPARSE_STATUS_SUCCESS)
      throw std::runtime_error("mkl_sparse_optimize failed");
  }
  ~MklSpmm() { mkl_sparse_destroy(h); }
  void run(const float* b, float* c, std::int64_t n) const {
    mkl_sparse_s_mm(SPARSE_OPERATION_NON_TRANSPOSE, 1.f, h, descr, SPARSE_LAYOUT_ROW_MAJOR, b,
                    static_cast<MKL_INT>(n), static_cast<MKL_INT>(n), 0.f, c, static_cast<MKL_INT>(n));
  }
};
#endif

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sparsecc_cpu_bench: LLVM CPU SpMM executors against dense OpenBLAS SGEMM"};
  std::vector<std::string> dirs;
  std::string batchsizes, json_path, target_name = "native";
  std::int64_t fixed_n = 0, limit = 0, check_rows = 64, max_nnz = 0;
  int reps = 11, opt = 2;
  std::vector<int> threads{1, 0};
  std::string dtype_name_arg = "f32";
  app.add_option("--dlmc", dirs,
                 "folders of DLMC .smtx(.gz) matrices (e.g. .../dlmc/rn50/magnitude_pruning/0.9)");
  std::string suite;
  double suite_sparsity = 0.9;
  int suite_batch = 1;
  app.add_option("--suite", suite,
                 "sparsert: the SparseRT suite's 20 problems (the bench suites' data folder)")
      ->check(CLI::IsMember({"sparsert"}));
  app.add_option("--sparsity", suite_sparsity, "--suite: 0.9 or 0.95")->capture_default_str();
  app.add_option("--batch", suite_batch, "--suite: the batch N is multiplied by")->capture_default_str();
  app.add_option("--batchsizes", batchsizes, "N of each matrix by name (DLMC rn50_batchsizes.txt: batch 1)");
  app.add_option("--n", fixed_n, "N for every matrix (instead of --batchsizes)");
  app.add_option("--target", target_name, "x86-64-avx512, x86-64-avx2 or native")->capture_default_str();
  app.add_option("--threads", threads, "thread counts to time (0: all cores)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--dtype", dtype_name_arg,
                 "B and C of the executors: f32, or f16 / bf16 (fp32 accumulation); SGEMM stays fp32")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  app.add_option("--opt", opt, "LLVM code generation level 0..3")->capture_default_str();
  std::string code = "auto";
  app.add_option("--code", code, "straight (straight-line), rolled, or auto (the planner's rule)")
      ->check(CLI::IsMember({"auto", "straight", "rolled"}))
      ->capture_default_str();
  app.add_option("--reps", reps, "timed runs a median is taken of")->capture_default_str();
  app.add_option("--limit", limit, "only the first K matrices of each folder (0: all)");
  app.add_option("--check-rows", check_rows, "rows checked against fp64")->capture_default_str();
  app.add_option("--max-nnz", max_nnz, "skip matrices of more nonzeros, saying so (0: none)");
  app.add_option("--json", json_path, "every figure as JSON");
  CLI11_PARSE(app, argc, argv);
  try {
    if (dirs.empty() && suite.empty()) throw UsageError("give --dlmc folders or --suite sparsert");
    if (!dirs.empty() && batchsizes.empty() && fixed_n <= 0)
      throw UsageError("give --batchsizes FILE or --n N");
    const auto ns =
        batchsizes.empty() ? std::map<std::string, std::int64_t>{} : bench::read_batch_sizes(batchsizes);
    const CpuTarget target = cpu_target(target_name);
    const DType dtype = require_dtype(dtype_name_arg, "--dtype", kSpmmCpuDtypes);
    const bool half = dtype != DType::f32;
    // Each output's error bound relative to its products' magnitudes: the fp32 figure, or the final
    // rounding to the dtype (spmm_tolerance with fp32 accumulation).
    const double bound = half ? spmm_tolerance(dtype, DType::f32, 0) : 1e-5;
    const double floor = dtype == DType::f16    ? std::ldexp(1.0, -25)
                         : dtype == DType::bf16 ? std::ldexp(1.0, -134)
                                                : 0;
#if SPARSECC_HAVE_MKL
    mkl_set_threading_layer(MKL_THREADING_GNU);  // the runner's OpenMP (libgomp), not a second runtime
#endif
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    fmt::print("CPU target {} ({} fp32 lanes), {} hardware threads; executors of {}{}; OpenBLAS {}\n",
               target.isa, target.lanes_f32(), cores, dtype,
               half ? " (fp32 accumulation; SGEMM in fp32)" : "", openblas_get_config());
    nlohmann::json out = {{"target", to_json(target)},
                          {"dtype", dtype_name_arg},
                          {"openblas", openblas_get_config()},
                          {"rows", nlohmann::json::array()}};
    bool failed = false;
    std::map<std::string, std::vector<double>> ratios, mkl_ratios;  // folder|threads -> x SGEMM, x MKL
    std::map<std::string, std::vector<double>> xsmm_ratios;         // folder -> x LIBXSMM (one thread)
    // A group of matrices: a DLMC folder (N from --batchsizes or --n), or the SparseRT suite.
    struct Item {
      std::string name;
      std::function<CsrMatrix()> load;
      std::int64_t n = 0;
    };
    std::vector<std::pair<std::string, std::vector<Item>>> groups;
    for (const std::string& dir : dirs) {
      std::vector<fs::path> paths;
      for (const auto& e : fs::directory_iterator(dir))
        if (e.path().string().find(".smtx") != std::string::npos) paths.push_back(e.path());
      std::sort(paths.begin(), paths.end());
      std::vector<Item> items;
      for (const fs::path& path : paths) {
        std::string name = path.filename().string();
        name = name.substr(0, name.find(".smtx"));
        const std::int64_t n = fixed_n > 0 ? fixed_n : ns.contains(name) ? ns.at(name) : 0;
        items.push_back({name, [path] { return read_smtx(path.string(), 1); }, n});
      }
      groups.emplace_back(dir, std::move(items));
    }
    if (!suite.empty()) {
      std::vector<Item> items;
      for (const bench::BenchProblem& p :
           bench::sparsert_suite(bench::default_data_dir(), suite_sparsity, suite_batch))
        items.push_back({p.name, [p] { return bench::load_problem_matrix(p); }, p.N});
      groups.emplace_back(fmt::format("sparsert {} batch {}", suite_sparsity, suite_batch), std::move(items));
    }
    for (auto& [dir, files] : groups) {
      if (limit > 0 && static_cast<std::int64_t>(files.size()) > limit)
        files.resize(static_cast<std::size_t>(limit));
      fmt::print(
          "\n== {} ({} matrices)\n{:<44} {:>6} {:>6} {:>8} {:>5} {:>3} {:>7} {:>7} {:>9} {:>9} {:>8} "
          "{:>7}{}{}\n",
          dir, files.size(), "matrix", "M", "K", "nnz", "N", "thr", "gen s", "jit s", "spmm us", "sgemm us",
          "GFLOP/s", "x sgemm", SPARSECC_HAVE_MKL ? fmt::format(" {:>9} {:>6}", "mkl us", "x mkl") : "",
          SPARSECC_HAVE_LIBXSMM ? fmt::format(" {:>9} {:>6}", "xsmm us", "x xsmm") : "");
      for (std::size_t fi = 0; fi < files.size(); ++fi) {
        const std::string& name = files[fi].name;
        const std::int64_t n = files[fi].n;
        if (n <= 0) {
          fmt::print("{:<44} skipped: no N in {}\n", name, batchsizes);
          continue;
        }
        const CsrMatrix a = round_values(files[fi].load(), dtype);
        if (max_nnz > 0 && a.nnz() > max_nnz) {
          fmt::print("{:<44} {:>6} {:>6} {:>8} skipped: more than --max-nnz {}\n", name, a.rows, a.cols,
                     a.nnz(), max_nnz);
          out["skipped"].push_back({{"folder", dir}, {"matrix", name}, {"nnz", a.nnz()}});
          continue;
        }
        const SpmmProblem pr{a.rows, a.cols, n, SpmmNMode::fixed, false, false, dtype};
        double t0 = now_s();
        SpmmCpuOptions cpu_options;
        if (code != "auto") cpu_options.rolled = code == "rolled";
        const SpmmCpuPlan plan = plan_spmm_cpu(a, pr, target, cpu_options);
        const double gen_s = now_s() - t0;  // the plan; lowering to IR is part of the build below
        t0 = now_s();
        const CpuSpmmKernel k = CpuSpmmKernel::build(a, plan, opt, cores);
        const double jit_s = now_s() - t0;
        SplitMix64 rng(7);
        std::vector<float> b(static_cast<std::size_t>(a.cols * n)), c(static_cast<std::size_t>(a.rows * n));
        for (float& v : b) v = static_cast<float>(round_to(dtype, rng.uniform_pm1()));
        // The executor's B and C in the dtype's bits (half executors); C read back as fp32 to check.
        std::vector<std::uint16_t> b16(half ? b.size() : 0), c16(half ? c.size() : 0);
        const auto to16 = [&](double v) {
          return dtype == DType::f16 ? double_to_half_bits(v) : double_to_bf16_bits(v);
        };
        for (std::size_t i = 0; i < b16.size(); ++i) b16[i] = to16(b[i]);
        const auto run = [&](int th) {
          if (half)
            k.run(b16.data(), c16.data(), nullptr, th);
          else
            k.run(b.data(), c.data(), nullptr, th);
        };
        std::vector<float> dense(static_cast<std::size_t>(a.rows * a.cols), 0.f), cd(c.size());
        for (std::int64_t r = 0; r < a.rows; ++r)
          for (std::int64_t e = a.row_ptr[r]; e < a.row_ptr[r + 1]; ++e)
            dense[static_cast<std::size_t>(r * a.cols + a.col_idx[e])] = static_cast<float>(a.values[e]);
        std::vector<std::int64_t> rows;
        for (std::int64_t i = 0; i < std::min(check_rows, a.rows); ++i)
          rows.push_back(i * a.rows / std::min(check_rows, a.rows));
        // LIBXSMM's fixed-sparsity JIT (fsspmdm: A given dense, its nonzeros baked into code for this N),
        // fp32, one thread (a call is serial), for N a multiple of 16 only: at other N LIBXSMM 1.17's
        // kernels compute wrong values and write outside C.
        // Evidence: docs/performance/2026-11-28-cpu-llvm.md#libxsmm
        double xus = 0, xerr = 0;
#if SPARSECC_HAVE_LIBXSMM
        if (!half && n % 16 == 0) {
          libxsmm_sfsspmdm* x = libxsmm_sfsspmdm_create(
              static_cast<libxsmm_blasint>(a.rows), static_cast<libxsmm_blasint>(n),
              static_cast<libxsmm_blasint>(a.cols), static_cast<libxsmm_blasint>(a.cols),
              static_cast<libxsmm_blasint>(n), static_cast<libxsmm_blasint>(n), 1.0f, 0.0f, 0, dense.data());
          if (x) {
            // fsspmdm reads and writes whole vectors past the last column of B and C where N is not a
            // multiple of its width: its own copies, with room to spare.
            const std::size_t slack = static_cast<std::size_t>(64 * n + 64);
            std::vector<float> bx(b.size() + slack, 0.0f), cx(cd.size() + slack);
            std::copy(b.begin(), b.end(), bx.begin());
            std::fill(cx.begin(), cx.end(), std::numeric_limits<float>::quiet_NaN());
            libxsmm_sfsspmdm_execute(x, bx.data(), cx.data());
            cx.resize(cd.size());
            xerr = check(a, b, n, cx, rows);
            cx.resize(cd.size() + slack);
            xus = median_us([&] { libxsmm_sfsspmdm_execute(x, bx.data(), cx.data()); }, reps);
            libxsmm_sfsspmdm_destroy(x);
          }
        }
#endif
        for (const int t : threads) {
          const int th = t > 0 ? t : cores;
          std::fill(c.begin(), c.end(), std::numeric_limits<float>::quiet_NaN());
          std::fill(c16.begin(), c16.end(), std::uint16_t{0xFFFF});  // a NaN in f16 and bf16
          run(th);
          for (std::size_t i = 0; i < c16.size(); ++i)
            c[i] = static_cast<float>(dtype == DType::f16 ? half_bits_to_double(c16[i])
                                                          : bf16_bits_to_double(c16[i]));
          const double err = check(a, b, n, c, rows, floor);
          const bool ok = err <= bound;
          failed = failed || !ok;
          const double us = median_us([&] { run(th); }, reps);
          openblas_set_num_threads(th);
          const double dus = median_us(
              [&] {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(a.rows),
                            static_cast<int>(n), static_cast<int>(a.cols), 1.f, dense.data(),
                            static_cast<int>(a.cols), b.data(), static_cast<int>(n), 0.f, cd.data(),
                            static_cast<int>(n));
              },
              reps);
          double mus = 0, merr = 0;  // MKL's inspector-executor, where built
#if SPARSECC_HAVE_MKL
          {
            mkl_set_num_threads(th);
            const MklSpmm mkl(a, n);
            std::fill(cd.begin(), cd.end(), std::numeric_limits<float>::quiet_NaN());
            mkl.run(b.data(), cd.data(), n);
            merr = check(a, b, n, cd, rows);
            mus = median_us([&] { mkl.run(b.data(), cd.data(), n); }, reps);
          }
#endif
          const double gflops = 2.0 * static_cast<double>(a.nnz()) * static_cast<double>(n) / (us * 1e3);
          const bool with_xsmm = SPARSECC_HAVE_LIBXSMM && !half && th == 1;
          fmt::print(
              "{:<44} {:>6} {:>6} {:>8} {:>5} {:>3} {:>7.2f} {:>7.2f} {:>9.1f} {:>9.1f} {:>8.1f} "
              "{:>7.2f}{}{}{}\n",
              name, a.rows, a.cols, a.nnz(), n, th, gen_s, jit_s, us, dus, gflops, dus / us,
              mus > 0 ? fmt::format(" {:>9.1f} {:>6.2f}", mus, mus / us) : "",
              !with_xsmm ? ""
              : xus > 0
                  ? fmt::format(" {:>9.1f} {:>6.2f}{}", xus, xus / us, xerr <= 1e-5 ? "" : " (xsmm WRONG)")
              : n % 16 ? fmt::format(" {:>16}", "xsmm: N % 16")
                       : fmt::format(" {:>16}", "xsmm refused"),
              ok ? "" : fmt::format("  FAILED: max rel error {:.2e}", err));
          if (with_xsmm && xus > 0 && xerr <= 1e-5) xsmm_ratios[dir].push_back(xus / us);
          ratios[fmt::format("{}|{}", dir, th)].push_back(dus / us);
          if (mus > 0) mkl_ratios[fmt::format("{}|{}", dir, th)].push_back(mus / us);
          out["rows"].push_back({{"folder", dir},
                                 {"dtype", dtype_name_arg},
                                 {"matrix", name},
                                 {"m", a.rows},
                                 {"k", a.cols},
                                 {"nnz", a.nnz()},
                                 {"n", n},
                                 {"threads", th},
                                 {"generate_s", gen_s},
                                 {"parse_s", k.stats().parse_seconds},
                                 {"compile_s", k.stats().compile_seconds},
                                 {"modules", k.stats().modules},
                                 {"ir_bytes", k.stats().ir_bytes},
                                 {"panels", plan.panel_count()},
                                 {"rolled", plan.rolled},
                                 {"column_tile", plan.column_tile},
                                 {"spmm_us", us},
                                 {"sgemm_us", dus},
                                 {"gflops", gflops},
                                 {"x_sgemm", dus / us},
                                 {"mkl_us", mus},
                                 {"mkl_max_rel_error", merr},
                                 {"libxsmm_us", th == 1 ? xus : 0.0},
                                 {"libxsmm_max_rel_error", th == 1 ? xerr : 0.0},
                                 {"max_rel_error", err},
                                 {"ok", ok}});
        }
      }
    }
    for (const auto& [key, v] : mkl_ratios) {
      fmt::print("\nx MKL inspector-executor, {} threads {}: {:.2f}", key.substr(0, key.find('|')),
                 key.substr(key.find('|') + 1), bench::geomean(v));
      out["summary_mkl"][key] = bench::geomean(v);
    }
    for (const auto& [dir, v] : xsmm_ratios) {
      fmt::print("\nx LIBXSMM fsspmdm, {} threads 1: {:.2f} ({} matrices it took)", dir, bench::geomean(v),
                 v.size());
      out["summary_libxsmm"][dir] = bench::geomean(v);
    }
    fmt::print("\nsummary: geomean x dense SGEMM (fp32), executors of {}\n", dtype);
    for (const auto& [key, v] : ratios) {
      fmt::print("  {}  threads {}: {:.2f} ({} matrices)\n", key.substr(0, key.find('|')),
                 key.substr(key.find('|') + 1), bench::geomean(v), v.size());
      out["summary"][key] = bench::geomean(v);
    }
    if (!json_path.empty()) std::ofstream(json_path) << out.dump(1) << "\n";
    return failed ? 1 : 0;
  } catch (const InputError& e) {
    fmt::print(stderr, "sparsecc_cpu_bench: {}\n", e.what());
    return 2;
  } catch (const UsageError& e) {
    fmt::print(stderr, "sparsecc_cpu_bench: {}\n", e.what());
    return 2;
  }
}
