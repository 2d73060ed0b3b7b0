// Whole models: every weight matrix of a .npz, .safetensors or .onnx file as a layer the compiler can
// build (out = A · in), with the orientation the operator implies, and every other tensor listed with
// the reason it was left out.
//
// ONNX (main graph, standard operators, node order):
// - MatMul(X, W), W a 2-D K×N initializer: out = W^T · in, A = W^T ("transposed").
//   MatMul(W, X), the initializer first: Y = W · X, each column of X is an input, A = W ("as_stored").
//   Both inputs initializers: skipped. When the MatMul's output feeds only an Add whose other input
//   is an initializer of one value per output (shape (M,), (1, M) or (1, 1, M) for MatMul(X, W),
//   (M, 1) or (1, M, 1) for MatMul(W, X)) or of one value, that Add is folded: its constant is the
//   bias, and relu is looked for after the Add. Any other Add is left to the graph (the layer has no
//   bias).
// - Gemm(X, B, C), B the initializer: A = alpha · B when transB=1 ("as_stored"), alpha · B^T when
//   transB=0 ("transposed"); transA=1 is skipped. C, when an initializer of M values (shape (M,) or
//   (1, M)) or of one value (broadcast), gives the bias beta · C; a C of any other shape, or one that is
//   not an initializer, skips the layer (its output could not be reproduced).
// - Conv(X, W, B) with a 4-D OIHW weight and group=1: A = W reshaped to O × (I·kh·kw)
//   ("oihw_flattened"), the weight of the im2col form; B, an initializer of O values, is the bias.
//   Grouped convolutions, weights of other ranks and a kernel_shape that disagrees with W are skipped.
// - relu: the op's first output (a folded Add's, for MatMul) feeds exactly one node input, that node
//   is a Relu, and the output is not a graph output.
// - A weight shared by several nodes gives one layer per node (each named after its node).
// - A node input that names nothing (no initializer, graph input or node output) is an InputError when
//   it is a weight or bias input of MatMul, Gemm or Conv, and ignored elsewhere.
// npz / safetensors (file order): every 2-D tensor is a layer with A = W ("matrix", "as_stored"); a
// tensor "<prefix>.bias" or "<prefix>_bias" with M values is its bias, where <prefix> is the layer name
// (the tensor name less a trailing ".weight" or "_weight"). Tensors of non-floating dtypes are listed
// as skipped; tensors of more than 4 dimensions are an InputError from the reader.
//
// Convolutions (ModelLayer::conv): a Conv layer's geometry (rt::ConvGeometry, layout nchw) from the
// node's attributes and its input X's inferred shape (ONNX shape inference; ModelReadOptions::
// conv_geometry runs it for the geometry alone): strides, pads (ONNX's [x1_begin, x2_begin, x1_end,
// x2_end] = [top, left, bottom, right]) and the height and width of X. auto_pad is resolved from the
// inferred output shape: pads that give Y's height and width are taken; a model without "pads" whose
// Y is larger than VALID padding gives is SAME padding, its total split evenly (an odd total, where
// SAME_UPPER and SAME_LOWER differ, is left without a geometry: the reader sees no string attributes).
// A Conv without a geometry keeps the im2col form (A and graph_n as above) and says why in conv_note:
// dilations other than 1, X's or Y's shape unknown (no inference, a symbolic height or width), a
// geometry that breaks rt::check_conv_geometry's rules (more than 64 taps, a padding as large as the
// kernel). npz / safetensors: a 4-D weight (O, I, kh, kw) whose layer name or tensor name matches a
// ModelReadOptions::conv_specs expression is a Conv layer (op "conv", "oihw_flattened") of that
// command-line geometry (sparsecc/model/conv_spec.hpp); its bias pairs as a matrix's does.
//
// Shapes (ModelReadOptions::infer_shapes, ONNX only): the graph's shapes by ONNX shape inference
// (io/onnx.hpp; the inputs' symbolic leading dimension set to ModelReadOptions::batch) give each layer
// the N its product has in the model, from the node's output Y: Conv, Y = (b, O, H', W'...): b · H' ·
// W'... (the im2col columns); MatMul(X, W), Y = (..., M): the product of the leading dims (1 for a
// vector); MatMul(W, X) with a 2-D Y = (M, c): c (a batched W · X is no single product: unknown); Gemm,
// Y = (rows, M): rows. A dimension inference left unknown leaves the layer's N unknown (0).
//
// Skipped: tensors that are not 2-D (npz/safetensors), biases (listed as such), initializers that feed
// no MatMul/Gemm/Conv weight input, non-floating weights, weights holding NaN or Inf (ONNX), layers the
// select expression does not match, empty and all-zero weights, weights denser than max_density, and
// matrices with a dimension over kMaxMatrixDimension. Skipped entries follow the file's tensor order;
// a tensor skipped for several nodes is listed once per node. Layer names are made unique by a suffix
// "#2", "#3", ... in layer order.
#pragma once

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "sparsecc/io/raw_tensor.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/model/conv_spec.hpp"
#include "sparsecc/runtime/conv_geometry.hpp"

namespace sparsecc {

struct ModelLayer {
  std::string name;    // ONNX: the node's name (the initializer's name when the node has none);
                       // npz/safetensors: the tensor name with a trailing ".weight"/"_weight" removed
  std::string tensor;  // the weight tensor's name in the file
  std::string op;      // "matmul" | "gemm" | "conv" (ONNX) or "matrix" (npz/safetensors: a 2-D tensor)
  std::string layout;  // how A was made from the stored tensor: "as_stored" (A = W), "transposed"
                       // (A = W^T: MatMul's K×N weight, Gemm with transB=0), "oihw_flattened"
                       // (Conv: A = O × (I·kh·kw))
  std::vector<std::int64_t> stored_shape;
  CsrMatrix a;               // M = output features, K = input features: the layer computes out = A · in
                             // (explicit zeros dropped; alpha folded in for Gemm)
  std::vector<double> bias;  // M values or empty: Gemm's C (times beta), Conv's B; npz/safetensors:
                             // the tensor "<prefix>.bias"/"<prefix>_bias" with M values
  bool relu = false;         // ONNX: the op's output feeds exactly one node and it is a Relu
  double density = 0;        // nnz / (M·K)
  std::int64_t graph_n = 0;  // with infer_shapes: the N the model's shapes give the layer; 0 unknown
  // op "conv": the convolution's geometry where known (see "Convolutions" above), layout nchw; else
  // empty, and conv_note says why (empty for layers of other ops).
  std::optional<rt::ConvGeometry> conv;
  std::string conv_note;
};

// A command-line geometry for the 4-D weights of .npz / .safetensors files (compile-model
// --layer-conv REGEX=SPEC): the first whose expression matches a 4-D tensor's layer or tensor name.
struct ConvSpecRule {
  std::string origin;  // for messages: "--layer-conv 'EXPR=SPEC'"
  std::regex pattern;
  ConvSpec spec;
};
// Parses REGEX=SPEC (split at the first '=' followed by a geometry); a UsageError naming `origin`.
ConvSpecRule parse_conv_spec_rule(const std::string& text, const std::string& option = "--layer-conv");

struct SkippedTensor {
  std::string tensor;
  std::string reason;
};

struct ModelContents {
  std::string file;
  std::string format;  // "npz" | "safetensors" | "onnx"
  std::vector<ModelLayer> layers;
  std::vector<SkippedTensor> skipped;
  std::string shape_note;  // with infer_shapes: why there are no shapes (no graph, inference failed)
};

struct ModelReadOptions {
  std::string select;         // ECMAScript regex; empty = all. A layer is kept when regex_search matches
                              // its name or its tensor name
  double max_density = 0.5;   // above this a weight is "dense" and skipped
  bool infer_shapes = false;  // ONNX: fill ModelLayer::graph_n (see "Shapes" above)
  // ONNX: run shape inference where the graph has a Conv, for ModelLayer::conv alone (graph_n stays 0
  // without infer_shapes).
  bool conv_geometry = false;
  // npz / safetensors: 4-D weights that become Conv layers (see "Convolutions" above).
  std::vector<ConvSpecRule> conv_specs = {};
  std::int64_t batch = 0;  // with infer_shapes: the inputs' symbolic leading dimension (0: unknown)
  // npz/safetensors: progress lines (step "read FILE:TENSOR") for a weight whose reading into CSR takes
  // more than a second.
  ReadProgress progress = {};
};

// The format comes from the extension (.npz, .safetensors or .onnx, optionally followed by .gz); any
// other is an InputError naming the file. An invalid select expression or a max_density outside
// [0, 1] is a UsageError; so is an .onnx file when this build has no ONNX support.
ModelContents read_model(const std::string& path, const ModelReadOptions& options = {});

}  // namespace sparsecc
