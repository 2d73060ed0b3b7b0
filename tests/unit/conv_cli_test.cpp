// Convolutions for users: the geometry SPEC of `sparsecc compile --conv` and compile-model's
// --layer-conv (parse_conv_spec, conv_geometry_for), the geometry of ONNX Conv layers (strides,
// asymmetric pads, auto_pad, dilations) and of .npz 4-D weights given one on the command line, the
// convolution problem of a model layer, and the in-process check of a convolution plan (its interpreter
// against the fp64 conv2d).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/random.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/io/npz.hpp"
#include "sparsecc/io/onnx.hpp"
#include "sparsecc/model/conv_spec.hpp"
#include "sparsecc/model/layers.hpp"
#include "sparsecc/model/model.hpp"
#include "sparsecc/pipeline/conv.hpp"
#include "test_support.hpp"

#if SPARSECC_HAVE_ONNX
#include <onnx/onnx_pb.h>
#endif

namespace sparsecc {
namespace {

#define EXPECT_CONTAINS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

// The message of the exception `expr` throws (of type `E`), or "" when it throws none.
template <typename E, typename F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return {};
}

// rows x cols values, about two thirds zero.
std::vector<double> sparse_values(std::int64_t count, std::uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<double> v(static_cast<std::size_t>(count));
  for (auto& x : v)
    x = rng.next() % 3 != 0 ? 0.0 : static_cast<double>(static_cast<int>(rng.next() % 16) - 8) / 4;
  return v;
}

TEST(ConvSpec, ParsesEveryForm) {
  ConvSpec s = parse_conv_spec("64x56x56,k3,s1,p1");
  EXPECT_EQ(s, (ConvSpec{.in_channels = 64,
                         .height = 56,
                         .width = 56,
                         .kernel_h = 3,
                         .kernel_w = 3,
                         .stride_h = 1,
                         .stride_w = 1,
                         .pad_top = 1,
                         .pad_left = 1,
                         .pad_bottom = 1,
                         .pad_right = 1}));
  s = parse_conv_spec("28x30,s2x1,k3x1,p1x0");  // fields after the image in any order; no channels
  EXPECT_EQ(s, (ConvSpec{.in_channels = 0,
                         .height = 28,
                         .width = 30,
                         .kernel_h = 3,
                         .kernel_w = 1,
                         .stride_h = 2,
                         .stride_w = 1,
                         .pad_top = 1,
                         .pad_left = 0,
                         .pad_bottom = 1,
                         .pad_right = 0}));
  s = parse_conv_spec("3x9x8,k3,s2,p0:1:1:0");  // top, left, bottom, right
  EXPECT_EQ(s.pad_top, 0);
  EXPECT_EQ(s.pad_left, 1);
  EXPECT_EQ(s.pad_bottom, 1);
  EXPECT_EQ(s.pad_right, 0);
  s = parse_conv_spec("7x7");  // defaults: stride 1, no padding, kernel from the weight
  EXPECT_EQ(s.kernel_h, 0);
  EXPECT_EQ(s.stride_h, 1);
  EXPECT_EQ(s.pad_bottom, 0);
  // conv_spec_string reads back as the geometry.
  rt::ConvGeometry g{.layout = rt::ConvLayout::nchw,
                     .in_channels = 3,
                     .height = 9,
                     .width = 8,
                     .kernel_h = 3,
                     .kernel_w = 2,
                     .stride_h = 2,
                     .stride_w = 1,
                     .pad_top = 0,
                     .pad_left = 1,
                     .pad_bottom = 1,
                     .pad_right = 0};
  EXPECT_EQ(conv_spec_string(g), "3x9x8,k3x2,s2x1,p0:1:1:0");
  EXPECT_EQ(
      conv_geometry_for(parse_conv_spec(conv_spec_string(g)), rt::ConvLayout::nchw, 4, 18, {4, 18}, "w"), g);
}

TEST(ConvSpec, RefusesMalformedSpecsNamingTheOption) {
  for (const char* bad : {"", "k3", "64x56x56,k3,k3", "64x56x56,q3", "64x56x56,k0", "64x56x56,p1:1",
                          "64x0x56", "64x56x56,,k3", "64x56x56,k3x3x3", "x56x56", "64x56x56,k-1", "1x2x3x4",
                          "64x56x56,s0", "64x56x56,kk", "64x56x56,k3,2x2"}) {
    const std::string m = message_of<UsageError>([&] { (void)parse_conv_spec(bad, "--conv"); });
    EXPECT_CONTAINS(m, "--conv") << bad;
    EXPECT_CONTAINS(m, fmt::format("'{}'", bad)) << bad;
  }
  EXPECT_CONTAINS(message_of<UsageError>([] { (void)parse_conv_spec("64x56x56,k3,k3"); }), "repeats");
  EXPECT_CONTAINS(message_of<UsageError>([] { (void)parse_conv_spec("64x56x56,k99999999"); }), "outside");
}

TEST(ConvSpec, GeometryAgainstTheWeight) {
  const auto nchw = rt::ConvLayout::nchw;
  // A matrix: the kernel from the spec, the channels from its columns.
  rt::ConvGeometry g = conv_geometry_for(parse_conv_spec("10x10,k3,p1"), nchw, 8, 36, {8, 36}, "w.mtx");
  EXPECT_EQ(g.in_channels, 4);
  EXPECT_EQ(g.pixels(), 100);
  // A 4-D weight gives the channels and the kernel, and checks what the spec gives.
  g = conv_geometry_for(parse_conv_spec("10x10,s2"), rt::ConvLayout::nhwc, 8, 36, {8, 4, 3, 3}, "w.npz", "c");
  EXPECT_EQ(g.kernel_w, 3);
  EXPECT_EQ(g.layout, rt::ConvLayout::nhwc);
  EXPECT_EQ(g.out_height(), 4);
  // Disagreements are InputErrors naming the file (and tensor).
  std::string m = message_of<InputError>([&] {
    (void)conv_geometry_for(parse_conv_spec("5x10x10,k3"), nchw, 8, 36, {8, 36}, "w.mtx");
  });
  EXPECT_CONTAINS(m, "w.mtx");
  EXPECT_CONTAINS(m, "36 columns");
  m = message_of<InputError>([&] {
    (void)conv_geometry_for(parse_conv_spec("10x10,k5"), nchw, 8, 36, {8, 4, 3, 3}, "w.npz", "conv1");
  });
  EXPECT_CONTAINS(m, "w.npz");
  EXPECT_CONTAINS(m, "conv1");
  EXPECT_CONTAINS(m, "kernel rows");
  m = message_of<InputError>([&] {
    (void)conv_geometry_for(parse_conv_spec("10x10,k5"), nchw, 8, 36, {8, 36}, "w.mtx");
  });
  EXPECT_CONTAINS(m, "not a multiple");
  // A matrix without a kernel, and geometries that break the executor's rules, are usage errors.
  EXPECT_CONTAINS(message_of<UsageError>([&] {
                    (void)conv_geometry_for(parse_conv_spec("10x10"), nchw, 8, 36, {8, 36}, "w.mtx");
                  }),
                  "give the kernel");
  EXPECT_CONTAINS(message_of<UsageError>([&] {
                    (void)conv_geometry_for(parse_conv_spec("10x10,k3,p3"), nchw, 8, 36, {8, 36}, "w.mtx");
                  }),
                  "padding");
  EXPECT_CONTAINS(message_of<UsageError>([&] {
                    (void)conv_geometry_for(parse_conv_spec("1x20x20,k9"), nchw, 8, 81, {8, 81}, "w.mtx");
                  }),
                  "taps");
}

// A model layer with a geometry is a convolution problem (N = output pixels) where args.conv says so.
TEST(ConvModel, LayerProblemIsAConvolution) {
  ModelLayer l;
  l.name = "c1";
  l.tensor = "c1.weight";
  l.op = "conv";
  l.a.rows = 4;
  l.a.cols = 27;
  l.a.row_ptr.assign(5, 0);
  l.bias = {1, 2, 3, 4};
  l.conv = rt::ConvGeometry{.layout = rt::ConvLayout::nchw,
                            .in_channels = 3,
                            .height = 9,
                            .width = 8,
                            .kernel_h = 3,
                            .kernel_w = 3,
                            .stride_h = 2,
                            .stride_w = 2,
                            .pad_top = 0,
                            .pad_left = 1,
                            .pad_bottom = 1,
                            .pad_right = 0};
  ModelLayerArgs args;
  std::vector<LayerNRule> rules;
  std::string from;
  EXPECT_EQ(model_layer_n(l, args, false, rules, from), 0);  // off: an SpMM at run-time N
  EXPECT_FALSE(model_layer_problem(l, 0, args, "f32").conv);
  args.conv = true;
  args.relu = true;
  EXPECT_EQ(model_layer_n(l, args, false, rules, from), l.conv->pixels());
  EXPECT_EQ(from, "conv geometry");
  const SpmmProblem p = model_layer_problem(l, l.conv->pixels(), args, "f32");
  ASSERT_TRUE(p.conv);
  EXPECT_EQ(*p.conv, *l.conv);
  EXPECT_EQ(p.m, 4);
  EXPECT_EQ(p.k, 27);
  EXPECT_EQ(p.n, l.conv->pixels());
  EXPECT_TRUE(p.bias);
  EXPECT_TRUE(p.relu);
}

// .npz: a 4-D weight matched by --layer-conv is a Conv layer of that geometry with its bias.
TEST(ConvModel, NpzFourDimensionalWeightsTakeACommandLineGeometry) {
  test::TempDir dir;
  const std::string npz = dir.file("m.npz");
  write_npz(npz,
            {test::make_tensor("c1.weight", {4, 3, 3, 3}, sparse_values(108, 3)),
             test::make_tensor("c1.bias", {4}, {1, -1, 0.5, 2}),
             test::make_tensor("c2.weight", {2, 4, 1, 1}, sparse_values(8, 4)),
             test::make_tensor("fc.weight", {5, 6}, sparse_values(30, 5))},
            false);
  ModelReadOptions options;
  options.max_density = 1.0;
  const ModelContents plain = read_model(npz, options);
  ASSERT_EQ(plain.layers.size(), 1u);  // 4-D weights are skipped without a geometry
  options.conv_specs.push_back(parse_conv_spec_rule("^c1$=9x8,s2,p0:1:1:0"));
  const ModelContents c = read_model(npz, options);
  ASSERT_EQ(c.layers.size(), 2u);
  const ModelLayer& l = c.layers[0];
  EXPECT_EQ(l.name, "c1");
  EXPECT_EQ(l.op, "conv");
  EXPECT_EQ(l.layout, "oihw_flattened");
  EXPECT_EQ(l.stored_shape, (std::vector<std::int64_t>{4, 3, 3, 3}));
  EXPECT_EQ(l.a.rows, 4);
  EXPECT_EQ(l.a.cols, 27);
  EXPECT_EQ(l.bias, (std::vector<double>{1, -1, 0.5, 2}));
  ASSERT_TRUE(l.conv);
  EXPECT_EQ(l.conv->in_channels, 3);
  EXPECT_EQ(l.conv->stride_h, 2);
  EXPECT_EQ(l.conv->pad_left, 1);
  EXPECT_EQ(l.conv->out_height(), 4);
  EXPECT_EQ(l.conv->out_width(), 4);
  // A geometry the weight disagrees with names the file and the tensor.
  options.conv_specs = {parse_conv_spec_rule("c2=5x9x9")};
  const std::string m = message_of<InputError>([&] { (void)read_model(npz, options); });
  EXPECT_CONTAINS(m, "m.npz");
  EXPECT_CONTAINS(m, "c2.weight");
  EXPECT_CONTAINS(message_of<UsageError>([] { (void)parse_conv_spec_rule("c1"); }), "REGEX=SPEC");
  EXPECT_CONTAINS(message_of<UsageError>([] { (void)parse_conv_spec_rule("c1=k3"); }),
                  "--layer-conv 'c1=k3'");
}

#if SPARSECC_HAVE_ONNX

onnx::TensorProto* add_initializer(onnx::GraphProto& g, const std::string& name,
                                   std::vector<std::int64_t> dims, const std::vector<double>& values) {
  onnx::TensorProto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (auto d : dims) t->add_dims(d);
  for (double v : values) t->add_float_data(static_cast<float>(v));
  return t;
}

onnx::NodeProto* add_conv(onnx::GraphProto& g, const std::string& name, const std::string& x,
                          const std::string& w, const std::string& y) {
  onnx::NodeProto* n = g.add_node();
  n->set_op_type("Conv");
  n->set_name(name);
  n->add_input(x);
  n->add_input(w);
  n->add_output(y);
  return n;
}

void set_ints(onnx::NodeProto* n, const std::string& name, const std::vector<std::int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (auto x : v) a->add_ints(x);
}

void set_string(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

// x: (batch, 3, 9, 8), batch symbolic; every Conv reads x.
std::string conv_model(const test::TempDir& dir) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto& g = *model.mutable_graph();
  g.set_name("convs");
  auto* x = g.add_input();
  x->set_name("x");
  auto* t = x->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  t->mutable_shape()->add_dim()->set_dim_param("batch");
  for (const std::int64_t d : {3, 9, 8}) t->mutable_shape()->add_dim()->set_dim_value(d);
  // Stride 2, asymmetric pads (top 0, left 1, bottom 1, right 0).
  add_initializer(g, "w1", {4, 3, 3, 3}, sparse_values(108, 11));
  auto* c1 = add_conv(g, "strided", "x", "w1", "y1");
  set_ints(c1, "strides", {2, 2});
  set_ints(c1, "pads", {0, 1, 1, 0});
  // Dilation 2: no convolution executor.
  add_initializer(g, "w2", {2, 3, 3, 3}, sparse_values(54, 12));
  set_ints(add_conv(g, "dilated", "x", "w2", "y2"), "dilations", {2, 2});
  // auto_pad SAME_UPPER with an even total (3x3, stride 1: one a side), and with an odd one (2x2).
  add_initializer(g, "w3", {2, 3, 3, 3}, sparse_values(54, 13));
  set_string(add_conv(g, "same", "x", "w3", "y3"), "auto_pad", "SAME_UPPER");
  add_initializer(g, "w4", {2, 3, 2, 2}, sparse_values(24, 14));
  set_string(add_conv(g, "same_odd", "x", "w4", "y4"), "auto_pad", "SAME_LOWER");
  add_initializer(g, "w5", {2, 3, 3, 3}, sparse_values(54, 15));
  set_string(add_conv(g, "valid", "x", "w5", "y5"), "auto_pad", "VALID");
  for (const char* y : {"y1", "y2", "y3", "y4", "y5"}) g.add_output()->set_name(y);
  std::string bytes;
  EXPECT_TRUE(model.SerializeToString(&bytes));
  const std::string path = dir.file("convs.onnx");
  test::write_bytes(path, Bytes(bytes.begin(), bytes.end()));
  return path;
}

#endif

TEST(ConvModel, OnnxConvLayersGetTheirGeometry) {
#if !SPARSECC_HAVE_ONNX
  GTEST_SKIP() << "built without ONNX support";
#else
  test::TempDir dir;
  const std::string path = conv_model(dir);
  ModelReadOptions options;
  options.max_density = 1.0;
  // Without shapes there is no geometry.
  ModelContents c = read_model(path, options);
  ASSERT_EQ(c.layers.size(), 5u);
  EXPECT_FALSE(c.layers[0].conv);
  EXPECT_CONTAINS(c.layers[0].conv_note, "unknown");
  // conv_geometry runs inference for the geometry alone (graph_n stays 0).
  options.conv_geometry = true;
  c = read_model(path, options);
  ASSERT_EQ(c.layers.size(), 5u);
  std::map<std::string, const ModelLayer*> by;
  for (const ModelLayer& l : c.layers) by[l.name] = &l;
  const ModelLayer& strided = *by.at("strided");
  EXPECT_EQ(strided.graph_n, 0);
  ASSERT_TRUE(strided.conv) << strided.conv_note;
  EXPECT_EQ(*strided.conv, (rt::ConvGeometry{.layout = rt::ConvLayout::nchw,
                                             .in_channels = 3,
                                             .height = 9,
                                             .width = 8,
                                             .kernel_h = 3,
                                             .kernel_w = 3,
                                             .stride_h = 2,
                                             .stride_w = 2,
                                             .pad_top = 0,
                                             .pad_left = 1,
                                             .pad_bottom = 1,
                                             .pad_right = 0}));
  EXPECT_EQ(strided.conv->out_height(), 4);
  EXPECT_EQ(strided.conv->out_width(), 4);
  EXPECT_FALSE(by.at("dilated")->conv);
  EXPECT_CONTAINS(by.at("dilated")->conv_note, "dilations [2, 2]");
  const ModelLayer& same = *by.at("same");
  ASSERT_TRUE(same.conv) << same.conv_note;
  EXPECT_EQ(same.conv->pad_top, 1);
  EXPECT_EQ(same.conv->pad_right, 1);
  EXPECT_EQ(same.conv->pixels(), 72);
  EXPECT_FALSE(by.at("same_odd")->conv);
  EXPECT_CONTAINS(by.at("same_odd")->conv_note, "auto_pad");
  const ModelLayer& valid = *by.at("valid");
  ASSERT_TRUE(valid.conv) << valid.conv_note;
  EXPECT_EQ(valid.conv->pad_top, 0);
  EXPECT_EQ(valid.conv->pixels(), 7 * 6);
  // With the shapes asked for, graph_n is the im2col N as before, beside the geometry.
  options.infer_shapes = true;
  options.batch = 2;
  c = read_model(path, options);
  EXPECT_EQ(c.layers[0].graph_n, 2 * 16);
  ASSERT_TRUE(c.layers[0].conv);

  // read_model_layers with args.conv: the convolution's N, "conv geometry", the others as before.
  ModelLayerArgs args;
  args.max_density = 1.0;
  args.conv = true;
  std::vector<std::string> notes;
  const ModelLayerSet set =
      read_model_layers(path, args, "compile", [&](const std::string& l) { notes.push_back(l); });
  ASSERT_EQ(set.n.size(), 5u);
  EXPECT_EQ(set.n[0], 16);
  EXPECT_EQ(set.n_from[0], "conv geometry");
  EXPECT_EQ(set.n[1], 0);
  EXPECT_EQ(set.n_from[1], "run time");
  bool dilated_noted = false;
  for (const std::string& n : notes)
    dilated_noted |= n.find("dilated is compiled as the GEMM") != std::string::npos;
  EXPECT_TRUE(dilated_noted);
  // The strided layer as compile-model builds it: its plan, checked on random images against conv2d.
  const ModelLayer& layer = set.model.layers[0];
  const SpmmProblem problem = model_layer_problem(layer, set.n[0], args, "f32");
  ASSERT_TRUE(problem.conv);
  SpmmPlan plan;
  try {
    plan = plan_spmm(layer.a, problem);
  } catch (const UsageError& e) {
    GTEST_SKIP() << "the planner takes no convolution here: " << e.what();
  }
  const pipeline::ConvCheck check = pipeline::check_conv_plan(plan, layer.a, layer.bias);
  EXPECT_TRUE(check.ok()) << check.text();
#endif
}

// The compile command's check of a convolution plan: its interpreter against conv2d in fp64.
TEST(ConvCheck, PlanInterpreterAgreesWithTheReference) {
  const rt::ConvGeometry g{.layout = rt::ConvLayout::nhwc,
                           .in_channels = 3,
                           .height = 9,
                           .width = 8,
                           .kernel_h = 3,
                           .kernel_w = 3,
                           .stride_h = 2,
                           .stride_w = 2,
                           .pad_top = 0,
                           .pad_left = 1,
                           .pad_bottom = 1,
                           .pad_right = 0};
  Tensor w = test::make_tensor("w", {4, 27}, sparse_values(108, 21));
  const CsrMatrix a = matrix_from_tensor(std::move(w), "w");
  const std::vector<double> bias = {0.5, -1, 0, 2};
  SpmmPlan plan;
  try {
    plan = plan_spmm(a, conv_problem(g, 4, true, true));
  } catch (const UsageError& e) {
    GTEST_SKIP() << "the planner takes no convolution here: " << e.what();
  }
  const pipeline::ConvCheck check = pipeline::check_conv_plan(plan, a, bias, 2, 7);
  EXPECT_TRUE(check.ok()) << check.text();
  EXPECT_EQ(check.batch, 2);
  EXPECT_CONTAINS(check.text(), "2 random image(s), seed 7");
  SpmmProblem plain;
  plain.m = 4;
  plain.k = 27;
  plain.n = 8;
  const SpmmPlan spmm = plan_spmm(a, plain);
  EXPECT_THROW((void)pipeline::check_conv_plan(spmm, a, {}), UsageError);
}

// 4-D weights from a tensor file are flattened OIHW; other ranks are refused naming the file.
TEST(ConvCheck, LoadsFourDimensionalWeights) {
  test::TempDir dir;
  const std::string npz = dir.file("w.npz");
  const std::vector<double> v = sparse_values(4 * 3 * 2 * 2, 31);
  write_npz(
      npz,
      {test::make_tensor("conv", {4, 3, 2, 2}, v), test::make_tensor("odd", {4, 3, 2}, sparse_values(24, 2))},
      false);
  const pipeline::ConvWeights w = pipeline::load_conv_weights(npz + ":conv", {}, "f32");
  EXPECT_EQ(w.stored_shape, (std::vector<std::int64_t>{4, 3, 2, 2}));
  EXPECT_EQ(w.a.rows, 4);
  EXPECT_EQ(w.a.cols, 12);
  EXPECT_EQ(dense_from_csr(w.a).data, v);
  const std::string m =
      message_of<InputError>([&] { (void)pipeline::load_conv_weights(npz + ":odd", {}, "f32"); });
  EXPECT_CONTAINS(m, "w.npz");
  EXPECT_CONTAINS(m, "4-D");
}

}  // namespace
}  // namespace sparsecc
