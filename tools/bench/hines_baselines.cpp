// Hines solver baselines: layouts from hines_schedules, kernels from hines_baselines.cu (NVRTC at run
// time, loaded with the runtime's library API), cuSPARSE gtsv2 for MIN-TRSV; check, then time.
#include "bench/hines_baselines.hpp"

#include <cusparse.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>

#include "bench/hines_schedules.hpp"
#include "bench/vendor_handles.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/compile/nvrtc.hpp"
#include "sparsecc/reference/hines_solve.hpp"

namespace sparsecc::bench {
namespace {

constexpr int kBlock = 128;  // HINES_BLOCK of the kernels' launch bounds

// The kernels of hines_baselines.cu for one precision and R, compiled for the current device.
struct Kernels {
  std::shared_ptr<Library> library;
  cudaKernel_t interleaved = nullptr, dhs = nullptr, assemble = nullptr, stage2 = nullptr, stage3 = nullptr,
               stage4 = nullptr;
  std::string arch;
};

Kernels load_kernels(const std::string& dtype, int r) {
  int device = 0;
  SPARSECC_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  SPARSECC_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  Kernels k;
  k.arch = fmt::format("sm_{}{}", prop.major, prop.minor);
  CudaCompileOptions options;
  options.arch = k.arch;
  options.extra = {fmt::format("-DHINES_REAL={}", dtype == "f64" ? "double" : "float"),
                   fmt::format("-DHINES_RHS={}", r), fmt::format("-DHINES_RHS_CHUNK={}", std::min(r, 8))};
  const CudaCompileResult compiled = compile_cuda(hines_kernel_source(), "hines_baselines.cu", options);
  k.library = std::make_shared<Library>();
  SPARSECC_CUDA_CHECK(
      cudaLibraryLoadData(&k.library->d, compiled.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  const auto get = [&](cudaKernel_t& out, const char* name) {
    SPARSECC_CUDA_CHECK(cudaLibraryGetKernel(&out, k.library->d, name));
  };
  get(k.interleaved, "hines_interleaved");
  get(k.dhs, "hines_dhs");
  get(k.assemble, "hines_trsv_assemble");
  get(k.stage2, "hines_trsv_stage2");
  get(k.stage3, "hines_trsv_stage3");
  get(k.stage4, "hines_trsv_stage4");
  return k;
}

// Launches `threads` threads (blocks of kBlock) of `kernel`; nothing when threads is 0.
void launch(cudaKernel_t kernel, std::int64_t threads, cudaStream_t stream,
            std::initializer_list<void*> args) {
  if (threads <= 0) return;
  const auto blocks = static_cast<unsigned>((threads + kBlock - 1) / kBlock);
  std::vector<void*> a(args);
  SPARSECC_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(blocks), dim3(kBlock),
                                       a.data(), 0, stream));
}

template <class T>
T* typed_ptr(const DeviceBuffer& b) {
  return static_cast<T*>(b.get());
}

// cuSPARSE's tridiagonal solver without pivoting (T is strictly diagonally dominant), per precision.
cusparseStatus_t gtsv_buffer_size(cusparseHandle_t h, int m, int n, const double* dl, const double* d,
                                  const double* du, const double* b, int ldb, std::size_t* bytes) {
  return cusparseDgtsv2_nopivot_bufferSizeExt(h, m, n, dl, d, du, b, ldb, bytes);
}
cusparseStatus_t gtsv_buffer_size(cusparseHandle_t h, int m, int n, const float* dl, const float* d,
                                  const float* du, const float* b, int ldb, std::size_t* bytes) {
  return cusparseSgtsv2_nopivot_bufferSizeExt(h, m, n, dl, d, du, b, ldb, bytes);
}
cusparseStatus_t gtsv(cusparseHandle_t h, int m, int n, const double* dl, const double* d, const double* du,
                      double* b, int ldb, void* buffer) {
  return cusparseDgtsv2_nopivot(h, m, n, dl, d, du, b, ldb, buffer);
}
cusparseStatus_t gtsv(cusparseHandle_t h, int m, int n, const float* dl, const float* d, const float* du,
                      float* b, int ldb, void* buffer) {
  return cusparseSgtsv2_nopivot(h, m, n, dl, d, du, b, ldb, buffer);
}

template <class V>
DeviceBuffer upload(const std::vector<V>& host) {
  DeviceBuffer d(std::max<std::size_t>(host.size(), 1) * sizeof(V));
  if (!host.empty()) d.upload(host.data(), host.size() * sizeof(V));
  return d;
}

template <class T>
std::vector<T> download(const DeviceBuffer& d, std::size_t count) {
  std::vector<T> host(count);
  d.download(host.data(), count * sizeof(T));
  return host;
}

// One GPU baseline, set up: enqueue one step; the outputs and scratch to NaN-poison before the first
// check; the solution (N x R row-major, Hines order).
struct GpuCase {
  std::function<void(cudaStream_t)> enqueue;
  std::vector<const DeviceBuffer*> outputs;
  std::function<std::vector<double>()> result;
  std::string note;
  std::shared_ptr<void> state;  // owns the buffers the closures use
};

std::string check_failure(double error, double tolerance, const char* which) {
  return fmt::format("check failed{}: max rel error {:.3g} above {:.2g}", which, error, tolerance);
}

// Sets the case up, checks a NaN-poisoned step and a replayed one against the reference, then times
// the step (CUDA graph replay; with events around direct launches if the capture fails).
HinesBaselineResult measure(const std::string& name, double tolerance, const std::vector<double>& ref,
                            const TimingOptions& timing, const std::function<GpuCase()>& setup) {
  HinesBaselineResult r;
  r.name = name;
  r.tolerance = tolerance;
  try {
    GpuCase c = setup();
    r.note = c.note;
    for (const DeviceBuffer* b : c.outputs) SPARSECC_CUDA_CHECK(cudaMemset(b->get(), 0xFF, b->bytes()));
    for (const char* which : {"", " on the replayed step"}) {
      c.enqueue(nullptr);
      SPARSECC_CUDA_CHECK(cudaDeviceSynchronize());
      SPARSECC_CUDA_CHECK(cudaGetLastError());
      const double error = hines_max_rel_error(c.result(), ref);
      r.rel_error = std::max(r.rel_error, error);
      if (!(error <= tolerance)) {
        r.note = check_failure(error, tolerance, which) + "; " + r.note;
        return r;
      }
    }
    try {
      r.timing = time_steady(c.enqueue, timing);
    } catch (const CudaError& e) {
      cudaGetLastError();
      r.timing = time_direct(c.enqueue, timing);
      r.note += fmt::format("; CUDA graph capture failed ({}), timed with events around {} direct launches",
                            e.what(), r.timing.launches_per_sample);
    }
    r.us = r.timing.median_us;
    r.ok = true;
  } catch (const std::exception& e) {
    r.note = r.note.empty() ? e.what() : fmt::format("{}; {}", e.what(), r.note);
  }
  cudaGetLastError();  // a non-sticky error of this baseline must not fail the next one
  return r;
}

// The system's values and right-hand sides in a baseline's layout, on the device.
template <class T>
void upload_system(const NodeMap& map, const HinesSystem& s, const std::vector<double>& b, int r,
                   DeviceBuffer& diag, DeviceBuffer& lower, DeviceBuffer& upper, DeviceBuffer& rhs) {
  diag = upload(scatter_nodes<T>(map, s.diag));
  lower = upload(scatter_nodes<T>(map, s.lower));
  upper = upload(scatter_nodes<T>(map, s.upper));
  rhs = upload(scatter_rhs<T>(map, b, r));
}

template <class T>
GpuCase interleaved_case(const Kernels& k, const HinesSystem& s, const std::vector<double>& b, int r) {
  struct State {
    InterleavedLayout layout;
    DeviceBuffer groups, warps, codes, diag, lower, upper, b, inv, x;
  };
  auto st = std::make_shared<State>();
  st->layout = build_interleaved(s, r);
  const InterleavedLayout& L = st->layout;
  st->groups = upload(L.groups), st->warps = upload(L.warps), st->codes = upload(L.codes);
  upload_system<T>(L.map, s, b, r, st->diag, st->lower, st->upper, st->b);
  st->inv = DeviceBuffer(static_cast<std::size_t>(L.map.slots) * sizeof(T));
  st->x = DeviceBuffer(static_cast<std::size_t>(L.map.rhs_slots) * sizeof(T));
  GpuCase c;
  c.enqueue = [st, kernel = k.interleaved](cudaStream_t stream) {
    const void *groups = st->groups.get(), *warps = st->warps.get(), *codes = st->codes.get();
    const void *diag = st->diag.get(), *lower = st->lower.get(), *upper = st->upper.get(), *bv = st->b.get();
    void *inv = st->inv.get(), *x = st->x.get();
    int nwarps = st->layout.num_warps();
    launch(kernel, static_cast<std::int64_t>(nwarps) * 32, stream,
           {&groups, &warps, &nwarps, &codes, &diag, &lower, &upper, &bv, &inv, &x});
  };
  c.outputs = {&st->inv, &st->x};
  c.result = [st, r] {
    const auto x = download<T>(st->x, static_cast<std::size_t>(st->layout.map.rhs_slots));
    return gather_rhs<T>(st->layout.map, x, r);
  };
  std::int64_t shared = 0;
  for (std::int32_t g = 0; g < L.num_groups(); ++g)
    shared = std::max<std::int64_t>(shared, L.groups[5 * g + 2]);
  c.note = fmt::format(
      "one thread per cell: {} cells in {} shape groups (largest {} cells), nodes interleaved per group "
      "(stride = cells padded to 32), {} warps in blocks of {}; factor + {} columns in one kernel; layout "
      "permuted once, untimed",
      s.num_cells(), L.num_groups(), shared, L.num_warps(), kBlock, r);
  c.state = st;
  return c;
}

template <class T>
GpuCase dhs_case(const Kernels& k, const HinesSystem& s, const std::vector<double>& b, int r, int threads) {
  struct State {
    DhsLayout layout;
    DeviceBuffer cells, table, children, diag, lower, upper, b, inv, fac, fu, x;
  };
  auto st = std::make_shared<State>();
  st->layout = build_dhs(s, threads, r);
  const DhsLayout& L = st->layout;
  st->cells = upload(L.cells), st->table = upload(L.table), st->children = upload(L.children);
  upload_system<T>(L.map, s, b, r, st->diag, st->lower, st->upper, st->b);
  const auto slots = static_cast<std::size_t>(L.map.slots);
  st->inv = DeviceBuffer(slots * sizeof(T));
  st->fac = DeviceBuffer(slots * sizeof(T));
  st->fu = DeviceBuffer(slots * sizeof(T));
  st->x = DeviceBuffer(static_cast<std::size_t>(L.map.rhs_slots) * sizeof(T));
  const int per_warp = 32 / threads;
  const std::int64_t warps = (L.num_cells() + per_warp - 1) / per_warp;
  GpuCase c;
  c.enqueue = [st, warps, kernel = k.dhs](cudaStream_t stream) {
    const void *cells = st->cells.get(), *table = st->table.get(), *children = st->children.get();
    const void *diag = st->diag.get(), *lower = st->lower.get(), *upper = st->upper.get(), *bv = st->b.get();
    void *inv = st->inv.get(), *fac = st->fac.get(), *fu = st->fu.get(), *x = st->x.get();
    int ncells = st->layout.num_cells(), kt = st->layout.k;
    launch(kernel, warps * 32, stream,
           {&cells, &ncells, &kt, &table, &children, &diag, &lower, &upper, &bv, &inv, &fac, &fu, &x});
  };
  c.outputs = {&st->inv, &st->fac, &st->fu, &st->x};
  c.result = [st, r] {
    const auto x = download<T>(st->x, static_cast<std::size_t>(st->layout.map.rhs_slots));
    return gather_rhs<T>(st->layout.map, x, r);
  };
  std::int32_t largest = 0;
  for (std::int32_t c0 = 0; c0 + 1 < static_cast<std::int32_t>(s.cell_offsets.size()); ++c0)
    largest = std::max(largest, s.cell_offsets[static_cast<std::size_t>(c0) + 1] -
                                    s.cell_offsets[static_cast<std::size_t>(c0)]);
  c.note = fmt::format(
      "{} threads per cell ({} cells per warp, {} warps in blocks of {}); Hu schedule, deepest ready nodes "
      "first: at most {} steps per cell (largest cell {} nodes), {} steps over all cells; slot layout "
      "step*K+lane "
      "(memory boosting), permuted once, untimed; children's updates pulled by the parent's lane (no "
      "atomics)",
      threads, per_warp, warps, kBlock, L.max_steps, largest, L.total_steps);
  c.state = st;
  return c;
}

template <class T>
GpuCase min_trsv_case(const Kernels& k, const HinesSystem& s, const std::vector<double>& b, int r) {
  struct State {
    MinTrsvLayout layout;
    std::shared_ptr<CusparseHandle> handle;
    DeviceBuffer rows, junctions, gather_offsets, gather, chains, dparent, dcells;
    DeviceBuffer diag, lower, upper, b, dl, d, du, X, md, mu, ml, mb, x, workspace;
  };
  auto st = std::make_shared<State>();
  st->layout = build_min_trsv(s);
  const MinTrsvLayout& L = st->layout;
  const auto n = static_cast<std::size_t>(L.n), m = static_cast<std::size_t>(L.m),
             R = static_cast<std::size_t>(r);
  const auto nj = static_cast<std::size_t>(L.num_junctions());
  if (static_cast<std::int64_t>(m) * (r + 2) > INT32_MAX)
    throw UsageError("min_trsv: the right-hand-side block exceeds 32-bit indices");
  st->handle = std::make_shared<CusparseHandle>();
  st->rows = upload(L.rows), st->junctions = upload(L.junctions),
  st->gather_offsets = upload(L.gather_offsets);
  st->gather = upload(L.gather), st->chains = upload(L.chains), st->dparent = upload(L.domain_parent);
  st->dcells = upload(L.domain_cells);
  const auto typed = [](const std::vector<double>& v) { return std::vector<T>(v.begin(), v.end()); };
  st->diag = upload(typed(s.diag)), st->lower = upload(typed(s.lower)), st->upper = upload(typed(s.upper));
  st->b = upload(typed(b));
  st->dl = DeviceBuffer(m * sizeof(T)), st->d = DeviceBuffer(m * sizeof(T)),
  st->du = DeviceBuffer(m * sizeof(T));
  st->X = DeviceBuffer(m * (R + 2) * sizeof(T));
  const std::size_t nj1 = std::max<std::size_t>(nj, 1);
  st->md = DeviceBuffer(nj1 * sizeof(T)), st->mu = DeviceBuffer(nj1 * sizeof(T)),
  st->ml = DeviceBuffer(nj1 * sizeof(T));
  st->mb = DeviceBuffer(nj1 * R * sizeof(T));
  st->x = DeviceBuffer(n * R * sizeof(T));
  std::size_t bytes = 0;
  SPARSECC_CUSPARSE_CHECK(gtsv_buffer_size(st->handle->h, L.m, r + 2, typed_ptr<T>(st->dl),
                                           typed_ptr<T>(st->d), typed_ptr<T>(st->du), typed_ptr<T>(st->X),
                                           L.m, &bytes));
  st->workspace = DeviceBuffer(std::max<std::size_t>(bytes, 256));
  GpuCase c;
  c.enqueue = [st, r, kern = k](cudaStream_t stream) {
    const MinTrsvLayout& L = st->layout;
    int n = L.n, m = L.m, nj = L.num_junctions(), ncells = L.num_domain_cells();
    const void *rows = st->rows.get(), *junctions = st->junctions.get(), *offsets = st->gather_offsets.get();
    const void *gather = st->gather.get(), *chains = st->chains.get(), *dparent = st->dparent.get();
    const void* dcells = st->dcells.get();
    const void *diag = st->diag.get(), *lower = st->lower.get(), *upper = st->upper.get(), *bv = st->b.get();
    void *dl = st->dl.get(), *d = st->d.get(), *du = st->du.get(), *X = st->X.get();
    void *md = st->md.get(), *mu = st->mu.get(), *ml = st->ml.get(), *mb = st->mb.get(), *x = st->x.get();
    launch(kern.assemble, m, stream, {&n, &m, &rows, &diag, &lower, &upper, &bv, &dl, &d, &du, &X});
    SPARSECC_CUSPARSE_CHECK(cusparseSetStream(st->handle->h, stream));
    SPARSECC_CUSPARSE_CHECK(gtsv(st->handle->h, m, r + 2, typed_ptr<T>(st->dl), typed_ptr<T>(st->d),
                                 typed_ptr<T>(st->du), typed_ptr<T>(st->X), m, st->workspace.get()));
    launch(kern.stage2, nj, stream,
           {&nj, &m, &junctions, &offsets, &gather, &chains, &diag, &lower, &upper, &bv, &X, &md, &mu, &ml,
            &mb});
    launch(kern.stage3, ncells, stream, {&ncells, &dcells, &dparent, &md, &mu, &ml, &mb});
    launch(kern.stage4, n, stream, {&n, &m, &rows, &X, &mb, &x});
  };
  c.outputs = {&st->dl, &st->d, &st->du, &st->X, &st->md, &st->mu, &st->ml, &st->mb, &st->x};
  c.result = [st, n, R] {
    const auto x = download<T>(st->x, n * R);
    return std::vector<double>(x.begin(), x.end());
  };
  c.note = fmt::format(
      "minimal decomposition: {} junctions, {} chains; cuSPARSE gtsv2_nopivot (diagonally dominant) on the "
      "junction-zeroed tridiagonal T ({} rows, {} columns: {} of b, the P and the Q vectors); stage 2 one "
      "thread "
      "per junction (gather); stage 3 serial Hines of the domain system ({} rows) on the GPU, one thread per "
      "cell's domain tree ({} threads), no host round trip; stage 4 one thread per row; T rebuilt every step",
      nj, L.num_chains(), L.m, r + 2, r, nj, L.num_domain_cells());
  c.state = st;
  return c;
}

HinesBaselineResult serial_cpu(const HinesSystem& s, const std::vector<double>& b, int r,
                               const HinesAccuracy& acc, int repetitions) {
  using Clock = std::chrono::steady_clock;
  HinesBaselineResult res;
  res.name = "serial_cpu";
  res.tolerance = acc.tolerance("f64");
  const std::vector<double>& ref = acc.ref;
  res.note =
      "fp64 serial Hines on one CPU core (the reference's arithmetic: factor + forward in one sweep, "
      "back-substitution), Hines order";
  std::vector<double> x(b.size()), pivot(static_cast<std::size_t>(s.size()));
  const auto step = [&] { serial_hines_step(s, b, r, x, pivot); };
  const auto t0 = Clock::now();
  step();
  const double first = std::chrono::duration<double>(Clock::now() - t0).count();
  res.rel_error = hines_max_rel_error(x, ref);
  if (!(res.rel_error <= res.tolerance)) {
    res.note = check_failure(res.rel_error, res.tolerance, "") + "; " + res.note;
    return res;
  }
  // Samples of `batch` steps each (at least ~1 ms), about 1 s in all unless `repetitions` is given.
  int batch = 1, samples = repetitions;
  if (repetitions <= 0) {
    const double t = std::max(first, 1e-8);
    batch = static_cast<int>(std::clamp(std::ceil(1e-3 / t), 1.0, 1e6));
    samples = static_cast<int>(std::clamp(1.0 / (t * batch), 5.0, 1000.0));
  }
  std::vector<double> us;
  for (int i = 0; i < samples; ++i) {
    const auto a = Clock::now();
    for (int j = 0; j < batch; ++j) step();
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - a).count() / batch);
  }
  res.timing = summarize(std::move(us), batch);
  res.us = res.timing.median_us;
  res.ok = true;
  return res;
}

void validate_inputs(const HinesSystem& s, const std::vector<double>& b, int r, const std::string& dtype,
                     const HinesBaselineOptions& o) {
  if (const auto issues = validate_hines(s, 1); !issues.empty())
    throw UsageError("Hines baselines: invalid system: " + issues.front());
  if (s.size() < 1) throw UsageError("Hines baselines: empty system");
  if (r < 1) throw UsageError(fmt::format("Hines baselines: {} right-hand sides (at least 1)", r));
  if (b.size() != static_cast<std::size_t>(s.size()) * static_cast<std::size_t>(r))
    throw UsageError(fmt::format("Hines baselines: {} right-hand-side values for {} rows x {} columns",
                                 b.size(), s.size(), r));
  if (dtype != "f64" && dtype != "f32")
    throw UsageError(fmt::format("Hines baselines: dtype '{}' is not f64 or f32", dtype));
  for (const int k : o.dhs_threads)
    if (k < 1 || k > 32)
      throw UsageError(fmt::format("Hines baselines: DHS with {} threads per cell (1 to 32)", k));
}

}  // namespace

std::vector<HinesBaselineResult> run_hines_baselines(const HinesSystem& s, const std::vector<double>& b,
                                                     int r, const std::string& dtype,
                                                     const HinesBaselineOptions& o) {
  validate_inputs(s, b, r, dtype, o);
  const HinesAccuracy acc = hines_accuracy(s, b, r);
  const std::vector<double>& ref = acc.ref;
  std::vector<HinesBaselineResult> results;
  results.push_back(serial_cpu(s, b, r, acc, o.cpu_repetitions));

  const bool f64 = dtype == "f64";
  const double tol = acc.tolerance(dtype);
  const std::string tol_note = acc.note(dtype).empty() ? "" : "; " + acc.note(dtype);
  std::vector<std::string> names = {"coreneuron_interleaved"};
  for (const int k : o.dhs_threads) names.push_back(fmt::format("dhs_{}", k));
  names.push_back("dhs_best");
  names.push_back("min_trsv");
  Kernels kernels;
  try {
    kernels = load_kernels(dtype, r);
  } catch (const std::exception& e) {
    cudaGetLastError();
    for (const std::string& name : names) {
      HinesBaselineResult f;
      f.name = name;
      f.tolerance = tol;
      f.note = fmt::format("kernels unavailable: {}", e.what());
      results.push_back(std::move(f));
    }
    return results;
  }
  const auto run = [&](const std::string& name, auto setup_f64, auto setup_f32) {
    results.push_back(measure(name, tol, ref, o.timing, [&]() -> GpuCase {
      GpuCase c = f64 ? setup_f64() : setup_f32();
      c.note = fmt::format("{}, {}: {}{}", dtype, kernels.arch, c.note, tol_note);
      return c;
    }));
  };
  run(
      "coreneuron_interleaved", [&] { return interleaved_case<double>(kernels, s, b, r); },
      [&] { return interleaved_case<float>(kernels, s, b, r); });
  std::size_t first_dhs = results.size();
  for (const int k : o.dhs_threads)
    run(
        fmt::format("dhs_{}", k), [&] { return dhs_case<double>(kernels, s, b, r, k); },
        [&] { return dhs_case<float>(kernels, s, b, r, k); });
  // dhs_best: the fastest K that passed.
  HinesBaselineResult best;
  best.name = "dhs_best";
  best.tolerance = tol;
  for (std::size_t i = first_dhs; i < results.size(); ++i) {
    const HinesBaselineResult& c = results[i];
    if (c.ok && (!best.ok || c.us < best.us)) {
      best = c;
      best.name = "dhs_best";
      best.note = fmt::format("K = {} ({}): {}", c.name.substr(4), c.name, c.note);
    }
  }
  if (!best.ok) {
    if (o.dhs_threads.empty()) {
      best.skipped = true;
      best.note = "no DHS thread counts requested";
    } else {
      best.note = "no dhs_K baseline passed its check";
    }
  }
  results.push_back(std::move(best));
  run(
      "min_trsv", [&] { return min_trsv_case<double>(kernels, s, b, r); },
      [&] { return min_trsv_case<float>(kernels, s, b, r); });
  return results;
}

}  // namespace sparsecc::bench
