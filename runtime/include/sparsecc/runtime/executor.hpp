// The SpMM executor: a bundle loaded onto a device, ready to launch. The kernel ABI every generated
// SpMM kernel follows:
//
//   extern "C" __global__ void <kernel>(const float* B, float* C, const float* bias,
//                                       const float* values, int n);
//
// launched with grid (ceil(n / n_tile), block_rows, 1), block (block_x, 1, 1) and shared_bytes of
// dynamic shared memory. B is K×N and C is M×N, both row-major with leading dimension n; bias and
// values point to the executor's device copies of those sections (null when absent). fp16 / bf16
// executors (metadata dtype) take 16-bit B and C and a sixth argument, the device copy of the
// fragments section (`const unsigned* fragments`, null when absent); bias and values stay float32.
// Convolution executors (metadata.conv) take the images X for B and Y for C, and n = the batch's pixels
// (images x metadata.n), whose column tiles make grid x (run_conv).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "sparsecc/runtime/bundle.hpp"
#include "sparsecc/runtime/device.hpp"

namespace sparsecc::rt {

struct LoadOptions {
  bool force_ptx = false;  // JIT the PTX even when the cubin matches the device
};

struct RunOptions {
  // Programmatic dependent launch where the bundle's kernel takes part (metadata.programmatic_launch:
  // sm_90 on, the kernels the inspector marks; a plain launch otherwise): the kernel may start while
  // the kernel ahead of it on the stream is finishing (its blocks wait for that grid in their
  // prologue), which hides most of the launch latency between consecutive layers. Correct whatever
  // runs ahead on the stream, since the kernel waits for it.
  bool programmatic = false;
};

// The image of a bundle a device loads: the cubin when the device's arch equals metadata.arch (an
// "a"/"f" suffix aside), otherwise the PTX for the driver's JIT. Throws BundleError when neither fits.
struct ChosenImage {
  std::span<const unsigned char> image;  // into the bundle
  std::string from;                      // "cubin" or "ptx"
  std::string reason;
};
ChosenImage choose_image(const Bundle& bundle, const std::string& name, const Context& ctx,
                         const LoadOptions& options);

// Reads the code contract (bundle.hpp) from `module`, loaded from the bundle's image `from` ("cubin" or
// "ptx"), and checks it against the bundle before anything is launched. Throws BundleError naming
// `name` when the module defines none (code of a generator before the contract, or not sparsecc's:
// compile the executor again) or when it differs from the metadata.
void check_loaded_contract(const Bundle& bundle, const Module& module, const std::string& name,
                           const std::string& from);

class SpmmExecutor {
 public:
  // Parses the bundle (BundleError), then loads its code into `ctx` (DriverError): the cubin when
  // the device's arch equals metadata.arch, otherwise the PTX. The context must outlive the executor.
  static SpmmExecutor load_file(const std::string& path, const Context& ctx, const LoadOptions& options = {});
  static SpmmExecutor load_bytes(std::span<const unsigned char> data, const std::string& name,
                                 const Context& ctx, const LoadOptions& options = {});
  static SpmmExecutor load(Bundle bundle, const std::string& name, const Context& ctx,
                           const LoadOptions& options = {});

  const BundleMetadata& metadata() const { return metadata_; }
  // "cubin" or "ptx", and why that image was chosen.
  const std::string& loaded_from() const { return loaded_from_; }
  const std::string& load_reason() const { return load_reason_; }

  // Enqueues C = A·B (+bias, ReLU as planned) on `stream`. Throws std::invalid_argument for a null
  // pointer, n < 1, (fixed mode) n other than metadata.n, or B or C not aligned to the loads the
  // kernel makes (8 bytes for fp32 kernels with two columns a thread, 16 for compressed kernels at a
  // fixed N that is a multiple of 8, 8 for vector kernels at N = 4; cudaMalloc's pointers are);
  // DriverError when the launch fails.
  // Convolution bundles (metadata.conv) take `run_conv` instead, and `run` refuses them.
  void run(CUdeviceptr B, CUdeviceptr C, int n, CUstream stream = nullptr, RunOptions options = {}) const;

  // Convolution executors (metadata.conv; sparsecc/runtime/conv_geometry.hpp): enqueues Y = W * X
  // (+bias, ReLU as planned) for a batch of images. `x_shape` and `y_shape` are the tensors' shapes
  // in the bundle's layout order (N, C, H, W or N, H, W, C): the runtime checks them against the
  // geometry (same batch N >= 1, fewer than 2^30 output pixels in all) and throws std::invalid_argument
  // naming the first that differs, a null pointer, or a bundle that is no convolution; DriverError
  // when the launch fails. X and Y must not overlap.
  void run_conv(CUdeviceptr x, const std::array<std::int64_t, 4>& x_shape, CUdeviceptr y,
                const std::array<std::int64_t, 4>& y_shape, CUstream stream = nullptr,
                RunOptions options = {}) const;

 private:
  SpmmExecutor() = default;

  const Context* ctx_ = nullptr;
  BundleMetadata metadata_;
  unsigned operand_alignment_ = 1;  // bytes B and C must be aligned to
  std::string loaded_from_;
  std::string load_reason_;
  std::unique_ptr<Module> module_;
  CUfunction fn_{};
  DeviceBuffer bias_;
  DeviceBuffer values_;
  DeviceBuffer fragments_;
  DeviceBuffer zeros_;  // convolutions: where taps in the padding read (kConvParams)
};

}  // namespace sparsecc::rt
