// sparsecc_bench hines FILE.swc... [--cells N] [--resolution P] [--rhs R,...] [--dtype f64,f32]
//                     [--shared-workspace BYTES] [--block-threads T] [--k K] [--sweep] [--no-baselines]
//                     [--seed S]
// For every precision and R: plans the forest with the default rules, compiles and bundles the
// executor, loads it with the runtime, checks one step on a NaN-poisoned x against the bound of
// hines_accuracy (max relative error against the extended-precision serial solve <= 1e-12 f64, 1e-4 f32,
// raised to 16x the serial solver's own error on ill-conditioned systems) on the right-hand sides of
// a time step, times steady-state steps (a CUDA graph of many steps, median of replays), then runs
// every baseline (checked against the same bound) and
// prints per-step times and the ratios baseline / sparsecc. --sweep also times plan variants (K,
// base threshold, grid levels, minimal decomposition) for the first precision and R.
#include "bench/hines_bench.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <optional>

#include "bench/baselines.hpp"
#include "bench/hines_baselines.hpp"
#include "bench/hines_schedules.hpp"
#include "bench/timing.hpp"
#include "sparsecc/bundle/hines_bundle.hpp"
#include "sparsecc/cli.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/compile/compile_hines.hpp"
#include "sparsecc/inspector/hines_planner.hpp"
#include "sparsecc/neuron/forest.hpp"
#include "sparsecc/pipeline/pipeline.hpp"
#include "sparsecc/reference/hines_solve.hpp"
#include "sparsecc/runtime/device.hpp"
#include "sparsecc/runtime/hines_executor.hpp"

namespace sparsecc::bench {

namespace {

struct HinesBenchArgs {
  std::vector<std::string> files;
  HinesOptions plan;  // the timed plan's options (--code, --shared-workspace, --block-threads, --k)
  int cells = 1;
  int resolution = 1;
  std::vector<int> rhs{1};
  std::vector<std::string> dtypes{"f64"};
  bool sweep = false;
  bool baselines = true;
  std::uint64_t seed = 1;
  TimingOptions timing;
};

struct Measured {
  bool ok = false;
  double us = 0, error = 0;
  std::string note;
};

template <typename Real>
std::vector<Real> cast(const std::vector<double>& v) {
  return std::vector<Real>(v.begin(), v.end());
}

template <typename Real>
DeviceBuffer upload(const std::vector<Real>& v) {
  DeviceBuffer buf(std::max<std::size_t>(v.size() * sizeof(Real), 8));
  buf.upload(v.data(), v.size() * sizeof(Real));
  return buf;
}

// Builds the executor of `plan`, checks one step, times steady-state steps.
template <typename Real>
Measured measure(const rt::Context& ctx, const HinesSystem& s, const HinesPlan& plan,
                 const std::vector<double>& b, const HinesAccuracy& acc, const TimingOptions& timing) {
  const pipeline::HinesArtifact art = pipeline::compile_hines_plan(plan, s, gpu_target(ctx.device().arch()));
  const rt::Bundle& bundle = *art.bundle;
  const CompiledHines& c = *art.compiled;
  const rt::HinesExecutor ex = rt::HinesExecutor::load_bytes(rt::bundle_bytes(bundle), "bench", ctx);
  DeviceBuffer d = upload(cast<Real>(s.diag)), u = upload(cast<Real>(s.upper)),
               l = upload(cast<Real>(s.lower)), bb = upload(cast<Real>(b));
  DeviceBuffer x(std::max<std::size_t>(b.size() * sizeof(Real), 8));
  const std::vector<Real> poison(b.size(), std::numeric_limits<Real>::quiet_NaN());
  x.upload(poison.data(), poison.size() * sizeof(Real));
  const auto ptr = [](const DeviceBuffer& buf) { return reinterpret_cast<CUdeviceptr>(buf.get()); };
  const auto step = [&](cudaStream_t stream) {
    ex.run(ptr(d), ptr(u), ptr(l), ptr(bb), ptr(x), reinterpret_cast<CUstream>(stream));
  };
  step(nullptr);
  SPARSECC_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<Real> out(b.size());
  x.download(out.data(), out.size() * sizeof(Real));
  Measured m;
  m.error = hines_max_rel_error(std::vector<double>(out.begin(), out.end()), acc.ref);
  const double tol = acc.tolerance(plan.problem.dtype);
  if (!(m.error <= tol)) {
    m.note = fmt::format("FAILED: max relative error {:.3g} above {:g}", m.error, tol);
    return m;
  }
  m.us = time_steady(step, timing).median_us;
  m.ok = true;
  std::vector<int> ks;
  for (const HinesLevel& L : plan.levels) ks.push_back(L.k);
  m.note = fmt::format(
      "depth {} (K {}), {} grid levels, {} threads/cell block, base {} rows ({}), {} launches, {}",
      plan.depth(), fmt::join(ks, ","), plan.grid_levels, plan.block_threads, plan.base_size(),
      to_string(plan.code), c.schedule.launches.size(),
      c.schedule.shared_from < plan.depth() ? fmt::format("levels {}.. in {} B of shared memory",
                                                          c.schedule.shared_from, c.schedule.shared_bytes())
                                            : std::string("workspace global"));
  return m;
}

Measured measure_plan(const rt::Context& ctx, const HinesSystem& s, const HinesPlan& plan,
                      const std::vector<double>& b, const HinesAccuracy& acc, const TimingOptions& timing) {
  return plan.problem.dtype == "f32" ? measure<float>(ctx, s, plan, b, acc, timing)
                                     : measure<double>(ctx, s, plan, b, acc, timing);
}

void sweep(const rt::Context& ctx, const HinesSystem& s, const std::string& dtype, int r,
           const std::vector<double>& b, const HinesAccuracy& acc, const TimingOptions& timing,
           double chosen_us) {
  struct Variant {
    std::string name;
    HinesOptions o;
  };
  std::vector<Variant> variants;
  for (const int k : {2, 3, 4, 6, 8, 16}) {
    Variant v{fmt::format("K {} on every level", k), {}};
    v.o.k = k;
    v.o.k_large = 0;
    variants.push_back(v);
  }
  for (const int k : {3, 4, 6, 12, 16}) {
    Variant v{fmt::format("K {} on large levels", k), {}};
    v.o.k_large = k;
    variants.push_back(v);
  }
  Variant minimal{"minimal decomposition", {}};
  minimal.o.decomposition = HinesDecomposition::minimal;
  variants.push_back(minimal);
  for (const int base : {8, 16, 32, 128, 512, 3500}) {
    Variant v{fmt::format("base threshold {} rows/cell", base), {}};
    v.o.base_rows = base;
    variants.push_back(v);
  }
  for (const int g : {0, 1, 2, 3, 4}) {
    Variant v{fmt::format("grid levels {}", g), {}};
    v.o.grid_levels = g;
    variants.push_back(v);
  }
  for (const int t : {64, 128, 256, 512, 1024}) {
    Variant v{fmt::format("block threads {}", t), {}};
    v.o.block_threads = t;
    variants.push_back(v);
  }
  for (const int t : {64, 128, 512}) {
    Variant v{fmt::format("grid-kernel blocks of {}", t), {}};
    v.o.threads_per_block = t;
    variants.push_back(v);
  }
  for (const char* code : {"tables", "unrolled"}) {
    Variant v{fmt::format("{} bases", code), {}};
    v.o.code = code;
    variants.push_back(v);
  }
  for (const std::int64_t bytes : {std::int64_t{0}, std::int64_t{48} * 1024, kHinesSharedWorkspaceMax}) {
    Variant v{bytes ? fmt::format("shared workspace {} KiB", bytes / 1024) : "workspace global", {}};
    v.o.shared_workspace = bytes;
    variants.push_back(v);
  }
  fmt::print("\nsweep ({} R {}): the default plan takes {:.2f} us\n", dtype, r, chosen_us);
  fmt::print("{:<32} {:>6} {:>5} {:>7} {:>6} {:>10} {:>8}\n", "variant", "depth", "grid", "threads", "base",
             "us/step", "vs plan");
  for (const Variant& v : variants) {
    HinesPlan plan;
    try {
      plan = plan_hines(s, r, dtype, v.o);
    } catch (const UsageError& e) {
      fmt::print("{:<32} not applicable: {}\n", v.name, e.what());
      continue;
    }
    const Measured m = measure_plan(ctx, s, plan, b, acc, timing);
    if (!m.ok) {
      fmt::print("{:<32} {}\n", v.name, m.note);
      continue;
    }
    fmt::print("{:<32} {:>6} {:>5} {:>7} {:>6} {:>10.2f} {:>7.2f}x\n", v.name, plan.depth(), plan.grid_levels,
               plan.block_threads, plan.base_size(), m.us, m.us / chosen_us);
  }
}

int run(const HinesBenchArgs& a) {
  const rt::Context ctx(0);
  const DeviceInfo dev = query_device();
  const HinesSystem s = load_hines_forest(a.files, a.cells, a.resolution);
  fmt::print("device: {}\n", dev.describe());
  fmt::print("problem: {} x [{}] at resolution {}: {} compartments in {} cells\n", a.cells,
             fmt::join(a.files, ", "), a.resolution, s.size(), s.num_cells());
  bool failed = false;
  bool swept = false;
  for (const std::string& dtype : a.dtypes)
    for (const int r : a.rhs) {
      const std::vector<double> b = random_step_rhs(s, static_cast<std::size_t>(r), a.seed);
      const HinesAccuracy acc = hines_accuracy(s, b, r);
      fmt::print(
          "\n{} R {}: accuracy bound {:.3g} (serial fp64 {:.3g}, serial fp32 {:.3g} from the "
          "extended-precision "
          "serial solve){}\n",
          dtype, r, acc.tolerance(dtype), acc.serial_f64_error, acc.serial_f32_error,
          acc.note(dtype).empty() ? "" : "; " + acc.note(dtype));
      const HinesPlan plan = plan_hines(s, r, dtype, a.plan);
      const Measured m = measure_plan(ctx, s, plan, b, acc, a.timing);
      fmt::print(
          "{} R {}: sparsecc {}\n", dtype, r,
          m.ok ? fmt::format("{:.2f} us/step, max rel err {:.2e}; {}", m.us, m.error, m.note) : m.note);
      if (!m.ok) {
        failed = true;
        continue;
      }
      if (a.baselines) {
        HinesBaselineOptions bo;
        bo.timing = a.timing;
        const auto results = run_hines_baselines(s, b, r, dtype, bo);
        fmt::print("{:<24} {:>12} {:>11} {:>14}  {}\n", "baseline", "us/step", "rel err", "sparsecc is",
                   "note");
        for (const auto& res : results) {
          if (!res.ok) {
            fmt::print("{:<24} {:>12} {:>11} {:>14}  {}\n", res.name, res.skipped ? "skipped" : "FAILED", "",
                       "", res.note);
            failed = failed || !res.skipped;
            continue;
          }
          fmt::print("{:<24} {:>12.2f} {:>11.2e} {:>13.2f}x  {}\n", res.name, res.us, res.rel_error,
                     res.us / m.us, res.note);
        }
      }
      if (a.sweep && !swept) {
        sweep(ctx, s, dtype, r, b, acc, a.timing, m.us);
        swept = true;
      }
    }
  return failed ? 1 : 0;
}

}  // namespace

int hines_bench_main(int argc, char** argv) {
  HinesBenchArgs a;
  CLI::App app{"sparsecc_bench hines: sparsecc's Hines executors against the Hines baselines",
               "sparsecc_bench hines"};
  app.add_option("files", a.files, "SWC files; their cells form one forest")->required();
  app.add_option("--cells", a.cells, "copies of the forest")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--resolution", a.resolution, "compartments per SWC segment")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--rhs", a.rhs, "right-hand sides per step (list)")
      ->check(CLI::Range(1, 1024))
      ->delimiter(',');
  app.add_option("--dtype", a.dtypes, "precisions (list)")
      ->check(CLI::IsMember({"f64", "f32"}))
      ->delimiter(',');
  app.add_option("--code", a.plan.code, "code mode of the timed plan")
      ->check(CLI::IsMember({"auto", "tables", "unrolled"}))
      ->capture_default_str();
  app.add_option("--shared-workspace", a.plan.shared_workspace,
                 "shared memory a block may keep its deepest levels' workspace in (-1: the rule, 0: none)")
      ->check(CLI::Range(std::int64_t{-1}, kHinesSharedWorkspaceMax))
      ->capture_default_str();
  app.add_option("--k", a.plan.k, "K of the timed plan's block levels (0: the planner's rule)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  app.add_option("--block-threads", a.plan.block_threads,
                 "threads of the timed plan's block kernel (0: the rule)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  app.add_flag("--sweep", a.sweep, "also time plan variants (K, base threshold, grid levels, block threads)");
  app.add_flag("!--no-baselines", a.baselines, "time sparsecc only");
  app.add_option("--seed", a.seed, "right-hand sides' seed")->check(cli::kNotNegative)->capture_default_str();
  app.add_option("--repetitions", a.timing.repetitions, "graph replays")->capture_default_str();
  app.add_option("--launches", a.timing.launches_per_graph, "steps per graph")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    return run(a);
  } catch (const InputError& e) {
    fmt::print(stderr, "sparsecc_bench hines: error: {}\n", e.what());
    return 2;
  } catch (const UsageError& e) {
    fmt::print(stderr, "sparsecc_bench hines: error: {}\n", e.what());
    return 2;
  } catch (const NoDeviceError& e) {
    fmt::print(stderr, "sparsecc_bench hines: error: {} (this program needs an NVIDIA GPU)\n", e.what());
    return 2;
  } catch (const rt::DriverUnavailable& e) {
    fmt::print(stderr, "sparsecc_bench hines: error: {} (this program needs an NVIDIA GPU)\n", e.what());
    return 2;
  } catch (const std::exception& e) {  // a failed CUDA or library call during the run
    fmt::print(stderr, "sparsecc_bench hines: error: {}\n", e.what());
    return 1;
  }
}

}  // namespace sparsecc::bench
