// A model's layers as compile-model builds them and tune --model tunes them (model/layers.hpp): the N
// rules of --layer-n-file and --layer-n (their order, precedence and errors), the N of the model's
// shapes, the notes the reader reports, and each layer's SpMM problem (bias, ReLU, N mode).
#include <gtest/gtest.h>

#include "sparsecc/common/error.hpp"
#include "sparsecc/io/npz.hpp"
#include "sparsecc/model/layers.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

ModelLayer layer_named(const std::string& name, const std::string& tensor, std::int64_t graph_n = 0) {
  ModelLayer l;
  l.name = name;
  l.tensor = tensor;
  l.graph_n = graph_n;
  l.a = test::random_csr(6, 4, 0.5, 1);
  return l;
}

// A .npz model: fc1 (4 x 6, with a bias), fc2 (3 x 4), and a dense tensor that is skipped.
std::string write_model(const test::TempDir& dir) {
  const std::string path = dir.file("m.npz");
  std::vector<double> w1(24, 0.0), w2(12, 0.0);
  w1[0] = 1, w1[7] = 2, w1[20] = 3;
  w2[1] = 4, w2[11] = 5;
  write_npz(
      path,
      {test::make_tensor("fc1.weight", {4, 6}, w1), test::make_tensor("fc1.bias", {4}, {1, 2, 3, 4}),
       test::make_tensor("fc2.weight", {3, 4}, w2), test::make_tensor("dense.weight", {2, 2}, {1, 1, 1, 1})},
      false);
  return path;
}

TEST(ModelLayers, RulesFromTheFileFirstThenTheExpressions) {
  test::TempDir dir;
  ModelLayerArgs args;
  args.layer_n_file = dir.file("n.txt");
  test::write_text(args.layer_n_file, "# layer N\nfc1,16\n\nfc2 32  # a comment\n");
  args.layer_n = {"^fc=8", "conv.*=4"};
  const std::vector<LayerNRule> rules = layer_n_rules(args);
  ASSERT_EQ(rules.size(), 4u);
  EXPECT_EQ(rules[0].name, "fc1");
  EXPECT_EQ(rules[0].n, 16);
  EXPECT_EQ(rules[0].origin, args.layer_n_file + ":2");
  EXPECT_FALSE(rules[0].pattern);
  EXPECT_EQ(rules[1].name, "fc2");
  EXPECT_EQ(rules[1].n, 32);
  EXPECT_EQ(rules[1].origin, args.layer_n_file + ":4");
  EXPECT_TRUE(rules[2].pattern);
  EXPECT_EQ(rules[2].n, 8);
  EXPECT_EQ(rules[2].origin, "--layer-n '^fc=8'");
  EXPECT_EQ(rules[3].n, 4);
}

TEST(ModelLayers, MalformedRulesAreErrorsNamingWhere) {
  test::TempDir dir;
  ModelLayerArgs args;
  args.layer_n_file = dir.file("n.txt");
  test::write_text(args.layer_n_file, "fc1,16\nfc1,8\n");
  test::expect_input_error([&] { layer_n_rules(args); }, {"n.txt", "listed twice"});
  test::write_text(args.layer_n_file, "fc1 0\n");
  test::expect_input_error([&] { layer_n_rules(args); }, {"n.txt", "expected a layer name and its N"});
  test::write_text(args.layer_n_file, "fc1 16777217\n");  // above kModelMaxN
  test::expect_input_error([&] { layer_n_rules(args); }, {"n.txt"});

  ModelLayerArgs expr;
  for (const std::string bad : {"fc", "=8", "fc=0", "fc=x"}) {
    expr.layer_n = {bad};
    EXPECT_THROW(layer_n_rules(expr), UsageError) << bad;
  }
  expr.layer_n = {"(=8"};
  try {
    layer_n_rules(expr);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular expression"), std::string::npos) << e.what();
  }
}

TEST(ModelLayers, TheFirstMatchingRuleWinsOverTheShapesAndN) {
  ModelLayerArgs args;
  args.n = 128;
  args.layer_n = {"attn=8", "^block=16"};
  std::vector<LayerNRule> rules = layer_n_rules(args);
  std::string from;

  // No rule: --n, or the shapes when they are asked for and known.
  EXPECT_EQ(model_layer_n(layer_named("fc", "fc.weight", 96), args, false, rules, from), 128);
  EXPECT_EQ(from, "--n");
  EXPECT_EQ(model_layer_n(layer_named("fc", "fc.weight", 96), args, true, rules, from), 96);
  EXPECT_EQ(from, "model shapes");
  EXPECT_EQ(model_layer_n(layer_named("fc", "fc.weight", kModelMaxN + 1), args, true, rules, from), 128);
  EXPECT_EQ(from, "--n");

  // A rule beats the shapes; the first that matches (name or tensor) is taken and marked used.
  EXPECT_EQ(model_layer_n(layer_named("block1.attn", "w", 96), args, true, rules, from), 8);
  EXPECT_EQ(from, "--layer-n 'attn=8'");
  EXPECT_TRUE(rules[0].used);
  EXPECT_FALSE(rules[1].used);
  EXPECT_EQ(model_layer_n(layer_named("x", "block2.ffn", 0), args, false, rules, from), 16);
  EXPECT_TRUE(rules[1].used);

  ModelLayerArgs runtime;
  std::vector<LayerNRule> none;
  EXPECT_EQ(model_layer_n(layer_named("fc", "fc.weight"), runtime, false, none, from), 0);
  EXPECT_EQ(from, "run time");
}

TEST(ModelLayers, ProblemOfALayer) {
  ModelLayer l = layer_named("enc.fc1", "enc.fc1.weight");
  ModelLayerArgs args;
  SpmmProblem p = model_layer_problem(l, 0, args, "f16");
  EXPECT_EQ(p.m, 6);
  EXPECT_EQ(p.k, 4);
  EXPECT_EQ(p.n, kModelPlanningN);
  EXPECT_EQ(p.n_mode, SpmmNMode::runtime);
  EXPECT_FALSE(p.bias);
  EXPECT_FALSE(p.relu);
  EXPECT_EQ(p.dtype, DType::f16);

  l.bias = std::vector<double>(6, 1.0);
  p = model_layer_problem(l, 32, args, "f32");
  EXPECT_EQ(p.n, 32);
  EXPECT_EQ(p.n_mode, SpmmNMode::fixed);
  EXPECT_TRUE(p.bias);

  args.relu_select = "fc1$";  // ReLU by name
  EXPECT_TRUE(model_layer_problem(l, 32, args, "f32").relu);
  args.relu_select = "fc2$";
  EXPECT_FALSE(model_layer_problem(l, 32, args, "f32").relu);
  l.relu = true;  // from the model (ONNX)
  EXPECT_TRUE(model_layer_problem(l, 32, args, "f32").relu);
  l.relu = false;
  args.relu = true;  // --relu: every layer
  EXPECT_TRUE(model_layer_problem(l, 32, args, "f32").relu);
}

TEST(ModelLayers, ReadsTheLayersWithTheirNAndReportsNotes) {
  test::TempDir dir;
  const std::string path = write_model(dir);
  ModelLayerArgs args;
  args.n = 64;
  args.layer_n = {"fc2=8", "nothing=4"};
  std::vector<std::string> notes;
  const ModelLayerSet set =
      read_model_layers(path, args, "compile", [&](const std::string& line) { notes.push_back(line); });
  ASSERT_EQ(set.model.layers.size(), 2u);
  EXPECT_EQ(set.model.layers[0].name, "fc1");
  EXPECT_EQ(set.model.layers[0].bias.size(), 4u);
  EXPECT_EQ(set.n, (std::vector<std::int64_t>{64, 8}));
  EXPECT_EQ(set.n_from, (std::vector<std::string>{"--n", "--layer-n 'fc2=8'"}));
  // The skipped tensors first, then the rule no layer took.
  ASSERT_EQ(notes.size(), set.model.skipped.size() + 1);
  EXPECT_EQ(notes.front().rfind("skipped ", 0), 0u) << notes.front();
  EXPECT_EQ(notes.back(), "--layer-n 'nothing=4': gives no layer of " + path +
                              " its N (none matches, or an earlier rule matched first)");

  // The same without a sink: nothing to report to, the same layers.
  EXPECT_EQ(read_model_layers(path, args, "compile").n, set.n);
}

TEST(ModelLayers, NoLayerLeftAndBadReluSelectAreErrors) {
  test::TempDir dir;
  const std::string path = write_model(dir);
  ModelLayerArgs args;
  args.select = "no-such-layer";
  std::vector<std::string> notes;
  test::expect_input_error(
      [&] { read_model_layers(path, args, "tune", [&](const std::string& l) { notes.push_back(l); }); },
      {"m.npz", "no sparse weight matrix to tune"});
  EXPECT_FALSE(notes.empty());  // the skipped tensors were reported before the error

  ModelLayerArgs relu;
  relu.relu_select = "(";
  EXPECT_THROW(read_model_layers(path, relu, "compile"), UsageError);
}

}  // namespace
}  // namespace sparsecc
