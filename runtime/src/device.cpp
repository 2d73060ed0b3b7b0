#include "sparsecc/runtime/device.hpp"

#include <string>
#include <utility>

namespace sparsecc::rt {

namespace {
int attribute(CUdevice dev, CUdevice_attribute a) {
  int v = 0;
  SPARSECC_CU(driver().cuDeviceGetAttribute(&v, a, dev));
  return v;
}
}  // namespace

DeviceInfo device_info(int ordinal) {
  const DriverApi& d = driver();
  CUdevice dev{};
  SPARSECC_CU(d.cuDeviceGet(&dev, ordinal));
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  SPARSECC_CU(d.cuDeviceGetName(name, sizeof name - 1, dev));
  info.name = name;
  info.cc_major = attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info.cc_minor = attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info.multiprocessors = attribute(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.l2_bytes = static_cast<std::size_t>(attribute(dev, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE));
  info.max_shared_per_block_optin = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  info.max_threads_per_block = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  info.max_threads_per_sm = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  info.max_blocks_per_sm = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
  info.registers_per_sm = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  info.registers_per_block = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  info.shared_per_sm = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  info.shared_per_block = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  info.reserved_shared_per_block = attribute(dev, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK);
  info.max_grid[0] = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
  info.max_grid[1] = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
  info.max_grid[2] = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
  info.clock_khz = attribute(dev, CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  SPARSECC_CU(d.cuDeviceTotalMem(&info.total_memory, dev));
  info.driver_version = d.version;
  return info;
}

std::vector<DeviceInfo> list_devices() {
  const DriverApi& d = driver();
  int count = 0;
  SPARSECC_CU(d.cuDeviceGetCount(&count));
  std::vector<DeviceInfo> out;
  for (int i = 0; i < count; ++i) out.push_back(device_info(i));
  return out;
}

Context::Context(int ordinal) {
  const DriverApi& d = driver();
  info_ = device_info(ordinal);
  SPARSECC_CU(d.cuDeviceGet(&dev_, ordinal));
  SPARSECC_CU(d.cuDevicePrimaryCtxRetain(&ctx_, dev_));
  make_current();
}

Context::~Context() {
  if (ctx_) driver().cuDevicePrimaryCtxRelease(dev_);
}

void Context::make_current() const { SPARSECC_CU(driver().cuCtxSetCurrent(ctx_)); }
void Context::synchronize() const { SPARSECC_CU(driver().cuCtxSynchronize()); }

Module::Module(std::span<const unsigned char> image, const std::string& what) : what_(what) {
  // PTX images are text and must be NUL-terminated for the driver.
  std::vector<unsigned char> owned(image.begin(), image.end());
  if (owned.empty() || owned.back() != 0) owned.push_back(0);
  char log[8192] = {};
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* vals[] = {log, reinterpret_cast<void*>(static_cast<std::uintptr_t>(sizeof log - 1))};
  CUresult rc = driver().cuModuleLoadDataEx(&mod_, owned.data(), 2, opts, vals);
  if (rc != CUDA_SUCCESS) {
    std::string msg = "cuModuleLoadDataEx(" + what_ + ")";
    if (log[0]) msg += std::string(" [") + log + "]";
    throw DriverError(msg, rc);
  }
}

Module::~Module() {
  if (mod_) driver().cuModuleUnload(mod_);
}

CUfunction Module::function(const std::string& name) const {
  CUfunction fn{};
  CUresult rc = driver().cuModuleGetFunction(&fn, mod_, name.c_str());
  if (rc != CUDA_SUCCESS) throw DriverError("cuModuleGetFunction(" + what_ + ", " + name + ")", rc);
  return fn;
}

std::optional<std::vector<unsigned char>> Module::global_bytes(const std::string& name) const {
  CUdeviceptr ptr{};
  std::size_t bytes = 0;
  const CUresult rc = driver().cuModuleGetGlobal(&ptr, &bytes, mod_, name.c_str());
  if (rc == CUDA_ERROR_NOT_FOUND) return std::nullopt;
  if (rc != CUDA_SUCCESS) throw DriverError("cuModuleGetGlobal(" + what_ + ", " + name + ")", rc);
  std::vector<unsigned char> out(bytes);
  if (bytes) SPARSECC_CU(driver().cuMemcpyDtoH(out.data(), ptr, bytes));
  return out;
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes) SPARSECC_CU(driver().cuMemAlloc(&ptr_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) driver().cuMemFree(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, 0)), bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) driver().cuMemFree(ptr_);
    ptr_ = std::exchange(o.ptr_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::upload(const void* src, std::size_t bytes) {
  if (bytes > bytes_) throw std::out_of_range("DeviceBuffer::upload larger than the allocation");
  if (bytes) SPARSECC_CU(driver().cuMemcpyHtoD(ptr_, src, bytes));
}

void DeviceBuffer::download(void* dst, std::size_t bytes) const {
  if (bytes > bytes_) throw std::out_of_range("DeviceBuffer::download larger than the allocation");
  if (bytes) SPARSECC_CU(driver().cuMemcpyDtoH(dst, ptr_, bytes));
}

void DeviceBuffer::fill32(std::uint32_t pattern) {
  if (bytes_ % 4) throw std::invalid_argument("DeviceBuffer::fill32 on a size not a multiple of 4");
  if (bytes_) SPARSECC_CU(driver().cuMemsetD32(ptr_, pattern, bytes_ / 4));
}

void launch(CUfunction fn, unsigned grid_x, unsigned block_x, void** args, CUstream stream,
            unsigned shared_bytes, unsigned grid_y, unsigned grid_z, unsigned block_y, unsigned block_z) {
  SPARSECC_CU(driver().cuLaunchKernel(fn, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes,
                                      stream, args, nullptr));
}

void launch_programmatic(CUfunction fn, unsigned grid_x, unsigned grid_y, unsigned block_x, void** args,
                         CUstream stream, unsigned shared_bytes, unsigned grid_z) {
  const DriverApi& api = driver();
  if (!api.cuLaunchKernelEx)
    throw DriverError(
        "cuLaunchKernelEx (a programmatic launch needs a CUDA 12.0 or later driver; this one is " +
            std::to_string(api.version) + ")",
        CUDA_ERROR_NOT_SUPPORTED);
  CUlaunchAttribute attribute{};
  attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attribute.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig config{};
  config.gridDimX = grid_x;
  config.gridDimY = grid_y;
  config.gridDimZ = grid_z;
  config.blockDimX = block_x;
  config.blockDimY = 1;
  config.blockDimZ = 1;
  config.sharedMemBytes = shared_bytes;
  config.hStream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  SPARSECC_CU(api.cuLaunchKernelEx(&config, fn, args, nullptr));
}

}  // namespace sparsecc::rt
