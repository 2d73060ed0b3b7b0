// SpInfer (EuroSys'25) and Flash-LLM (VLDB'24), the peers of issue 47, for sparsecc_llm_bench.
// Their kernels are built from their own sources, never copied into the project: configure with
// -DSPARSECC_PEERS_SPINFER=/path/to/spinfer (the artifact in ../shared/peers/spinfer: csrc/SpMM_API.cu
// for SpInfer's InitSparseMatrixA_bitmap and SpMM_SplitK_API_bitmap_v3, kernel_benchmark/Flashllm_utils.cuh
// for Flash-LLM's InitSparseMatrixA_API and SpMM_SplitK_API). Without it, available() is false and
// the bench says why.
//
// Their layouts: A is M x K row-major fp16 on the host (M and K multiples of 64; Flash-LLM's kernels
// take M in multiples of 256 at N <= 32 and 128 at N = 64), B is column-major K x N (each column of
// K values contiguous), C column-major M x N; N is 8, 16, 32, 64 or a multiple of 128; fp16 only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace sparsecc::bench::peers {

// True when the bench was built with the peers' kernels.
bool available();
// Why not (the CMake option to set), when !available().
std::string unavailable_reason();

enum class Kind { spinfer, flashllm };
const char* kind_name(Kind k);  // "spinfer", "flashllm"

// Why the peer cannot take an M x K weight (empty when it can).
std::string shape_problem(Kind k, std::int64_t m, std::int64_t k_cols);
// The least N >= n that both peers' launchers take (8, 16, 32, 64, then multiples of 128).
int padded_n(int n);

// One weight in a peer's compressed format, made on the host by the peer's own code, with any number
// of device copies (cold-L2 timing rotates among them).
class Format {
 public:
  virtual ~Format() = default;
  virtual Kind kind() const = 0;
  // The bytes of one device copy (every array the kernel is given).
  virtual std::size_t bytes() const = 0;
  // Its arrays and sizes, in words.
  virtual std::string describe() const = 0;
  // Uploads one more device copy; returns its index.
  virtual int add_device_copy() = 0;
  virtual int device_copies() const = 0;
  // Enqueues the peer's SpMM on `stream` with copy `copy`: C (fp16, column-major M x n) = A B (B fp16
  // column-major K x n), splitting K in `split_k` parts reduced through `workspace` (M x n x split_k
  // fp16 values; unused at split_k 1). Throws std::runtime_error when the launcher reports an error.
  virtual void run(int copy, const void* b, void* c, int n, void* workspace, int split_k,
                   cudaStream_t stream) const = 0;
};

// The peer's format of the M x K row-major fp16 matrix `a_dense` (bits). Throws std::runtime_error
// when !available() or shape_problem is not empty.
std::unique_ptr<Format> make_format(Kind k, const std::uint16_t* a_dense, int m, int k_cols);

}  // namespace sparsecc::bench::peers
