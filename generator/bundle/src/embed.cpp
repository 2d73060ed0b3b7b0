#include "sparsecc/bundle/embed.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <iterator>
#include <map>
#include <string_view>

#include "sparsecc/bundle/hines_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/math.hpp"

namespace sparsecc {

namespace {

// C++20 keywords and alternative tokens, the contextual names of modules and virtual functions, a
// few names the C library defines as macros, those GNU modes predefine, and the namespaces the
// generated code names.
constexpr std::string_view kReservedWords[] = {
    "alignas",     "alignof",   "and",        "and_eq",    "asm",      "auto",         "bitand",
    "bitor",       "bool",      "break",      "case",      "catch",    "char",         "char8_t",
    "char16_t",    "char32_t",  "class",      "compl",     "concept",  "const",        "consteval",
    "constexpr",   "constinit", "const_cast", "continue",  "co_await", "co_return",    "co_yield",
    "decltype",    "default",   "delete",     "do",        "double",   "dynamic_cast", "else",
    "enum",        "explicit",  "export",     "extern",    "false",    "float",        "for",
    "friend",      "goto",      "if",         "inline",    "int",      "long",         "mutable",
    "namespace",   "new",       "noexcept",   "not",       "not_eq",   "nullptr",      "operator",
    "or",          "or_eq",     "private",    "protected", "public",   "register",     "reinterpret_cast",
    "requires",    "return",    "short",      "signed",    "sizeof",   "static",       "static_assert",
    "static_cast", "struct",    "switch",     "template",  "this",     "thread_local", "throw",
    "true",        "try",       "typedef",    "typeid",    "typename", "union",        "unsigned",
    "using",       "virtual",   "void",       "volatile",  "wchar_t",  "while",        "xor",
    "xor_eq",      "final",     "override",   "import",    "module",   "assert",       "errno",
    "offsetof",    "major",     "minor",      "NULL",      "EOF",      "stdin",        "stdout",
    "stderr",      "unix",      "linux",      "i386",      "std",      "sparsecc"};

// Names the generated API declares in the namespace or in Kernels; a layer may not take them.
constexpr std::string_view kApiNames[] = {"LayerInfo", "kLayerCount", "layers",  "bundle_bytes",
                                          "Kernels",   "State",       "embedded"};

bool is_reserved(std::string_view s) {
  return std::ranges::find(kReservedWords, s) != std::end(kReservedWords) ||
         std::ranges::find(kApiNames, s) != std::end(kApiNames);
}

bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// A C++ string literal of `s`: printable ASCII as is, everything else as three-digit octal escapes
// (never hexadecimal ones, which would swallow a following hex digit).
std::string string_literal(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\' || c == '?')  // '?' escaped: no trigraph warnings
      out += {'\\', ch};
    else if (c >= 0x20 && c < 0x7f)
      out += ch;
    else
      out += fmt::format("\\{:03o}", c);
  }
  return out + "\"";
}

// The shortest decimal that reads back as exactly `x`, always a floating-point literal.
std::string double_literal(double x) {
  std::string s = fmt::format("{}", x);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

// The shortest decimal that reads back as exactly `x` as a float, with the "f" suffix.
std::string float_literal(float x) {
  std::string s = fmt::format("{}", x);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s + "f";
}

void validate_namespace(const std::string& ns) {
  if (ns.empty()) throw UsageError("embed: the namespace is empty");
  std::size_t at = 0;
  for (int part = 0;; ++part) {
    const std::size_t end = ns.find("::", at);
    const std::string_view p =
        std::string_view(ns).substr(at, end == std::string::npos ? std::string::npos : end - at);
    const auto bad = [&](const std::string& why) {
      throw UsageError(fmt::format("embed: namespace '{}' is not valid C++: {}", ns, why));
    };
    if (p.empty()) bad("an empty part");
    if (std::isdigit(static_cast<unsigned char>(p.front()))) bad(fmt::format("'{}' starts with a digit", p));
    if (!std::all_of(p.begin(), p.end(), is_ident_char)) bad(fmt::format("'{}' is not an identifier", p));
    if (p.find("__") != std::string_view::npos ||
        (p.front() == '_' && p.size() > 1 && std::isupper(static_cast<unsigned char>(p[1]))))
      bad(fmt::format("'{}' is a reserved identifier", p));
    // The generated code names std:: and sparsecc:: unqualified, so only the first part may be "sparsecc".
    if (p != "sparsecc" || part > 0)
      if (std::ranges::find(kReservedWords, p) != std::end(kReservedWords))
        bad(fmt::format("'{}' is a keyword or a reserved name", p));
    if (end == std::string::npos) break;
    at = end + 2;
  }
}

void validate_header_name(const std::string& name) {
  if (name.empty() || std::any_of(name.begin(), name.end(), [](char c) {
        return c == '"' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
      }))
    throw UsageError(fmt::format("embed: '{}' cannot be #included by name", name));
}

// The lines of a C array initializer: `per_line` elements a line, each written by `put`.
template <class T, class Put>
void append_elements(std::string& out, std::span<const T> values, std::size_t per_line, Put put) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    out += i % per_line == 0 ? "    " : " ";
    put(out, values[i]);
    out += (i + 1) % per_line == 0 || i + 1 == values.size() ? ",\n" : ",";
  }
}

void append_bytes(std::string& out, std::span<const unsigned char> bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.reserve(out.size() + bytes.size() * 6 + bytes.size() / 16 * 5 + 64);
  append_elements<unsigned char>(out, bytes, 16, [](std::string& o, unsigned char b) {
    const char lit[4] = {'0', 'x', kHex[b >> 4], kHex[b & 15]};
    o.append(lit, 4);
  });
}

// Little-endian 64-bit words of `bytes`, the last one zero-padded, five a line.
void append_words(std::string& out, std::span<const unsigned char> bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::vector<std::uint64_t> words(static_cast<std::size_t>(ceil_div(std::ssize(bytes), 8)), 0);
  for (std::size_t i = 0; i < bytes.size(); ++i) words[i / 8] |= std::uint64_t{bytes[i]} << (8 * (i % 8));
  out.reserve(out.size() + words.size() * 21 + 64);
  append_elements<std::uint64_t>(out, words, 5, [](std::string& o, std::uint64_t w) {
    char lit[18] = {'0', 'x'};
    for (int d = 0; d < 16; ++d) lit[2 + d] = kHex[(w >> (60 - 4 * d)) & 15];
    o.append(lit, 18);
  });
}

void append_ints(std::string& out, std::span<const std::int32_t> values) {
  append_elements<std::int32_t>(out, values, 16,
                                [](std::string& o, std::int32_t v) { o += fmt::format("{}", v); });
}

void append_doubles(std::string& out, std::span<const double> values) {
  append_elements<double>(out, values, 4, [](std::string& o, double v) { o += double_literal(v); });
}

// Bundles up to this size are byte arrays; larger ones 64-bit words.
constexpr std::size_t kByteLayoutLimit = std::size_t{1} << 20;

struct Layer {
  std::string name, ident;
  std::vector<unsigned char> bytes;  // the bundle file as embedded (after EmbedOptions)
  rt::Bundle bundle;
  HinesSystem system;  // op "hines": the verification section's system
  bool hines() const { return bundle.metadata.op == "hines"; }
};

std::int64_t layer_nnz(const Layer& l) {
  if (!l.hines()) return l.bundle.metadata.nnz;
  const std::int64_t rows = l.system.size();
  return rows + 2 * (rows - l.system.num_cells());  // the diagonal, and upper and lower per non-root row
}

// M, K, N as the header declares them.
std::array<std::int64_t, 3> layer_shape(const Layer& l) {
  const rt::BundleMetadata& md = l.bundle.metadata;
  if (l.hines()) return {md.hines.rows, md.hines.rows, md.hines.rhs};
  return {md.m, md.k, md.n};
}

std::string layer_summary(const Layer& l) {
  const rt::BundleMetadata& md = l.bundle.metadata;
  if (l.hines())
    return fmt::format("hines: {} compartments in {} cell{}, R = {}, {}, {} bytes", md.hines.rows,
                       md.hines.cells, md.hines.cells == 1 ? "" : "s", md.hines.rhs, md.dtype,
                       l.bytes.size());
  return fmt::format("spmm: {} x {}, {} nonzeros, N = {} ({}), {}, {} bytes", md.m, md.k, md.nnz, md.n,
                     md.n_mode, md.dtype, l.bytes.size());
}

// The LayerInfo struct and kLayerCount every generated header declares.
void declare_layer_info(std::string& h, std::size_t count) {
  h += "struct LayerInfo {\n"
       "  const char* name;\n"
       "  const char* op;  // \"spmm\" | \"hines\"\n"
       "  std::int64_t m, k, n, nnz;  // spmm: A is m x k, n the compiled N; hines: m = k = rows, n = rhs\n"
       "  const char* dtype;\n"
       "  const char* n_mode;  // \"fixed\" | \"runtime\"\n"
       "  const char* fingerprint;\n"
       "};\n\n";
  h += fmt::format("inline constexpr std::size_t kLayerCount = {};\n", count);
}

// A layer's namespace and its constants (the caller closes it).
void open_layer_namespace(std::string& h, const Layer& l, std::size_t index) {
  const auto [m, k, n] = layer_shape(l);
  h += fmt::format("\n// {}\n", layer_summary(l));
  h += fmt::format("namespace {} {{\n", l.ident);
  h += fmt::format("inline constexpr const char* kName = {};\n", string_literal(l.name));
  h += fmt::format("inline constexpr std::int64_t M = {}, K = {}, N = {};\n", m, k, n);
  h += fmt::format("inline constexpr std::size_t kIndex = {};\n", index);
  if (const auto& g = l.bundle.metadata.conv) {
    // A convolution executor: its geometry, and the shapes SpmmExecutor::run_conv takes for a batch.
    const std::int64_t oh = g->out_height(), ow = g->out_width();
    const bool nhwc = g->layout == rt::ConvLayout::nhwc;
    h += fmt::format(
        "// A convolution ({}): Kernels::{}().run_conv(x, input_shape(batch), y, output_shape(batch), "
        "stream).\n",
        rt::describe(*g), l.ident);
    h += "inline constexpr bool kConv = true;\n";
    h += fmt::format("inline constexpr const char* kLayout = \"{}\";\n", rt::to_string(g->layout));
    h += fmt::format(
        "inline constexpr std::int64_t kInChannels = {}, kHeight = {}, kWidth = {}, kOutChannels = {}, "
        "kOutHeight = {}, kOutWidth = {};\n",
        g->in_channels, g->height, g->width, m, oh, ow);
    h += fmt::format(
        "inline constexpr std::int64_t kKernelH = {}, kKernelW = {}, kStrideH = {}, kStrideW = {}, kPadTop = "
        "{}, "
        "kPadLeft = {}, kPadBottom = {}, kPadRight = {};\n",
        g->kernel_h, g->kernel_w, g->stride_h, g->stride_w, g->pad_top, g->pad_left, g->pad_bottom,
        g->pad_right);
    h += fmt::format(
        "// X and Y of `batch` images in the layout's order ({}).\n"
        "inline constexpr std::array<std::int64_t, 4> input_shape(std::int64_t batch) {{ return {{{}}}; }}\n"
        "inline constexpr std::array<std::int64_t, 4> output_shape(std::int64_t batch) {{ return {{{}}}; "
        "}}\n",
        nhwc ? "N, H, W, C" : "N, C, H, W",
        nhwc ? "batch, kHeight, kWidth, kInChannels" : "batch, kInChannels, kHeight, kWidth",
        nhwc ? "batch, kOutHeight, kOutWidth, kOutChannels" : "batch, kOutChannels, kOutHeight, kOutWidth");
  }
}

// The sources' table behind layers().
void append_layer_table(std::string& s, const std::vector<Layer>& layers) {
  s += "\nstatic constexpr LayerInfo kLayers[kLayerCount] = {\n";
  for (const Layer& l : layers) {
    const rt::BundleMetadata& md = l.bundle.metadata;
    const auto [m, k, n] = layer_shape(l);
    s += fmt::format("    {{{}, {}, {}, {}, {}, {}, {}, {}, {}}},\n", string_literal(l.name),
                     string_literal(md.op), m, k, n, layer_nnz(l), string_literal(md.dtype),
                     string_literal(md.n_mode), string_literal(md.fingerprint));
  }
}

// The Hines system's accessors a layer's namespace declares (the verification section's system).
void declare_hines_system(std::string& h, const Layer& l) {
  const bool passive = !l.system.cap_over_dt.empty();
  h += "// The system of one implicit Euler step, in Hines order (rows; see "
       "sparsecc/runtime/hines_executor.hpp).\n";
  h += "std::span<const std::int32_t> parent();  // parent[i] > i, -1 at a cell's root\n";
  h += "std::span<const double> diag();          // A[i][i]\n";
  h += "std::span<const double> upper();         // A[i][parent[i]], 0 at roots\n";
  h += "std::span<const double> lower();         // A[parent[i]][i], 0 at roots\n";
  if (passive) {
    h += "// b[i] = cap_over_dt[i] * v_old[i] + leak[i] * kLeakReversalMv + i_inject[i]  (uS, mV, nA)\n";
    h += "std::span<const double> cap_over_dt();   // C_i / dt [uS]\n";
    h += "std::span<const double> leak();          // leak conductance g_i [uS]\n";
  } else {
    h += "// Empty: the bundle's system carries no passive-step terms.\n";
    h += "std::span<const double> cap_over_dt();\n";
    h += "std::span<const double> leak();\n";
  }
  h += fmt::format("inline constexpr double kLeakReversalMv = {};\n",
                   double_literal(l.system.leak_reversal_mv));
  h += fmt::format(
      "std::span<const std::int32_t> compartment_of();  // Hines row -> compartment (SWC order at "
      "resolution 1){}\n",
      l.bundle.permutation.empty() ? "; empty: none in the bundle" : "");
  h += "std::span<const std::int32_t> cell_offsets();    // cell c: rows [cell_offsets[c], "
       "cell_offsets[c + 1])\n";
}

// The arrays of the Hines system of layer `i` (declare_hines_system), in the source's embedded namespace.
void append_hines_arrays(std::string& s, const Layer& l, std::size_t i) {
  const HinesSystem& h = l.system;
  const auto ints = [&](const char* what, std::span<const std::int32_t> v) {
    s += fmt::format("static const std::int32_t k{}{}[{}] = {{\n", what, i, v.size());
    append_ints(s, v);
    s += "};\n";
  };
  const auto doubles = [&](const char* what, std::span<const double> v) {
    s += fmt::format("static const double k{}{}[{}] = {{\n", what, i, v.size());
    append_doubles(s, v);
    s += "};\n";
  };
  ints("Parent", h.parent);
  doubles("Diag", h.diag);
  doubles("Upper", h.upper);
  doubles("Lower", h.lower);
  if (!h.cap_over_dt.empty()) {
    doubles("CapOverDt", h.cap_over_dt);
    doubles("Leak", h.leak);
  }
  if (!l.bundle.permutation.empty()) ints("CompartmentOf", l.bundle.permutation);
  ints("CellOffsets", h.cell_offsets);
}

// The accessors' definitions of layer `i`'s Hines system.
void define_hines_system(std::string& s, const Layer& l, std::size_t i) {
  const bool passive = !l.system.cap_over_dt.empty();
  const auto def = [&](const char* type, const char* fn, const char* array, bool present) {
    if (present)
      s += fmt::format("std::span<const {}> {}() {{ return embedded::k{}{}; }}\n", type, fn, array, i);
    else
      s += fmt::format("std::span<const {}> {}() {{ return {{}}; }}\n", type, fn);
  };
  def("std::int32_t", "parent", "Parent", true);
  def("double", "diag", "Diag", true);
  def("double", "upper", "Upper", true);
  def("double", "lower", "Lower", true);
  def("double", "cap_over_dt", "CapOverDt", passive);
  def("double", "leak", "Leak", passive);
  def("std::int32_t", "compartment_of", "CompartmentOf", !l.bundle.permutation.empty());
  def("std::int32_t", "cell_offsets", "CellOffsets", true);
}

// The namespace's braces ("a::b" opens the nested namespaces at once).
std::string open_namespace(const std::string& ns) { return fmt::format("namespace {} {{\n", ns); }
std::string close_namespace(const std::string& ns) { return fmt::format("}}  // namespace {}\n", ns); }

std::string make_header(const std::vector<Layer>& layers, const std::string& ns) {
  std::string h;
  h += "// Generated by sparsecc embed; do not edit.\n";
  h += fmt::format(
      "// {} layer{} embedded as bundle bytes. Kernels loads each executor into one context on first use\n"
      "// (sparsecc::rt: the CUDA driver API alone); layers() and bundle_bytes() describe and expose them.\n",
      layers.size(), layers.size() == 1 ? "" : "s");
  h += "#pragma once\n\n";
  const bool conv = std::any_of(layers.begin(), layers.end(),
                                [](const Layer& l) { return l.bundle.metadata.conv.has_value(); });
  h += conv ? "#include <array>\n" : "";
  h += "#include <cstddef>\n#include <cstdint>\n#include <memory>\n#include <mutex>\n#include <span>\n\n";
  h += "#include \"sparsecc/runtime/executor.hpp\"\n#include \"sparsecc/runtime/hines_executor.hpp\"\n\n";
  h += open_namespace(ns);
  h += "\n";
  declare_layer_info(h, layers.size());
  h += "// The layers in order; bundle_bytes(i) is layer i's bundle file (std::out_of_range past the end).\n";
  h += "std::span<const LayerInfo> layers();\n";
  h += "std::span<const unsigned char> bundle_bytes(std::size_t index);\n";
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    open_layer_namespace(h, l, i);
    h += "std::span<const unsigned char> bundle();\n";
    if (l.hines()) declare_hines_system(h, l);
    h += fmt::format("}}  // namespace {}\n", l.ident);
  }
  h += "\n";
  h += "// Loads each executor on first use into one context (thread-safe: std::call_once per layer); the\n"
       "// context must outlive the Kernels. A failed load throws (rt::BundleError, rt::DriverError) and is\n"
       "// tried again on the next call.\n";
  h += "class Kernels {\n public:\n";
  h += "  explicit Kernels(const sparsecc::rt::Context& ctx, sparsecc::rt::LoadOptions options = {});\n";
  h += "  ~Kernels();\n\n";
  for (const Layer& l : layers)
    h += fmt::format("  const sparsecc::rt::{}& {}();\n", l.hines() ? "HinesExecutor" : "SpmmExecutor",
                     l.ident);
  h += "\n private:\n  struct State;\n  std::unique_ptr<State> state_;\n};\n\n";
  h += close_namespace(ns);
  return h;
}

std::string make_source(const std::vector<Layer>& layers, const std::string& ns,
                        const std::string& header_name) {
  std::size_t bytes = 0;
  for (const Layer& l : layers) bytes += l.bytes.size();
  std::string s;
  s.reserve(bytes * 6 + bytes / 16 * 5 + (1 << 16));
  s += "// Generated by sparsecc embed; do not edit.\n";
  s += fmt::format("#include {}\n\n", string_literal(header_name));
  const bool words =
      std::ranges::any_of(layers, [](const Layer& l) { return l.bytes.size() > kByteLayoutLimit; });
  s += words ? "#include <bit>\n" : "";
  s += "#include <optional>\n#include <stdexcept>\n#include <string>\n\n";
  if (words)
    s +=
        "static_assert(std::endian::native == std::endian::little, \"the bundles are stored as little-endian "
        "words\");\n\n";
  s += open_namespace(ns);
  s += "\nnamespace embedded {\n";
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    s += fmt::format("\n// {}: {}\n", l.ident, layer_summary(l));
    if (l.bytes.size() <= kByteLayoutLimit) {
      s += fmt::format("alignas(16) static const unsigned char kBundle{}[{}] = {{\n", i, l.bytes.size());
      append_bytes(s, l.bytes);
      s += fmt::format("}};\nstatic std::span<const unsigned char> bundle{}() {{ return kBundle{}; }}\n", i,
                       i);
    } else {
      s += "// As little-endian 64-bit words: compilers spend time and memory per array element, and as a\n"
           "// byte array this bundle would cost them gigabytes.\n";
      s += fmt::format("alignas(16) static const std::uint64_t kBundle{}Words[{}] = {{\n", i,
                       ceil_div(std::ssize(l.bytes), 8));
      append_words(s, l.bytes);
      s += fmt::format(
          "}};\nstatic std::span<const unsigned char> bundle{}() {{\n"
          "  return {{reinterpret_cast<const unsigned char*>(kBundle{}Words), {}}};\n}}\n",
          i, i, l.bytes.size());
    }
    if (l.hines()) append_hines_arrays(s, l, i);
  }
  append_layer_table(s, layers);
  s += "};\n\nstatic std::span<const unsigned char> (*const kBundles[kLayerCount])() = {\n";
  for (std::size_t i = 0; i < layers.size(); ++i) s += fmt::format("    bundle{},\n", i);
  s += "};\n\n}  // namespace embedded\n\n";

  s += "std::span<const LayerInfo> layers() { return embedded::kLayers; }\n\n";
  s += "std::span<const unsigned char> bundle_bytes(std::size_t index) {\n";
  s += fmt::format(
      "  if (index >= kLayerCount)\n"
      "    throw std::out_of_range(\"{}::bundle_bytes: no layer \" + std::to_string(index) + \" (there are "
      "{})\");\n",
      ns, layers.size());
  s += "  return embedded::kBundles[index]();\n}\n";

  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    s += fmt::format("\nnamespace {} {{\n", l.ident);
    s += fmt::format("std::span<const unsigned char> bundle() {{ return embedded::bundle{}(); }}\n", i);
    if (l.hines()) define_hines_system(s, l, i);
    s += fmt::format("}}  // namespace {}\n", l.ident);
  }

  s += "\nstruct Kernels::State {\n";
  s += "  State(const sparsecc::rt::Context& c, sparsecc::rt::LoadOptions o) : ctx(c), options(o) {}\n";
  s += "  const sparsecc::rt::Context& ctx;\n  sparsecc::rt::LoadOptions options;\n";
  s += "  std::once_flag once[kLayerCount];\n";
  for (std::size_t i = 0; i < layers.size(); ++i)
    s += fmt::format("  std::optional<sparsecc::rt::{}> layer{};\n",
                     layers[i].hines() ? "HinesExecutor" : "SpmmExecutor", i);
  s += "};\n\n";
  s += "Kernels::Kernels(const sparsecc::rt::Context& ctx, sparsecc::rt::LoadOptions options)\n"
       "    : state_(std::make_unique<State>(ctx, options)) {}\n\n";
  s += "Kernels::~Kernels() = default;\n";
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    const char* type = l.hines() ? "HinesExecutor" : "SpmmExecutor";
    s += fmt::format("\nconst sparsecc::rt::{}& Kernels::{}() {{\n", type, l.ident);
    s += fmt::format("  std::call_once(state_->once[{}], [this] {{\n", i);
    s += fmt::format("    state_->layer{}.emplace(\n", i);
    s += fmt::format(
        "        sparsecc::rt::{}::load_bytes(embedded::bundle{}(), {}, state_->ctx, state_->options));\n",
        type, i, string_literal(l.name));
    s += "  });\n";
    s += fmt::format("  return *state_->layer{};\n}}\n", i);
  }
  s += "\n";
  s += close_namespace(ns);
  return s;
}

bool is_cpu(const Layer& l) { return l.bundle.metadata.target == "cpu"; }

const char* cpu_real(const Layer& l) { return l.bundle.metadata.dtype == "f32" ? "float" : "double"; }

// The vector ISA a CPU layer's code needs: its target, or for "native" code the width it was built
// with (the plan's lanes of its element type).
std::string cpu_isa(const Layer& l) {
  const rt::BundleMetadata& md = l.bundle.metadata;
  if (md.arch != "native") return md.arch;
  const auto lanes = md.plan_summary.value("lanes", std::int64_t{0});
  const std::int64_t bits = lanes * (md.dtype == "f64" ? 64 : 32);
  return bits > 256 ? "x86-64-avx512" : "x86-64-avx2";
}

std::string make_cpu_header(const std::vector<Layer>& layers, const std::string& ns) {
  std::string h;
  h += "// Generated by sparsecc embed; do not edit.\n";
  h += fmt::format(
      "// {} layer{} compiled for the CPU ({}), linked from the static library embed wrote beside this\n"
      "// header; sparsecc::rt::CpuSpmmExecutor / CpuHinesExecutor run them (no CUDA, no LLVM).\n",
      layers.size(), layers.size() == 1 ? "" : "s", layers.front().bundle.metadata.arch);
  h += "#pragma once\n\n";
  h += "#include <cstddef>\n#include <cstdint>\n#include <memory>\n#include <span>\n\n";
  h += "#include \"sparsecc/runtime/cpu_executor.hpp\"\n\n";
  h += open_namespace(ns);
  h += "\n";
  declare_layer_info(h, layers.size());
  h += "std::span<const LayerInfo> layers();\n";
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    open_layer_namespace(h, l, i);
    if (l.hines()) {
      declare_hines_system(h, l);
      h += "// The executor's rows: rows()[i] is the Hines row of its row i (CpuHinesExecutor::to_rows).\n";
      h += "std::span<const std::int32_t> rows();\n";
    }
    h += fmt::format("}}  // namespace {}\n", l.ident);
  }
  h += "\n";
  h += "// The executors over the linked code, made when the Kernels are; a Hines executor owns its\n"
       "// workspace (one solve at a time each).\n";
  h += "class Kernels {\n public:\n  Kernels();\n  ~Kernels();\n\n";
  h += "  // Layer `index` (layers() order) when it is an SpMM / a Hines executor, else null;\n"
       "  // std::out_of_range past the end.\n";
  h += "  const sparsecc::rt::CpuSpmmExecutor* spmm(std::size_t index);\n";
  h += "  sparsecc::rt::CpuHinesExecutor* hines(std::size_t index);\n\n";
  for (const Layer& l : layers)
    h += l.hines() ? fmt::format("  sparsecc::rt::CpuHinesExecutor& {}();\n", l.ident)
                   : fmt::format("  const sparsecc::rt::CpuSpmmExecutor& {}();\n", l.ident);
  h += "\n private:\n  struct State;\n  std::unique_ptr<State> state_;\n};\n\n";
  h += close_namespace(ns);
  return h;
}

std::string make_cpu_source(const std::vector<Layer>& layers, const std::string& ns,
                            const std::string& header_name) {
  std::string s;
  s += "// Generated by sparsecc embed; do not edit.\n";
  s += fmt::format("#include {}\n\n", string_literal(header_name));
  s += "#include <stdexcept>\n#include <string>\n\n";
  s += "// The layers' entry points, in the static library embed wrote beside this source.\n";
  s += "extern \"C\" {\n";
  for (const Layer& l : layers) {
    const rt::BundleMetadata& md = l.bundle.metadata;
    if (l.hines())
      s += fmt::format(
          "void {0}_solve(std::int64_t, const {1}*, const {1}*, const {1}*, const {1}*, {1}*, {1}*);\n",
          md.kernel, cpu_real(l));
    else  // B and C: float for f32, the 16-bit values of f16 and bf16 (the bias stays fp32)
      s += fmt::format(
          "void {0}_tile(std::int64_t, std::int64_t, std::int32_t, const {1}*, {1}*, const float*);\n",
          md.kernel, md.dtype == "f32" ? "float" : "std::uint16_t");
  }
  s += "}\n\n";
  s += open_namespace(ns);
  s += "\nnamespace embedded {\n";
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    s += fmt::format("\n// {}: {}\n", l.ident, layer_summary(l));
    if (l.hines()) {
      append_hines_arrays(s, l, i);
      s += fmt::format("static const std::int32_t kRows{}[{}] = {{\n", i, l.bundle.tables.size());
      append_ints(s, l.bundle.tables);
      s += "};\n";
    } else if (!l.bundle.bias.empty()) {
      s += fmt::format("alignas(64) static const float kBias{}[{}] = {{\n", i, l.bundle.bias.size());
      append_elements<float>(s, l.bundle.bias, 4, [](std::string& o, float v) { o += float_literal(v); });
      s += "};\n";
    }
  }
  append_layer_table(s, layers);
  s += "};\n\n}  // namespace embedded\n\n";
  s += "std::span<const LayerInfo> layers() { return embedded::kLayers; }\n";
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    if (!l.hines()) continue;
    s += fmt::format("\nnamespace {} {{\n", l.ident);
    define_hines_system(s, l, i);
    s += fmt::format("std::span<const std::int32_t> rows() {{ return embedded::kRows{}; }}\n", i);
    s += fmt::format("}}  // namespace {}\n", l.ident);
  }
  s += "\nstruct Kernels::State {\n";
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    const rt::BundleMetadata& md = l.bundle.metadata;
    if (l.hines()) {
      const std::int64_t real = md.dtype == "f32" ? 4 : 8;
      s += fmt::format(
          "  sparsecc::rt::CpuHinesExecutor layer{}{{reinterpret_cast<void*>(&{}_solve),\n"
          "                                        {{{}, {}, {}, {}, {}, {}}},\n"
          "                                        embedded::kRows{}}};\n",
          i, md.kernel, string_literal(md.dtype), md.hines.rows, md.hines.cells, md.hines.rhs,
          md.plan_summary.at("items").get<std::int64_t>(), ceil_div(md.hines.workspace_bytes, real), i);
    } else {
      s += fmt::format(
          "  sparsecc::rt::CpuSpmmExecutor layer{}{{&{}_tile, {{{}, {}, {}, {}, {}, {}, {}}}, {}}};\n", i,
          md.kernel, md.m, md.k, md.n, md.block_rows, md.n_tile, md.relu ? "true" : "false",
          string_literal(md.dtype),
          l.bundle.bias.empty() ? std::string("nullptr") : fmt::format("embedded::kBias{}", i));
    }
  }
  std::string isa = "x86-64-avx2";
  for (const Layer& l : layers)
    if (cpu_isa(l) == "x86-64-avx512") isa = "x86-64-avx512";
  s += fmt::format(
      "}};\n\n// The widest vector ISA of the layers' code, checked before any of it can run.\n"
      "Kernels::Kernels() {{\n  sparsecc::rt::require_cpu({}, {});\n  state_ = "
      "std::make_unique<State>();\n}}\n\n"
      "Kernels::~Kernels() = default;\n",
      string_literal(isa), string_literal(ns + " (sparsecc embed)"));
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    s += l.hines()
             ? fmt::format("\nsparsecc::rt::CpuHinesExecutor& Kernels::{}() {{ return state_->layer{}; }}\n",
                           l.ident, i)
             : fmt::format(
                   "\nconst sparsecc::rt::CpuSpmmExecutor& Kernels::{}() {{ return state_->layer{}; }}\n",
                   l.ident, i);
  }
  const auto by_index = [&](const char* type, const char* fn, bool hines) {
    s += fmt::format("\n{} Kernels::{}(std::size_t index) {{\n  switch (index) {{\n", type, fn);
    for (std::size_t i = 0; i < layers.size(); ++i)
      s += fmt::format(
          "    case {}: return {};\n", i,
          layers[i].hines() == hines ? fmt::format("&state_->layer{}", i) : std::string("nullptr"));
    s += fmt::format(
        "  }}\n  throw std::out_of_range(\"{}::Kernels::{}: no layer \" + std::to_string(index) + \" (there "
        "are {})\");\n}}\n",
        ns, fn, layers.size());
  };
  by_index("const sparsecc::rt::CpuSpmmExecutor*", "spmm", false);
  by_index("sparsecc::rt::CpuHinesExecutor*", "hines", true);
  s += "\n";
  s += close_namespace(ns);
  return s;
}
}  // namespace

std::string cpp_identifier(const std::string& layer_name) {
  std::string id;
  for (const char c : layer_name) {
    const char k = is_ident_char(c) ? c : '_';
    if (k == '_' && (id.empty() || id.back() == '_')) continue;  // no leading '_', no runs
    id += k;
  }
  while (!id.empty() && id.back() == '_') id.pop_back();
  if (id.empty())
    throw UsageError(fmt::format("layer name {} has no letter or digit to make a C++ name of",
                                 string_literal(layer_name)));
  if (std::isdigit(static_cast<unsigned char>(id.front()))) id = "l_" + id;
  if (is_reserved(id)) id += '_';
  return id;
}

rt::Bundle parse_embeddable_bundle(std::span<const unsigned char> bytes, const std::string& name) {
  rt::Bundle b = rt::parse_bundle(bytes, name);
  if (b.metadata.op == "hines") {
    if (b.reference.empty())
      throw rt::BundleError(name +
                            ": a Hines bundle without its verification section cannot be embedded (the "
                            "system is needed); write it again with sparsecc hines -o");
    const HinesSystem s = hines_system_from_reference_bytes(b.reference, name);
    if (s.size() != b.metadata.hines.rows || s.num_cells() != b.metadata.hines.cells)
      throw rt::BundleError(
          fmt::format("{}: the verification section holds {} rows in {} cells, the metadata {} in {}", name,
                      s.size(), s.num_cells(), b.metadata.hines.rows, b.metadata.hines.cells));
  } else if (b.metadata.op != "spmm") {
    throw rt::BundleError(fmt::format("{}: op \"{}\" cannot be embedded", name, b.metadata.op));
  }
  return b;
}

bool strip_bundle(rt::Bundle& b, const EmbedOptions& options) {
  bool changed = false;
  if (options.strip_ptx && !b.cubin.empty() && !b.ptx.empty()) {
    b.ptx.clear();
    changed = true;
  }
  // The plan goes with the verification matrix: it is interpreted against it, never alone.
  if (options.strip_reference && b.metadata.op == "spmm" && (!b.reference.empty() || !b.plan.empty())) {
    b.reference.clear();
    b.plan.clear();
    changed = true;
  }
  return changed;
}

std::vector<unsigned char> stripped_bundle(std::span<const unsigned char> bytes, const std::string& name,
                                           const EmbedOptions& options) {
  rt::Bundle b = parse_embeddable_bundle(bytes, name);
  if (!strip_bundle(b, options)) return {bytes.begin(), bytes.end()};
  return rt::bundle_bytes(b, name);
}

EmbedSources embed_bundles(const std::vector<EmbeddedLayer>& layers, const std::string& ns,
                           const std::string& header_name, const EmbedOptions& options) {
  if (layers.empty()) throw UsageError("embed: no bundles to embed");
  validate_namespace(ns);
  validate_header_name(header_name);
  std::vector<Layer> parsed;
  std::map<std::string, std::string> by_ident;  // identifier -> layer name
  for (const EmbeddedLayer& in : layers) {
    Layer l;
    l.name = in.name;
    l.ident = cpp_identifier(in.name);
    if (const auto [it, fresh] = by_ident.emplace(l.ident, in.name); !fresh)
      throw UsageError(fmt::format("embed: layers {} and {} both get the C++ name '{}'; rename one",
                                   string_literal(it->second), string_literal(in.name), l.ident));
    const std::string what = fmt::format("layer {}", string_literal(in.name));
    l.bundle = parse_embeddable_bundle(in.bytes, what);
    l.bytes = strip_bundle(l.bundle, options) ? rt::bundle_bytes(l.bundle, what) : in.bytes;
    if (l.hines()) l.system = hines_system_from_reference_bytes(l.bundle.reference, what);
    parsed.push_back(std::move(l));
  }
  const std::size_t cpu = static_cast<std::size_t>(std::ranges::count_if(parsed, is_cpu));
  if (cpu == 0) return {make_header(parsed, ns), make_source(parsed, ns, header_name), {}};
  if (cpu != parsed.size())
    throw UsageError("embed: the bundles are for GPUs and CPUs both; embed each kind on its own");
  EmbedSources out{make_cpu_header(parsed, ns), make_cpu_source(parsed, ns, header_name), {}};
  for (const Layer& l : parsed) out.archives.emplace_back(l.bundle.objects.begin(), l.bundle.objects.end());
  return out;
}

}  // namespace sparsecc
