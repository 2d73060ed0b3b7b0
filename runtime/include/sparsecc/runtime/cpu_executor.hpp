// CPU executors: machine code the generator compiled ahead of time for a CPU target (sparsecc compile
// / compile-model / hines --target x86-64-avx512|x86-64-avx2|native), linked into the program as a
// static library (sparsecc embed, or sparsecc_add_kernels(... TARGET cpu)), and run over a number
// of threads the caller gives. The library sparsecc::runtime_cpu holds them: C++ and, where the
// compiler has it, OpenMP; no CUDA and no LLVM.
//
// The calling shapes are the GPU executors' (executor.hpp, hines_executor.hpp) with host pointers:
//   CpuSpmmExecutor::run(B, C)      C (M x N) = A · B (+bias) (ReLU), B K x N, row-major fp32, or
//                                   (dtype f16 / bf16) the dtype's 16-bit values, fp32 accumulation
//   CpuHinesExecutor::run(d, u, l, b, x)   one solve of the Hines system in the executor's row order
// Every element of C (of x) is written: no clearing needed. Calls on different threads may overlap
// for SpMM executors; a Hines executor's workspace is its own, so its calls must not.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace sparsecc::rt {

// The entry an SpMM executor's code exports: C's rows of one panel over columns [col, col + width),
// width the column tile when `full` is 1 and N mod the column tile otherwise.
using CpuSpmmTile = void (*)(std::int64_t panel, std::int64_t col, std::int32_t full, const float* b,
                             float* c, const float* bias);
// The same for an executor of f16 or bf16 B and C (the dtype's bits; the bias stays fp32).
using CpuSpmmHalfTile = void (*)(std::int64_t panel, std::int64_t col, std::int32_t full,
                                 const std::uint16_t* b, std::uint16_t* c, const float* bias);

struct CpuSpmmShape {
  std::int64_t m = 0, k = 0, n = 0;  // A is M x K, N fixed
  std::int64_t panels = 0;           // row panels of the plan
  std::int64_t column_tile = 0;      // columns of C a call of the tile computes at most
  bool relu = false;
  std::string dtype = "f32";  // B and C: "f32", or "f16" / "bf16" (16-bit values, fp32 accumulation)
};

class CpuSpmmExecutor {
 public:
  // `bias`: M fp32 values the code adds (it must outlive the executor), or null for none. Throws
  // std::invalid_argument for a shape that is not positive, or a dtype that is not the tile's (f32
  // for CpuSpmmTile, f16 or bf16 for CpuSpmmHalfTile).
  CpuSpmmExecutor(CpuSpmmTile tile, const CpuSpmmShape& shape, const float* bias = nullptr);
  CpuSpmmExecutor(CpuSpmmHalfTile tile, const CpuSpmmShape& shape, const float* bias = nullptr);

  // C = A · B (+bias) (ReLU). threads: 0 takes the hardware's. The work items are the column tiles
  // of every panel, handed out dynamically. Throws std::invalid_argument for a null pointer, or
  // arrays that are not of the executor's dtype (float for f32, std::uint16_t for f16 and bf16).
  void run(const float* b, float* c, int threads = 0) const;
  void run(const std::uint16_t* b, std::uint16_t* c, int threads = 0) const;

  const CpuSpmmShape& shape() const { return shape_; }
  const std::string& dtype() const { return shape_.dtype; }
  std::int64_t m() const { return shape_.m; }
  std::int64_t k() const { return shape_.k; }
  std::int64_t n() const { return shape_.n; }

 private:
  void check_shape() const;
  void run_items(const void* b, void* c, int threads) const;

  CpuSpmmTile tile_ = nullptr;
  CpuSpmmHalfTile half_tile_ = nullptr;
  CpuSpmmShape shape_;
  const float* bias_;
};

// The entry a Hines executor's code exports: solves group `item` of the plan (T double for f64,
// float for f32); d, u, l, b are read, x written (x may be b), work is the executor's workspace.
template <class T>
using CpuHinesSolve = void (*)(std::int64_t item, const T* d, const T* u, const T* l, const T* b, T* x,
                               T* work);

struct CpuHinesShape {
  std::string dtype = "f64";         // "f64" or "f32"
  std::int64_t rows = 0, cells = 0;  // compartments and cells of the forest
  std::int64_t rhs = 1;              // right-hand sides a row (contiguous)
  std::int64_t items = 0;            // groups of cells the code solves apart
  std::int64_t workspace = 0;        // values of T
};

// d, u, l: rows values (diagonal, A[i][parent], A[parent][i]); b, x: rows x rhs. All in the
// executor's row order: permutation()[i] is the Hines row (of the generator's system, the GPU
// executor's order) of the executor's row i; to_rows / from_rows below convert.
class CpuHinesExecutor {
 public:
  // `permutation`: rows entries (it must outlive the executor). Throws std::invalid_argument for a
  // shape that is not consistent.
  CpuHinesExecutor(void* solve, const CpuHinesShape& shape, std::span<const std::int32_t> permutation);

  // One solve. threads: 0 takes the hardware's. Throws std::invalid_argument for a null pointer or
  // a T that is not the executor's dtype.
  void run(const double* d, const double* u, const double* l, const double* b, double* x, int threads = 0);
  void run(const float* d, const float* u, const float* l, const float* b, float* x, int threads = 0);

  const CpuHinesShape& shape() const { return shape_; }
  std::int64_t rows() const { return shape_.rows; }
  std::int64_t rhs() const { return shape_.rhs; }
  std::span<const std::int32_t> permutation() const { return permutation_; }

  // by_hines[h * R + j] (the generator's Hines order) -> out[i * R + j] (this executor's rows), and back.
  template <class T>
  void to_rows(std::span<const T> by_hines, std::span<T> out) const {
    check_sizes(by_hines.size(), out.size());
    const std::size_t r = static_cast<std::size_t>(shape_.rhs);
    for (std::size_t i = 0; i < permutation_.size(); ++i)
      for (std::size_t j = 0; j < r; ++j) out[i * r + j] = by_hines[std::size_t(permutation_[i]) * r + j];
  }
  template <class T>
  void from_rows(std::span<const T> rows, std::span<T> by_hines) const {
    check_sizes(rows.size(), by_hines.size());
    const std::size_t r = static_cast<std::size_t>(shape_.rhs);
    for (std::size_t i = 0; i < permutation_.size(); ++i)
      for (std::size_t j = 0; j < r; ++j) by_hines[std::size_t(permutation_[i]) * r + j] = rows[i * r + j];
  }

 private:
  void check_sizes(std::size_t a, std::size_t b) const;
  template <class T>
  void run_as(const char* dtype, const T* d, const T* u, const T* l, const T* b, T* x, int threads);

  void* solve_;
  CpuHinesShape shape_;
  std::span<const std::int32_t> permutation_;
  std::vector<double> work_;  // the workspace (values of T), from work() on
  void* work();               // 64-byte aligned into work_
};

// Whether this CPU runs code of the vector ISA `isa` ("x86-64-avx512": AVX-512F; "x86-64-avx2": AVX2
// and FMA). require_cpu throws std::runtime_error naming `what` and the ISA when it does not, instead
// of the illegal instruction the code would stop at; the sources embed writes call it first.
bool cpu_supports(const std::string& isa);
void require_cpu(const std::string& isa, const std::string& what);

// Runs fn(item) for item in [0, items) on `threads` threads (0: the hardware's), items handed out
// dynamically; serial where the runtime was built without OpenMP.
void cpu_parallel_for(std::int64_t items, int threads, void (*fn)(std::int64_t item, const void* ctx),
                      const void* ctx);

}  // namespace sparsecc::rt
