// Whole-model reading: layers from .npz / .safetensors (2-D tensors, bias pairing) and from ONNX graphs
// (MatMul, Gemm and Conv orientation, alpha/beta, biases, ReLU), the reasons tensors are skipped, and
// the errors for corrupt and unsupported files, and the N that ONNX shapes give each layer (also on
// ResNet-50's real 3x3 filters and activations, through the plan interpreter). ONNX fixtures are built
// as ModelProto messages in the tests; without ONNX support those tests are skipped.
#include "sparsecc/model/model.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/random.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/io/npz.hpp"
#include "sparsecc/io/onnx.hpp"
#include "sparsecc/io/safetensors.hpp"
#include "sparsecc/plan/spmm_interpreter.hpp"
#include "sparsecc/plan/spmm_plan.hpp"
#include "sparsecc/reference/conv.hpp"
#include "test_support.hpp"

#if SPARSECC_HAVE_ONNX
#include <onnx/onnx_pb.h>
#endif

namespace sparsecc {
namespace {

// rows × cols values, about three quarters of them zero, each exact in float16.
std::vector<double> sparse_values(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<double> v(static_cast<std::size_t>(rows * cols));
  for (auto& x : v)
    x = rng.next() % 4 != 0 ? 0.0 : static_cast<double>(static_cast<int>(rng.next() % 16) - 8) / 4;
  return v;
}

std::vector<double> dense_of(const CsrMatrix& a) { return dense_from_csr(a).data; }

// The reason `tensor` was skipped for, or "" when it was not.
std::string reason_for(const ModelContents& m, const std::string& tensor) {
  std::string out;
  for (const auto& s : m.skipped)
    if (s.tensor == tensor) out += (out.empty() ? "" : " | ") + s.reason;
  return out;
}

#define EXPECT_CONTAINS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

// ---- npz / safetensors ---------------------------------------------------------------------------

void write_container(const std::string& path, const std::vector<Tensor>& tensors) {
  if (path.ends_with(".npz"))
    write_npz(path, tensors, true);
  else
    write_safetensors(path, tensors);
}

TEST(Model, ContainersListMatricesWithBiases) {
  test::TempDir dir;
  const auto w1 = sparse_values(4, 6, 1);
  std::vector<double> dense(3 * 4, 0.5);
  dense[0] = 0;
  for (const std::string file : {"m.npz", "m.safetensors"}) {
    const std::string path = dir.file(file);
    write_container(
        path,
        {test::make_tensor("fc1.weight", {4, 6}, w1, DType::f16),
         test::make_tensor("fc1.bias", {4}, {1, 2, 3, 4}), test::make_tensor("fc2_weight", {3, 4}, dense),
         test::make_tensor("fc2_bias", {3}, {1, 2, 3}), test::make_tensor("zero", {2, 2}, {0, 0, 0, 0}),
         test::make_tensor("embed", {5}, {1, 2, 3, 4, 5}),
         test::make_tensor("conv.weight", {2, 1, 3, 3}, std::vector<double>(18, 1)),
         test::make_tensor("odd.weight", {2, 3}, {1, 0, 0, 0, 0, 2}),
         test::make_tensor("odd.bias", {3}, {1, 2, 3})});
    const ModelContents m = read_model(path);
    EXPECT_EQ(m.file, path);
    EXPECT_EQ(m.format, file.substr(2));
    ASSERT_EQ(m.layers.size(), 2u) << file;
    const ModelLayer& fc1 = m.layers[0];
    EXPECT_EQ(fc1.name, "fc1");
    EXPECT_EQ(fc1.tensor, "fc1.weight");
    EXPECT_EQ(fc1.op, "matrix");
    EXPECT_EQ(fc1.layout, "as_stored");
    EXPECT_EQ(fc1.stored_shape, (std::vector<std::int64_t>{4, 6}));
    EXPECT_EQ(fc1.a.rows, 4);
    EXPECT_EQ(fc1.a.cols, 6);
    EXPECT_EQ(fc1.a.source_dtype, DType::f16);
    EXPECT_EQ(dense_of(fc1.a), w1);
    EXPECT_EQ(fc1.bias, (std::vector<double>{1, 2, 3, 4}));
    EXPECT_FALSE(fc1.relu);
    EXPECT_DOUBLE_EQ(fc1.density, static_cast<double>(fc1.a.nnz()) / 24);
    EXPECT_EQ(m.layers[1].name, "odd");
    EXPECT_TRUE(m.layers[1].bias.empty());

    EXPECT_EQ(reason_for(m, "fc1.bias"), "bias of layer 'fc1'");
    EXPECT_EQ(reason_for(m, "fc2_weight"), "density 0.9167 above 0.5");
    EXPECT_EQ(reason_for(m, "fc2_bias"), "bias of layer 'fc2'");
    EXPECT_EQ(reason_for(m, "zero"), "all zero");
    EXPECT_EQ(reason_for(m, "embed"), "not 2-D (rank 1)");
    EXPECT_EQ(reason_for(m, "conv.weight"), "not 2-D (rank 4)");
    EXPECT_EQ(reason_for(m, "odd.bias"),
              "not 2-D (rank 1); named as the bias of layer 'odd' but holds 3 values for its 2 outputs");
    EXPECT_EQ(m.skipped.size(), 7u);

    // Skipped entries follow the file's order.
    EXPECT_EQ(m.skipped.front().tensor, "fc1.bias");
    EXPECT_EQ(m.skipped.back().tensor, "odd.bias");
  }
}

TEST(Model, ContainersSkipTensorsOfOtherDtypes) {
  // A PyTorch checkpoint as safetensors: BatchNorm's int64 step counter beside the layers.
  test::TempDir dir;
  const std::string path = dir.file("m.safetensors");
  std::vector<Tensor> tensors = {test::make_tensor("fc.weight", {2, 3}, {1, 0, 0, 0, 0, 2}),
                                 test::make_tensor("bn.num_batches_tracked", {}, {0}, DType::f64),
                                 test::make_tensor("fc.bias", {2}, {1, 2})};
  Bytes bytes = format_safetensors(tensors);
  const std::string from = R"("dtype":"F64")", to = R"("dtype":"I64")";
  const auto at = std::search(bytes.begin(), bytes.end(), from.begin(), from.end());
  ASSERT_NE(at, bytes.end());
  std::copy(to.begin(), to.end(), at);
  test::write_bytes(path, bytes);
  const ModelContents m = read_model(path);
  ASSERT_EQ(m.layers.size(), 1u);
  EXPECT_EQ(m.layers[0].name, "fc");
  EXPECT_EQ(m.layers[0].bias, (std::vector<double>{1, 2}));
  EXPECT_EQ(reason_for(m, "bn.num_batches_tracked"), "dtype I64 (only floating-point tensors are read)");
}

TEST(Model, SelectAndMaxDensity) {
  test::TempDir dir;
  const std::string path = dir.file("m.safetensors");
  write_safetensors(path, {test::make_tensor("enc.q.weight", {2, 2}, {1, 0, 0, 1}),
                           test::make_tensor("enc.k.weight", {2, 2}, {1, 1, 1, 0}),
                           test::make_tensor("dec.q.weight", {2, 2}, {0, 2, 0, 0})});
  const ModelContents all = read_model(path, {.select = "", .max_density = 1.0});
  EXPECT_EQ(all.layers.size(), 3u);
  EXPECT_TRUE(all.skipped.empty());

  const ModelContents q = read_model(path, {.select = R"(\.q\b)", .max_density = 1.0});
  ASSERT_EQ(q.layers.size(), 2u);
  EXPECT_EQ(q.layers[0].name, "enc.q");
  EXPECT_EQ(q.layers[1].name, "dec.q");
  EXPECT_EQ(reason_for(q, "enc.k.weight"), R"(does not match --select '\.q\b')");

  // The tensor name matches too (the layer name lacks ".weight").
  EXPECT_EQ(read_model(path, {.select = "k\\.weight$"}).layers.size(), 0u);  // 0.75 dense
  EXPECT_EQ(read_model(path, {.select = "k\\.weight$", .max_density = 0.75}).layers.size(), 1u);

  EXPECT_THROW(read_model(path, {.select = "(unclosed"}), UsageError);
  EXPECT_THROW(read_model(path, {.select = "", .max_density = 1.5}), UsageError);
  EXPECT_THROW(read_model(path, {.select = "", .max_density = -0.1}), UsageError);
}

TEST(Model, FormatsAndCorruptContainers) {
  test::TempDir dir;
  test::expect_input_error([&] { read_model(dir.file("m.pt")); }, {"m.pt", "unknown model format"});
  test::expect_input_error([&] { read_model(dir.file("m.mtx")); }, {"m.mtx", "unknown model format"});

  const std::string npz = dir.file("m.npz");
  write_npz(npz, {test::make_tensor("w", {8, 8}, sparse_values(8, 8, 3))}, false);
  Bytes bytes = read_file(npz);
  bytes.resize(bytes.size() / 2);
  test::write_bytes(npz, bytes);
  test::expect_input_error([&] { read_model(npz); }, {"m.npz"});

  const std::string st = dir.file("m.safetensors");
  write_safetensors(st, {test::make_tensor("w", {8, 8}, sparse_values(8, 8, 3))});
  bytes = read_file(st);
  bytes.resize(bytes.size() - 10);
  test::write_bytes(st, bytes);
  test::expect_input_error([&] { read_model(st); }, {"m.safetensors"});

  // Gzip is transparent, as for single matrices.
  const std::string gz = dir.file("g.npz.gz");
  write_npz(gz, {test::make_tensor("w", {2, 2}, {1, 0, 0, 0})}, false);
  EXPECT_EQ(read_model(gz).format, "npz");
  EXPECT_EQ(read_model(gz).layers.size(), 1u);
}

// A safetensors file of `tensors` (f32) in which every value 3.25 is replaced by `bad` (NaN or Inf,
// which the writer refuses).
void write_with_nonfinite(const std::string& path, const std::vector<Tensor>& tensors, double bad) {
  write_safetensors(path, tensors);
  Bytes b = read_file(path);
  unsigned char mark[4], repl[4];
  store_le(DType::f32, 3.25, mark);
  store_le(DType::f32, bad, repl);
  for (std::size_t i = 0; i + 4 <= b.size(); ++i)
    if (std::equal(mark, mark + 4, b.begin() + static_cast<std::ptrdiff_t>(i)))
      std::copy(repl, repl + 4, b.begin() + static_cast<std::ptrdiff_t>(i));
  test::write_bytes(path, b);
}

TEST(Model, NonFiniteValuesOfCompiledLayersAreRefused) {
  test::TempDir dir;
  const std::string path = dir.file("m.safetensors");
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  // NaN in a tensor no layer uses (a running variance) is left alone.
  write_with_nonfinite(path,
                       {test::make_tensor("fc.weight", {2, 2}, {1, 0, 0, 1}),
                        test::make_tensor("bn.running_var", {2}, {1, 3.25})},
                       nan);
  EXPECT_EQ(read_model(path).layers.size(), 1u);
  // In the weight of a layer that would be compiled: bad input naming the file and the tensor.
  write_with_nonfinite(path,
                       {test::make_tensor("fc.weight", {2, 2}, {1, 0, 0, 3.25}),
                        test::make_tensor("other.weight", {2, 2}, {1, 0, 0, 1})},
                       inf);
  test::expect_input_error([&] { read_model(path); },
                           {"m.safetensors: tensor 'fc.weight'", "value at flat index 3 is +Inf"});
  // A layer --select leaves out is skipped, whatever it holds.
  const ModelContents other = read_model(path, {.select = "other"});
  ASSERT_EQ(other.layers.size(), 1u);
  EXPECT_EQ(other.layers[0].tensor, "other.weight");
  EXPECT_EQ(reason_for(other, "fc.weight"), "does not match --select 'other'");
  // In the bias of a compiled layer.
  write_with_nonfinite(
      path,
      {test::make_tensor("fc.weight", {2, 2}, {1, 0, 0, 1}), test::make_tensor("fc.bias", {2}, {3.25, 0})},
      nan);
  test::expect_input_error([&] { read_model(path); },
                           {"m.safetensors: tensor 'fc.bias'", "flat index 0 is NaN"});
}

TEST(Model, DuplicateNamesGetSuffixes) {
  test::TempDir dir;
  const std::string path = dir.file("m.npz");
  write_npz(
      path,
      {test::make_tensor("fc.weight", {2, 2}, {1, 0, 0, 0}),
       test::make_tensor("fc_weight", {2, 2}, {0, 1, 0, 0}), test::make_tensor("fc", {2, 2}, {0, 0, 1, 0})},
      false);
  const ModelContents m = read_model(path);
  ASSERT_EQ(m.layers.size(), 3u);
  EXPECT_EQ(m.layers[0].name, "fc");
  EXPECT_EQ(m.layers[1].name, "fc#2");
  EXPECT_EQ(m.layers[2].name, "fc#3");
  EXPECT_EQ(m.layers[2].tensor, "fc");
}

// ---- ONNX ----------------------------------------------------------------------------------------

#if SPARSECC_HAVE_ONNX

std::vector<double> transposed(const std::vector<double>& v, std::int64_t rows, std::int64_t cols) {
  std::vector<double> t(v.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      t[static_cast<std::size_t>(c * rows + r)] = v[static_cast<std::size_t>(r * cols + c)];
  return t;
}

onnx::TensorProto* add_initializer(onnx::GraphProto& g, const std::string& name,
                                   std::vector<std::int64_t> dims, const std::vector<double>& values) {
  onnx::TensorProto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (auto d : dims) t->add_dims(d);
  for (double v : values) t->add_float_data(static_cast<float>(v));
  return t;
}

onnx::NodeProto* add_node(onnx::GraphProto& g, const std::string& op, const std::string& name,
                          std::vector<std::string> inputs, std::vector<std::string> outputs) {
  onnx::NodeProto* n = g.add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return n;
}

void set_int(onnx::NodeProto* n, const std::string& name, std::int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void set_float(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

void set_ints(onnx::NodeProto* n, const std::string& name, const std::vector<std::int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (auto x : v) a->add_ints(x);
}

// A model around a graph whose input is "x" and whose output is `output`.
struct OnnxModel {
  onnx::ModelProto model;
  onnx::GraphProto& g = *model.mutable_graph();
  OnnxModel() {
    model.set_ir_version(8);
    model.add_opset_import()->set_version(17);
    g.set_name("test");
    g.add_input()->set_name("x");
  }
  void output(const std::string& name) { g.add_output()->set_name(name); }
  // Types the input "x" as a float tensor of `dims`; a dimension of -1 is the symbolic "batch".
  void input_shape(const std::vector<std::int64_t>& dims) {
    auto* x = g.mutable_input(0)->mutable_type()->mutable_tensor_type();
    x->set_elem_type(onnx::TensorProto::FLOAT);
    for (const std::int64_t d : dims)
      if (d < 0)
        x->mutable_shape()->add_dim()->set_dim_param("batch");
      else
        x->mutable_shape()->add_dim()->set_dim_value(d);
  }
  std::string save(const test::TempDir& dir, const std::string& file) const {
    std::string bytes;
    EXPECT_TRUE(model.SerializeToString(&bytes));
    const std::string path = dir.file(file);
    test::write_bytes(path, Bytes(bytes.begin(), bytes.end()));
    return path;
  }
};

#define REQUIRE_ONNX() EXPECT_TRUE(onnx_available())
#else
#define REQUIRE_ONNX() GTEST_SKIP() << "built without ONNX support"
#endif

// The N a layer's product has in the model, from ONNX shape inference: Conv (b · output pixels), Gemm
// and MatMul(X, W) (the rows of X), MatMul(W, X) (the columns of X); unknown behind an operator
// inference cannot type, and everywhere while the batch stays symbolic.
TEST(ModelOnnx, ShapesGiveEachLayerItsN) {
  REQUIRE_ONNX();
#if SPARSECC_HAVE_ONNX
  test::TempDir dir;
  const auto build = [&](bool static_batch) {
    OnnxModel m;
    m.input_shape({static_batch ? 3 : -1, 3, 8, 8});
    add_initializer(m.g, "Wc", {4, 3, 3, 3}, sparse_values(4, 27, 21));
    auto* conv = add_node(m.g, "Conv", "conv1", {"x", "Wc"}, {"c"});  // (b, 4, 4, 4)
    set_ints(conv, "pads", {1, 1, 1, 1});
    set_ints(conv, "strides", {2, 2});
    add_node(m.g, "Relu", "", {"c"}, {"r"});
    set_int(add_node(m.g, "Flatten", "", {"r"}, {"f"}), "axis", 1);  // (b, 64)
    add_initializer(m.g, "Wg", {10, 64}, sparse_values(10, 64, 22));
    set_int(add_node(m.g, "Gemm", "fc", {"f", "Wg"}, {"g"}), "transB", 1);  // (b, 10)
    add_initializer(m.g, "Wh", {10, 6}, sparse_values(10, 6, 23));
    add_node(m.g, "MatMul", "head", {"g", "Wh"}, {"h"});  // (b, 6)
    set_ints(add_node(m.g, "Transpose", "", {"g"}, {"t"}), "perm", {1, 0});
    add_initializer(m.g, "Wp", {5, 10}, sparse_values(5, 10, 24));
    add_node(m.g, "MatMul", "proj", {"Wp", "t"}, {"p"});  // (5, b)
    auto* odd = add_node(m.g, "Mystery", "", {"g"}, {"u"});
    odd->set_domain("com.example");
    add_initializer(m.g, "Wu", {10, 3}, sparse_values(10, 3, 25));
    add_node(m.g, "MatMul", "after", {"u", "Wu"}, {"v"});
    for (const char* y : {"h", "p", "v"}) m.output(y);
    return m.save(dir, static_batch ? "static.onnx" : "symbolic.onnx");
  };
  const std::string symbolic = build(false), fixed = build(true);
  const auto graph_n = [](const std::string& path, bool infer, std::int64_t batch) {
    const ModelContents c =
        read_model(path, {.select = "", .max_density = 1.0, .infer_shapes = infer, .batch = batch});
    EXPECT_EQ(c.shape_note, "");
    std::map<std::string, std::int64_t> n;
    for (const ModelLayer& l : c.layers) n[l.name] = l.graph_n;
    return n;
  };
  using Ns = std::map<std::string, std::int64_t>;
  EXPECT_EQ(graph_n(symbolic, false, 0),
            (Ns{{"conv1", 0}, {"fc", 0}, {"head", 0}, {"proj", 0}, {"after", 0}}));
  EXPECT_EQ(graph_n(symbolic, true, 0),
            (Ns{{"conv1", 0}, {"fc", 0}, {"head", 0}, {"proj", 0}, {"after", 0}}));
  EXPECT_EQ(graph_n(symbolic, true, 2),
            (Ns{{"conv1", 32}, {"fc", 2}, {"head", 2}, {"proj", 2}, {"after", 0}}));
  // A batch fixed in the model stays; --batch only names a symbolic one.
  EXPECT_EQ(graph_n(fixed, true, 0), (Ns{{"conv1", 48}, {"fc", 3}, {"head", 3}, {"proj", 3}, {"after", 0}}));
  EXPECT_EQ(graph_n(fixed, true, 2), graph_n(fixed, true, 0));
  // A model that makes libonnx's inference crash (a zero stride: a division by zero) is read without
  // shapes, saying why.
  {
    OnnxModel m;
    m.input_shape({1, 3, 8, 8});
    add_initializer(m.g, "Wc", {4, 3, 3, 3}, sparse_values(4, 27, 21));
    set_ints(add_node(m.g, "Conv", "conv1", {"x", "Wc"}, {"c"}), "strides", {2, 0});
    m.output("c");
    const ModelContents c =
        read_model(m.save(dir, "zero_stride.onnx"), {.select = "", .max_density = 1.0, .infer_shapes = true});
    ASSERT_EQ(c.layers.size(), 1u);
    EXPECT_EQ(c.layers[0].graph_n, 0);
    EXPECT_CONTAINS(c.shape_note, "ONNX shape inference");
  }
  // Formats without a graph say so.
  const std::string npz = dir.file("m.npz");
  write_npz(npz, {test::make_tensor("w", {4, 6}, sparse_values(4, 6, 26))}, false);
  EXPECT_CONTAINS(read_model(npz, {.select = "", .max_density = 0.5, .infer_shapes = true}).shape_note,
                  "holds no graph");
#endif
}

// Real data end to end: ResNet-50's pruned 3x3 filters of block groups 1-3 as ONNX Convs over their
// published activations (batch symbolic, bound to 1; block group 2 with stride 2). The shapes give
// each layer the N of its im2col product, and its plan, run by the interpreter on the im2col of the
// activations, reproduces the fp64 convolution of the filter as stored in the .npz.
TEST(ModelOnnx, RealConvLayersTakeTheirNFromTheShapes) {
  REQUIRE_ONNX();
#if SPARSECC_HAVE_ONNX
  SPARSECC_DATA_OR_SKIP(npz, "sparsert/resnet50_3x3_sparse90.npz");
  std::map<std::string, Tensor> t;
  for (Tensor& x : read_npz(npz.string())) t[x.name] = std::move(x);
  test::TempDir dir;
  for (const auto& [group, stride] : {std::pair<int, std::int64_t>{1, 1}, {2, 2}, {3, 1}}) {
    SCOPED_TRACE(fmt::format("block group {}", group));
    const Tensor& f = t.at(fmt::format("filter_bg{}", group));
    const Tensor& act = t.at(fmt::format("input_bg{}", group));
    const std::int64_t c = act.shape[0], h = act.shape[1], w = act.shape[2], o = f.shape[0];
    OnnxModel m;
    m.input_shape({-1, c, h, w});
    add_initializer(m.g, "W", {o, c, 3, 3}, f.data);  // OIHW: the im2col filter's row-major order
    auto* conv = add_node(m.g, "Conv", "conv", {"x", "W"}, {"y"});
    set_ints(conv, "pads", {1, 1, 1, 1});
    set_ints(conv, "strides", {stride, stride});
    set_ints(conv, "kernel_shape", {3, 3});
    m.output("y");
    const ModelContents mc = read_model(m.save(dir, fmt::format("bg{}.onnx", group)),
                                        {.select = "", .max_density = 1.0, .infer_shapes = true, .batch = 1});
    ASSERT_EQ(mc.layers.size(), 1u);
    const ModelLayer& layer = mc.layers[0];
    EXPECT_EQ(dense_of(layer.a), f.data);
    const Conv3x3Shape shape{1, c, h, w, o, 1, stride};
    const std::int64_t oh = shape.out_height(), ow = shape.out_width();
    ASSERT_EQ(layer.graph_n, oh * ow);

    DenseMatrix b(c * 9, oh * ow);  // im2col: row ch * 9 + ky * 3 + kx, column oy * ow + ox
    for (std::int64_t ch = 0; ch < c; ++ch)
      for (std::int64_t ky = 0; ky < 3; ++ky)
        for (std::int64_t kx = 0; kx < 3; ++kx)
          for (std::int64_t oy = 0; oy < oh; ++oy)
            for (std::int64_t ox = 0; ox < ow; ++ox) {
              const std::int64_t iy = oy * stride + ky - 1, ix = ox * stride + kx - 1;
              if (iy >= 0 && iy < h && ix >= 0 && ix < w)
                b(ch * 9 + ky * 3 + kx, oy * ow + ox) =
                    act.data[static_cast<std::size_t>((ch * h + iy) * w + ix)];
            }
    SpmmProblem problem;
    problem.m = o;
    problem.k = c * 9;
    problem.n = layer.graph_n;
    const SpmmPlan plan = plan_spmm(layer.a, problem);
    const DenseMatrix got = interpret_spmm(plan, spmm_kernel_values(plan, layer.a), b);
    DenseMatrix want(o, oh * ow);
    want.data = conv3x3(layer.a, act.data, shape);
    EXPECT_LE(test::max_rel_error(got, want), 1e-5);
  }
#endif
}

TEST(ModelOnnx, MatMulWeightIsTransposed) {
  REQUIRE_ONNX();
#if SPARSECC_HAVE_ONNX
  test::TempDir dir;
  OnnxModel m;
  const std::int64_t k = 5, n = 7;
  const auto w = sparse_values(k, n, 11);
  add_initializer(m.g, "W", {k, n}, w);
  add_node(m.g, "MatMul", "fc1", {"x", "W"}, {"h"});
  add_node(m.g, "Relu", "act", {"h"}, {"r"});
  // The initializer first: Y = W2 · r, A = W2 as stored.
  const auto w2 = sparse_values(3, n, 12);
  add_initializer(m.g, "W2", {3, n}, w2);
  add_node(m.g, "MatMul", "", {"W2", "r"}, {"y"});
  m.output("y");

  const ModelContents c = read_model(m.save(dir, "m.onnx"), {.select = "", .max_density = 1.0});
  EXPECT_EQ(c.format, "onnx");
  ASSERT_EQ(c.layers.size(), 2u);
  const ModelLayer& fc1 = c.layers[0];
  EXPECT_EQ(fc1.name, "fc1");
  EXPECT_EQ(fc1.tensor, "W");
  EXPECT_EQ(fc1.op, "matmul");
  EXPECT_EQ(fc1.layout, "transposed");
  EXPECT_EQ(fc1.stored_shape, (std::vector<std::int64_t>{k, n}));
  EXPECT_EQ(fc1.a.rows, n);
  EXPECT_EQ(fc1.a.cols, k);
  EXPECT_EQ(fc1.a.source_dtype, DType::f32);
  EXPECT_EQ(dense_of(fc1.a), transposed(w, k, n));
  EXPECT_TRUE(fc1.relu);
  EXPECT_TRUE(fc1.bias.empty());

  const ModelLayer& second = c.layers[1];
  EXPECT_EQ(second.name, "W2");  // the node has no name
  EXPECT_EQ(second.layout, "as_stored");
  EXPECT_EQ(dense_of(second.a), w2);
  EXPECT_FALSE(second.relu);  // a graph output, no Relu
  EXPECT_TRUE(c.skipped.empty());
#endif
}

TEST(ModelOnnx, MatMulThenAddFoldsTheBias) {
  REQUIRE_ONNX();
#if SPARSECC_HAVE_ONNX
  test::TempDir dir;
  OnnxModel m;
  const std::int64_t k = 5, n = 7;
  // fc1: X · W + b (b of shape (1, 7)), then Relu: bias and ReLU fused.
  add_initializer(m.g, "W", {k, n}, sparse_values(k, n, 21));
  add_initializer(m.g, "b", {1, n}, {1, 2, 3, 4, 5, 6, 7});
  add_node(m.g, "MatMul", "fc1", {"x", "W"}, {"h"});
  add_node(m.g, "Add", "fc1_add", {"b", "h"}, {"hb"});
  add_node(m.g, "Relu", "act", {"hb"}, {"r"});
  // fc2: W2 · r + c (c of shape (3, 1), one value per row of W2).
  add_initializer(m.g, "W2", {3, n}, sparse_values(3, n, 22));
  add_initializer(m.g, "c", {3, 1}, {-1, -2, -3});
  add_node(m.g, "MatMul", "fc2", {"W2", "r"}, {"y2"});
  add_node(m.g, "Add", "fc2_add", {"y2", "c"}, {"y"});
  // fc3: an Add whose constant is not one value per output stays outside the layer.
  add_initializer(m.g, "W3", {k, n}, sparse_values(k, n, 23));
  add_initializer(m.g, "d", {2, n}, std::vector<double>(2 * n, 1.0));
  add_node(m.g, "MatMul", "fc3", {"x", "W3"}, {"h3"});
  add_node(m.g, "Add", "fc3_add", {"h3", "d"}, {"z"});
  // fc4: the MatMul's output is also a graph output, so the Add cannot be folded.
  add_initializer(m.g, "W4", {k, n}, sparse_values(k, n, 24));
  add_initializer(m.g, "e", {n}, std::vector<double>(n, 1.0));
  add_node(m.g, "MatMul", "fc4", {"x", "W4"}, {"h4"});
  add_node(m.g, "Add", "fc4_add", {"h4", "e"}, {"z4"});
  // fc5 / fc6: rank-3 activations: X · W5 + f with f of shape (1, 1, 7), W6 · r + g with g of
  // shape (1, 3, 1).
  add_initializer(m.g, "W5", {k, n}, sparse_values(k, n, 25));
  add_initializer(m.g, "f", {1, 1, n}, {7, 6, 5, 4, 3, 2, 1});
  add_node(m.g, "MatMul", "fc5", {"x", "W5"}, {"h5"});
  add_node(m.g, "Add", "fc5_add", {"h5", "f"}, {"z5"});
  add_initializer(m.g, "W6", {3, n}, sparse_values(3, n, 26));
  add_initializer(m.g, "g", {1, 3, 1}, {0.5, 0.25, 0.125});
  add_node(m.g, "MatMul", "fc6", {"W6", "r"}, {"y6"});
  add_node(m.g, "Add", "fc6_add", {"g", "y6"}, {"z6"});
  m.output("y");
  m.output("z");
  m.output("h4");
  m.output("z4");
  m.output("z5");
  m.output("z6");

  const ModelContents c = read_model(m.save(dir, "m.onnx"), {.select = "", .max_density = 1.0});
  ASSERT_EQ(c.layers.size(), 6u);
  EXPECT_EQ(c.layers[4].bias, (std::vector<double>{7, 6, 5, 4, 3, 2, 1}));
  EXPECT_EQ(c.layers[5].bias, (std::vector<double>{0.5, 0.25, 0.125}));
  EXPECT_EQ(reason_for(c, "f"), "bias of layer 'fc5'");
  EXPECT_EQ(reason_for(c, "g"), "bias of layer 'fc6'");
  EXPECT_EQ(c.layers[0].name, "fc1");
  EXPECT_EQ(c.layers[0].bias, (std::vector<double>{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_TRUE(c.layers[0].relu);
  EXPECT_EQ(c.layers[1].name, "fc2");
  EXPECT_EQ(c.layers[1].layout, "as_stored");
  EXPECT_EQ(c.layers[1].bias, (std::vector<double>{-1, -2, -3}));
  EXPECT_FALSE(c.layers[1].relu);
  EXPECT_TRUE(c.layers[2].bias.empty());
  EXPECT_TRUE(c.layers[3].bias.empty());
  EXPECT_EQ(reason_for(c, "b"), "bias of layer 'fc1'");
  EXPECT_EQ(reason_for(c, "c"), "bias of layer 'fc2'");
  EXPECT_EQ(reason_for(c, "d"), "feeds Add, not a MatMul/Gemm/Conv weight");
  EXPECT_EQ(reason_for(c, "e"), "feeds Add, not a MatMul/Gemm/Conv weight");
#endif
}

TEST(ModelOnnx, GemmOrientationAlphaBetaAndBias) {
  REQUIRE_ONNX();
#if SPARSECC_HAVE_ONNX
  test::TempDir dir;
  OnnxModel m;
  // transB=1: B is M×K (PyTorch's Linear): A = alpha·B, bias = beta·C.
  const auto b1 = sparse_values(4, 6, 21);
  add_initializer(m.g, "fc1.weight", {4, 6}, b1);
  add_initializer(m.g, "fc1.bias", {4}, {1, -2, 3, 0.5});
  auto* g1 = add_node(m.g, "Gemm", "fc1", {"x", "fc1.weight", "fc1.bias"}, {"h1"});
  set_int(g1, "transB", 1);
  set_float(g1, "alpha", 2.0f);
  set_float(g1, "beta", 0.5f);
  // transB=0: B is K×M: A = B^T; C of shape (1, M).
  const auto b2 = sparse_values(4, 3, 22);
  add_initializer(m.g, "B2", {4, 3}, b2);
  add_initializer(m.g, "C2", {1, 3}, {7, 8, 9});
  add_node(m.g, "Gemm", "fc2", {"h1", "B2", "C2"}, {"h2"});
  // A scalar C broadcasts to every output.
  add_initializer(m.g, "B3", {3, 2}, {1, 0, 0, 1, 0, 0});
  add_initializer(m.g, "C3", {}, {0.25});
  add_node(m.g, "Gemm", "fc3", {"h2", "B3", "C3"}, {"h3"});
  // A C that is not per output skips the layer; transA=1 is skipped.
  add_initializer(m.g, "B4", {2, 2}, {1, 0, 0, 1});
  add_initializer(m.g, "C4", {5, 2}, std::vector<double>(10, 1));
  add_node(m.g, "Gemm", "fc4", {"h3", "B4", "C4"}, {"h4"});
  add_initializer(m.g, "B5", {2, 2}, {1, 0, 0, 1});
  set_int(add_node(m.g, "Gemm", "fc5", {"h4", "B5"}, {"y"}), "transA", 1);
  m.output("y");

  const ModelContents c = read_model(m.save(dir, "m.onnx"), {.select = "", .max_density = 1.0});
  ASSERT_EQ(c.layers.size(), 3u);
  const ModelLayer& fc1 = c.layers[0];
  EXPECT_EQ(fc1.op, "gemm");
  EXPECT_EQ(fc1.layout, "as_stored");
  EXPECT_EQ(fc1.a.rows, 4);
  EXPECT_EQ(fc1.a.cols, 6);
  std::vector<double> twice = b1;
  for (auto& v : twice) v *= 2;
  EXPECT_EQ(dense_of(fc1.a), twice);
  EXPECT_EQ(fc1.bias, (std::vector<double>{0.5, -1, 1.5, 0.25}));
  EXPECT_FALSE(fc1.relu);

  const ModelLayer& fc2 = c.layers[1];
  EXPECT_EQ(fc2.layout, "transposed");
  EXPECT_EQ(fc2.a.rows, 3);
  EXPECT_EQ(fc2.a.cols, 4);
  EXPECT_EQ(dense_of(fc2.a), transposed(b2, 4, 3));
  EXPECT_EQ(fc2.bias, (std::vector<double>{7, 8, 9}));

  const ModelLayer& fc3 = c.layers[2];
  EXPECT_EQ(fc3.a.rows, 2);
  EXPECT_EQ(fc3.bias, (std::vector<double>{0.25, 0.25}));

  EXPECT_EQ(reason_for(c, "fc1.bias"), "bias of layer 'fc1'");
  EXPECT_EQ(reason_for(c, "C2"), "bias of layer 'fc2'");
  EXPECT_EQ(reason_for(c, "B4"),
            "Gemm 'fc4': bias C 'C4' of shape (5, 2) is not one value per output (2 outputs)");
  EXPECT_EQ(reason_for(c, "C4"), "bias of layer 'fc4'");
  EXPECT_EQ(reason_for(c, "B5"), "Gemm 'fc5': transA=1");
#endif
}

TEST(ModelOnnx, ConvWeightsAreFlattened) {
  REQUIRE_ONNX();
#if SPARSECC_HAVE_ONNX
  test::TempDir dir;
  OnnxModel m;
  const auto w = sparse_values(2 * 3 * 2 * 2, 1, 31);
  add_initializer(m.g, "conv1.weight", {2, 3, 2, 2}, w);
  add_initializer(m.g, "conv1.bias", {2}, {0.5, -0.5});
  auto* c1 = add_node(m.g, "Conv", "conv1", {"x", "conv1.weight", "conv1.bias"}, {"c1"});
  set_ints(c1, "kernel_shape", {2, 2});
  add_node(m.g, "Relu", "", {"c1"}, {"r1"});
  // Grouped, 1-D (rank-3 weight) and a kernel_shape that disagrees are skipped.
  add_initializer(m.g, "dw", {4, 1, 3, 3}, std::vector<double>(36, 0));
  set_int(add_node(m.g, "Conv", "dw", {"r1", "dw"}, {"c2"}), "group", 4);
  add_initializer(m.g, "conv1d", {2, 2, 3}, {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0});
  add_node(m.g, "Conv", "c1d", {"c2", "conv1d"}, {"c3"});
  add_initializer(m.g, "k", {2, 2, 3, 3}, std::vector<double>(36, 0));
  set_ints(add_node(m.g, "Conv", "ks", {"c3", "k"}, {"y"}), "kernel_shape", {5, 5});
  m.output("y");
  m.output("r1");  // a graph output after the Relu does not matter

  const ModelContents c = read_model(m.save(dir, "m.onnx"), {.select = "", .max_density = 1.0});
  ASSERT_EQ(c.layers.size(), 1u);
  const ModelLayer& conv = c.layers[0];
  EXPECT_EQ(conv.op, "conv");
  EXPECT_EQ(conv.layout, "oihw_flattened");
  EXPECT_EQ(conv.stored_shape, (std::vector<std::int64_t>{2, 3, 2, 2}));
  EXPECT_EQ(conv.a.rows, 2);
  EXPECT_EQ(conv.a.cols, 12);
  EXPECT_EQ(dense_of(conv.a), w);
  EXPECT_EQ(conv.bias, (std::vector<double>{0.5, -0.5}));
  EXPECT_TRUE(conv.relu);
  EXPECT_EQ(reason_for(c, "conv1.bias"), "bias of layer 'conv1'");
  EXPECT_EQ(reason_for(c, "dw"), "Conv 'dw': grouped convolution (group=4)");
  EXPECT_EQ(reason_for(c, "conv1d"),
            "Conv 'c1d': weight of rank 3 (only 2-D convolutions, with 4-D OIHW weights, are read)");
  EXPECT_EQ(reason_for(c, "k"),
            "Conv 'ks': kernel_shape [5, 5] disagrees with the weight's shape (2, 2, 3, 3)");
#endif
}

TEST(ModelOnnx, ReluNeedsTheOnlyConsumer) {
  REQUIRE_ONNX();
#if SPARSECC_HAVE_ONNX
  test::TempDir dir;
  OnnxModel m;
  add_initializer(m.g, "W1", {2, 2}, {1, 0, 0, 1});
  add_node(m.g, "MatMul", "a", {"x", "W1"}, {"h1"});
  add_node(m.g, "Relu", "", {"h1"}, {"r1"});
  add_node(m.g, "Add", "", {"h1", "r1"}, {"s"});  // h1 feeds two nodes
  add_initializer(m.g, "W2", {2, 2}, {1, 0, 0, 1});
  add_node(m.g, "MatMul", "b", {"s", "W2"}, {"h2"});
  add_node(m.g, "Relu", "", {"h2"}, {"y"});
  m.output("h2");  // the pre-activation is a graph output
  m.output("y");
  add_initializer(m.g, "W3", {2, 2}, {1, 0, 0, 1});
  add_node(m.g, "MatMul", "c", {"y", "W3"}, {"h3"});
  add_node(m.g, "Sigmoid", "", {"h3"}, {"z"});
  m.output("z");
  const ModelContents c = read_model(m.save(dir, "m.onnx"));
  ASSERT_EQ(c.layers.size(), 3u);
  EXPECT_FALSE(c.layers[0].relu);
  EXPECT_FALSE(c.layers[1].relu);
  EXPECT_FALSE(c.layers[2].relu);
#endif
}

TEST(ModelOnnx, SkipReasons) {
  REQUIRE_ONNX();
#if SPARSECC_HAVE_ONNX
  test::TempDir dir;
  OnnxModel m;
  add_initializer(m.g, "dense", {2, 2}, {1, 1, 1, 0});
  add_node(m.g, "MatMul", "fc_dense", {"x", "dense"}, {"h1"});
  add_initializer(m.g, "shift", {2}, {1, 2});
  add_node(m.g, "Add", "add", {"h1", "shift"}, {"h2"});
  add_initializer(m.g, "other", {3, 2}, {1, 0, 0, 0, 0, 0});
  add_node(m.g, "MatMul", "attn.q", {"h2", "other"}, {"h3"});
  auto* shape = m.g.add_initializer();
  shape->set_name("shape");
  shape->set_data_type(onnx::TensorProto::INT64);
  shape->add_dims(1);
  shape->add_int64_data(-1);
  add_node(m.g, "Reshape", "", {"h3", "shape"}, {"h4"});
  add_initializer(m.g, "unused", {2, 2}, {1, 0, 0, 0});
  add_initializer(m.g, "zero", {2, 2}, {0, 0, 0, 0});
  add_node(m.g, "MatMul", "fc_zero", {"h4", "zero"}, {"h5"});
  auto* q = m.g.add_initializer();  // int8 weight of a MatMul
  q->set_name("int8");
  q->set_data_type(onnx::TensorProto::INT8);
  q->add_dims(2);
  q->add_dims(2);
  q->set_raw_data(std::string(4, '\1'));
  add_node(m.g, "MatMul", "fc_int8", {"h5", "int8"}, {"h6"});
  add_initializer(m.g, "rank3", {1, 2, 2}, {1, 0, 0, 0});
  add_node(m.g, "MatMul", "fc_rank3", {"h6", "rank3"}, {"h8"});
  add_initializer(m.g, "gemm_a", {2, 2}, {1, 0, 0, 0});
  add_node(m.g, "Gemm", "g", {"gemm_a", "h8"}, {"y"});
  auto* s = m.g.add_sparse_initializer();
  s->mutable_values()->set_name("sparse");
  m.output("y");

  const ModelContents c = read_model(m.save(dir, "m.onnx"), {.select = "fc|q"});
  ASSERT_EQ(c.layers.size(), 1u);
  EXPECT_EQ(c.layers[0].name, "attn.q");
  EXPECT_EQ(reason_for(c, "dense"), "MatMul 'fc_dense': density 0.75 above 0.5");
  EXPECT_EQ(reason_for(c, "shift"), "bias of layer 'fc_dense'");  // folded from the Add, as a Gemm's C is
  EXPECT_EQ(reason_for(c, "other"), "");                          // attn.q is a layer (selected by its name)
  EXPECT_EQ(reason_for(c, "shape"), "feeds Reshape, not a MatMul/Gemm/Conv weight");
  EXPECT_EQ(reason_for(c, "unused"), "feeds no node");
  EXPECT_EQ(reason_for(c, "zero"), "MatMul 'fc_zero': all zero");
  EXPECT_EQ(reason_for(c, "int8"), "MatMul 'fc_int8': non-floating dtype INT8");
  EXPECT_EQ(reason_for(c, "rank3"), "MatMul 'fc_rank3': weight of rank 3 (2 needed)");
  EXPECT_EQ(reason_for(c, "gemm_a"), "feeds Gemm 'g' as input A, not a MatMul/Gemm/Conv weight");
  EXPECT_CONTAINS(reason_for(c, "sparse"), "sparse initializer");

  const ModelContents only_fc = read_model(m.save(dir, "m.onnx"), {.select = "^fc", .max_density = 1.0});
  EXPECT_EQ(reason_for(only_fc, "other"), "MatMul 'attn.q': does not match --select '^fc'");
  ASSERT_EQ(only_fc.layers.size(), 1u);
  EXPECT_EQ(only_fc.layers[0].name, "fc_dense");
  EXPECT_DOUBLE_EQ(only_fc.layers[0].density, 0.75);
#endif
}

TEST(ModelOnnx, NonFiniteValuesOfCompiledLayersAreRefused) {
  REQUIRE_ONNX();
#if SPARSECC_HAVE_ONNX
  test::TempDir dir;
  OnnxModel m;
  add_initializer(m.g, "W", {2, 2}, {1, 0, 0, 1});
  add_node(m.g, "MatMul", "fc", {"x", "W"}, {"h1"});
  add_initializer(m.g, "bad", {2, 2}, {1, 0, 0, std::nan("")});
  add_node(m.g, "MatMul", "fc_nan", {"h1", "bad"}, {"h2"});
  add_initializer(m.g, "mask", {2}, {0, -std::numeric_limits<double>::infinity()});
  add_node(m.g, "Add", "", {"h2", "mask"}, {"h3"});  // the bias of fc_nan
  m.output("h3");
  const std::string path = m.save(dir, "m.onnx");
  test::expect_input_error([&] { read_model(path); },
                           {"m.onnx: tensor 'bad'", "value at flat index 3 is NaN"});
  // Not selected: skipped as before, NaN and all.
  const ModelContents c = read_model(path, {.select = "^fc$"});
  ASSERT_EQ(c.layers.size(), 1u);
  EXPECT_EQ(reason_for(c, "bad"), "MatMul 'fc_nan': does not match --select '^fc$'");
  // The bias of a compiled layer.
  OnnxModel b;
  add_initializer(b.g, "W", {2, 2}, {1, 0, 0, 1});
  add_node(b.g, "MatMul", "fc", {"x", "W"}, {"h1"});
  add_initializer(b.g, "mask", {2}, {0, -std::numeric_limits<double>::infinity()});
  add_node(b.g, "Add", "", {"h1", "mask"}, {"y"});
  b.output("y");
  test::expect_input_error([&] { read_model(b.save(dir, "b.onnx")); },
                           {"b.onnx: tensor 'mask'", "value at flat index 1 is -Inf"});
#endif
}

TEST(ModelOnnx, SharedWeightsAndNames) {
  REQUIRE_ONNX();
#if SPARSECC_HAVE_ONNX
  test::TempDir dir;
  OnnxModel m;
  add_initializer(m.g, "W", {2, 2}, {1, 0, 0, 0});
  add_node(m.g, "MatMul", "", {"x", "W"}, {"h1"});
  add_node(m.g, "MatMul", "", {"h1", "W"}, {"h2"});
  set_int(add_node(m.g, "Gemm", "", {"h2", "W"}, {"y"}), "transA", 1);
  m.output("y");
  const ModelContents c = read_model(m.save(dir, "m.onnx"));
  ASSERT_EQ(c.layers.size(), 2u);
  EXPECT_EQ(c.layers[0].name, "W");
  EXPECT_EQ(c.layers[1].name, "W#2");
  EXPECT_EQ(c.layers[1].tensor, "W");
  EXPECT_EQ(reason_for(c, "W"), "Gemm: transA=1");
#endif
}

TEST(ModelOnnx, HalfPrecisionInitializers) {
  REQUIRE_ONNX();
#if SPARSECC_HAVE_ONNX
  test::TempDir dir;
  OnnxModel m;
  const std::vector<double> w = {1.5, 0, -0.25, 0, 0, 65504, 0, 0};
  auto* h = m.g.add_initializer();
  h->set_name("h");
  h->set_data_type(onnx::TensorProto::FLOAT16);
  h->add_dims(4);
  h->add_dims(2);
  std::string raw;
  for (double v : w) {
    const std::uint16_t bits = double_to_half_bits(v);
    raw += static_cast<char>(bits & 0xFF);
    raw += static_cast<char>(bits >> 8);
  }
  h->set_raw_data(raw);
  auto* g1 = add_node(m.g, "Gemm", "half", {"x", "h"}, {"y1"});
  set_int(g1, "transB", 1);
  auto* b = m.g.add_initializer();  // bfloat16 through int32_data
  b->set_name("b");
  b->set_data_type(onnx::TensorProto::BFLOAT16);
  b->add_dims(2);
  b->add_dims(4);
  for (double v : w) b->add_int32_data(double_to_bf16_bits(v == 65504 ? 3.0 : v));
  add_node(m.g, "MatMul", "bf", {"y1", "b"}, {"y"});
  auto* d = m.g.add_initializer();  // double through double_data
  d->set_name("d");
  d->set_data_type(onnx::TensorProto::DOUBLE);
  d->add_dims(1);
  d->add_dims(3);
  for (double v : {0.1, 0.0, 0.0}) d->add_double_data(v);
  add_node(m.g, "MatMul", "dbl", {"y", "d"}, {"z"});
  m.output("z");

  const std::string path = m.save(dir, "m.onnx");
  const OnnxGraph graph = read_onnx(path);
  ASSERT_EQ(graph.initializers.size(), 3u);
  EXPECT_EQ(graph.initializers[0].data_type, "FLOAT16");
  EXPECT_TRUE(graph.initializers[0].floating);
  EXPECT_EQ(graph.initializers[0].tensor.dtype, DType::f16);
  EXPECT_EQ(graph.initializers[0].tensor.data, w);
  EXPECT_EQ(graph.nodes[0].int_attr("transB", 0), 1);
  EXPECT_EQ(graph.nodes[0].float_attr("alpha", 1.0), 1.0);
  EXPECT_EQ(graph.inputs, std::vector<std::string>{"x"});
  EXPECT_EQ(graph.outputs, std::vector<std::string>{"z"});

  const ModelContents c = read_model(path);
  ASSERT_EQ(c.layers.size(), 3u);
  EXPECT_EQ(c.layers[0].a.source_dtype, DType::f16);
  EXPECT_EQ(dense_of(c.layers[0].a), w);
  EXPECT_EQ(c.layers[1].a.source_dtype, DType::bf16);
  EXPECT_EQ(c.layers[1].a.values, (std::vector<double>{1.5, 3.0, -0.25}));  // row-major in the transpose
  EXPECT_EQ(c.layers[2].a.source_dtype, DType::f64);
  EXPECT_EQ(c.layers[2].a.values, (std::vector<double>{0.1}));
#endif
}

TEST(ModelOnnx, DegenerateProtobufsAreRefusedBeforeParsing) {
  REQUIRE_ONNX();
#if SPARSECC_HAVE_ONNX
  test::TempDir dir;
  // Empty nodes take two bytes each in the file and hundreds once parsed.
  OnnxModel m;
  add_initializer(m.g, "W", {2, 2}, {1, 0, 0, 1});
  add_node(m.g, "MatMul", "fc", {"x", "W"}, {"y"});
  m.output("y");
  for (std::uint64_t i = 0; i <= kMinOnnxMessageLimit; ++i) m.g.add_node();
  const std::string path = m.save(dir, "nodes.onnx");
  test::expect_input_error(
      [&] { read_model(path); },
      {"nodes.onnx: the protobuf holds more than 262144 messages", "refused as degenerate"});
  // Compressed, the limit follows the size on disk.
  write_file_atomic(dir.file("nodes.onnx.gz"), read_file(path));
  test::expect_input_error([&] { read_model(dir.file("nodes.onnx.gz")); }, {"refused as degenerate"});
  EXPECT_EQ(onnx_message_limit(100), kMinOnnxMessageLimit);
  EXPECT_EQ(onnx_message_limit(std::uint64_t{64} << 20), (std::uint64_t{64} << 20) / kOnnxBytesPerMessage);
  // A model of ordinary size is read, and so is one under the limit for its size.
  OnnxModel small;
  add_initializer(small.g, "W", {2, 2}, {1, 0, 0, 1});
  add_node(small.g, "MatMul", "fc", {"x", "W"}, {"y"});
  small.output("y");
  EXPECT_EQ(read_model(small.save(dir, "small.onnx")).layers.size(), 1u);
  std::string bytes;
  ASSERT_TRUE(small.model.SerializeToString(&bytes));
  const Bytes b(bytes.begin(), bytes.end());
  test::expect_input_error([&] { parse_onnx(b, "small.onnx", {.message_limit = 2}); },
                           {"more than 2 messages"});
#endif
}

TEST(ModelOnnx, CorruptAndUnsupportedFiles) {
  REQUIRE_ONNX();
#if SPARSECC_HAVE_ONNX
  test::TempDir dir;
  OnnxModel m;
  add_initializer(m.g, "W", {16, 16}, sparse_values(16, 16, 41));
  add_node(m.g, "MatMul", "fc", {"x", "W"}, {"y"});
  m.output("y");
  const std::string path = m.save(dir, "m.onnx");
  Bytes bytes = read_file(path);
  test::write_bytes(dir.file("cut.onnx"),
                    Bytes(bytes.begin(), bytes.begin() + static_cast<long>(bytes.size() / 2)));
  test::expect_input_error([&] { read_model(dir.file("cut.onnx")); }, {"cut.onnx", "does not parse"});
  test::write_bytes(dir.file("empty.onnx"), {});
  test::expect_input_error([&] { read_model(dir.file("empty.onnx")); }, {"empty.onnx", "holds no graph"});
  test::write_bytes(dir.file("junk.onnx"), Bytes(64, 0xFF));
  test::expect_input_error([&] { read_model(dir.file("junk.onnx")); }, {"junk.onnx"});

  // raw_data shorter than the dims need.
  OnnxModel r;
  auto* t = r.g.add_initializer();
  t->set_name("W");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(4);
  t->add_dims(4);
  t->set_raw_data(std::string(60, '\0'));
  add_node(r.g, "MatMul", "fc", {"x", "W"}, {"y"});
  test::expect_input_error(
      [&] { read_model(r.save(dir, "raw.onnx")); },
      {"raw.onnx: tensor 'W'", "raw_data holds 60 bytes; shape (4, 4) of FLOAT needs 64"});
  t->clear_raw_data();
  for (int i = 0; i < 15; ++i) t->add_float_data(1);
  test::expect_input_error([&] { read_model(r.save(dir, "typed.onnx")); },
                           {"typed.onnx: tensor 'W'", "float_data holds 15 values"});
  t->add_float_data(1);
  t->set_dims(0, -4);
  test::expect_input_error([&] { read_model(r.save(dir, "neg.onnx")); },
                           {"neg.onnx: tensor 'W'", "negative"});
  t->set_dims(0, std::int64_t{1} << 40);
  t->set_dims(1, std::int64_t{1} << 40);
  test::expect_input_error([&] { read_model(r.save(dir, "huge.onnx")); }, {"huge.onnx: tensor 'W'"});
  t->set_dims(0, 4);
  t->set_dims(1, 4);
  EXPECT_EQ(read_model(r.save(dir, "ok.onnx")).layers.size(), 0u);  // all ones: dense

  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = t->add_external_data();
  kv->set_key("location");
  kv->set_value("weights.bin");
  test::expect_input_error([&] { read_model(r.save(dir, "ext.onnx")); },
                           {"ext.onnx: tensor 'W'", "external file ('weights.bin')"});

  // A duplicate initializer; a weight input that names nothing.
  OnnxModel d;
  add_initializer(d.g, "W", {1}, {1});
  add_initializer(d.g, "W", {1}, {1});
  test::expect_input_error([&] { read_model(d.save(dir, "dup.onnx")); },
                           {"dup.onnx: tensor 'W'", "duplicate"});
  OnnxModel dangling;
  add_node(dangling.g, "Add", "", {"x", "nothing"}, {"s"});  // not a weight input: ignored
  add_node(dangling.g, "Gemm", "g", {"s", "lost"}, {"y"});
  test::expect_input_error([&] { read_model(dangling.save(dir, "dangling.onnx")); },
                           {"dangling.onnx: tensor 'lost'", "Gemm 'g' input B names no initializer"});
#endif
}

TEST(ModelOnnx, AvailabilityMatchesTheBuild) {
#if SPARSECC_HAVE_ONNX
  EXPECT_TRUE(onnx_available());
#else
  EXPECT_FALSE(onnx_available());
  test::TempDir dir;
  test::write_bytes(dir.file("m.onnx"), {1, 2, 3});
  try {
    read_model(dir.file("m.onnx"));
    ADD_FAILURE() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_CONTAINS(e.what(), "built without ONNX support");
    EXPECT_CONTAINS(e.what(), "m.onnx");
  }
#endif
}

}  // namespace
}  // namespace sparsecc
