// CPU executors (sparsecc/runtime/cpu_executor.hpp).
#include "sparsecc/runtime/cpu_executor.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <thread>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace sparsecc::rt {

bool cpu_supports(const std::string& isa) {
  __builtin_cpu_init();
  if (isa == "x86-64-avx512") return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  if (isa == "x86-64-avx2") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return false;
}

void require_cpu(const std::string& isa, const std::string& what) {
  if (!cpu_supports(isa))
    throw std::runtime_error(what + ": compiled for " + isa + ", which this CPU does not run (" +
                             (isa == "x86-64-avx512" ? "no AVX-512F" : "no AVX2 with FMA") +
                             "); compile the executors for x86-64-avx2");
}

void cpu_parallel_for(std::int64_t items, int threads, void (*fn)(std::int64_t, const void*),
                      const void* ctx) {
  if (items <= 0) return;
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int t = static_cast<int>(std::min<std::int64_t>(threads > 0 ? threads : hw, items));
#ifdef _OPENMP
  if (t > 1) {
#pragma omp parallel for num_threads(t) schedule(dynamic, 1)
    for (std::int64_t item = 0; item < items; ++item) fn(item, ctx);
    return;
  }
#else
  (void)t;
#endif
  for (std::int64_t item = 0; item < items; ++item) fn(item, ctx);
}

CpuSpmmExecutor::CpuSpmmExecutor(CpuSpmmTile tile, const CpuSpmmShape& shape, const float* bias)
    : tile_(tile), shape_(shape), bias_(bias) {
  if (!tile) throw std::invalid_argument("CpuSpmmExecutor: no code");
  if (shape.dtype != "f32")
    throw std::invalid_argument("CpuSpmmExecutor: fp32 code for an executor of dtype \"" + shape.dtype +
                                "\"");
  check_shape();
}

CpuSpmmExecutor::CpuSpmmExecutor(CpuSpmmHalfTile tile, const CpuSpmmShape& shape, const float* bias)
    : half_tile_(tile), shape_(shape), bias_(bias) {
  if (!tile) throw std::invalid_argument("CpuSpmmExecutor: no code");
  if (shape.dtype != "f16" && shape.dtype != "bf16")
    throw std::invalid_argument("CpuSpmmExecutor: 16-bit code for an executor of dtype \"" + shape.dtype +
                                "\" (not f16 or bf16)");
  check_shape();
}

void CpuSpmmExecutor::check_shape() const {
  const CpuSpmmShape& s = shape_;
  if (s.m <= 0 || s.k <= 0 || s.n <= 0 || s.panels <= 0 || s.panels > s.m || s.column_tile <= 0)
    throw std::invalid_argument("CpuSpmmExecutor: the shape (m, k, n, panels, column tile) is not valid");
}

namespace {
struct SpmmCall {
  CpuSpmmTile tile;
  CpuSpmmHalfTile half_tile;
  std::int64_t tile_cols, full, per_panel;
  const void* b;
  const float* bias;
  void* c;
};
}  // namespace

void CpuSpmmExecutor::run_items(const void* b, void* c, int threads) const {
  if (!b || !c) throw std::invalid_argument("CpuSpmmExecutor::run: null B or C");
  const std::int64_t tile = std::min(shape_.column_tile, shape_.n);
  const std::int64_t full = shape_.n / tile, rest = shape_.n % tile;
  const SpmmCall call{tile_, half_tile_, tile, full, full + (rest ? 1 : 0), b, bias_, c};
  // A work item is one column tile of one panel, so that layers of few panels still spread over
  // the threads.
  cpu_parallel_for(
      shape_.panels * call.per_panel, threads,
      [](std::int64_t item, const void* ctx) {
        const auto& k = *static_cast<const SpmmCall*>(ctx);
        const std::int64_t q = item / k.per_panel, i = item % k.per_panel;
        const std::int32_t is_full = i < k.full ? 1 : 0;
        if (k.tile)
          k.tile(q, i * k.tile_cols, is_full, static_cast<const float*>(k.b), static_cast<float*>(k.c),
                 k.bias);
        else
          k.half_tile(q, i * k.tile_cols, is_full, static_cast<const std::uint16_t*>(k.b),
                      static_cast<std::uint16_t*>(k.c), k.bias);
      },
      &call);
}

void CpuSpmmExecutor::run(const float* b, float* c, int threads) const {
  if (!tile_)
    throw std::invalid_argument("CpuSpmmExecutor::run: float arrays for an executor of " + shape_.dtype +
                                " (give std::uint16_t arrays)");
  run_items(b, c, threads);
}

void CpuSpmmExecutor::run(const std::uint16_t* b, std::uint16_t* c, int threads) const {
  if (!half_tile_)
    throw std::invalid_argument("CpuSpmmExecutor::run: std::uint16_t arrays for an executor of " +
                                shape_.dtype + " (give float arrays)");
  run_items(b, c, threads);
}

CpuHinesExecutor::CpuHinesExecutor(void* solve, const CpuHinesShape& shape,
                                   std::span<const std::int32_t> permutation)
    : solve_(solve), shape_(shape), permutation_(permutation) {
  if (!solve) throw std::invalid_argument("CpuHinesExecutor: no code");
  if (shape.dtype != "f64" && shape.dtype != "f32")
    throw std::invalid_argument("CpuHinesExecutor: dtype \"" + shape.dtype + "\" is not f64 or f32");
  if (shape.rows <= 0 || shape.cells <= 0 || shape.cells > shape.rows || shape.rhs <= 0 || shape.items <= 0 ||
      shape.workspace < 0 || permutation.size() != static_cast<std::size_t>(shape.rows))
    throw std::invalid_argument(
        "CpuHinesExecutor: the shape (rows, cells, rhs, items, permutation) is not valid");
  const std::size_t bytes = static_cast<std::size_t>(shape.workspace) * (shape.dtype == "f64" ? 8 : 4);
  work_.assign((bytes + 7) / 8 + 8, 0.0);  // 64 bytes of slack for the alignment
}

void* CpuHinesExecutor::work() {
  const auto at = reinterpret_cast<std::uintptr_t>(work_.data());
  return reinterpret_cast<void*>((at + 63) / 64 * 64);
}

void CpuHinesExecutor::check_sizes(std::size_t a, std::size_t b) const {
  const std::size_t want = static_cast<std::size_t>(shape_.rows * shape_.rhs);
  if (a != want || b != want)
    throw std::invalid_argument("CpuHinesExecutor: vectors of " + std::to_string(a) + " and " +
                                std::to_string(b) + " values for " + std::to_string(shape_.rows) +
                                " rows x " + std::to_string(shape_.rhs) + " right-hand sides");
}

namespace {
template <class T>
struct HinesCall {
  CpuHinesSolve<T> solve;
  const T *d, *u, *l, *b;
  T *x, *work;
};
}  // namespace

template <class T>
void CpuHinesExecutor::run_as(const char* dtype, const T* d, const T* u, const T* l, const T* b, T* x,
                              int threads) {
  if (shape_.dtype != dtype)
    throw std::invalid_argument("CpuHinesExecutor::run: " + std::string(dtype) +
                                " arrays for an executor of " + shape_.dtype);
  if (!d || !u || !l || !b || !x) throw std::invalid_argument("CpuHinesExecutor::run: a null array");
  const HinesCall<T> call{reinterpret_cast<CpuHinesSolve<T>>(solve_), d, u, l, b, x, static_cast<T*>(work())};
  cpu_parallel_for(
      shape_.items, threads,
      [](std::int64_t item, const void* ctx) {
        const auto& k = *static_cast<const HinesCall<T>*>(ctx);
        k.solve(item, k.d, k.u, k.l, k.b, k.x, k.work);
      },
      &call);
}

void CpuHinesExecutor::run(const double* d, const double* u, const double* l, const double* b, double* x,
                           int threads) {
  run_as("f64", d, u, l, b, x, threads);
}
void CpuHinesExecutor::run(const float* d, const float* u, const float* l, const float* b, float* x,
                           int threads) {
  run_as("f32", d, u, l, b, x, threads);
}

}  // namespace sparsecc::rt
