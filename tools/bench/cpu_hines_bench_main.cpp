// sparsecc_cpu_hines_bench: the LLVM backend's Hines executor (same-shape cells one a SIMD lane) on
// a forest of SWC cells against the serial per-cell solve on one core. A program, not a test: the
// executor is first checked on NaN-poisoned x (bit for bit against the plan's interpreter, and
// against the extended-precision reference within the bound of hines_accuracy.hpp), then every
// variant is timed as the median of --reps steps after a warm-up step. One step is the full
// factor + solve of all R right-hand sides.
//
// Variants: serial (the loop of bench::serial_hines_step in the dtype: one fused factor + forward
// sweep and one backward sweep over the forest's Hines order, no allocations), the JIT code at each
// --threads count. Reports µs, the ratio to serial, the largest relative error, the bytes a step
// must move at least (d, u, l, b in; x, the workspace out) per second, a streaming copy's bytes per
// second on as many threads for comparison, and the generate / parse / code-generation seconds.
// Exit: 0 ok, 1 a check failed, 2 bad usage.
#include <fmt/format.h>
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "bench/cpu_timing.hpp"
#include "bench/hines_schedules.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/emit/hines_llvm.hpp"
#include "sparsecc/inspector/hines_cpu_planner.hpp"
#include "sparsecc/llvm/cpu_jit.hpp"
#include "sparsecc/llvm/hines_jit.hpp"
#include "sparsecc/neuron/forest.hpp"
#include "sparsecc/reference/hines_accuracy.hpp"

using namespace sparsecc;

namespace {

using bench::now_s;

template <class F>
double median_us(F&& f, int reps) {
  return bench::cpu_median_us(f, reps);
}

// n values of T, 64-byte aligned (a vector of the code never splits a cache line).
template <typename T>
class Buffer {
 public:
  explicit Buffer(std::size_t n, T fill = T(0))
      : n_(n),
        p_(static_cast<T*>(
            std::aligned_alloc(64, (std::max<std::size_t>(n, 1) * sizeof(T) + 63) / 64 * 64))) {
    if (!p_) throw std::bad_alloc();
    std::fill(p_.get(), p_.get() + n_, fill);
  }
  T* data() { return p_.get(); }
  const T* data() const { return p_.get(); }
  std::size_t size() const { return n_; }
  T& operator[](std::size_t i) { return p_.get()[i]; }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::size_t n_;
  std::unique_ptr<T, Free> p_;
};

// bench::serial_hines_step's arithmetic in T, on arrays already in T (x := b first, pivot := d).
template <typename T>
void serial_step(std::span<const std::int32_t> parent, const T* d, const T* upper, const T* lower, const T* b,
                 std::size_t r, T* x, T* piv) {
  const std::size_t n = parent.size();
  std::copy(b, b + n * r, x);
  std::copy(d, d + n, piv);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t p = parent[i];
    if (p < 0) continue;
    const T f = lower[i] / piv[i];
    piv[p] -= f * upper[i];
    T* xp = x + static_cast<std::size_t>(p) * r;
    const T* xi = x + i * r;
    for (std::size_t c = 0; c < r; ++c) xp[c] -= f * xi[c];
  }
  for (std::size_t i = n; i-- > 0;) {
    const std::int32_t p = parent[i];
    T* xi = x + i * r;
    const T inv = T(1) / piv[i];
    if (p < 0) {
      for (std::size_t c = 0; c < r; ++c) xi[c] *= inv;
    } else {
      const T u = upper[i];
      const T* xp = x + static_cast<std::size_t>(p) * r;
      for (std::size_t c = 0; c < r; ++c) xi[c] = (xi[c] - u * xp[c]) * inv;
    }
  }
}

// Bytes per second of a streaming copy of `bytes` bytes on `threads` threads (median of reps).
double copy_bytes_per_s(std::size_t bytes, int threads, int reps) {
  const std::size_t n = bytes / sizeof(double);
  Buffer<double> a(n, 1.0), c(n, 0.0);
  const double us = median_us(
      [&] {
#pragma omp parallel for num_threads(threads) schedule(static)
        for (std::size_t i = 0; i < n; ++i) c[i] = a[i];
      },
      reps);
  return 2.0 * static_cast<double>(n * sizeof(double)) / (us * 1e-6);
}

struct Args {
  std::vector<std::string> files;
  int cells = 1, resolution = 1, rhs = 1, reps = 21, opt = 2;
  std::string dtype = "f64", target = "native", json_path, ir_dir;
  std::vector<int> threads;
};

template <typename T>
int run(const Args& a) {
  const DType dt = sizeof(T) == 8 ? DType::f64 : DType::f32;
  const HinesSystem s = load_hines_forest(a.files, a.cells, a.resolution);
  const auto n = static_cast<std::size_t>(s.size()), r = static_cast<std::size_t>(a.rhs);
  const CpuTarget target = cpu_target(a.target);
  fmt::print("problem: {} x [{}] at resolution {}: {} compartments in {} cells, {} R = {}\n", a.cells,
             fmt::join(a.files, ", "), a.resolution, n, s.num_cells(), a.dtype, a.rhs);
  std::string cpu;
  if (std::ifstream info("/proc/cpuinfo"); info)
    for (std::string line; std::getline(info, line);)
      if (line.rfind("model name", 0) == 0) {
        cpu = line.substr(line.find(':') + 2);
        break;
      }
  fmt::print("cpu: {} ({} hardware threads), target {} ({}-bit vectors)\n", cpu, omp_get_num_procs(),
             target.isa, target.vector_bits);

  const std::vector<double> b64 = random_step_rhs(s, r, 42);
  const HinesAccuracy acc = hines_accuracy(s, b64, a.rhs);
  const double tol = acc.tolerance(a.dtype);

  // The serial solve, in Hines order.
  Buffer<T> d(n), u(n), l(n), b(n * r), x(n * r), piv(n);
  for (std::size_t i = 0; i < n; ++i) {
    d[i] = static_cast<T>(s.diag[i]);
    u[i] = static_cast<T>(s.upper[i]);
    l[i] = static_cast<T>(s.lower[i]);
  }
  for (std::size_t i = 0; i < n * r; ++i) b[i] = static_cast<T>(b64[i]);
  const auto serial = [&] {
    serial_step<T>(s.parent, d.data(), u.data(), l.data(), b.data(), r, x.data(), piv.data());
  };
  serial();
  const auto error_of = [&](const std::vector<double>& xh) { return hines_max_rel_error(xh, acc.ref); };
  const double serial_error = error_of(std::vector<double>(x.data(), x.data() + n * r));
  if constexpr (sizeof(T) == 8) {  // the project's serial step, bit for bit
    std::vector<double> xs(n * r), ps(n);
    bench::serial_hines_step(s, b64, a.rhs, xs, ps);
    if (std::memcmp(xs.data(), x.data(), xs.size() * sizeof(double)) != 0) {
      fmt::print(stderr, "error: the serial loop differs from bench::serial_hines_step\n");
      return 1;
    }
  }
  const double serial_us = median_us(serial, a.reps);

  // Plan, generate, compile.
  const double g0 = now_s();
  const HinesCpuPlan plan = plan_hines_cpu(s, target, dt, a.rhs);
  const int compile_threads = std::max(target.cores, 1);
  const std::vector<std::string> ir =
      emit_hines_llvm_modules(plan, kCpuHinesPrefix, std::int64_t{kCpuModulesPerThread} * compile_threads);
  const double generate_s = now_s() - g0;
  for (std::size_t m = 0; m < ir.size() && !a.ir_dir.empty(); ++m)
    std::ofstream(fmt::format("{}/module_{}.ll", a.ir_dir, m)) << ir[m];
  CpuHinesKernel k = CpuHinesKernel::compile(ir, plan, a.opt, compile_threads, kCpuHinesPrefix);
  const CpuCompileStats& st = k.stats();
  std::int64_t full = 0, narrow = 0;
  for (const HinesCpuGroup& g : plan.groups) (g.width > 1 ? full : narrow) += 1;
  fmt::print(
      "plan: {} shapes, {} groups of {} lanes + {} of width 1; IR {:.1f} MB in {} modules; generate {:.2f} "
      "s, "
      "parse {:.2f} s, code generation and link {:.2f} s ({} threads)\n",
      plan.shapes.size(), full, plan.lanes, narrow, static_cast<double>(st.ir_bytes) / 1e6, st.modules,
      generate_s, st.parse_seconds, st.compile_seconds, compile_threads);

  // Arrays in the plan's row order; the check.
  const std::vector<std::int32_t> perm = plan.permutation();
  Buffer<T> pd(n), pu(n), pl(n), pb(n * r), px(n * r, std::numeric_limits<T>::quiet_NaN());
  for (std::size_t k2 = 0; k2 < n; ++k2) {
    const auto h = static_cast<std::size_t>(perm[k2]);
    pd[k2] = d[h];
    pu[k2] = u[h];
    pl[k2] = l[h];
    for (std::size_t c = 0; c < r; ++c) pb[k2 * r + c] = b[h * r + c];
  }
  k.run(pd.data(), pu.data(), pl.data(), pb.data(), px.data(), 0);
  {
    Buffer<T> want(n * r, std::numeric_limits<T>::quiet_NaN()), w(n);
    interpret_hines_cpu(plan, pd.data(), pu.data(), pl.data(), pb.data(), want.data(), w.data());
    if (std::memcmp(want.data(), px.data(), n * r * sizeof(T)) != 0) {
      fmt::print(stderr, "error: the JIT code differs from the plan's interpreter\n");
      return 1;
    }
  }
  std::vector<double> xh(n * r);
  for (std::size_t k2 = 0; k2 < n; ++k2)
    for (std::size_t c = 0; c < r; ++c) xh[static_cast<std::size_t>(perm[k2]) * r + c] = px[k2 * r + c];
  const double jit_error = error_of(xh);
  const bool ok = jit_error <= tol && serial_error <= tol;

  // Bytes a step moves at least: d u l and b read, x and the workspace written.
  const double step_bytes = static_cast<double>((3 + 2 * r + 1) * n * sizeof(T));
  nlohmann::json out = {{"cpu", cpu},
                        {"target", to_json(target)},
                        {"files", a.files},
                        {"cells", s.num_cells()},
                        {"copies", a.cells},
                        {"resolution", a.resolution},
                        {"compartments", n},
                        {"dtype", a.dtype},
                        {"rhs", a.rhs},
                        {"reps", a.reps},
                        {"tolerance", tol},
                        {"shapes", plan.shapes.size()},
                        {"full_groups", full},
                        {"narrow_groups", narrow},
                        {"lanes", plan.lanes},
                        {"ir_bytes", st.ir_bytes},
                        {"modules", st.modules},
                        {"generate_s", generate_s},
                        {"parse_s", st.parse_seconds},
                        {"compile_s", st.compile_seconds},
                        {"step_bytes", step_bytes},
                        {"rows", nlohmann::json::array()}};
  fmt::print(
      "\n| variant | threads | µs/step | vs serial | max rel error (bound {:.1e}) | step GB/s | copy GB/s "
      "|\n",
      tol);
  fmt::print("|---|---|---|---|---|---|---|\n");
  const auto row = [&](const std::string& name, int threads, double us, double error) {
    const double copy = copy_bytes_per_s(static_cast<std::size_t>(step_bytes), threads, 5);
    fmt::print("| {} | {} | {:.1f} | {:.2f}x | {:.2e} | {:.1f} | {:.1f} |\n", name, threads, us,
               serial_us / us, error, step_bytes / (us * 1e-6) / 1e9, copy / 1e9);
    out["rows"].push_back({{"variant", name},
                           {"threads", threads},
                           {"us", us},
                           {"ratio_vs_serial", serial_us / us},
                           {"max_rel_error", error},
                           {"step_bytes_per_s", step_bytes / (us * 1e-6)},
                           {"copy_bytes_per_s", copy}});
  };
  row("serial per-cell solve", 1, serial_us, serial_error);
  for (const int th : a.threads) {
    const double us =
        median_us([&] { k.run(pd.data(), pu.data(), pl.data(), pb.data(), px.data(), th); }, a.reps);
    row("sparsecc JIT (lanes)", th, us, jit_error);
  }
  out["ok"] = ok;
  if (!ok) fmt::print(stderr, "error: an error is above the bound {:.2e}\n", tol);
  if (!a.json_path.empty()) std::ofstream(a.json_path) << out.dump(1) << "\n";
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "sparsecc_cpu_hines_bench: the CPU Hines executor (cells one a SIMD lane) against the serial solve");
  Args a;
  app.add_option("files", a.files, "SWC files; their cells form one forest")->required();
  app.add_option("--cells", a.cells, "copies of the forest")->capture_default_str();
  app.add_option("--resolution", a.resolution, "compartments per SWC segment")->capture_default_str();
  app.add_option("--dtype", a.dtype, "f64 or f32")
      ->check(CLI::IsMember({"f64", "f32"}))
      ->capture_default_str();
  app.add_option("--rhs", a.rhs, "right-hand sides")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--threads", a.threads, "thread counts the JIT code is timed at (default: 1 and all)")
      ->delimiter(',');
  app.add_option("--reps", a.reps, "timed steps a median is taken of")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--target", a.target, "CPU target (x86-64-avx512, x86-64-avx2, native)")
      ->capture_default_str();
  app.add_option("--opt", a.opt, "LLVM code generation level 0..3")
      ->check(CLI::Range(0, 3))
      ->capture_default_str();
  app.add_option("--json", a.json_path, "every figure as JSON");
  app.add_option("--ir", a.ir_dir, "folder the IR modules are written to (module_{i}.ll)")
      ->check(CLI::ExistingDirectory);
  CLI11_PARSE(app, argc, argv);
  if (a.threads.empty()) a.threads = {1, std::max(omp_get_num_procs(), 1)};
  try {
    return a.dtype == "f64" ? run<double>(a) : run<float>(a);
  } catch (const UsageError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
