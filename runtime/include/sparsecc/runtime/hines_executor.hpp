// The Hines executor: a bundle whose op is "hines", loaded onto a device. One call of run() is one
// time step: it enqueues the bundle's launch list (grid-level stages, the per-cell block kernel,
// the grid levels' back-substitution) on one stream, so the step can be captured in a CUDA graph.
//
// Arrays, all on the device, in the bundle's dtype (f64: double, f32: float), in Hines order:
//   d, u, l  rows values each: diagonal A[i][i], upper A[i][parent[i]], lower A[parent[i]][i]
//            (0 at a cell's root); u and l may change between steps like d;
//   b, x     rows x R, row-major (the R right-hand sides of row i contiguous); x may be b (in place).
// Hines order is the post-order numbering of the generator (parent[i] > i, cells consecutive);
// permutation()[i] is the compartment (the user's numbering, e.g. SWC order) of Hines row i, and
// to_hines_order / from_hines_order convert host vectors.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "sparsecc/runtime/bundle.hpp"
#include "sparsecc/runtime/device.hpp"
#include "sparsecc/runtime/executor.hpp"

namespace sparsecc::rt {

class HinesExecutor {
 public:
  // Parses the bundle (BundleError, also when its op is not "hines"), loads its code into `ctx` (the
  // cubin when the arch matches, else the PTX; DriverError), uploads the tables and allocates the
  // workspace. The context must outlive the executor.
  static HinesExecutor load_file(const std::string& path, const Context& ctx,
                                 const LoadOptions& options = {});
  static HinesExecutor load_bytes(std::span<const unsigned char> data, const std::string& name,
                                  const Context& ctx, const LoadOptions& options = {});
  static HinesExecutor load(Bundle bundle, const std::string& name, const Context& ctx,
                            const LoadOptions& options = {});

  const BundleMetadata& metadata() const { return metadata_; }
  const std::string& loaded_from() const { return loaded_from_; }
  const std::string& load_reason() const { return load_reason_; }
  std::int64_t rows() const { return metadata_.hines.rows; }
  std::int64_t rhs() const { return metadata_.hines.rhs; }
  std::size_t real_bytes() const { return metadata_.dtype == "f32" ? 4 : 8; }
  // Hines row -> compartment; empty when the bundle carries none (then Hines order is the user's).
  const std::vector<std::int32_t>& permutation() const { return permutation_; }

  // Enqueues one step. Throws std::invalid_argument for a null pointer; DriverError when a launch
  // fails. Steps on different streams must not overlap: the workspace is the executor's.
  void run(CUdeviceptr d, CUdeviceptr u, CUdeviceptr l, CUdeviceptr b, CUdeviceptr x,
           CUstream stream = nullptr) const;

 private:
  HinesExecutor() = default;

  struct Launch {
    CUfunction fn{};
    unsigned grid = 1, block = 1, shared_bytes = 0;
    std::vector<std::string> buffers;  // per argument: d u l b x workspace tables i32
    std::vector<std::int64_t> values;
  };
  const Context* ctx_ = nullptr;
  BundleMetadata metadata_;
  std::string loaded_from_, load_reason_;
  std::unique_ptr<Module> module_;
  std::vector<Launch> launches_;
  std::vector<std::int32_t> permutation_;
  DeviceBuffer tables_, workspace_;
};

// user[c * R + j] (compartment order) -> out[i * R + j] (Hines order); sizes rows x R.
template <class T>
void to_hines_order(std::span<const std::int32_t> permutation, std::span<const T> user, std::span<T> out,
                    std::size_t r) {
  if (user.size() != permutation.size() * r || out.size() != user.size())
    throw std::invalid_argument("to_hines_order: sizes do not match the permutation");
  for (std::size_t i = 0; i < permutation.size(); ++i)
    for (std::size_t j = 0; j < r; ++j) out[i * r + j] = user[std::size_t(permutation[i]) * r + j];
}
template <class T>
void from_hines_order(std::span<const std::int32_t> permutation, std::span<const T> hines, std::span<T> out,
                      std::size_t r) {
  if (hines.size() != permutation.size() * r || out.size() != hines.size())
    throw std::invalid_argument("from_hines_order: sizes do not match the permutation");
  for (std::size_t i = 0; i < permutation.size(); ++i)
    for (std::size_t j = 0; j < r; ++j) out[std::size_t(permutation[i]) * r + j] = hines[i * r + j];
}

}  // namespace sparsecc::rt
