// Vendor baselines for C = A·B (A M×K sparse and fixed, B K×N dense, row-major, fp32): cuBLAS
// dense GEMM on the dense form of A (fp32 with TF32 off, TF32, fp16 tensor cores; cublasGemmEx's
// default and cuBLASLt's heuristic algorithms, with the weight as stored and transposed) and cuSPARSE
// SpMM (CSR and COO, every algorithm). Each output is checked against the fp64 CPU reference before its
// time counts; a baseline that fails the check is reported as failed, never timed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/timing.hpp"
#include "sparsecc/matrix/csr.hpp"

namespace sparsecc::bench {

// The device the baselines run on, and the library versions.
struct DeviceInfo {
  std::string name;
  int ordinal = 0;
  int cc_major = 0, cc_minor = 0;
  int sms = 0;
  int sm_clock_khz = 0;   // peak; 0 when the device does not say
  int mem_clock_khz = 0;  // peak; 0 when the device does not say
  std::int64_t l2_bytes = 0;
  std::int64_t memory_bytes = 0;
  int driver_version = 0;        // e.g. 13000 for 13.0
  int runtime_version = 0;       // e.g. 13000 for 13.0
  std::string cublas_version;    // "major.minor.patch"
  std::string cusparse_version;  // "major.minor.patch"

  std::string describe() const;  // one line
};

// Thrown when no CUDA driver or device is usable (the message says why).
class NoDeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Queries the current device; NoDeviceError when there is none.
DeviceInfo query_device();

// With timing.cold_l2 every launch rotates among copies of all its operands (A included), enough of
// them that at least twice the L2 capacity passes between two uses of one copy.
struct BaselineOptions {
  TimingOptions timing;
  // cuBLAS: besides cublasGemmEx's default algorithm, the first this many cuBLASLt heuristic results
  // for each of the weight's two layouts (A as stored and A transposed) are checked and timed; each
  // precision's result is the fastest (0: the cublasGemmEx default alone).
  int cublas_algorithms = 4;
  std::uint64_t seed = 7;  // B's values (SplitMix64, uniform in [-1, 1), float32-exact)
};

// Relative L2 error tolerances against the fp64 reference, per precision.
inline constexpr double kTolFp32 = 1e-5;
inline constexpr double kTolTf32 = 5e-3;
inline constexpr double kTolFp16 = 1e-2;

struct BaselineResult {
  std::string name;  // cublas_fp32 (the best of cublas_fp32_*), ..., cusparse_csr_alg1, ..., cusparse_best
  double us = 0;     // median µs per launch; 0 unless ok
  double rel_error = 0;  // ||C - C_ref||_2 / ||C_ref||_2
  bool ok = false;       // checked and timed
  bool skipped = false;  // the library does not support this case (not a failure)
  std::string note;      // why it failed or was skipped; for cusparse_best the algorithm chosen
  TimingStats timing;    // all samples when ok
  double tolerance = 0;  // the rel_error bound this baseline was checked against
  // Set by run_baselines when ok: enqueues the launch that was checked and timed (the first set), holding
  // its operands, handles and workspace alive, so that a sequence of problems can be timed as one
  // graph (bench/network_pass.hpp). Graph-capturable.
  std::function<void(cudaStream_t)> enqueue;
};

// The fastest of `results` whose name starts with `prefix` and that passed, renamed `name`, its note
// naming the one chosen; skipped when none passed and none failed.
BaselineResult best_of(const std::vector<BaselineResult>& results, const std::string& prefix,
                       const std::string& name, double tolerance);

// The result called `name` when it passed its check and was timed, else null.
const BaselineResult* find_ok(const std::vector<BaselineResult>& results, const std::string& name);

// Uploads A (its dense form for cuBLAS) and a random B, runs and times every baseline, and returns
// one result each plus "cublas_fp32", "cublas_tf32", "cublas_fp16" and "cusparse_best" (the fastest
// of each kind that passed). Errors inside
// one baseline are reported in its result; the others still run.
std::vector<BaselineResult> run_baselines(const CsrMatrix& a, std::int64_t n, const BaselineOptions& options);

}  // namespace sparsecc::bench
