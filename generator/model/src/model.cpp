#include "sparsecc/model/model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <utility>

#include "sparsecc/common/error.hpp"
#include "sparsecc/io/load.hpp"
#include "sparsecc/io/mtx.hpp"
#include "sparsecc/io/npy.hpp"
#include "sparsecc/io/npz.hpp"
#include "sparsecc/io/onnx.hpp"
#include "sparsecc/io/raw_tensor.hpp"
#include "sparsecc/io/safetensors.hpp"
#include "sparsecc/plan/spmm_plan.hpp"

namespace sparsecc {

namespace {

// "npz", "safetensors" or "onnx" by extension (ignoring case and a trailing ".gz").
std::optional<std::string> model_format(const std::string& path) {
  std::string base = std::filesystem::path(path).filename().string();
  std::transform(base.begin(), base.end(), base.begin(), [](unsigned char c) { return std::tolower(c); });
  if (base.ends_with(".gz")) base.resize(base.size() - 3);
  for (const std::string format : {"npz", "safetensors", "onnx"})
    if (base.size() > format.size() + 1 && base.ends_with("." + format)) return format;
  return std::nullopt;
}

class Selector {
 public:
  explicit Selector(const std::string& pattern) : pattern_(pattern) {
    if (pattern.empty()) return;
    try {
      re_.emplace(pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw UsageError(fmt::format("invalid --select expression '{}': {}", pattern, e.what()));
    }
  }
  bool keeps(const std::string& name, const std::string& tensor) const {
    return !re_ || std::regex_search(name, *re_) || std::regex_search(tensor, *re_);
  }
  std::string reason() const { return fmt::format("does not match --select '{}'", pattern_); }

 private:
  std::string pattern_;
  std::optional<std::regex> re_;
};

bool all_finite(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

// Why a weight of `rows` x `cols` (A's shape before the transpose that `transposed` asks for) is
// skipped before its values are read, or empty.
std::string shape_skip_reason(const ModelLayer& layer, std::int64_t rows, std::int64_t cols,
                              bool transposed) {
  if (rows > kMaxMatrixDimension || cols > kMaxMatrixDimension)
    return fmt::format("shape {} exceeds the matrix dimension limit of {}", shape_string({rows, cols}),
                       kMaxMatrixDimension);
  if (rows == 0 || cols == 0) return fmt::format("empty (shape {})", shape_string(layer.stored_shape));
  if ((transposed ? cols : rows) > spmm_max_rows())
    return fmt::format("{} rows exceed the {} an SpMM executor takes", transposed ? cols : rows,
                       spmm_max_rows());
  return {};
}

// Fills layer.a and layer.density from `a` (already in A's shape), or returns why the layer is skipped.
std::string take_matrix(ModelLayer& layer, CsrMatrix a, const ModelReadOptions& options) {
  if (a.nnz() == 0) return "all zero";
  const double density =
      static_cast<double>(a.nnz()) / (static_cast<double>(a.rows) * static_cast<double>(a.cols));
  if (density > options.max_density)
    return fmt::format("density {:.4g} above {}", density, options.max_density);
  layer.a = std::move(a);
  layer.density = density;
  return {};
}

// Fills layer.a and layer.density from `w` (2-D, already in A's shape before the transpose that
// `transposed` asks for; every value scaled by `alpha`), or returns why the layer is skipped.
std::string build_matrix(ModelLayer& layer, Tensor w, bool transposed, double alpha,
                         const ModelReadOptions& options, const std::string& file) {
  if (std::string reason = shape_skip_reason(layer, w.shape[0], w.shape[1], transposed); !reason.empty())
    return reason;
  if (alpha != 1.0) {
    for (double& v : w.data) v *= alpha;
    if (!all_finite(w.data)) return fmt::format("alpha={} makes a weight overflow", alpha);
  }
  CsrMatrix a = matrix_from_tensor(std::move(w), file);
  if (transposed) a = transpose(a);
  return take_matrix(layer, std::move(a), options);
}

// Layer names made unique in layer order: the second "fc" becomes "fc#2".
void make_names_unique(std::vector<ModelLayer>& layers) {
  std::set<std::string> used;
  for (auto& l : layers) {
    std::string name = l.name;
    for (int k = 2; used.contains(name); ++k) name = fmt::format("{}#{}", l.name, k);
    used.insert(name);
    l.name = std::move(name);
  }
}

// ---- npz / safetensors -------------------------------------------------------------------------

std::string layer_name_of(const std::string& tensor) {
  for (const std::string suffix : {".weight", "_weight"})
    if (tensor.size() > suffix.size() && tensor.ends_with(suffix))
      return tensor.substr(0, tensor.size() - suffix.size());
  return tensor;
}

void read_container(ModelContents& out, const Selector& select, const ModelReadOptions& options) {
  // Every tensor's header, its data left as the file's bytes (one buffer for a .safetensors file, one per
  // member of an .npz); a layer's bytes are scanned straight into its CSR and let go. Tensors of other
  // dtypes (a checkpoint's int64 step counters, boolean masks) are listed as skipped.
  std::vector<RawTensor> tensors;
  if (out.format == "npz")
    visit_npz_raw(out.file, true, [&](RawTensor&& t) { tensors.push_back(std::move(t)); });
  else
    tensors = read_safetensors_raw(out.file, true);
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < tensors.size(); ++i) index.emplace(tensors[i].name, i);

  // Biases first: "<prefix>.bias" / "<prefix>_bias" with one value per row of the matrix "<prefix>[.weight]".
  std::vector<std::optional<std::size_t>> bias_tensor(tensors.size());
  std::map<std::size_t, std::string> bias_of, misfit;
  // The command-line geometry of a 4-D weight (--layer-conv), or null.
  const auto conv_rule = [&](const RawTensor& w) -> const ConvSpecRule* {
    if (w.shape.size() != 4) return nullptr;
    const std::string name = layer_name_of(w.name);
    for (const ConvSpecRule& r : options.conv_specs)
      if (std::regex_search(name, r.pattern) || std::regex_search(w.name, r.pattern)) return &r;
    return nullptr;
  };
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const RawTensor& w = tensors[i];
    if ((w.shape.size() != 2 && !conv_rule(w)) || !w.unread_dtype.empty()) continue;
    const std::string name = layer_name_of(w.name);
    for (const std::string suffix : {".bias", "_bias"}) {
      const auto it = index.find(name + suffix);
      if (it == index.end() || it->second == i || !tensors[it->second].unread_dtype.empty()) continue;
      if (tensors[it->second].numel() == w.shape[0]) {
        bias_tensor[i] = it->second;
        bias_of.emplace(it->second, name);
        break;
      }
      misfit.emplace(it->second,
                     fmt::format("named as the bias of layer '{}' but holds {} values for its {} outputs",
                                 name, tensors[it->second].numel(), w.shape[0]));
    }
  }

  // A bias's values (NaN or Inf named as check_finite names them).
  auto bias_values = [&](std::size_t j) {
    const Tensor b = decode_raw(tensors[j], out.file, true);
    check_finite(b.data, out.file, b.name);
    return b.data;
  };

  for (std::size_t i = 0; i < tensors.size(); ++i) {
    RawTensor& w = tensors[i];
    auto skip = [&](const std::string& reason) { out.skipped.push_back({w.name, reason}); };
    if (!w.unread_dtype.empty()) {
      skip(fmt::format("dtype {} (only floating-point tensors are read)", w.unread_dtype));
      continue;
    }
    if (const auto it = bias_of.find(i); it != bias_of.end()) {
      skip(fmt::format("bias of layer '{}'", it->second));
      continue;
    }
    const ConvSpecRule* conv = conv_rule(w);
    if (w.shape.size() != 2 && !conv) {
      const auto it = misfit.find(i);
      skip(fmt::format("not 2-D (rank {}){}", w.shape.size(), it == misfit.end() ? "" : "; " + it->second));
      continue;
    }
    ModelLayer layer;
    layer.name = layer_name_of(w.name);
    layer.tensor = w.name;
    layer.op = "matrix";
    layer.layout = "as_stored";
    layer.stored_shape = w.shape;
    if (!select.keeps(layer.name, layer.tensor)) {
      skip(select.reason());
      continue;
    }
    if (conv) {
      // A 4-D OIHW weight with its geometry from the command line: the im2col weight O x (I*kh*kw).
      layer.op = "conv";
      layer.layout = "oihw_flattened";
      if (w.fortran_order)
        throw_at_byte(out.file, w.data_byte, "a 4-D weight in Fortran order (store it in C order, OIHW)",
                      w.name);
      w.shape = {w.shape[0], w.shape[1] * w.shape[2] * w.shape[3]};
      layer.conv = conv_geometry_for(conv->spec, rt::ConvLayout::nchw, w.shape[0], w.shape[1],
                                     layer.stored_shape, out.file, w.name, conv->origin);
    }
    // A NaN or Inf in a layer that would be compiled is bad input, in every format: the scan into CSR
    // checks the weight; a weight skipped for its shape is checked on its own.
    std::string reason = shape_skip_reason(layer, w.shape[0], w.shape[1], false);
    CsrMatrix a;
    if (reason.empty()) {
      ProgressClock clock(options.progress, fmt::format("read {}:{}", out.file, w.name));
      a = matrix_from_raw(w, out.file, [&](double f) { clock.at(f); });
    } else {
      check_raw_finite(w, out.file);
    }
    w.data = {};
    w.storage.reset();  // an .npz member's bytes go as soon as its CSR is made
    if (bias_tensor[i]) layer.bias = bias_values(*bias_tensor[i]);
    if (reason.empty()) reason = take_matrix(layer, std::move(a), options);
    if (!reason.empty()) {
      out.skipped.push_back({layer.tensor, reason});
      continue;
    }
    out.layers.push_back(std::move(layer));
  }
}

// ---- ONNX ----------------------------------------------------------------------------------------

class OnnxReader {
 public:
  OnnxReader(ModelContents& out, const Selector& select, const ModelReadOptions& options)
      : out_(out), select_(select), options_(options), graph_(read_graph(out.file, options)) {
    if (options.infer_shapes) out_.shape_note = graph_.shape_note;
    for (std::size_t i = 0; i < graph_.initializers.size(); ++i)
      init_.emplace(graph_.initializers[i].tensor.name, i);
    known_.insert(graph_.sparse_initializers.begin(), graph_.sparse_initializers.end());
    known_.insert(graph_.inputs.begin(), graph_.inputs.end());
    for (const auto& n : graph_.nodes) {
      known_.insert(n.outputs.begin(), n.outputs.end());
      for (const auto& in : n.inputs) {
        if (in.empty()) continue;
        ++uses_[in];
        user_[in] = &n;
      }
    }
    graph_outputs_.insert(graph_.outputs.begin(), graph_.outputs.end());
    notes_.resize(graph_.initializers.size());
  }

  void run() {
    for (const auto& n : graph_.nodes) {
      if (n.is("MatMul") && n.inputs.size() == 2)
        matmul(n);
      else if (n.is("Gemm") && n.inputs.size() >= 2)
        gemm(n);
      else if (n.is("Conv") && n.inputs.size() >= 2)
        conv(n);
      else
        for (const auto& in : n.inputs)
          if (const auto j = initializer(in))
            feeds(*j, n.domain.empty() || n.domain == "ai.onnx" ? n.op_type : n.domain + "::" + n.op_type);
    }
    for (std::size_t j = 0; j < notes_.size(); ++j) {
      const std::string& name = graph_.initializers[j].tensor.name;
      const Notes& note = notes_[j];
      for (const auto& r : note.reasons) out_.skipped.push_back({name, r});
      if (note.layer || !note.reasons.empty()) continue;
      for (const auto& b : note.bias_of) out_.skipped.push_back({name, fmt::format("bias of layer '{}'", b)});
      if (!note.bias_of.empty()) continue;
      if (note.feeds.empty())
        out_.skipped.push_back({name, "feeds no node"});
      else
        out_.skipped.push_back(
            {name, fmt::format("feeds {}, not a MatMul/Gemm/Conv weight", fmt::join(note.feeds, ", "))});
    }
    for (const auto& s : graph_.sparse_initializers)
      out_.skipped.push_back({s, "sparse initializer (not read; store the weight as a dense initializer)"});
  }

 private:
  struct Notes {
    bool layer = false;                // some node made a layer of it
    std::vector<std::string> reasons;  // one per node whose layer was skipped
    std::vector<std::string> bias_of;  // layers it is the bias of
    std::vector<std::string> feeds;    // other uses, for the message
  };

  // The graph, with shapes where asked for (infer_shapes), or where a Conv needs them for its geometry.
  static OnnxGraph read_graph(const std::string& file, const ModelReadOptions& options) {
    OnnxGraph g = read_onnx(file, {.infer_shapes = options.infer_shapes, .batch = options.batch});
    if (!options.infer_shapes && options.conv_geometry &&
        std::any_of(g.nodes.begin(), g.nodes.end(), [](const OnnxNode& n) { return n.is("Conv"); }))
      g = read_onnx(file, {.infer_shapes = true, .batch = options.batch});
    return g;
  }

  std::optional<std::size_t> initializer(const std::string& name) const {
    if (name.empty()) return std::nullopt;
    const auto it = init_.find(name);
    return it == init_.end() ? std::nullopt : std::optional<std::size_t>(it->second);
  }

  void feeds(std::size_t j, const std::string& what) {
    auto& f = notes_[j].feeds;
    if (std::find(f.begin(), f.end(), what) == f.end()) f.push_back(what);
  }

  static std::string label(const OnnxNode& n) {
    return n.name.empty() ? n.op_type : fmt::format("{} '{}'", n.op_type, n.name);
  }

  // A weight or bias input must name something; other dangling references are left alone.
  void require(const OnnxNode& n, const std::string& input, const char* role) const {
    if (input.empty() || known_.contains(input) || init_.contains(input)) return;
    throw_at_byte(out_.file, -1,
                  fmt::format("{} input {} names no initializer, graph input or node output", label(n), role),
                  input);
  }

  // The node that alone consumes n's first output, when that output is no graph output.
  const OnnxNode* sole_user(const OnnxNode& n) const {
    if (n.outputs.empty() || n.outputs[0].empty()) return nullptr;
    const std::string& y = n.outputs[0];
    const auto it = uses_.find(y);
    return it != uses_.end() && it->second == 1 && !graph_outputs_.contains(y) ? user_.at(y) : nullptr;
  }

  bool feeds_relu(const OnnxNode& n) const {
    const OnnxNode* u = sole_user(n);
    return u && u->is("Relu");
  }

  // The common part of every layer: selection, dtype, finite values, and A from the weight's values
  // seen as a `shape` matrix (transposed, times alpha); false when skipped.
  bool finish(ModelLayer& layer, const OnnxNode& n, std::size_t w, const std::vector<std::int64_t>& shape,
              bool transposed, double alpha, const std::string& early_reason,
              const OnnxNode* last = nullptr) {
    const OnnxInitializer& init = graph_.initializers[w];
    const std::vector<std::string> biases = std::exchange(bias_inputs_, {});
    auto skip = [&](const std::string& reason) {
      notes_[w].reasons.push_back(fmt::format("{}: {}", label(n), reason));
      return false;
    };
    if (!select_.keeps(layer.name, layer.tensor)) return skip(select_.reason());
    if (!init.floating) return skip(fmt::format("non-floating dtype {}", init.data_type));
    if (!early_reason.empty()) return skip(early_reason);
    // A NaN or Inf in a layer that would be compiled is bad input, in every format.
    check_finite(init.tensor.data, out_.file, init.tensor.name);
    for (const std::string& b : biases)
      if (const auto j = initializer(b)) check_finite(graph_.initializers[*j].tensor.data, out_.file, b);
    if (!all_finite(layer.bias)) return skip("the bias times beta overflows");
    Tensor matrix;
    matrix.name = init.tensor.name;
    matrix.dtype = init.tensor.dtype;
    matrix.shape = shape;
    matrix.data = init.tensor.data;
    if (std::string reason = build_matrix(layer, std::move(matrix), transposed, alpha, options_, out_.file);
        !reason.empty())
      return skip(reason);
    layer.relu = feeds_relu(last ? *last : n);
    notes_[w].layer = true;
    out_.layers.push_back(std::move(layer));
    return true;
  }

  // The N the inferred shape of n's output gives the layer (see model.hpp), 0 when unknown.
  std::int64_t graph_n(const OnnxNode& n, const std::string& op, const std::string& layout) const {
    if (n.outputs.empty()) return 0;
    const auto it = graph_.shapes.find(n.outputs[0]);
    if (it == graph_.shapes.end()) return 0;
    const std::vector<std::int64_t>& y = it->second;
    std::vector<std::int64_t> dims;  // the dims whose product is N
    if (op == "conv") {
      if (y.size() < 3) return 0;
      dims = y;
      dims.erase(dims.begin() + 1);  // all but the output channels
    } else if (op == "gemm") {
      if (y.size() != 2) return 0;
      dims = {y[0]};
    } else if (layout == "transposed") {  // MatMul(X, W)
      if (y.empty()) return 0;
      dims.assign(y.begin(), y.end() - 1);
    } else {  // MatMul(W, X)
      if (y.size() == 1) return 1;
      if (y.size() != 2) return 0;
      dims = {y[1]};
    }
    std::int64_t n_total = 1;
    for (const std::int64_t d : dims) {
      if (d <= 0 || n_total > (std::int64_t{1} << 40) / d) return 0;
      n_total *= d;
    }
    return n_total;
  }

  ModelLayer start(const OnnxNode& n, std::size_t w, const char* op, const char* layout) const {
    ModelLayer layer;
    layer.graph_n = options_.infer_shapes ? graph_n(n, op, layout) : 0;
    layer.tensor = graph_.initializers[w].tensor.name;
    layer.name = n.name.empty() ? layer.tensor : n.name;
    layer.op = op;
    layer.layout = layout;
    layer.stored_shape = graph_.initializers[w].tensor.shape;
    return layer;
  }

  // Y = X · W (A = W^T) or Y = W · X (A = W).
  void matmul(const OnnxNode& n) {
    require(n, n.inputs[0], "A");
    require(n, n.inputs[1], "B");
    const auto a = initializer(n.inputs[0]), b = initializer(n.inputs[1]);
    if (a && b) {
      for (const auto j : {*a, *b})
        notes_[j].reasons.push_back(fmt::format("{}: both inputs are initializers", label(n)));
      return;
    }
    if (!a && !b) return;
    const std::size_t w = a ? *a : *b;
    const bool transposed = !a;
    ModelLayer layer = start(n, w, "matmul", transposed ? "transposed" : "as_stored");
    const Tensor& t = graph_.initializers[w].tensor;
    std::string reason;
    const OnnxNode* add = nullptr;
    if (t.shape.size() != 2)
      reason = fmt::format("weight of rank {} (2 needed)", t.shape.size());
    else if (select_.keeps(layer.name, layer.tensor))
      add = fold_add(n, transposed, transposed ? t.shape[1] : t.shape[0], layer);
    finish(layer, n, w, t.shape, transposed, 1.0, reason, add);
  }

  // MatMul followed by Add of a per-output initializer (how Linear layers of three-dimensional
  // activations are exported): the Add's constant becomes the layer's bias, and its ReLU is looked
  // for after the Add. Y = X · W broadcasts a bias of shape (M), (1, M) or (1, 1, M) (activations
  // of rank 3); Y = W · X one of shape (M, 1) or (1, M, 1); one value broadcasts either way. The
  // Add that alone consumes the MatMul's output is folded, or nothing is (the layer then has no
  // bias, and the Add stays the graph's business).
  const OnnxNode* fold_add(const OnnxNode& n, bool transposed, std::int64_t m, ModelLayer& layer) {
    const OnnxNode* add = sole_user(n);
    if (!add || !add->is("Add") || add->inputs.size() != 2) return nullptr;
    const std::string& other = add->inputs[0] == n.outputs[0] ? add->inputs[1] : add->inputs[0];
    const auto shapes = transposed ? std::vector<std::vector<std::int64_t>>{{m}, {1, m}, {1, 1, m}}
                                   : std::vector<std::vector<std::int64_t>>{{m, 1}, {1, m, 1}};
    // bias() refuses what is no per-output floating initializer (and then leaves the layer alone).
    const auto c = initializer(other);
    if (!c || !bias(other, "of the Add", m, 1.0, shapes, layer).empty()) return nullptr;
    notes_[*c].bias_of.push_back(layer.name);
    return add;
  }

  // A per-output bias from an initializer of M values or one value (broadcast), times `scale`; the
  // reason it cannot be used otherwise.
  std::string bias(const std::string& input, const char* role, std::int64_t m, double scale,
                   const std::vector<std::vector<std::int64_t>>& shapes, ModelLayer& layer) {
    if (input.empty() || scale == 0.0) return {};
    const auto c = initializer(input);
    if (!c) return fmt::format("bias {} '{}' is computed, not an initializer", role, input);
    const OnnxInitializer& init = graph_.initializers[*c];
    if (!init.floating)
      return fmt::format("bias {} '{}' has non-floating dtype {}", role, input, init.data_type);
    const auto& shape = init.tensor.shape;
    const bool per_output = std::find(shapes.begin(), shapes.end(), shape) != shapes.end();
    if (init.tensor.numel() != 1 && !per_output)
      return fmt::format("bias {} '{}' of shape {} is not one value per output ({} outputs)", role, input,
                         shape_string(shape), m);
    layer.bias.assign(static_cast<std::size_t>(m), 0.0);
    for (std::int64_t i = 0; i < m; ++i)
      layer.bias[static_cast<std::size_t>(i)] =
          scale * init.tensor.data[per_output ? static_cast<std::size_t>(i) : 0];
    bias_inputs_.push_back(input);
    return {};
  }

  // Y = alpha · X' · B' + beta · C.
  void gemm(const OnnxNode& n) {
    const std::string& x = n.inputs[0];
    const std::string& b = n.inputs[1];
    const std::string c = n.inputs.size() > 2 ? n.inputs[2] : std::string();
    require(n, b, "B");
    require(n, c, "C");
    if (const auto j = initializer(x)) feeds(*j, label(n) + " as input A");
    const auto w = initializer(b);
    if (!w) {
      if (const auto j = initializer(c)) feeds(*j, label(n) + " as bias C");
      return;
    }
    const bool trans_b = n.int_attr("transB", 0) != 0;
    ModelLayer layer = start(n, *w, "gemm", trans_b ? "as_stored" : "transposed");
    if (const auto j = initializer(c)) notes_[*j].bias_of.push_back(layer.name);
    const Tensor& t = graph_.initializers[*w].tensor;
    const double alpha = n.float_attr("alpha", 1.0), beta = n.float_attr("beta", 1.0);
    std::string reason;
    if (n.int_attr("transA", 0) != 0) {
      reason = "transA=1";
    } else if (t.shape.size() != 2) {
      reason = fmt::format("weight of rank {} (2 needed)", t.shape.size());
    } else if (select_.keeps(layer.name, layer.tensor)) {
      const std::int64_t m = trans_b ? t.shape[0] : t.shape[1];
      reason = bias(c, "C", m, beta, {{m}, {1, m}}, layer);
    }
    finish(layer, n, *w, t.shape, !trans_b, alpha, reason);
  }

  // Y = conv(X, W) + B with W of shape (O, I, kh, kw): the im2col weight O × (I·kh·kw).
  void conv(const OnnxNode& n) {
    const std::string& x = n.inputs[0];
    const std::string& b = n.inputs[1];
    const std::string c = n.inputs.size() > 2 ? n.inputs[2] : std::string();
    require(n, b, "W");
    require(n, c, "B");
    if (const auto j = initializer(x)) feeds(*j, label(n) + " as input X");
    const auto w = initializer(b);
    if (!w) {
      if (const auto j = initializer(c)) feeds(*j, label(n) + " as bias B");
      return;
    }
    ModelLayer layer = start(n, *w, "conv", "oihw_flattened");
    if (const auto j = initializer(c)) notes_[*j].bias_of.push_back(layer.name);
    const Tensor& t = graph_.initializers[*w].tensor;
    const std::int64_t group = n.int_attr("group", 1);
    std::string reason;
    std::vector<std::int64_t> shape;
    if (t.shape.size() != 4) {
      reason = fmt::format("weight of rank {} (only 2-D convolutions, with 4-D OIHW weights, are read)",
                           t.shape.size());
    } else if (group != 1) {
      reason = fmt::format("grouped convolution (group={})", group);
    } else if (const auto k = n.int_lists.find("kernel_shape");
               k != n.int_lists.end() && k->second != std::vector<std::int64_t>{t.shape[2], t.shape[3]}) {
      reason = fmt::format("kernel_shape [{}] disagrees with the weight's shape {}",
                           fmt::join(k->second, ", "), shape_string(t.shape));
    } else {
      shape = {t.shape[0], t.shape[1] * t.shape[2] * t.shape[3]};
      if (select_.keeps(layer.name, layer.tensor))
        reason = bias(c, "B", t.shape[0], 1.0, {{t.shape[0]}}, layer);
      rt::ConvGeometry g;
      layer.conv_note = conv_geometry(n, t.shape, g);
      if (layer.conv_note.empty()) layer.conv = g;
    }
    finish(layer, n, *w, shape, false, 1.0, reason);
  }

  // The geometry of Conv node n with weight shape (O, I, kh, kw) (see "Convolutions" in model.hpp), or
  // why it has none.
  std::string conv_geometry(const OnnxNode& n, const std::vector<std::int64_t>& w,
                            rt::ConvGeometry& g) const {
    const auto list = [&](const char* name, std::vector<std::int64_t> fallback) {
      const auto it = n.int_lists.find(name);
      return it == n.int_lists.end() ? fallback : it->second;
    };
    const std::vector<std::int64_t> dilations = list("dilations", {1, 1});
    if (dilations != std::vector<std::int64_t>{1, 1})
      return fmt::format("dilations [{}] (convolution executors take dilation 1)",
                         fmt::join(dilations, ", "));
    const std::vector<std::int64_t> strides = list("strides", {1, 1});
    const bool has_pads = n.int_lists.contains("pads");
    const std::vector<std::int64_t> pads = list("pads", {0, 0, 0, 0});
    if (strides.size() != 2 || pads.size() != 4)
      return fmt::format("strides [{}] or pads [{}] of the wrong length", fmt::join(strides, ", "),
                         fmt::join(pads, ", "));
    const auto shape_of = [&](const std::string& value) -> std::vector<std::int64_t> {
      const auto it = value.empty() ? graph_.shapes.end() : graph_.shapes.find(value);
      return it == graph_.shapes.end() ? std::vector<std::int64_t>{} : it->second;
    };
    const std::vector<std::int64_t> x = shape_of(n.inputs[0]);
    const std::vector<std::int64_t> y =
        n.outputs.empty() ? std::vector<std::int64_t>{} : shape_of(n.outputs[0]);
    const auto known = [](const std::vector<std::int64_t>& s) {
      return s.size() == 4 && s[2] > 0 && s[3] > 0;
    };
    if (!known(x))
      return fmt::format("the input's height and width are unknown{}",
                         graph_.shape_note.empty() ? "" : " (" + graph_.shape_note + ")");
    if (!known(y)) return "the output's height and width are unknown";
    g.layout = rt::ConvLayout::nchw;
    g.in_channels = w[1];
    g.height = x[2];
    g.width = x[3];
    g.kernel_h = w[2];
    g.kernel_w = w[3];
    g.stride_h = strides[0];
    g.stride_w = strides[1];
    g.pad_top = pads[0], g.pad_left = pads[1], g.pad_bottom = pads[2], g.pad_right = pads[3];
    if (g.stride_h > 0 && g.stride_w > 0 && !has_pads && (g.out_height() != y[2] || g.out_width() != y[3])) {
      // auto_pad SAME_UPPER / SAME_LOWER: the total padding that gives Y, split evenly.
      const auto same = [](std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t s,
                           std::int64_t& lo, std::int64_t& hi) {
        const std::int64_t total = std::max<std::int64_t>((out - 1) * s + k - in, 0);
        lo = total / 2;
        hi = total - lo;
        return total % 2 == 0;
      };
      if (!same(g.height, y[2], g.kernel_h, g.stride_h, g.pad_top, g.pad_bottom) ||
          !same(g.width, y[3], g.kernel_w, g.stride_w, g.pad_left, g.pad_right))
        return "auto_pad SAME with an odd total padding (SAME_UPPER and SAME_LOWER differ there, and the "
               "reader sees no string attributes to tell which)";
    }
    if (x[1] > 0 && x[1] != g.in_channels)
      return fmt::format("the input has {} channels, the weight {}", x[1], g.in_channels);
    if (const auto errors = rt::check_conv_geometry(g); !errors.empty())
      return fmt::format("geometry {}: {}", rt::describe(g), fmt::join(errors, "; "));
    if (g.out_height() != y[2] || g.out_width() != y[3])
      return fmt::format("the inferred output {}x{} disagrees with the geometry {} ({}x{})", y[2], y[3],
                         rt::describe(g), g.out_height(), g.out_width());
    return {};
  }

  ModelContents& out_;
  const Selector& select_;
  const ModelReadOptions& options_;
  OnnxGraph graph_;
  std::map<std::string, std::size_t> init_;
  std::set<std::string> known_;
  std::map<std::string, int> uses_;
  std::map<std::string, const OnnxNode*> user_;
  std::set<std::string> graph_outputs_;
  std::vector<Notes> notes_;
  std::vector<std::string> bias_inputs_;  // the bias initializers of the layer being built
};

}  // namespace

ConvSpecRule parse_conv_spec_rule(const std::string& text, const std::string& option) {
  ConvSpecRule rule;
  rule.origin = fmt::format("{} '{}'", option, text);
  // The expression may hold '=': the geometry is what follows the last '='.
  const auto eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw UsageError(fmt::format("{}: expected REGEX=SPEC (e.g. 'conv1=3x224x224,k7,s2,p3')", rule.origin));
  try {
    rule.pattern = std::regex(text.substr(0, eq), std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw UsageError(fmt::format("{}: not a regular expression: {}", rule.origin, e.what()));
  }
  rule.spec = parse_conv_spec(std::string_view(text).substr(eq + 1), rule.origin);
  return rule;
}

ModelContents read_model(const std::string& path, const ModelReadOptions& options) {
  if (!(options.max_density >= 0.0 && options.max_density <= 1.0))
    throw UsageError(fmt::format("max density {} is outside [0, 1]", options.max_density));
  const Selector select(options.select);
  const auto format = model_format(path);
  if (!format)
    throw_in_file(path, "unknown model format (expected .npz, .safetensors or .onnx, optionally .gz)");
  ModelContents out;
  out.file = path;
  out.format = *format;
  if (*format == "onnx") {
    OnnxReader(out, select, options).run();
  } else {
    read_container(out, select, options);
    if (options.infer_shapes)
      out.shape_note = fmt::format("a .{} file holds no graph to take shapes from", *format);
  }
  make_names_unique(out.layers);
  return out;
}

}  // namespace sparsecc
