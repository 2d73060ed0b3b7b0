// Devices, contexts, modules and device memory over the driver API, with RAII ownership.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sparsecc/runtime/driver.hpp"

namespace sparsecc::rt {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int multiprocessors = 0;
  std::size_t total_memory = 0;
  std::size_t l2_bytes = 0;
  int max_shared_per_block_optin = 0;
  // The launch and residency limits (cuDeviceGetAttribute), for the generator's target description
  // of this device (tools: device_facts).
  int max_threads_per_block = 0;
  int max_threads_per_sm = 0;
  int max_blocks_per_sm = 0;
  int registers_per_sm = 0;
  int registers_per_block = 0;
  int shared_per_sm = 0;              // bytes
  int shared_per_block = 0;           // bytes, without opting in
  int reserved_shared_per_block = 0;  // bytes the system keeps of each resident block
  int max_grid[3] = {0, 0, 0};
  int clock_khz = 0;  // peak SM clock
  int driver_version = 0;

  std::string arch() const { return "sm_" + std::to_string(cc_major * 10 + cc_minor); }
};

std::vector<DeviceInfo> list_devices();  // throws DriverUnavailable
DeviceInfo device_info(int ordinal);

// The device's primary context, retained for the object's lifetime and made current on creation.
class Context {
 public:
  explicit Context(int ordinal = 0);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  void make_current() const;
  void synchronize() const;
  const DeviceInfo& device() const { return info_; }

 private:
  CUdevice dev_{};
  CUcontext ctx_{};
  DeviceInfo info_;
};

// A module loaded from a cubin or PTX image held in memory. PTX is compiled by the driver for the
// current device; the JIT log is kept in the error message on failure.
class Module {
 public:
  Module(std::span<const unsigned char> image, const std::string& what);
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  CUfunction function(const std::string& name) const;
  // The bytes of the global `name` (a __device__ variable), or nullopt when the module has none.
  std::optional<std::vector<unsigned char>> global_bytes(const std::string& name) const;

 private:
  CUmodule mod_{};
  std::string what_;
};

// Untyped device allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr get() const { return ptr_; }
  std::size_t size() const { return bytes_; }
  void upload(const void* src, std::size_t bytes);
  void download(void* dst, std::size_t bytes) const;
  // Fills with a 32-bit pattern (e.g. a NaN bit pattern to poison outputs before a run).
  void fill32(std::uint32_t pattern);

 private:
  CUdeviceptr ptr_ = 0;
  std::size_t bytes_ = 0;
};

// Shared memory (static and dynamic together) a block may use without raising its kernel's limit
// (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES).
inline constexpr std::int64_t kDefaultSharedLimit = 48 * 1024;

// Launches `fn` on `stream` (0 = the context's default stream) with a kernel argument array.
void launch(CUfunction fn, unsigned grid_x, unsigned block_x, void** args, CUstream stream = nullptr,
            unsigned shared_bytes = 0, unsigned grid_y = 1, unsigned grid_z = 1, unsigned block_y = 1,
            unsigned block_z = 1);

// The same with programmatic stream serialization (cuLaunchKernelEx,
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION): the kernel may start before the work ahead
// of it on the stream has finished, so it must wait for that itself (griddepcontrol.wait) before it
// reads what that work wrote. Throws DriverError when the driver lacks cuLaunchKernelEx.
void launch_programmatic(CUfunction fn, unsigned grid_x, unsigned grid_y, unsigned block_x, void** args,
                         CUstream stream, unsigned shared_bytes, unsigned grid_z = 1);

}  // namespace sparsecc::rt
