// Convolution executors from the command line's inputs (`sparsecc compile --conv`, compile-model's
// Conv layers): the filter bank as a 2-D matrix or a 4-D OIHW tensor, and the in-process check of a
// convolution plan (its CPU interpreter, interpret_conv, against the fp64 convolution, conv2d).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparsecc/io/load.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/plan/spmm_plan.hpp"
#include "sparsecc/runtime/bundle.hpp"

namespace sparsecc::pipeline {

struct ConvWeights {
  CsrMatrix a;                             // O x (I * kh * kw), column (i * kh + dy) * kw + dx
  std::vector<std::int64_t> stored_shape;  // the tensor's shape: (O, I, kh, kw), or the matrix's (M, K)
};

// FILE[:TENSOR]: a 4-D tensor (O, I, kh, kw) of .npy / .npz / .safetensors flattened to O x (I·kh·kw),
// or any matrix load_spmm_matrix reads (taken as that flattening already). InputError naming the file
// (and tensor) for a tensor of another rank, a shape an SpMM executor cannot take, or a value that
// overflows `dtype`.
ConvWeights load_conv_weights(const std::string& spec, const LoadOptions& options, const std::string& dtype);

struct ConvCheck {
  std::int64_t batch = 0;
  std::uint64_t seed = 0;
  double rel_error = 0;                  // max |Y - ref| / max |ref| over the finite outputs
  std::int64_t unwritten = 0;            // outputs that are not finite
  double tolerance = 0;                  // spmm_check_tolerance of A, the dtype and its accumulation
  std::string how = "plan interpreter";  // or "GPU NAME (cubin image)"
  bool ok() const { return unwritten == 0 && rel_error <= tolerance; }
  std::string text() const;  // "plan interpreter on 2 random image(s), seed 1: max relative error ..."
};

// Runs `plan` (a convolution plan of `a`, SpmmProblem::conv set) through interpret_conv on `batch`
// random images X (uniform in [-1, 1) from `seed`, rounded to the plan's dtype) and compares with conv2d
// in fp64 of A's values rounded to the dtype (the bias and ReLU as planned). UsageError for a plan
// without conv.
ConvCheck check_conv_plan(const SpmmPlan& plan, const CsrMatrix& a, const std::vector<double>& bias,
                          std::int64_t batch = 2, std::uint64_t seed = 1);

// The same on device 0: the convolution bundle (metadata.conv; named `name` in errors) loaded and run
// with SpmmExecutor::run_conv on `batch` random images in the bundle's dtype, Y poisoned with NaN first,
// against conv2d.
// `tolerance` 0: spmm_check_tolerance.
ConvCheck check_conv_bundle_on_gpu(const rt::Bundle& bundle, const std::string& name, const CsrMatrix& a,
                                   std::int64_t batch, std::uint64_t seed, double tolerance = 0);

}  // namespace sparsecc::pipeline
