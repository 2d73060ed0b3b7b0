// Writes the binary hostile inputs of tests/cli/hostile_test.sh into a folder, each under 10 MB:
// deeply nested JSON (safetensors header, manifest, tuning database, predictor), zip members and
// headers that declare far more data than the file holds, decompression bombs (.npz, .mtx.gz,
// .smtx.gz), a float matrix beside an int64 scalar (.npz, .safetensors), NaN and out-of-range
// weights (.npz, .safetensors, .onnx), an ONNX model whose external data is a device file, and a
// small valid model for the output-path cases.
//   make_hostile_fixtures OUTDIR                 the fixtures above
//   make_hostile_fixtures OUTDIR BUNDLE.sccb     also forged bundles made from BUNDLE: forged_m.sccb
//                                                (metadata m halved) and deep_metadata.sccb (metadata
//                                                nested 100000 levels deep), checksums recomputed
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "sparsecc/common/file.hpp"
#include "sparsecc/io/npy.hpp"
#include "sparsecc/io/npz.hpp"
#include "sparsecc/io/safetensors.hpp"
#include "sparsecc/matrix/dense.hpp"
#include "sparsecc/runtime/bundle.hpp"

#if SPARSECC_HAVE_ONNX
#include <onnx/onnx_pb.h>
#endif

namespace {

using sparsecc::Bytes;
using sparsecc::Tensor;
namespace fs = std::filesystem;

constexpr int kDeepLevels = 100000;
constexpr std::size_t kChunk = std::size_t{64} << 20;  // one repeated unit of the bombs

void put(Bytes& b, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) b.push_back(static_cast<unsigned char>(v >> (8 * i)));
}
void append(Bytes& b, std::string_view s) { b.insert(b.end(), s.begin(), s.end()); }
void append(Bytes& b, const Bytes& s) { b.insert(b.end(), s.begin(), s.end()); }

// The bytes as given (write_file_atomic would gzip them again under a .gz name).
void write(const fs::path& p, std::string_view s) {
  std::FILE* f = std::fopen(p.string().c_str(), "wb");
  if (!f) throw std::runtime_error(p.string() + ": cannot create");
  const bool ok = std::fwrite(s.data(), 1, s.size(), f) == s.size();
  if (std::fclose(f) != 0 || !ok) throw std::runtime_error(p.string() + ": cannot write");
}
void write(const fs::path& p, const Bytes& b) {
  write(p, std::string_view(reinterpret_cast<const char*>(b.data()), b.size()));
}

// `levels` nested arrays around 0: [[[...0...]]].
std::string deep_json(int levels) { return std::string(levels, '[') + "0" + std::string(levels, ']'); }

// A zip member as stored: its name, method (0 stored, 8 deflate), compressed bytes, CRC-32 and the
// uncompressed size its headers declare (which a hostile file may misstate).
struct ZipMember {
  std::string name;
  std::uint16_t method = 0;
  Bytes data;
  std::uint32_t crc = 0;
  std::uint64_t declared_size = 0;
};

// A plain (not zip64) archive: local headers with their data, the central directory, the end record.
Bytes zip_archive(const std::vector<ZipMember>& members) {
  Bytes out, central;
  for (const ZipMember& m : members) {
    if (m.data.size() > 0xFFFFFFFEu || m.declared_size > 0xFFFFFFFEu)
      throw std::runtime_error("zip64 needed");
    const std::uint64_t local = out.size();
    put(out, 0x04034b50, 4);
    put(out, 20, 2), put(out, 0, 2), put(out, m.method, 2), put(out, 0, 2), put(out, 0x21, 2);
    put(out, m.crc, 4), put(out, m.data.size(), 4), put(out, m.declared_size, 4);
    put(out, m.name.size(), 2), put(out, 0, 2);
    append(out, m.name);
    append(out, m.data);
    put(central, 0x02014b50, 4);
    put(central, 20, 2), put(central, 20, 2), put(central, 0, 2), put(central, m.method, 2);
    put(central, 0, 2), put(central, 0x21, 2);
    put(central, m.crc, 4), put(central, m.data.size(), 4), put(central, m.declared_size, 4);
    put(central, m.name.size(), 2), put(central, 0, 2), put(central, 0, 2), put(central, 0, 2);
    put(central, 0, 2), put(central, 0, 4), put(central, local, 4);
    append(central, m.name);
  }
  const std::uint64_t cd = out.size();
  append(out, central);
  put(out, 0x06054b50, 4);
  put(out, 0, 2), put(out, 0, 2), put(out, members.size(), 2), put(out, members.size(), 2);
  put(out, central.size(), 4), put(out, cd, 4), put(out, 0, 2);
  return out;
}

std::uint32_t crc_of(const Bytes& b) {
  return static_cast<std::uint32_t>(crc32(0, b.data(), static_cast<uInt>(b.size())));
}

ZipMember stored(const std::string& name, const Bytes& data) {
  return {name, 0, data, crc_of(data), data.size()};
}

// Raw deflate of `in` at `level`, ended with `flush` (Z_FINISH: a complete stream; Z_FULL_FLUSH: a
// byte-aligned run of blocks that refers to nothing before it, so copies of it can be chained).
Bytes deflate_raw(const Bytes& in, int level, int flush) {
  z_stream z{};
  if (deflateInit2(&z, level, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2");
  Bytes out(deflateBound(&z, in.size()) + 64);
  z.next_in = const_cast<unsigned char*>(in.data());
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, flush);
  if (rc != Z_STREAM_END && rc != Z_OK) throw std::runtime_error("deflate");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// The .npy v1 header of a float32 C-order array of `shape`, padded to 128 bytes.
Bytes npy_header(const std::string& descr, const std::string& shape) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  dict.resize(128 - 10 - 1, ' ');
  dict += '\n';
  Bytes b;
  append(b, std::string_view("\x93NUMPY\x01\x00", 8));
  put(b, dict.size(), 2);
  append(b, dict);
  return b;
}

// A pruned weight, about 1 in 8 entries nonzero, deterministic.
Tensor sparse_weight(const std::string& name, std::int64_t rows, std::int64_t cols, unsigned salt) {
  Tensor t;
  t.name = name;
  t.shape = {rows, cols};
  t.data.resize(static_cast<std::size_t>(rows * cols));
  std::uint32_t s = 2463534242u ^ salt;
  for (double& v : t.data) {
    s ^= s << 13, s ^= s >> 17, s ^= s << 5;
    v = (s % 8 == 0) ? static_cast<double>(static_cast<int>(s >> 8) % 1000 - 500) / 512.0 : 0.0;
  }
  return t;
}

// A safetensors file from its header JSON and data.
Bytes safetensors(const std::string& header, const Bytes& data) {
  Bytes b;
  put(b, header.size(), 8);
  append(b, header);
  append(b, data);
  return b;
}

// gzip of `text` followed by `copies` gzip members of kChunk newlines: a multi-member stream that
// expands to about copies * 64 MiB.
Bytes gzip_bomb(std::string_view text, int copies) {
  Bytes out = sparsecc::gzip(std::span(reinterpret_cast<const unsigned char*>(text.data()), text.size()));
  const Bytes filler(kChunk, '\n');
  const Bytes member = sparsecc::gzip(filler);
  for (int i = 0; i < copies; ++i) append(out, member);
  return out;
}

// An .npz whose one member w.npy is an honest deflate stream of a (copies*4096) x 4096 float32
// array of zeros: about copies * 64 MiB from about copies * 64 KiB.
Bytes npz_bomb(int copies) {
  const std::uint64_t rows = static_cast<std::uint64_t>(copies) * (kChunk / 4 / 4096);
  const Bytes head = npy_header("<f4", "(" + std::to_string(rows) + ", 4096)");
  const Bytes zeros(kChunk, 0);
  Bytes data = deflate_raw(head, 9, Z_FULL_FLUSH);
  const Bytes unit = deflate_raw(zeros, 9, Z_FULL_FLUSH);
  uLong crc = crc32(0, head.data(), static_cast<uInt>(head.size()));
  const uLong crc_unit = crc32(0, zeros.data(), static_cast<uInt>(zeros.size()));
  for (int i = 0; i < copies; ++i) {
    append(data, unit);
    crc = crc32_combine(crc, crc_unit, static_cast<z_off_t>(zeros.size()));
  }
  append(data, deflate_raw({}, 9, Z_FINISH));  // the final, empty block
  return zip_archive({{"w.npy", 8, data, static_cast<std::uint32_t>(crc), head.size() + copies * kChunk}});
}

// An .npz whose member w.npy declares 1 GiB (within deflate's ratio of its compressed size) but
// holds about 1.1 MB.
Bytes npz_lying() {
  Bytes body = npy_header("<f4", "(16384, 16384)");
  std::uint32_t s = 88172645u;
  for (int i = 0; i < 1100000; ++i) {
    s ^= s << 13, s ^= s >> 17, s ^= s << 5;
    body.push_back(static_cast<unsigned char>(s & 0x3f));  // never a NaN pattern
  }
  const Bytes data = deflate_raw(body, 0, Z_FINISH);
  return zip_archive({{"w.npy", 8, data, crc_of(body), 128 + (std::uint64_t{1} << 30)}});
}

// The values of `t` as little-endian float32.
Bytes f32_bytes(const Tensor& t) {
  Bytes data;
  for (double v : t.data) {
    const float f = static_cast<float>(v);
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    put(data, u, 4);
  }
  return data;
}

Bytes int64_scalar_npy(std::int64_t v) {
  Bytes b = npy_header("<i8", "()");
  put(b, static_cast<std::uint64_t>(v), 8);
  return b;
}

#if SPARSECC_HAVE_ONNX
void add_float_initializer(onnx::GraphProto* g, const Tensor& t) {
  onnx::TensorProto* p = g->add_initializer();
  p->set_name(t.name);
  p->set_data_type(onnx::TensorProto::FLOAT);
  for (auto d : t.shape) p->add_dims(d);
  for (double v : t.data) p->add_float_data(static_cast<float>(v));
}
// X (batch x K) -> MatMul(W: K x N) -> Y, W given as an initializer (its data inline, or external);
// with `next`, a second MatMul by it (inline) follows.
onnx::ModelProto matmul_model(const Tensor& w, const std::string& external, const Tensor* next = nullptr) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("hostile");
  onnx::ValueInfoProto* x = g->add_input();
  x->set_name("X");
  onnx::TypeProto_Tensor* xt = x->mutable_type()->mutable_tensor_type();
  xt->set_elem_type(onnx::TensorProto::FLOAT);
  xt->mutable_shape()->add_dim()->set_dim_param("batch");
  xt->mutable_shape()->add_dim()->set_dim_value(w.shape[0]);
  g->add_output()->set_name("Y");
  if (external.empty()) {
    add_float_initializer(g, w);
  } else {
    onnx::TensorProto* p = g->add_initializer();
    p->set_name(w.name);
    p->set_data_type(onnx::TensorProto::FLOAT);
    for (auto d : w.shape) p->add_dims(d);
    p->set_data_location(onnx::TensorProto::EXTERNAL);
    onnx::StringStringEntryProto* loc = p->add_external_data();
    loc->set_key("location");
    loc->set_value(external);
  }
  onnx::NodeProto* n = g->add_node();
  n->set_name("fc1");
  n->set_op_type("MatMul");
  n->add_input("X");
  n->add_input(w.name);
  n->add_output(next ? "H" : "Y");
  if (next) {
    add_float_initializer(g, *next);
    onnx::NodeProto* n2 = g->add_node();
    n2->set_name("fc2");
    n2->set_op_type("MatMul");
    n2->add_input("H");
    n2->add_input(next->name);
    n2->add_output("Y");
  }
  return m;
}
#endif

// The bytes of `bundle` with its metadata section replaced by `metadata`, sections laid out again
// in their order and the header's size and checksum recomputed: a forgery that passes the checksum.
Bytes replace_metadata(const Bytes& bundle, const std::string& metadata) {
  auto get = [&](std::size_t at, int bytes) {
    if (at + bytes > bundle.size()) throw std::runtime_error("not a bundle: truncated");
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= std::uint64_t{bundle[at + i]} << (8 * i);
    return v;
  };
  if (bundle.size() < 32 || std::memcmp(bundle.data(), "SPCCBNDL", 8) != 0)
    throw std::runtime_error("not a bundle");
  const auto count = static_cast<std::size_t>(get(12, 4));
  struct Section {
    std::uint32_t kind;
    Bytes data;
  };
  std::vector<Section> sections;
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t e = sparsecc::rt::kBundleHeaderBytes + i * sparsecc::rt::kBundleEntryBytes;
    const auto kind = static_cast<std::uint32_t>(get(e, 4));
    const std::uint64_t off = get(e + 8, 8), size = get(e + 16, 8);
    if (off + size > bundle.size()) throw std::runtime_error("not a bundle: section out of range");
    Section s{kind, Bytes(bundle.begin() + static_cast<std::ptrdiff_t>(off),
                          bundle.begin() + static_cast<std::ptrdiff_t>(off + size))};
    if (kind == static_cast<std::uint32_t>(sparsecc::rt::SectionKind::metadata))
      s.data.assign(metadata.begin(), metadata.end());
    sections.push_back(std::move(s));
  }
  Bytes out(bundle.begin(), bundle.begin() + 16);
  const std::size_t table_end = sparsecc::rt::kBundleHeaderBytes + count * sparsecc::rt::kBundleEntryBytes;
  std::uint64_t at = (table_end + 7) / 8 * 8;
  Bytes table, body(at - table_end, 0);
  for (const Section& s : sections) {
    put(table, s.kind, 4), put(table, 0, 4), put(table, at, 8), put(table, s.data.size(), 8);
    append(body, s.data);
    at += s.data.size();
    while (at % 8) body.push_back(0), ++at;
  }
  put(out, at, 8);
  Bytes rest = table;
  append(rest, body);
  put(out, sparsecc::rt::fnv1a64(rest), 8);
  append(out, rest);
  return out;
}

std::string metadata_of(const Bytes& bundle) {
  const sparsecc::rt::Bundle b = sparsecc::rt::parse_bundle(bundle, "bundle");
  return b.metadata.to_json().dump();
}

void write_fixtures(const fs::path& out) {
  // Class 1: JSON nested kDeepLevels deep, wherever the tool reads JSON from a user's file.
  const std::string deep = deep_json(kDeepLevels);
  write(out / "deep.safetensors", safetensors("{\"w\":" + deep + "}", {}));
  write(out / "deep_manifest.json", "{\"layers\":" + deep + "}");
  write(out / "deep_db.json", "{\"records\":" + deep + "}");
  write(out / "deep_predictor.json", "{\"weights\":" + deep + "}");

  // Class 4: sizes that lie, and bombs.
  write(out / "lying.npz", npz_lying());
  write(out / "bomb.npz", npz_bomb(63));  // 3.9 GiB
  write(out / "bomb.mtx.gz",
        gzip_bomb("%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 1.0\n", 80));
  write(out / "bomb.smtx.gz", gzip_bomb("3, 3, 1\n0 1 1 1\n0\n", 80));
  {
    Bytes b = npy_header("<f4", "(100000, 100000)");
    b.resize(b.size() + 16, 0);
    write(out / "huge_shape.npy", b);
    write(out / "huge_shape.npz", zip_archive({stored("w.npy", b)}));
  }
  write(out / "huge_shape.safetensors",
        safetensors(R"({"w":{"dtype":"F32","shape":[100000,100000],"data_offsets":[0,40000000000]}})",
                    Bytes(16, 0)));

  // Class 5: an int64 scalar beside the float matrix (unnamed selection takes the matrix); NaN and
  // values out of f32's range.
  const Tensor w = sparse_weight("w", 32, 24, 7);
  {
    // The writers refuse NaN: the bytes are laid out here.
    Bytes nan_data = f32_bytes(w);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(nan_data.data() + 5 * 4, &nan, 4);
    Bytes nan_npy = npy_header("<f4", "(32, 24)");
    append(nan_npy, nan_data);
    write(out / "nan.npz", zip_archive({stored("w.npy", nan_npy)}));
    write(out / "nan.safetensors", safetensors(R"({"w":{"dtype":"F32","shape":[32,24],"data_offsets":[0,)" +
                                                   std::to_string(nan_data.size()) + "]}}",
                                               nan_data));
    Tensor big = w;
    big.dtype = sparsecc::DType::f64;
    big.data[3] = 1e39;
    sparsecc::write_npz((out / "overflow.npz").string(), {big}, false);
    sparsecc::write_safetensors((out / "overflow.safetensors").string(), {big});
  }
  write(out / "mixed.npz",
        zip_archive({stored("w.npy", sparsecc::format_npy(w)), stored("step.npy", int64_scalar_npy(7))}));
  {
    Bytes data = f32_bytes(w);
    const std::size_t wb = data.size();
    put(data, 7, 8);
    write(out / "mixed.safetensors",
          safetensors(R"({"w":{"dtype":"F32","shape":[32,24],"data_offsets":[0,)" + std::to_string(wb) +
                          R"(]},"step":{"dtype":"I64","shape":[],"data_offsets":[)" + std::to_string(wb) +
                          "," + std::to_string(wb + 8) + "]}}",
                      data));
  }
  // A small valid model for the output-path cases.
  sparsecc::write_npz((out / "model.npz").string(), {sparse_weight("fc1.weight", 48, 64, 1)}, true);
#if SPARSECC_HAVE_ONNX
  {
    Tensor k = sparse_weight("W", 24, 32, 3);  // K x N for MatMul
    k.data[9] = std::numeric_limits<double>::quiet_NaN();
    // Beside a valid layer, so that skipping the NaN weight would still compile something.
    const Tensor k2 = sparse_weight("W2", 32, 16, 4);
    write(out / "nan.onnx", matmul_model(k, "", &k2).SerializeAsString());
    // External data behind a name in the model's folder that the test links to a device or FIFO.
    write(out / "external_zero.onnx", matmul_model(k, "zero.bin").SerializeAsString());
  }
#endif
}

void write_forged(const fs::path& out, const fs::path& bundle_path) {
  const Bytes bundle = sparsecc::read_file(bundle_path.string());
  nlohmann::json md = nlohmann::json::parse(metadata_of(bundle));
  const std::int64_t m = md.at("m").get<std::int64_t>();
  md["m"] = m / 2;  // the kernel still writes m rows of C
  write(out / "forged_m.sccb", replace_metadata(bundle, md.dump()));
  write(out / "deep_metadata.sccb", replace_metadata(bundle, "{\"op\":" + deep_json(kDeepLevels) + "}"));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: make_hostile_fixtures OUTDIR [BUNDLE.sccb]\n");
    return 2;
  }
  try {
    const fs::path out = argv[1];
    fs::create_directories(out);
    if (argc == 3)
      write_forged(out, argv[2]);
    else
      write_fixtures(out);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_hostile_fixtures: %s\n", e.what());
    return 1;
  }
  return 0;
}
