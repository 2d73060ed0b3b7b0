// Writes the model fixtures of tests/cli/compile_model_test.sh into a folder: the same small pruned
// two-layer network as model.npz, model.safetensors and (with ONNX support) model.onnx, plus inputs
// compile-model must reject or skip.   make_model_fixtures OUTDIR
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "sparsecc/common/file.hpp"
#include "sparsecc/io/npz.hpp"
#include "sparsecc/io/safetensors.hpp"
#include "sparsecc/matrix/dense.hpp"

#if SPARSECC_HAVE_ONNX
#include <onnx/onnx_pb.h>
#endif

namespace {

using sparsecc::Tensor;

// A pruned weight: about 1 in 8 entries nonzero, deterministic.
Tensor sparse_weight(const std::string& name, std::int64_t rows, std::int64_t cols, unsigned salt) {
  Tensor t;
  t.name = name;
  t.shape = {rows, cols};
  t.data.resize(static_cast<std::size_t>(rows * cols));
  std::uint32_t s = 2463534242u ^ salt;
  for (double& v : t.data) {
    s ^= s << 13, s ^= s >> 17, s ^= s << 5;
    v = (s % 8 == 0) ? static_cast<double>(static_cast<int>(s >> 8) % 1000 - 500) / 512.0 : 0.0;
  }
  return t;
}
Tensor vector_of(const std::string& name, std::int64_t n, double base) {
  Tensor t;
  t.name = name;
  t.shape = {n};
  for (std::int64_t i = 0; i < n; ++i) t.data.push_back(base + 0.125 * static_cast<double>(i % 5));
  return t;
}
Tensor dense_weight(const std::string& name, std::int64_t rows, std::int64_t cols) {
  Tensor t;
  t.name = name;
  t.shape = {rows, cols};
  for (std::int64_t i = 0; i < rows * cols; ++i) t.data.push_back(0.25 + static_cast<double>(i % 7) / 8.0);
  return t;
}

#if SPARSECC_HAVE_ONNX
void add_initializer(onnx::GraphProto* g, const Tensor& t, bool transpose) {
  onnx::TensorProto* p = g->add_initializer();
  p->set_name(t.name);
  p->set_data_type(onnx::TensorProto::FLOAT);
  if (transpose) {
    p->add_dims(t.shape[1]);
    p->add_dims(t.shape[0]);
    for (std::int64_t c = 0; c < t.shape[1]; ++c)
      for (std::int64_t r = 0; r < t.shape[0]; ++r)
        p->add_float_data(static_cast<float>(t.data[r * t.shape[1] + c]));
  } else {
    for (auto d : t.shape) p->add_dims(d);
    for (double v : t.data) p->add_float_data(static_cast<float>(v));
  }
}
onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& name, const std::string& op,
                          std::vector<std::string> in, std::vector<std::string> out) {
  onnx::NodeProto* n = g->add_node();
  n->set_name(name);
  n->set_op_type(op);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}
// X (batch x 64) -> MatMul(W1: 64 x 48) -> Relu -> Gemm(W2: 16 x 48, transB=1, C=b2) -> Add(scale) -> Y.
std::string onnx_model(const Tensor& w1, const Tensor& w2, const Tensor& b2, const Tensor& scale) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("fixture");
  onnx::ValueInfoProto* x = g->add_input();  // X: (batch, 64), the batch symbolic
  x->set_name("X");
  onnx::TypeProto_Tensor* xt = x->mutable_type()->mutable_tensor_type();
  xt->set_elem_type(onnx::TensorProto::FLOAT);
  xt->mutable_shape()->add_dim()->set_dim_param("batch");
  xt->mutable_shape()->add_dim()->set_dim_value(64);
  g->add_output()->set_name("Y");
  add_initializer(g, w1, /*transpose=*/true);  // MatMul's K x N weight: A = W1^T
  add_initializer(g, w2, false);
  add_initializer(g, b2, false);
  add_initializer(g, scale, false);
  add_node(g, "fc1", "MatMul", {"X", w1.name}, {"h"});
  add_node(g, "act1", "Relu", {"h"}, {"r"});
  onnx::NodeProto* gemm = add_node(g, "fc2", "Gemm", {"r", w2.name, b2.name}, {"z"});
  onnx::AttributeProto* a = gemm->add_attribute();
  a->set_name("transB");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(1);
  add_node(g, "shift", "Add", {"z", scale.name}, {"Y"});
  return m.SerializeAsString();
}
#endif

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_model_fixtures OUTDIR\n");
    return 2;
  }
  try {
    const std::filesystem::path out = argv[1];
    std::filesystem::create_directories(out);
    const Tensor w1 = sparse_weight("fc1.weight", 48, 64, 1), b1 = vector_of("fc1.bias", 48, -0.5);
    const Tensor w2 = sparse_weight("fc2.weight", 16, 48, 2), b2 = vector_of("fc2.bias", 16, 0.25);
    const Tensor dense = dense_weight("proj.weight", 8, 8), scale = vector_of("scale", 5, 1.0);
    const std::vector<Tensor> model = {w1, b1, w2, b2, dense, scale};
    sparsecc::write_npz((out / "model.npz").string(), model, true);
    sparsecc::write_safetensors((out / "model.safetensors").string(), model);
    sparsecc::write_npz((out / "dense.npz").string(), {dense, scale}, false);
    // The first half of model.npz: a truncated archive.
    const sparsecc::Bytes npz = sparsecc::format_npz(model, false);
    sparsecc::write_file_atomic((out / "truncated.npz").string(),
                                std::span<const unsigned char>(npz.data(), npz.size() / 2));
    sparsecc::write_file_atomic((out / "garbage.onnx").string(),
                                std::string_view("\x08\x07\x12\xff\xff\xff\xff\x0fnot a model"));
#if SPARSECC_HAVE_ONNX
    const Tensor onnx_b2 = vector_of("fc2.bias", 16, 0.25);
    Tensor s16 = vector_of("scale", 16, 1.0);
    sparsecc::write_file_atomic((out / "model.onnx").string(), onnx_model(w1, w2, onnx_b2, s16));
#endif
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_model_fixtures: %s\n", e.what());
    return 1;
  }
  return 0;
}
