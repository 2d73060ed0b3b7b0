// ONNX models (a serialized ModelProto), read through libonnx's protobuf classes when sparsecc is
// built with ONNX support (SPARSECC_WITH_ONNX and Debian's libonnx-dev), and handed on as plain
// structs: the main graph's initializers and nodes, in file order. Subgraphs (If, Loop, Scan bodies)
// are not read. Initializers of element type FLOAT, DOUBLE, FLOAT16 and BFLOAT16 are decoded from
// raw_data (little-endian) or from the typed fields (float_data, double_data, int32_data holding
// 16-bit patterns); other element types are listed with their shape only. Unlike the other tensor
// readers, decoding keeps NaN and Inf (models hold them in masks and constants): callers that use a
// tensor as a weight check its values. Errors are InputError naming the file and the tensor or node:
// bytes that do not parse, a missing graph, duplicate initializer names, negative dimensions, a data
// size that disagrees with the dimensions, segmented tensors, and initializers kept in external data
// files (not supported).
//
// Shapes (OnnxReadOptions::infer_shapes): libonnx's shape inference over the main graph, after the
// leading dimension of each graph input that the model leaves symbolic or unset (a batch dimension,
// "N", "batch_size") is given OnnxReadOptions::batch when that is set. Nodes inference cannot type
// (unknown or custom operators) leave their outputs without shapes; an error of inference as a whole
// is no read error: the graph comes without shapes and shape_note says why. Inference runs in a
// child process (fork), since libonnx can crash on malformed attributes (a Conv with a zero stride
// divides by zero): a crash, or inference still running after two minutes, is such an error too.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "sparsecc/matrix/dense.hpp"

namespace sparsecc {

struct OnnxInitializer {
  // name, shape (the dims) and, for a floating element type, dtype and values in C order.
  Tensor tensor;
  std::string data_type;  // ONNX's name of the element type: "FLOAT", "FLOAT16", "INT64", ...
  bool floating = false;  // FLOAT, DOUBLE, FLOAT16 or BFLOAT16: tensor.data holds the values
};

struct OnnxNode {
  std::string name;                 // may be empty
  std::string op_type;              // "MatMul", "Gemm", "Conv", "Relu", ...
  std::string domain;               // "" (or "ai.onnx") for the standard operators
  std::vector<std::string> inputs;  // "" for an omitted optional input
  std::vector<std::string> outputs;
  // The attributes of types INT, FLOAT and INTS (transA, transB, alpha, beta, group, kernel_shape, ...).
  std::map<std::string, std::int64_t> ints;
  std::map<std::string, double> floats;
  std::map<std::string, std::vector<std::int64_t>> int_lists;

  std::int64_t int_attr(const std::string& attr, std::int64_t fallback) const;
  double float_attr(const std::string& attr, double fallback) const;
  // True for the standard operator `op` (empty or "ai.onnx" domain).
  bool is(const std::string& op) const;
};

struct OnnxReadOptions {
  bool infer_shapes = false;
  // With infer_shapes: the size of the inputs' symbolic leading dimension (0: left unknown).
  std::int64_t batch = 0;
  // The most protobuf messages the model may hold (0: onnx_message_limit of the data's size).
  std::uint64_t message_limit = 0;
  // With infer_shapes: how long inference may run before it is abandoned (the shapes stay unknown
  // and shape_note says why).
  int inference_seconds = 120;
};

struct OnnxGraph {
  std::string name;
  std::vector<OnnxInitializer> initializers;     // graph.initializer, in file order
  std::vector<std::string> sparse_initializers;  // names of graph.sparse_initializer (not decoded)
  std::vector<OnnxNode> nodes;                   // in file (topological) order
  std::vector<std::string> inputs;               // graph input names
  std::vector<std::string> outputs;              // graph output names
  // With infer_shapes: the dims of every value inference reached (graph inputs and outputs, node
  // outputs), -1 for a dimension it left unknown; shape_note is set when inference failed.
  std::map<std::string, std::vector<std::int64_t>> shapes;
  std::string shape_note;
};

// Whether this build of sparsecc reads ONNX; without it parse_onnx and read_onnx throw UsageError.
bool onnx_available();

// A model's protobuf may hold at most one message per kOnnxBytesPerMessage bytes of the file, and
// always kMinOnnxMessageLimit: every message costs hundreds of bytes once parsed, but an empty one
// takes two bytes of the file, so degenerate models are refused before they are parsed.
inline constexpr std::uint64_t kOnnxBytesPerMessage = 16;
inline constexpr std::uint64_t kMinOnnxMessageLimit = std::uint64_t{1} << 18;
std::uint64_t onnx_message_limit(std::uint64_t file_bytes);

// `file` names the input in messages. Inputs over 2 GiB (protobuf's limit) are an InputError.
OnnxGraph parse_onnx(std::span<const unsigned char> data, const std::string& file,
                     const OnnxReadOptions& options = {});
OnnxGraph read_onnx(const std::string& path, const OnnxReadOptions& options = {});  // gzip-transparent

}  // namespace sparsecc
