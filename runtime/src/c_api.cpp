#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "sparsecc/runtime/executor.hpp"
#include "sparsecc/runtime/sparsecc_runtime.h"

namespace rt = sparsecc::rt;

struct sparsecc_executor {
  std::unique_ptr<rt::Context> ctx;  // declared first: destroyed after the executor
  std::optional<rt::SpmmExecutor> executor;
  std::string metadata_json;
};

namespace {

thread_local std::string g_last_error;

sparsecc_status fail(sparsecc_status status, const char* what) noexcept {
  try {
    g_last_error = what;
  } catch (...) {
    g_last_error.clear();
  }
  return status;
}

// Runs `fn`, mapping every exception to a status and the thread's last error.
template <class Fn>
sparsecc_status guarded(Fn&& fn) noexcept {
  try {
    fn();
    g_last_error.clear();
    return SPARSECC_OK;
  } catch (const rt::BundleError& e) {
    return fail(SPARSECC_BAD_BUNDLE, e.what());
  } catch (const rt::DriverUnavailable& e) {
    return fail(SPARSECC_NO_DEVICE, e.what());
  } catch (const rt::DriverError& e) {
    return fail(SPARSECC_DRIVER_ERROR, e.what());
  } catch (const std::invalid_argument& e) {
    return fail(SPARSECC_BAD_ARGUMENT, e.what());
  } catch (const std::exception& e) {
    return fail(SPARSECC_INTERNAL_ERROR, e.what());
  } catch (...) {
    return fail(SPARSECC_INTERNAL_ERROR, "unknown exception");
  }
}

template <class Parse>
sparsecc_status load(Parse&& parse, const std::string& name, int device, sparsecc_executor** out) noexcept {
  return guarded([&] {
    if (!out) throw std::invalid_argument("sparsecc_executor_load: out must not be null");
    *out = nullptr;
    if (device < 0)
      throw std::invalid_argument("sparsecc_executor_load: device " + std::to_string(device) + " < 0");
    rt::Bundle bundle = parse();
    int count = 0;
    SPARSECC_CU(rt::driver().cuDeviceGetCount(&count));
    if (device >= count)
      throw rt::DriverUnavailable("no CUDA device " + std::to_string(device) + " (" + std::to_string(count) +
                                  " present)");
    auto handle = std::make_unique<sparsecc_executor>();
    handle->ctx = std::make_unique<rt::Context>(device);
    handle->executor.emplace(rt::SpmmExecutor::load(std::move(bundle), name, *handle->ctx));
    handle->metadata_json = handle->executor->metadata().to_json().dump();
    *out = handle.release();
  });
}

}  // namespace

extern "C" {

sparsecc_status sparsecc_executor_load_file(const char* path, int device, sparsecc_executor** out) {
  if (!path) return fail(SPARSECC_BAD_ARGUMENT, "sparsecc_executor_load_file: path must not be null");
  return load([&] { return rt::read_bundle_file(path); }, path, device, out);
}

sparsecc_status sparsecc_executor_load_bytes(const void* data, size_t size, int device,
                                             sparsecc_executor** out) {
  if (!data && size)
    return fail(SPARSECC_BAD_ARGUMENT, "sparsecc_executor_load_bytes: data must not be null");
  const auto* bytes = static_cast<const unsigned char*>(data);
  return load(
      [&] {
        return rt::parse_bundle({bytes, size}, "bundle in memory");
      },
      "bundle in memory", device, out);
}

sparsecc_status sparsecc_executor_run(const sparsecc_executor* executor, CUdeviceptr B, CUdeviceptr C, int n,
                                      CUstream stream) {
  if (!executor) return fail(SPARSECC_BAD_ARGUMENT, "sparsecc_executor_run: executor must not be null");
  return guarded([&] { executor->executor->run(B, C, n, stream); });
}

sparsecc_status sparsecc_executor_run_ex(const sparsecc_executor* executor, CUdeviceptr B, CUdeviceptr C,
                                         int n, CUstream stream, unsigned flags) {
  if (!executor) return fail(SPARSECC_BAD_ARGUMENT, "sparsecc_executor_run_ex: executor must not be null");
  if (flags & ~SPARSECC_RUN_PROGRAMMATIC)
    return fail(SPARSECC_BAD_ARGUMENT,
                "sparsecc_executor_run_ex: unknown flags (only SPARSECC_RUN_PROGRAMMATIC)");
  sparsecc::rt::RunOptions options;
  options.programmatic = (flags & SPARSECC_RUN_PROGRAMMATIC) != 0;
  return guarded([&] { executor->executor->run(B, C, n, stream, options); });
}

const char* sparsecc_executor_metadata_json(const sparsecc_executor* executor) {
  return executor ? executor->metadata_json.c_str() : "";
}

void sparsecc_executor_destroy(sparsecc_executor* executor) { delete executor; }

const char* sparsecc_last_error(void) { return g_last_error.c_str(); }

}  // extern "C"
