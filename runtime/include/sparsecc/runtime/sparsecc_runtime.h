/* The runtime's C API: load an executor bundle onto a device and launch it. Every function returns
 * a status; on failure sparsecc_last_error() describes the problem (a thread-local message, valid
 * until the next call on the same thread). No C++ exception crosses this interface. The kernel ABI
 * and the bundle format are described in sparsecc/runtime/executor.hpp and bundle.hpp. */
#ifndef SPARSECC_RUNTIME_H
#define SPARSECC_RUNTIME_H

#include <cuda.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sparsecc_status {
  SPARSECC_OK = 0,
  SPARSECC_BAD_BUNDLE = 1,    /* unreadable, malformed, inconsistent or unsupported bundle */
  SPARSECC_NO_DEVICE = 2,     /* no CUDA driver, no device, or no device with that ordinal */
  SPARSECC_DRIVER_ERROR = 3,  /* a driver call failed (module load, JIT, allocation, launch) */
  SPARSECC_BAD_ARGUMENT = 4,  /* null pointer, or n not accepted by the executor */
  SPARSECC_INTERNAL_ERROR = 5 /* anything else (e.g. out of host memory) */
} sparsecc_status;

typedef struct sparsecc_executor sparsecc_executor;

/* Loads a bundle onto device `device` (retaining its primary context). The bundle is validated
 * before the device is touched, so a bad bundle reports SPARSECC_BAD_BUNDLE even without a GPU. */
sparsecc_status sparsecc_executor_load_file(const char* path, int device, sparsecc_executor** out);
sparsecc_status sparsecc_executor_load_bytes(const void* data, size_t size, int device,
                                             sparsecc_executor** out);

/* Enqueues C = A·B (+bias, ReLU) on `stream` (NULL: the default stream). B is K×n and C is M×n,
 * row-major, float32, in device memory. */
sparsecc_status sparsecc_executor_run(const sparsecc_executor* executor, CUdeviceptr B, CUdeviceptr C, int n,
                                      CUstream stream);

/* Flags of sparsecc_executor_run_ex. SPARSECC_RUN_PROGRAMMATIC: programmatic dependent launch (the
 * kernel may start while the kernel ahead of it on the stream finishes, and waits for it itself)
 * where the bundle's metadata has "programmatic_launch": true (sm_90 on), a plain launch otherwise. */
#define SPARSECC_RUN_PROGRAMMATIC 1u

/* sparsecc_executor_run with flags (0: the same as sparsecc_executor_run). */
sparsecc_status sparsecc_executor_run_ex(const sparsecc_executor* executor, CUdeviceptr B, CUdeviceptr C,
                                         int n, CUstream stream, unsigned flags);

/* The bundle's metadata as JSON text, owned by the executor. */
const char* sparsecc_executor_metadata_json(const sparsecc_executor* executor);

/* Frees the executor and its device buffers; NULL is accepted. */
void sparsecc_executor_destroy(sparsecc_executor* executor);

/* The message of the last failed call on this thread ("" after a successful one). */
const char* sparsecc_last_error(void);

#ifdef __cplusplus
}
#endif

#endif
