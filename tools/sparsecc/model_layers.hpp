// A model's layers as `compile-model` builds them and `tune --model` tunes them: the same reader
// options, the same SpMM problem per layer, so that the tuning key of every layer that `tune --model`
// records is the key `compile-model --db` looks up.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "sparsecc/model/model.hpp"
#include "sparsecc/plan/spmm_plan.hpp"

namespace sparsecc::cli {

// The batch a run-time-N executor is planned (and tuned) for when --n is not given.
inline constexpr std::int64_t kModelPlanningN = 64;

inline constexpr std::int64_t kModelMaxN = std::int64_t{1} << 24;

struct ModelLayerArgs {
  std::string select;                // --select
  double max_density = 0.5;          // --max-density
  std::int64_t n = 0;                // --n; 0: run-time N, planned for kModelPlanningN
  std::vector<std::string> layer_n;  // --layer-n REGEX=N: a fixed N for the layers that match
  std::string layer_n_file;          // --layer-n-file FILE: lines "NAME,N" or "NAME N"
  bool n_from_shapes = false;        // --n-from-shapes: N from the model's shapes (ONNX) where known
  std::int64_t batch = 0;            // --batch: the inputs' symbolic leading dimension; implies n_from_shapes
  bool relu = false;                 // --relu: after every layer
  std::string relu_select;           // --relu-select: after the layers whose name matches
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
inline std::vector<LayerNRule> layer_n_rules(const ModelLayerArgs& args) {
  std::vector<LayerNRule> rules;
  const auto parse_n = [](std::string_view text, std::int64_t& n) {
    return parse_int(text, n) && n >= 1 && n <= kModelMaxN;
  };
  if (!args.layer_n_file.empty()) {
    const Bytes bytes = read_input(args.layer_n_file);
    LineCursor lines(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    for (std::string_view line; lines.next(line);) {
      if (const auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
      const auto fields = split_fields(line, true);
      if (fields.empty()) continue;
      LayerNRule rule;
      if (fields.size() != 2 || !parse_n(fields[1], rule.n))
        throw_at_line(args.layer_n_file, lines.line_number(),
                      fmt::format("expected a layer name and its N (1 to {}), as \"NAME,N\" or \"NAME N\"",
                                  kModelMaxN));
      rule.name = std::string(fields[0]);
      rule.origin = fmt::format("{}:{}", args.layer_n_file, lines.line_number());
      for (const LayerNRule& r : rules)
        if (r.name == rule.name)
          throw_at_line(args.layer_n_file, lines.line_number(),
                        fmt::format("layer {} is listed twice (first at {})", rule.name, r.origin));
      rules.push_back(std::move(rule));
    }
  }
  for (const std::string& text : args.layer_n) {
    LayerNRule rule;
    rule.origin = fmt::format("--layer-n '{}'", text);
    const auto eq = text.rfind('=');
    if (eq == std::string::npos || eq == 0 || !parse_n(std::string_view(text).substr(eq + 1), rule.n))
      throw UsageError(fmt::format("{}: expected REGEX=N with N from 1 to {}", rule.origin, kModelMaxN));
    try {
      rule.pattern = std::regex(text.substr(0, eq));
    } catch (const std::regex_error& e) {
      throw UsageError(fmt::format("{}: not a regular expression: {}", rule.origin, e.what()));
    }
    rules.push_back(std::move(rule));
  }
  return rules;
}

// The model's layers (skipped tensors listed on stderr) with their N: the first rule of
// layer_n_rules() that matches, else the N of the model's shapes (--n-from-shapes or --batch, where
// known), else --n (0: run-time N); a rule no layer takes is reported on stderr, and so is how many
// layers the shapes gave an N. An InputError naming the file when no layer is left, a UsageError for a
// --relu-select that is not a regular expression.
inline ModelLayerSet read_model_layers(const std::string& path, const ModelLayerArgs& args,
                                       const std::string& verb) {
  if (!args.relu_select.empty()) {
    try {
      (void)std::regex(args.relu_select);
    } catch (const std::regex_error& e) {
      throw UsageError(
          fmt::format("--relu-select '{}' is not a regular expression: {}", args.relu_select, e.what()));
    }
  }
  std::vector<LayerNRule> rules = layer_n_rules(args);
  ModelReadOptions read_options;
  read_options.select = args.select;
  read_options.max_density = args.max_density;
  read_options.infer_shapes = args.n_from_shapes || args.batch > 0;
  read_options.batch = args.batch;
  ModelLayerSet set{read_model(path, read_options), {}, {}};
  for (const SkippedTensor& s : set.model.skipped) fmt::print(stderr, "skipped {}: {}\n", s.tensor, s.reason);
  if (set.model.layers.empty())
    throw InputError(SourceLocation::in_file(path),
                     fmt::format("no sparse weight matrix to {} ({} tensor(s) skipped, listed above)", verb,
                                 set.model.skipped.size()));
  std::size_t from_shapes = 0, shaped = 0;
  for (const ModelLayer& layer : set.model.layers) {
    std::int64_t n = args.n;
    std::string from = args.n > 0 ? "--n" : "run time";
    if (layer.graph_n > 0) ++shaped;
    if (read_options.infer_shapes && layer.graph_n > 0 && layer.graph_n <= kModelMaxN) {
      n = layer.graph_n;
      from = "model shapes";
    }
    for (LayerNRule& rule : rules) {
      const bool match = rule.pattern ? std::regex_search(layer.name, *rule.pattern) ||
                                            std::regex_search(layer.tensor, *rule.pattern)
                                      : layer.name == rule.name;
      if (match) {
        n = rule.n;
        from = rule.origin;
        rule.used = true;
        break;
      }
    }
    if (from == "model shapes") ++from_shapes;
    set.n.push_back(n);
    set.n_from.push_back(std::move(from));
  }
  if (read_options.infer_shapes)
    fmt::print(stderr, "{}: the model's shapes give {} of {} layer(s) an N{}{}{}\n", path, shaped,
               set.model.layers.size(), shaped > from_shapes ? fmt::format(" ({} taken)", from_shapes) : "",
               set.model.shape_note.empty() ? "" : ": ", set.model.shape_note);
  for (const LayerNRule& rule : rules)
    if (!rule.used)
      fmt::print(stderr, "{}: gives no layer of {} its N (none matches, or an earlier rule matched first)\n",
                 rule.origin, path);
  return set;
}

// The SpMM problem of one layer: its bias, ReLU from the model (ONNX) or the arguments, N fixed at
// `n` (the layer's N from read_model_layers) or, for 0, at run time.
inline SpmmProblem model_layer_problem(const ModelLayer& layer, std::int64_t n, const ModelLayerArgs& args,
                                       const std::string& dtype) {
  SpmmProblem problem;
  problem.m = layer.a.rows;
  problem.k = layer.a.cols;
  problem.n = n > 0 ? n : kModelPlanningN;
  problem.n_mode = n > 0 ? SpmmNMode::fixed : SpmmNMode::runtime;
  problem.bias = !layer.bias.empty();
  problem.relu = args.relu || layer.relu ||
                 (!args.relu_select.empty() && std::regex_search(layer.name, std::regex(args.relu_select)));
  problem.dtype = require_dtype(dtype, "--dtype", kSpmmDtypes);
  return problem;
}

}  // namespace sparsecc::cli
