// The CUDA driver API, opened at run time. The runtime links no CUDA library: it opens
// libcuda.so.1 on first use and resolves each entry point by the symbol cuda.h binds it to, so a binary
// starts on a machine without a GPU and can say why it cannot run instead of failing to load.
#pragma once

#include <cuda.h>

#include <stdexcept>
#include <string>

namespace sparsecc::rt {

// Raised when a driver call fails; what() names the call and the driver's error name and text.
class DriverError : public std::runtime_error {
 public:
  DriverError(const std::string& call, CUresult code);
  CUresult code() const noexcept { return code_; }

 private:
  CUresult code_;
};

// Raised when no usable driver or device is present (library missing, cuInit failed, no device).
class DriverUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Entry points the runtime uses, typed from the declarations in cuda.h.
struct DriverApi {
#define SPARSECC_DRIVER_FN(name) decltype(&::name) name = nullptr;
#include "sparsecc/runtime/driver_functions.inc"
#undef SPARSECC_DRIVER_FN
  // Optional (drivers of CUDA 12.0 on): programmatic launches need it, plain ones do not.
  decltype(&::cuLaunchKernelEx) cuLaunchKernelEx = nullptr;
  int version = 0;  // cuDriverGetVersion, e.g. 13000
};

// The driver, loaded and initialised once (thread-safe). Throws DriverUnavailable with the reason.
const DriverApi& driver();

// True when driver() would succeed; `why` receives the reason otherwise.
bool driver_available(std::string* why = nullptr);

// Throws DriverError when `code` is not CUDA_SUCCESS.
void check(CUresult code, const char* call);

}  // namespace sparsecc::rt

#define SPARSECC_CU(call_expr) ::sparsecc::rt::check((call_expr), #call_expr)
