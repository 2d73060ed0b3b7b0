// SpInfer and Flash-LLM built from the peers' own sources (SPARSECC_PEERS_SPINFER): SpInfer's host
// format code and launcher are compiled from its csrc/SpMM_API.cu next to this file; Flash-LLM's come
// from the header its benchmark includes, kernel_benchmark/Flashllm_utils.cuh, included here once.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "Flashllm_utils.cuh"  // Flash-LLM: namespace flash_llm_utils (defines kernels and macros)
#include "SpMM_API.cuh"        // SpInfer: build/SpMM_API.cuh (declarations only)
#include "bench/peer_kernels.hpp"

namespace sparsecc::bench::peers {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                             ")");
}

// Device memory freed with its owner.
struct Dev {
  void* p = nullptr;
  std::size_t bytes = 0;
  Dev() = default;
  Dev(const void* host, std::size_t n) : bytes(n) {
    check(cudaMalloc(&p, n > 0 ? n : 1), "cudaMalloc (peer format)");
    if (n > 0) check(cudaMemcpy(p, host, n, cudaMemcpyHostToDevice), "cudaMemcpy (peer format)");
  }
  Dev(Dev&& o) noexcept : p(o.p), bytes(o.bytes) { o.p = nullptr; }
  Dev& operator=(Dev&&) = delete;
  Dev(const Dev&) = delete;
  ~Dev() {
    if (p) cudaFree(p);
  }
};

// Host arrays from malloc, freed with their owner.
template <class T>
struct HostArray {
  T* p = nullptr;
  std::size_t count = 0;
  ~HostArray() { std::free(p); }
  std::size_t bytes() const { return count * sizeof(T); }
};

class SpinferFormat : public Format {
 public:
  SpinferFormat(const std::uint16_t* a, int m, int k) : m_(m), k_(k) {
    int max_nnz = 0;
    // Tiles as SpInfer's benchmark makes them: 8x8 bitmaps in 16x64 median and 64x64 global tiles.
    int* local_offsets = nullptr;
    num_gtiles_ = InitSparseMatrixA_bitmap(reinterpret_cast<half*>(const_cast<std::uint16_t*>(a)), m, k, 8,
                                           16, 64, 8, 64, 64, &val_.p, &local_offsets, &median_.p, &global_.p,
                                           &bitmap_.p, max_nnz);
    std::free(local_offsets);  // not an argument of the kernel
    if (num_gtiles_ < 0) throw std::runtime_error("SpInfer InitSparseMatrixA_bitmap failed (host malloc)");
    const int num_ltiles = num_gtiles_ * 64, num_mtiles = num_gtiles_ * 4;
    val_.count = static_cast<std::size_t>(global_.p[num_gtiles_]);
    bitmap_.count = static_cast<std::size_t>(num_ltiles);
    global_.count = static_cast<std::size_t>(num_gtiles_) + 1;
    median_.count = static_cast<std::size_t>(num_mtiles);
    if (max_nnz % 64 != 0) max_nnz = (max_nnz / 64 + 1) * 64;  // as its benchmark does
    max_nnz_ = max_nnz;
  }
  Kind kind() const override { return Kind::spinfer; }
  std::size_t bytes() const override {
    return val_.bytes() + bitmap_.bytes() + global_.bytes() + median_.bytes() + sizeof(int);
  }
  std::string describe() const override {
    return "bitmap v3: " + std::to_string(val_.count) + " fp16 values (padded per 64x64 tile), " +
           std::to_string(bitmap_.count) + " 8x8 bitmaps, " + std::to_string(global_.count + median_.count) +
           " tile offsets";
  }
  int add_device_copy() override {
    Copy c{Dev(val_.p, val_.bytes()), Dev(bitmap_.p, bitmap_.bytes()), Dev(global_.p, global_.bytes()),
           Dev(median_.p, median_.bytes()), Dev(&max_nnz_, sizeof(int))};
    copies_.push_back(std::move(c));
    return static_cast<int>(copies_.size()) - 1;
  }
  int device_copies() const override { return static_cast<int>(copies_.size()); }
  void run(int copy, const void* b, void* c, int n, void* workspace, int split_k,
           cudaStream_t stream) const override {
    const Copy& d = copies_.at(static_cast<std::size_t>(copy));
    // The dense A argument is not read by the kernel.
    check(SpMM_SplitK_API_bitmap_v3(stream, nullptr, static_cast<const half*>(d.val.p),
                                    static_cast<const int*>(d.global.p), static_cast<const int*>(d.median.p),
                                    static_cast<const uint64_t*>(d.bitmap.p),
                                    static_cast<const int*>(d.max_nnz.p), static_cast<const half*>(b),
                                    static_cast<half*>(c), m_, n, k_, static_cast<half*>(workspace), split_k),
          "SpMM_SplitK_API_bitmap_v3");
  }

 private:
  struct Copy {
    Dev val, bitmap, global, median, max_nnz;
  };
  int m_, k_;
  int num_gtiles_ = 0;
  int max_nnz_ = 0;
  HostArray<half> val_;
  HostArray<uint64_t> bitmap_;
  HostArray<int> global_, median_;
  std::vector<Copy> copies_;
};

class FlashLlmFormat : public Format {
 public:
  FlashLlmFormat(const std::uint16_t* a, int m, int k) : m_(m), k_(k) {
    // Tiled-CSL with Flash-LLM's bank-conflict-avoiding reordering (InitSparseMatrixA_API).
    const int offsets = flash_llm_utils::InitSparseMatrixA_API(
        reinterpret_cast<half*>(const_cast<std::uint16_t*>(a)), m, 0, k, &weights_.p, &offsets_.p);
    offsets_.count = static_cast<std::size_t>(offsets);
    weights_.count = static_cast<std::size_t>(offsets_.p[offsets - 1]) * 4;  // 4 values a vector
  }
  Kind kind() const override { return Kind::flashllm; }
  std::size_t bytes() const override { return weights_.bytes() + offsets_.bytes(); }
  std::string describe() const override {
    return "Tiled-CSL: " + std::to_string(weights_.count) +
           " (fp16 value, 16-bit position) pairs (padded to 4 a "
           "128x64 tile), " +
           std::to_string(offsets_.count) + " tile offsets";
  }
  int add_device_copy() override {
    Copy c{Dev(weights_.p, weights_.bytes()), Dev(offsets_.p, offsets_.bytes())};
    copies_.push_back(std::move(c));
    return static_cast<int>(copies_.size()) - 1;
  }
  int device_copies() const override { return static_cast<int>(copies_.size()); }
  void run(int copy, const void* b, void* c, int n, void* workspace, int split_k,
           cudaStream_t stream) const override {
    const Copy& d = copies_.at(static_cast<std::size_t>(copy));
    check(flash_llm_utils::SpMM_SplitK_API(stream, nullptr, static_cast<const uint4*>(d.weights.p),
                                           static_cast<const int*>(d.offsets.p), static_cast<const half*>(b),
                                           static_cast<half*>(c), m_, n, k_, static_cast<half*>(workspace),
                                           split_k),
          "flash_llm SpMM_SplitK_API");
  }

 private:
  struct Copy {
    Dev weights, offsets;
  };
  int m_, k_;
  HostArray<uint32_t> weights_;
  HostArray<int> offsets_;
  std::vector<Copy> copies_;
};

}  // namespace

bool available() { return true; }

std::string unavailable_reason() { return {}; }

const char* kind_name(Kind k) { return k == Kind::spinfer ? "spinfer" : "flashllm"; }

std::string shape_problem(Kind k, std::int64_t m, std::int64_t k_cols) {
  const std::int64_t m_unit = k == Kind::spinfer ? 64 : 256;
  if (m % m_unit != 0 || k_cols % 64 != 0)
    return std::string(kind_name(k)) + " takes M a multiple of " + std::to_string(m_unit) +
           " and K a multiple of 64 (M " + std::to_string(m) + ", K " + std::to_string(k_cols) + ")";
  if (m * k_cols >= (std::int64_t{1} << 31))
    return std::string(kind_name(k)) + " indexes A with 32-bit ints: M x K must stay below 2^31";
  return {};
}

int padded_n(int n) {
  for (int p : {8, 16, 32, 64})
    if (n <= p) return p;
  return (n + 127) / 128 * 128;
}

std::unique_ptr<Format> make_format(Kind k, const std::uint16_t* a_dense, int m, int k_cols) {
  if (const std::string why = shape_problem(k, m, k_cols); !why.empty()) throw std::runtime_error(why);
  if (k == Kind::spinfer) return std::make_unique<SpinferFormat>(a_dense, m, k_cols);
  return std::make_unique<FlashLlmFormat>(a_dense, m, k_cols);
}

}  // namespace sparsecc::bench::peers
