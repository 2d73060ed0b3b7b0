#include "sparsecc/io/onnx.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <optional>
#include <set>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "sparsecc/io/npy.hpp"

#if SPARSECC_HAVE_ONNX
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#endif

namespace sparsecc {

std::int64_t OnnxNode::int_attr(const std::string& attr, std::int64_t fallback) const {
  const auto it = ints.find(attr);
  return it == ints.end() ? fallback : it->second;
}

double OnnxNode::float_attr(const std::string& attr, double fallback) const {
  const auto it = floats.find(attr);
  return it == floats.end() ? fallback : it->second;
}

bool OnnxNode::is(const std::string& op) const {
  return op_type == op && (domain.empty() || domain == "ai.onnx");
}

std::uint64_t onnx_message_limit(std::uint64_t file_bytes) {
  return std::max(kMinOnnxMessageLimit, file_bytes / kOnnxBytesPerMessage);
}

OnnxGraph read_onnx(const std::string& path, const OnnxReadOptions& options) {
  if (!onnx_available()) return parse_onnx({}, path);  // throws the UsageError without reading the file
  std::uint64_t file_bytes = 0;
  const Bytes data = read_input(path, file_bytes);
  // The message limit follows the file's size on disk, not what a .onnx.gz expands to.
  OnnxReadOptions o = options;
  o.message_limit = onnx_message_limit(file_bytes);
  return parse_onnx(data, path, o);
}

#if SPARSECC_HAVE_ONNX

namespace {

std::optional<DType> floating_type(std::int32_t t) {
  switch (t) {
    case onnx::TensorProto::FLOAT:
      return DType::f32;
    case onnx::TensorProto::DOUBLE:
      return DType::f64;
    case onnx::TensorProto::FLOAT16:
      return DType::f16;
    case onnx::TensorProto::BFLOAT16:
      return DType::bf16;
    default:
      return std::nullopt;
  }
}

std::string type_name(std::int32_t t) {
  if (onnx::TensorProto_DataType_IsValid(t))
    return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(t));
  return fmt::format("element type {}", t);
}

// Decodes one initializer; releases its raw bytes once they are converted.
OnnxInitializer convert(onnx::TensorProto& p, const std::string& file) {
  OnnxInitializer out;
  const std::string name = p.name();
  auto fail = [&](const std::string& msg) { throw_at_byte(file, -1, msg, name); };
  if (p.data_location() == onnx::TensorProto::EXTERNAL || p.external_data_size() > 0) {
    std::string location;
    for (const auto& kv : p.external_data())
      if (kv.key() == "location") location = kv.value();
    fail(
        fmt::format("data kept in an external file{}; external data is not supported (save the model "
                    "with its weights inside the .onnx file)",
                    location.empty() ? std::string() : fmt::format(" ('{}')", location)));
  }
  if (p.has_segment()) fail("segmented tensors are not supported");
  out.tensor.name = name;
  out.tensor.shape.assign(p.dims().begin(), p.dims().end());
  out.data_type = type_name(p.data_type());
  const auto& shape = out.tensor.shape;
  std::int64_t numel = 1;
  for (const auto d : shape)
    if (d < 0) fail(fmt::format("negative dimension in shape {}", shape_string(shape)));
  for (const auto d : shape)
    if (d == 0) numel = 0;
  if (numel != 0)
    for (const auto d : shape)
      if (__builtin_mul_overflow(numel, d, &numel))
        fail(fmt::format("shape {} has too many elements", shape_string(shape)));

  const auto dtype = floating_type(p.data_type());
  if (!dtype) return out;
  out.floating = true;
  out.tensor.dtype = *dtype;
  if (static_cast<std::uint64_t>(numel) > kMaxInputBytes / sizeof(double))
    fail(fmt::format("shape {} exceeds the {} byte input limit", shape_string(shape), kMaxInputBytes));
  const auto n = static_cast<std::size_t>(numel);
  const bool fp16 = *dtype == DType::f16 || *dtype == DType::bf16;
  const int typed = *dtype == DType::f32   ? p.float_data_size()
                    : *dtype == DType::f64 ? p.double_data_size()
                                           : p.int32_data_size();
  const char* field = *dtype == DType::f32   ? "float_data"
                      : *dtype == DType::f64 ? "double_data"
                                             : "int32_data";
  std::vector<double>& values = out.tensor.data;
  if (p.has_raw_data()) {
    if (typed > 0) fail(fmt::format("holds both raw_data and {}", field));
    const std::string& raw = p.raw_data();
    const std::size_t size = dtype_size(*dtype);
    if (raw.size() != n * size)
      fail(fmt::format("raw_data holds {} bytes; shape {} of {} needs {}", raw.size(), shape_string(shape),
                       out.data_type, n * size));
    values.resize(n);
    const auto* bytes = reinterpret_cast<const unsigned char*>(raw.data());
    for (std::size_t i = 0; i < n; ++i) values[i] = load_le(*dtype, bytes + i * size);
    p.clear_raw_data();
    return out;
  }
  if (static_cast<std::size_t>(typed) != n)
    fail(fmt::format("{} holds {} values; shape {} of {} needs {}", field, typed, shape_string(shape),
                     out.data_type, n));
  values.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const int at = static_cast<int>(i);
    if (*dtype == DType::f32) {
      values[i] = p.float_data(at);
    } else if (*dtype == DType::f64) {
      values[i] = p.double_data(at);
    } else if (fp16) {
      // The 16-bit pattern sits in the low bits of each int32.
      const auto bits = static_cast<std::uint16_t>(static_cast<std::uint32_t>(p.int32_data(at)) & 0xFFFFu);
      values[i] = *dtype == DType::f16 ? half_bits_to_double(bits) : bf16_bits_to_double(bits);
    }
  }
  return out;
}

OnnxNode convert(const onnx::NodeProto& p) {
  OnnxNode node;
  node.name = p.name();
  node.op_type = p.op_type();
  node.domain = p.domain();
  node.inputs.assign(p.input().begin(), p.input().end());
  node.outputs.assign(p.output().begin(), p.output().end());
  for (const auto& a : p.attribute()) {
    // Old exporters leave `type` unset; the field that is present tells then.
    const auto t = a.type();
    const bool untyped = t == onnx::AttributeProto::UNDEFINED;
    if (t == onnx::AttributeProto::INT || (untyped && a.has_i()))
      node.ints[a.name()] = a.i();
    else if (t == onnx::AttributeProto::FLOAT || (untyped && a.has_f()))
      node.floats[a.name()] = a.f();
    else if (t == onnx::AttributeProto::INTS || (untyped && a.ints_size() > 0))
      node.int_lists[a.name()].assign(a.ints().begin(), a.ints().end());
  }
  return node;
}

bool write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

// libonnx's shape inference over `model`, in a child process: on malformed attributes it can divide
// by zero or worse (a Conv with a zero stride does), and no model may take sparsecc down. The child
// sends back a status byte and the inferred value infos (a serialized GraphProto) or the message of
// the exception that stopped inference; the parent waits at most `seconds`. The schema registry is built
// in the parent first, so that every child inherits it instead of building it again. Returns the
// graph, or in `why` the reason there is none.
std::optional<onnx::GraphProto> run_inference(onnx::ModelProto& model, int seconds, std::string& why) {
  onnx::OpSchemaRegistry::Instance();
  int fds[2];
  if (::pipe(fds) != 0) {
    why = fmt::format("ONNX shape inference not run: pipe: {}", std::strerror(errno));
    return std::nullopt;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    why = fmt::format("ONNX shape inference not run: fork: {}", std::strerror(errno));
    ::close(fds[0]);
    ::close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    ::close(fds[0]);
    char status = 'E';
    std::string bytes;
    try {
      onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(),
                                         onnx::ShapeInferenceOptions(/*check_type=*/false, /*error_mode=*/0));
      onnx::GraphProto values;
      *values.mutable_input() = model.graph().input();
      *values.mutable_value_info() = model.graph().value_info();
      *values.mutable_output() = model.graph().output();
      bytes = values.SerializeAsString();
      status = 'G';
    } catch (const std::exception& e) {
      bytes = e.what();
    }
    const bool ok = write_all(fds[1], &status, 1) && write_all(fds[1], bytes.data(), bytes.size());
    ::_exit(ok ? 0 : 1);
  }
  ::close(fds[1]);
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  bool timed_out = false;
  for (char buf[65536];;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now())
            .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, INT_MAX)));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) break;
    if (r == 0) continue;  // the deadline: checked above
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    why = fmt::format("ONNX shape inference did not finish in {} s", seconds);
    return std::nullopt;
  }
  if (WIFSIGNALED(wstatus)) {
    why = fmt::format("ONNX shape inference (libonnx) crashed on this model ({})",
                      ::strsignal(WTERMSIG(wstatus)));
    return std::nullopt;
  }
  if (got.empty() || got[0] != 'G') {
    why = got.size() > 1 ? fmt::format("ONNX shape inference failed: {}", got.substr(1))
                         : std::string("ONNX shape inference failed");
    return std::nullopt;
  }
  onnx::GraphProto values;
  if (!values.ParseFromArray(got.data() + 1, static_cast<int>(got.size() - 1))) {
    why = "ONNX shape inference failed: its result does not parse";
    return std::nullopt;
  }
  return values;
}

// The shapes of the graph's values by libonnx's shape inference (see onnx.hpp), into out.shapes.
void infer_shapes(onnx::ModelProto& model, std::int64_t batch, int seconds, OnnxGraph& out) {
  onnx::GraphProto& g = *model.mutable_graph();
  std::set<std::string> initializers;
  for (const auto& p : g.initializer()) initializers.insert(p.name());
  if (batch > 0)
    for (auto& v : *g.mutable_input()) {
      if (initializers.contains(v.name()) || !v.type().has_tensor_type() ||
          !v.type().tensor_type().has_shape() || v.type().tensor_type().shape().dim_size() == 0)
        continue;
      auto* lead = v.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0);
      if (!lead->has_dim_value()) lead->set_dim_value(batch);
    }
  // A node of a domain the model imports no opset of fails inference as a whole; imported, it only
  // leaves its own outputs untyped (no schema), which error mode 0 lets pass.
  std::set<std::string> domains;
  for (const auto& o : model.opset_import()) domains.insert(o.domain() == "ai.onnx" ? "" : o.domain());
  for (const auto& n : g.node())
    if (domains.insert(n.domain() == "ai.onnx" ? "" : n.domain()).second) {
      auto* o = model.add_opset_import();
      o->set_domain(n.domain());
      o->set_version(1);
    }
  const std::optional<onnx::GraphProto> values = run_inference(model, seconds, out.shape_note);
  if (!values) return;
  const auto take = [&](const onnx::ValueInfoProto& v) {
    if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return;
    std::vector<std::int64_t> dims;
    for (const auto& d : v.type().tensor_type().shape().dim())
      dims.push_back(d.has_dim_value() && d.dim_value() >= 0 ? d.dim_value() : -1);
    out.shapes[v.name()] = std::move(dims);
  };
  for (const auto& v : values->input()) take(v);
  for (const auto& v : values->value_info()) take(v);
  for (const auto& v : values->output()) take(v);
}

// How many sub-messages parsing `p..end` as a protobuf message would create, counting every
// length-delimited field whose payload is itself a well-formed message (strings and packed numbers
// that happen to parse as messages are counted too: an upper bound). False when `p..end` is not a
// well-formed message. Stops early once `count` passes `limit`.
bool count_messages(const unsigned char* p, const unsigned char* end, int depth, std::uint64_t& count,
                    std::uint64_t limit) {
  auto varint = [&](std::uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p == end) return false;
      const unsigned char b = *p++;
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  };
  while (p < end) {
    std::uint64_t tag = 0, v = 0;
    if (!varint(tag) || (tag >> 3) == 0) return false;
    switch (tag & 7) {
      case 0:
        if (!varint(v)) return false;
        break;
      case 1:
        if (end - p < 8) return false;
        p += 8;
        break;
      case 5:
        if (end - p < 4) return false;
        p += 4;
        break;
      case 2: {
        if (!varint(v) || v > static_cast<std::uint64_t>(end - p)) return false;
        std::uint64_t inner = 0;
        if (depth < 100 && count_messages(p, p + v, depth + 1, inner, limit - std::min(limit, count)))
          count += 1 + inner;
        if (count > limit) return true;
        p += v;
        break;
      }
      default:  // groups (deprecated) and invalid wire types
        return false;
    }
  }
  return true;
}

}  // namespace

bool onnx_available() { return true; }

OnnxGraph parse_onnx(std::span<const unsigned char> data, const std::string& file,
                     const OnnxReadOptions& options) {
  if (data.size() > static_cast<std::size_t>(INT_MAX))
    throw_in_file(file, fmt::format("{} bytes exceed protobuf's 2 GiB limit (models this large keep their "
                                    "weights in external data files, which are not supported)",
                                    data.size()));
  // Each message protobuf creates costs hundreds of bytes, while an empty one takes two bytes of the
  // file: a degenerate model is refused before it is parsed.
  std::uint64_t messages = 0;
  const std::uint64_t limit = options.message_limit ? options.message_limit : onnx_message_limit(data.size());
  count_messages(data.data(), data.data() + data.size(), 0, messages, limit);
  if (messages > limit)
    throw_in_file(file,
                  fmt::format("the protobuf holds more than {} messages, the limit for a file of this size "
                              "(one per {} bytes, at least {}); refused as degenerate",
                              limit, kOnnxBytesPerMessage, kMinOnnxMessageLimit));
  onnx::ModelProto model;
  if (!model.ParseFromArray(data.data(), static_cast<int>(data.size())))
    throw_in_file(file, "not an ONNX model: the protobuf does not parse (truncated or corrupt file?)");
  if (!model.has_graph()) throw_in_file(file, "not an ONNX model: it holds no graph");
  onnx::GraphProto& g = *model.mutable_graph();

  OnnxGraph out;
  out.name = g.name();
  std::set<std::string> names;
  for (auto& p : *g.mutable_initializer()) {
    if (p.name().empty()) throw_in_file(file, "an initializer has no name");
    if (!names.insert(p.name()).second) throw_at_byte(file, -1, "duplicate initializer name", p.name());
    out.initializers.push_back(convert(p, file));
  }
  for (const auto& s : g.sparse_initializer()) {
    const std::string& name = s.values().name();
    if (!names.insert(name).second) throw_at_byte(file, -1, "duplicate initializer name", name);
    out.sparse_initializers.push_back(name);
  }
  for (const auto& n : g.node()) out.nodes.push_back(convert(n));
  for (const auto& v : g.input()) out.inputs.push_back(v.name());
  for (const auto& v : g.output()) out.outputs.push_back(v.name());
  if (options.infer_shapes) infer_shapes(model, options.batch, options.inference_seconds, out);
  return out;
}

#else

bool onnx_available() { return false; }

OnnxGraph parse_onnx(std::span<const unsigned char>, const std::string& file, const OnnxReadOptions&) {
  throw UsageError(fmt::format(
      "{}: this sparsecc was built without ONNX support (install libonnx-dev and rebuild)", file));
}

#endif

}  // namespace sparsecc
