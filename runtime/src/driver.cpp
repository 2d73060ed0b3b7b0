#include "sparsecc/runtime/driver.hpp"

#include <dlfcn.h>

#include <mutex>

namespace sparsecc::rt {

namespace {

std::string describe(const DriverApi* api, CUresult code) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api && api->cuGetErrorName) api->cuGetErrorName(code, &name);
  if (api && api->cuGetErrorString) api->cuGetErrorString(code, &text);
  std::string s = name ? name : ("CUresult " + std::to_string(static_cast<int>(code)));
  if (text) s += std::string(" (") + text + ")";
  return s;
}

struct Loaded {
  DriverApi api;
  std::string error;  // empty when loaded
};

const DriverApi* g_api = nullptr;  // set once loading finished, for error descriptions

Loaded load() {
  Loaded out;
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = ::dlerror();
    out.error = std::string("the CUDA driver (libcuda.so.1) could not be opened: ") + (e ? e : "unknown");
    return out;
  }
  // Each entry point is looked up under the exact symbol cuda.h maps its name to (cuMemAlloc ->
  // cuMemAlloc_v2, ...), which is the symbol a program linked against libcuda would bind, so the
  // pointer's prototype is the one the header declares. (cuGetProcAddress would hand out the
  // newest variant for the toolkit version, whose signature may differ, e.g. cuCtxSynchronize_v2.)
  DriverApi& api = out.api;
  std::string missing;
#define SPARSECC_SYMBOL_NAME(name) #name
#define SPARSECC_EXPANDED_NAME(name) SPARSECC_SYMBOL_NAME(name)
#define SPARSECC_DRIVER_FN(name)                                                                 \
  {                                                                                              \
    void* fn = ::dlsym(lib, SPARSECC_EXPANDED_NAME(name));                                       \
    if (!fn) missing += std::string(missing.empty() ? "" : ", ") + SPARSECC_EXPANDED_NAME(name); \
    api.name = reinterpret_cast<decltype(api.name)>(fn);                                         \
  }
#include "sparsecc/runtime/driver_functions.inc"
#undef SPARSECC_DRIVER_FN
  api.cuLaunchKernelEx = reinterpret_cast<decltype(api.cuLaunchKernelEx)>(
      ::dlsym(lib, SPARSECC_EXPANDED_NAME(cuLaunchKernelEx)));
#undef SPARSECC_EXPANDED_NAME
#undef SPARSECC_SYMBOL_NAME
  if (!missing.empty()) {
    out.error = "the CUDA driver lacks entry points needed by sparsecc: " + missing;
    return out;
  }
  if (CUresult rc = api.cuInit(0); rc != CUDA_SUCCESS) {
    out.error = "cuInit failed: " + describe(&api, rc);
    return out;
  }
  api.cuDriverGetVersion(&api.version);
  int count = 0;
  if (CUresult rc = api.cuDeviceGetCount(&count); rc != CUDA_SUCCESS) {
    out.error = "cuDeviceGetCount failed: " + describe(&api, rc);
    return out;
  }
  if (count == 0) out.error = "the CUDA driver reports no device";
  return out;
}

const Loaded& loaded() {
  static const Loaded l = [] {
    Loaded x = load();
    return x;
  }();
  static std::once_flag once;
  std::call_once(once, [] { g_api = &l.api; });
  return l;
}

}  // namespace

DriverError::DriverError(const std::string& call, CUresult code)
    : std::runtime_error(call + " failed: " + describe(g_api, code)), code_(code) {}

const DriverApi& driver() {
  const Loaded& l = loaded();
  if (!l.error.empty()) throw DriverUnavailable(l.error);
  return l.api;
}

bool driver_available(std::string* why) {
  const Loaded& l = loaded();
  if (why) *why = l.error;
  return l.error.empty();
}

void check(CUresult code, const char* call) {
  if (code != CUDA_SUCCESS) throw DriverError(call, code);
}

}  // namespace sparsecc::rt
