// Running an SpMM executor for the checks (`verify`, `demo`, the tuner's measurer): on the GPU with
// NaN-poisoned outputs, and the comparison with the fp64 reference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparsecc/common/dtype.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/matrix/dense.hpp"
#include "sparsecc/runtime/bundle.hpp"
#include "sparsecc/runtime/device.hpp"
#include "sparsecc/runtime/executor.hpp"

namespace sparsecc::pipeline {

// Values on the device in `dtype` (f32, f16 or bf16; each rounded to it), as an executor reads them.
rt::DeviceBuffer upload_values(const std::vector<double>& values, DType dtype);
// A device buffer for `count` outputs in `dtype`, in whole 32-bit words (an odd count of 16-bit outputs
// leaves half of the last word unused), filled with NaN of the dtype: an output never written fails.
rt::DeviceBuffer poisoned_outputs(std::size_t count, DType dtype);
// Fills `buffer` with NaN of `dtype` again (before another run).
void poison(rt::DeviceBuffer& buffer, DType dtype);
// The first `count` values of `buffer`, in `dtype`, widened to double.
std::vector<double> download_values(const rt::DeviceBuffer& buffer, std::size_t count, DType dtype);

// B on the device in an executor's dtype (f16 / bf16: rounded to it) and a C buffer, for running
// executors of one problem, each on NaN-poisoned outputs.
class SpmmGpuInputs {
 public:
  SpmmGpuInputs(const std::string& dtype, const DenseMatrix& b, std::int64_t m);
  // Poisons C, runs `exec` on B (n columns), waits, and returns C widened to double.
  std::vector<double> run(const rt::Context& ctx, const rt::SpmmExecutor& exec, std::int64_t n);
  CUdeviceptr b() const { return b_.get(); }
  CUdeviceptr c() const { return c_.get(); }

 private:
  DType dtype_;
  std::size_t outputs_ = 0;
  rt::DeviceBuffer b_, c_;
};

// Loads `bundle` (named `name` in errors) on device 0 and runs it on B (n columns) with C poisoned
// with NaN first; returns C. f16 / bf16 bundles take B rounded to their dtype and return C widened. `how`
// receives the device and the image that ran ("GPU … (cubin image)").
std::vector<double> run_spmm_on_gpu(const rt::Bundle& bundle, const std::string& name, const DenseMatrix& b,
                                    std::int64_t n, std::string& how);

// B (k x n) for a check: uniform in [-1, 1) from `seed`, rounded to `dtype` (the executor's own inputs;
// f32 is exact already).
DenseMatrix random_check_input(std::int64_t k, std::int64_t n, std::uint64_t seed, const std::string& dtype);

// spmm_tolerance for A's longest row.
double spmm_check_tolerance(const CsrMatrix& a, const std::string& dtype, const std::string& accumulate);

struct SpmmCheck {
  double rel_error = 0;        // max |C - ref| / max |ref| over the finite outputs
  std::int64_t unwritten = 0;  // outputs that are not finite (never written, or NaN/Inf)
};

SpmmCheck compare_spmm(const std::vector<double>& got, const DenseMatrix& ref);

}  // namespace sparsecc::pipeline
