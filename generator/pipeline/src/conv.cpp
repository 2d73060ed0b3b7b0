#include "sparsecc/pipeline/conv.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sparsecc/common/dtype.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/random.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/io/npy.hpp"
#include "sparsecc/pipeline/inputs.hpp"
#include "sparsecc/pipeline/run.hpp"
#include "sparsecc/plan/spmm_interpreter.hpp"
#include "sparsecc/reference/conv.hpp"
#include "sparsecc/reference/spmm.hpp"
#include "sparsecc/runtime/executor.hpp"

namespace sparsecc::pipeline {

ConvWeights load_conv_weights(const std::string& spec, const LoadOptions& options, const std::string& dtype) {
  const InputSpec in = parse_input_spec(spec);
  const InputFormat format = detect_format(in.path);
  const bool tensors =
      format == InputFormat::npy || format == InputFormat::npz || format == InputFormat::safetensors;
  // A tensor file whose tensor is named, or that holds one tensor, may hold the 4-D OIHW weight.
  if (tensors && (!in.tensor.empty() || list_tensors(in.path).size() == 1)) {
    Tensor t = load_tensor(spec);
    if (t.shape.size() == 4) {
      ConvWeights w;
      w.stored_shape = t.shape;
      const std::string name = t.name;
      t.shape = {w.stored_shape[0], w.stored_shape[1] * w.stored_shape[2] * w.stored_shape[3]};
      w.a = matrix_from_tensor(std::move(t), in.path);
      SourceLocation where = SourceLocation::in_file(in.path);
      where.tensor = name;
      require_spmm_matrix(w.a, where);
      check_values_fit(w.a, dtype, in.path, name);
      return w;
    }
    if (t.shape.size() != 2)
      throw_at_byte(in.path, -1,
                    fmt::format("shape {}: a convolution's weight is 4-D (O, I, kh, kw) or a matrix O x "
                                "(I*kh*kw)",
                                shape_string(t.shape)),
                    t.name);
  }
  ConvWeights w;
  w.a = load_spmm_matrix(spec, options, dtype);
  w.stored_shape = {w.a.rows, w.a.cols};
  return w;
}

std::string ConvCheck::text() const {
  return fmt::format("{} on {} random image(s), seed {}: max relative error {:.3e} (tolerance {:.1e}){}", how,
                     batch, seed, rel_error, tolerance,
                     unwritten ? fmt::format(", {} output(s) not finite", unwritten) : "");
}

namespace {

// `batch` images of `g` uniform in [-1, 1) from `seed`, rounded to `dtype` (exact in float32).
std::vector<float> random_images(const rt::ConvGeometry& g, std::int64_t batch, std::uint64_t seed,
                                 DType dtype) {
  SplitMix64 rng(seed);
  std::vector<float> x(static_cast<std::size_t>(g.input_elements(batch)));
  for (float& v : x) v = static_cast<float>(round_to(dtype, rng.uniform_pm1()));
  return x;
}

// `got` (Y in the layout) against conv2d of A's values rounded to `dtype`, within the tolerance of the
// dtype and its accumulation.
ConvCheck compare_conv(const std::vector<double>& got, const CsrMatrix& a, const std::vector<float>& x,
                       const rt::ConvGeometry& g, std::int64_t batch, const std::vector<double>* bias,
                       bool relu, DType dtype, DType accumulate) {
  DenseMatrix ref(1, 0);
  ref.data = conv2d(round_values(a, dtype), std::vector<double>(x.begin(), x.end()), g, batch, bias, relu);
  ref.cols = static_cast<std::int64_t>(ref.data.size());
  ConvCheck c;
  c.batch = batch;
  c.tolerance = spmm_check_tolerance(a, std::string(dtype_name(dtype)), std::string(dtype_name(accumulate)));
  if (got.size() != ref.data.size()) {
    c.unwritten = static_cast<std::int64_t>(ref.data.size());
    c.rel_error = INFINITY;
    return c;
  }
  const SpmmCheck s = compare_spmm(got, ref);
  c.rel_error = s.rel_error;
  c.unwritten = s.unwritten;
  return c;
}

}  // namespace

ConvCheck check_conv_plan(const SpmmPlan& plan, const CsrMatrix& a, const std::vector<double>& bias,
                          std::int64_t batch, std::uint64_t seed) {
  if (!plan.problem.conv) throw UsageError("check_conv_plan: the plan is no convolution");
  const rt::ConvGeometry& g = *plan.problem.conv;
  const std::vector<float> x = random_images(g, batch, seed, plan.problem.dtype);
  const std::vector<double>* bias_ptr = plan.problem.bias ? &bias : nullptr;
  const std::vector<float> got = interpret_conv(plan, spmm_kernel_values(plan, a), x, batch, bias_ptr);
  ConvCheck c = compare_conv(std::vector<double>(got.begin(), got.end()), a, x, g, batch, bias_ptr,
                             plan.problem.relu, plan.problem.dtype, plan.epilogue.accumulate);
  c.seed = seed;
  return c;
}

ConvCheck check_conv_bundle_on_gpu(const rt::Bundle& bundle, const std::string& name, const CsrMatrix& a,
                                   std::int64_t batch, std::uint64_t seed, double tolerance) {
  const rt::BundleMetadata& md = bundle.metadata;
  if (!md.conv) throw UsageError(fmt::format("{}: the bundle is no convolution", name));
  const rt::ConvGeometry& g = *md.conv;
  const DType dtype = require_dtype(md.dtype, "the bundle's dtype", {DType::f32, DType::f16, DType::bf16});
  const DType accumulate = md.accumulate.empty() ? DType::f32 : require_dtype(md.accumulate, "accumulate");
  const std::vector<float> x = random_images(g, batch, seed, dtype);
  rt::Context ctx(0);
  const rt::SpmmExecutor exec = rt::SpmmExecutor::load(bundle, name, ctx);
  const std::size_t outputs = static_cast<std::size_t>(g.output_elements(batch, md.m));
  const rt::DeviceBuffer xd = upload_values(std::vector<double>(x.begin(), x.end()), dtype);
  rt::DeviceBuffer yd = poisoned_outputs(outputs, dtype);
  exec.run_conv(xd.get(), g.input_shape(batch), yd.get(), g.output_shape(batch, md.m));
  ctx.synchronize();
  const std::vector<double> y = download_values(yd, outputs, dtype);
  const std::vector<double> bias(bundle.bias.begin(), bundle.bias.end());
  ConvCheck c = compare_conv(y, a, x, g, batch, md.bias ? &bias : nullptr, md.relu, dtype, accumulate);
  c.seed = seed;
  c.how = fmt::format("GPU {} ({} image)", ctx.device().name, exec.loaded_from());
  if (tolerance > 0) c.tolerance = tolerance;
  return c;
}

}  // namespace sparsecc::pipeline
