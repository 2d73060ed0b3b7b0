// A model's layers as `compile-model` builds them and `tune --model` tunes them: the same reader
// options, the same SpMM problem per layer, so that the tuning key of every layer that `tune --model`
// records is the key `compile-model --db` looks up.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <regex>
#include <string>

#include "sparsecc/common/error.hpp"
#include "sparsecc/model/model.hpp"
#include "sparsecc/plan/spmm_plan.hpp"

namespace sparsecc::cli {

// The batch a run-time-N executor is planned (and tuned) for when --n is not given.
inline constexpr std::int64_t kModelPlanningN = 64;

struct ModelLayerArgs {
  std::string select;        // --select
  double max_density = 0.5;  // --max-density
  std::int64_t n = 0;        // --n; 0: run-time N, planned for kModelPlanningN
  bool relu = false;         // --relu: after every layer
  std::string relu_select;   // --relu-select: after the layers whose name matches
};

// The model's layers (skipped tensors listed on stderr); an InputError naming the file when none is
// left, a UsageError for a --relu-select that is not a regular expression.
inline ModelContents read_model_layers(const std::string& path, const ModelLayerArgs& args,
                                       const std::string& verb) {
  if (!args.relu_select.empty()) {
    try {
      (void)std::regex(args.relu_select);
    } catch (const std::regex_error& e) {
      throw UsageError(
          fmt::format("--relu-select '{}' is not a regular expression: {}", args.relu_select, e.what()));
    }
  }
  ModelReadOptions read_options;
  read_options.select = args.select;
  read_options.max_density = args.max_density;
  ModelContents model = read_model(path, read_options);
  for (const SkippedTensor& s : model.skipped) fmt::print(stderr, "skipped {}: {}\n", s.tensor, s.reason);
  if (model.layers.empty())
    throw InputError(SourceLocation::in_file(path),
                     fmt::format("no sparse weight matrix to {} ({} tensor(s) skipped, listed above)", verb,
                                 model.skipped.size()));
  return model;
}

// The SpMM problem of one layer: its bias, ReLU from the model (ONNX) or the arguments, N fixed at
// --n or at run time.
inline SpmmProblem model_layer_problem(const ModelLayer& layer, const ModelLayerArgs& args,
                                       const std::string& dtype) {
  SpmmProblem problem;
  problem.m = layer.a.rows;
  problem.k = layer.a.cols;
  problem.n = args.n > 0 ? args.n : kModelPlanningN;
  problem.n_mode = args.n > 0 ? SpmmNMode::fixed : SpmmNMode::runtime;
  problem.bias = !layer.bias.empty();
  problem.relu = args.relu || layer.relu ||
                 (!args.relu_select.empty() && std::regex_search(layer.name, std::regex(args.relu_select)));
  problem.dtype = dtype;
  return problem;
}

}  // namespace sparsecc::cli
