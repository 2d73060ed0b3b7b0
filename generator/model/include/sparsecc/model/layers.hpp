// A model's layers as `compile-model` builds them and `tune --model` tunes them: the same reader
// options, the same N per layer and the same SpMM problem per layer, so that the tuning key of every
// layer that `tune --model` records is the key `compile-model --db` looks up.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "sparsecc/model/model.hpp"
#include "sparsecc/plan/spmm_plan.hpp"

namespace sparsecc {

// The batch a run-time-N executor is planned (and tuned) for when no N is given.
inline constexpr std::int64_t kModelPlanningN = 64;

// The largest N a layer may be given (by a rule or the model's shapes).
inline constexpr std::int64_t kModelMaxN = std::int64_t{1} << 24;

// How the layers are chosen and given their N and ReLU (the flags of compile-model and tune --model).
struct ModelLayerArgs {
  std::string select;                // --select: the layers whose name or tensor matches
  double max_density = 0.5;          // --max-density: denser weights are skipped
  std::int64_t n = 0;                // --n; 0: run-time N, planned for kModelPlanningN
  std::vector<std::string> layer_n;  // --layer-n REGEX=N: a fixed N for the layers that match
  std::string layer_n_file;          // --layer-n-file FILE: lines "NAME,N" or "NAME N"
  bool n_from_shapes = false;        // --n-from-shapes: N from the model's shapes (ONNX) where known
  std::int64_t batch = 0;            // --batch: the inputs' symbolic leading dimension; implies n_from_shapes
  bool relu = false;                 // --relu: after every layer
  std::string relu_select;           // --relu-select: after the layers whose name matches
  // Conv layers with a geometry (ModelLayer::conv) become convolution executors (compile-model without
  // --conv-as-gemm): their problem is conv_problem (N = output pixels, the batch at run time) and no
  // N rule applies to them. Off: every layer an SpMM of its matrix (tune --model, --conv-as-gemm).
  bool conv = false;
  std::vector<std::string> layer_conv;  // --layer-conv REGEX=SPEC: geometries of npz/safetensors 4-D weights
};

// The model's layers as they are compiled: each with the N it is built for (0: run-time N) and where
// that N came from.
struct ModelLayerSet {
  ModelContents model;
  std::vector<std::int64_t> n;      // one a layer
  std::vector<std::string> n_from;  // one a layer: the rule's origin, "model shapes", "--n" or "run time"
};

// One way to give some layers their own N: a line of --layer-n-file (an exact layer name) or a
// --layer-n expression (matched against the layer's name and its tensor's name, like --select).
struct LayerNRule {
  std::string origin;  // where it was given, for messages: "FILE:LINE" or "--layer-n 'EXPR=N'"
  std::string name;    // exact: the layer name
  std::optional<std::regex> pattern;
  std::int64_t n = 0;
  bool used = false;
};

// The --layer-n-file lines first (exact names, in file order), then the --layer-n expressions in the
// order given. A malformed line is an InputError naming the file and line; a malformed --layer-n a
// UsageError.
std::vector<LayerNRule> layer_n_rules(const ModelLayerArgs& args);

// Whether `layer` is compiled as a convolution executor under `args` (args.conv and a geometry).
bool model_layer_is_conv(const ModelLayer& layer, const ModelLayerArgs& args);

// The N of `layer`: for a convolution (model_layer_is_conv) its output pixels ("conv geometry");
// otherwise the first of `rules` that matches (marked used), else the N of the model's shapes
// when `from_shapes` and known (up to kModelMaxN), else args.n (0: run-time N). `from` receives the
// origin ("FILE:LINE", "--layer-n '...'", "model shapes", "--n" or "run time").
std::int64_t model_layer_n(const ModelLayer& layer, const ModelLayerArgs& args, bool from_shapes,
                           std::vector<LayerNRule>& rules, std::string& from);

// Receives the lines a reader reports to the user on the way (skipped tensors, what the shapes gave,
// rules that gave no layer its N), one line at a time without the newline.
using ModelNoteSink = std::function<void(const std::string& line)>;

// The model's layers (each skipped tensor reported through `note`) with their N (model_layer_n); a
// rule no layer takes is reported, and so is how many layers the shapes gave an N. An InputError
// naming the file when no layer is left ("no sparse weight matrix to `verb`"), a UsageError for a
// --relu-select that is not a regular expression. `progress` (ModelReadOptions::progress): lines for a
// weight whose reading takes more than a second.
ModelLayerSet read_model_layers(const std::string& path, const ModelLayerArgs& args, const std::string& verb,
                                const ModelNoteSink& note = {}, const ReadProgress& progress = {});

// The SpMM problem of one layer: a convolution's (conv_problem of its geometry) where
// model_layer_is_conv; otherwise its bias, ReLU from the model (ONNX) or the arguments, N fixed at
// `n` (the layer's N from read_model_layers) or, for 0, at run time (planned for kModelPlanningN).
SpmmProblem model_layer_problem(const ModelLayer& layer, std::int64_t n, const ModelLayerArgs& args,
                                const std::string& dtype);

}  // namespace sparsecc
