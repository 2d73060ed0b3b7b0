#include "sparsecc/model/layers.hpp"

#include <fmt/format.h>

#include <utility>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"

namespace sparsecc {

std::vector<LayerNRule> layer_n_rules(const ModelLayerArgs& args) {
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

bool model_layer_is_conv(const ModelLayer& layer, const ModelLayerArgs& args) {
  return args.conv && layer.conv.has_value();
}

std::int64_t model_layer_n(const ModelLayer& layer, const ModelLayerArgs& args, bool from_shapes,
                           std::vector<LayerNRule>& rules, std::string& from) {
  if (model_layer_is_conv(layer, args)) {
    from = "conv geometry";
    return layer.conv->pixels();
  }
  std::int64_t n = args.n;
  from = args.n > 0 ? "--n" : "run time";
  if (from_shapes && layer.graph_n > 0 && layer.graph_n <= kModelMaxN) {
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
  return n;
}

ModelLayerSet read_model_layers(const std::string& path, const ModelLayerArgs& args, const std::string& verb,
                                const ModelNoteSink& note, const ReadProgress& progress) {
  const auto report = [&](const std::string& line) {
    if (note) note(line);
  };
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
  read_options.conv_geometry = args.conv;
  for (const std::string& text : args.layer_conv)
    read_options.conv_specs.push_back(parse_conv_spec_rule(text));
  read_options.progress = progress;
  ModelLayerSet set{read_model(path, read_options), {}, {}};
  for (const SkippedTensor& s : set.model.skipped) report(fmt::format("skipped {}: {}", s.tensor, s.reason));
  if (set.model.layers.empty())
    throw InputError(SourceLocation::in_file(path),
                     fmt::format("no sparse weight matrix to {} ({} tensor(s) skipped, listed above)", verb,
                                 set.model.skipped.size()));
  std::size_t from_shapes = 0, shaped = 0;
  for (const ModelLayer& layer : set.model.layers) {
    if (layer.graph_n > 0) ++shaped;
    if (layer.op == "conv" && !layer.conv && args.conv)
      report(
          fmt::format("{}: layer {} is compiled as the GEMM of its im2col matrix, not as a convolution: {}",
                      path, layer.name, layer.conv_note));
    std::string from;
    const std::int64_t n = model_layer_n(layer, args, read_options.infer_shapes, rules, from);
    if (from == "model shapes") ++from_shapes;
    set.n.push_back(n);
    set.n_from.push_back(std::move(from));
  }
  if (read_options.infer_shapes)
    report(fmt::format("{}: the model's shapes give {} of {} layer(s) an N{}{}{}", path, shaped,
                       set.model.layers.size(),
                       shaped > from_shapes ? fmt::format(" ({} taken)", from_shapes) : "",
                       set.model.shape_note.empty() ? "" : ": ", set.model.shape_note));
  for (const LayerNRule& rule : rules)
    if (!rule.used)
      report(fmt::format("{}: gives no layer of {} its N (none matches, or an earlier rule matched first)",
                         rule.origin, path));
  return set;
}

SpmmProblem model_layer_problem(const ModelLayer& layer, std::int64_t n, const ModelLayerArgs& args,
                                const std::string& dtype) {
  const bool relu =
      args.relu || layer.relu ||
      (!args.relu_select.empty() && std::regex_search(layer.name, std::regex(args.relu_select)));
  if (model_layer_is_conv(layer, args))
    return conv_problem(*layer.conv, layer.a.rows, !layer.bias.empty(), relu,
                        require_dtype(dtype, "--dtype", kSpmmDtypes));
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

}  // namespace sparsecc
