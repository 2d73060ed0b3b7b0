#include "sparsecc/runtime/bundle.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

#include "sparsecc/runtime/compressed_stream.hpp"

namespace sparsecc::rt {

static_assert(std::endian::native == std::endian::little, "bundles are read and written little-endian");

namespace {

using json = nlohmann::json;
constexpr char kMagic[8] = {'S', 'P', 'C', 'C', 'B', 'N', 'D', 'L'};
constexpr std::size_t kKinds = 12;  // section kinds 1..11, index 0 unused
constexpr int kMaxJsonDepth = 64;
constexpr std::int64_t kIntMax = std::numeric_limits<std::int32_t>::max();
// The most dynamic shared memory a block of any supported architecture can have (sm_90: 227 KiB).
constexpr std::int64_t kMaxDynamicShared = 232448;
// The dynamic shared memory an SpMM executor is launched with (no opt-in; the planner's limit).
constexpr std::int64_t kMaxSpmmShared = 48 * 1024;
// The accumulators a thread of an SpMM kernel may hold (the planner's limit on rows_per_block).
constexpr std::int64_t kMaxAccumulators = 64;
// The most fields a code contract may have.
constexpr std::size_t kMaxContractWords = 256;
// The characters before the contract's name in which its PTX declaration starts.
constexpr std::size_t kMaxContractHead = 256;
constexpr std::int64_t kNoOffset = -1;

const char* kind_name(std::uint32_t kind) {
  static const char* const names[kKinds] = {"?",           "metadata",  "cubin",     "ptx",
                                            "values",      "bias",      "reference", "tables",
                                            "permutation", "fragments", "plan",      "objects"};
  return kind < kKinds ? names[kind] : "?";
}

[[noreturn]] void fail_at(const std::string& name, std::uint64_t byte, const std::string& msg) {
  throw BundleError(name + ": byte " + std::to_string(byte) + ": " + msg);
}
[[noreturn]] void fail_key(const std::string& name, const std::string& key, const std::string& msg) {
  throw BundleError(name + ": metadata key '" + key + "': " + msg);
}
// `offset` is the section's byte offset in the file, or kNoOffset when there is no file yet.
[[noreturn]] void fail_section(const std::string& name, SectionKind kind, std::int64_t offset,
                               const std::string& msg) {
  std::string where = std::string("section ") + kind_name(static_cast<std::uint32_t>(kind));
  if (offset != kNoOffset) where += " (byte " + std::to_string(offset) + ")";
  throw BundleError(name + ": " + where + ": " + msg);
}

template <class T>
T load_le(std::span<const unsigned char> d, std::size_t at) {
  T v;
  std::memcpy(&v, d.data() + at, sizeof v);
  return v;
}
template <class T>
void store_le(std::vector<unsigned char>& out, std::size_t at, T v) {
  std::memcpy(out.data() + at, &v, sizeof v);
}

const json& field(const json& j, const char* key, const std::string& name) {
  const auto it = j.find(key);
  if (it == j.end()) fail_key(name, key, "missing");
  return *it;
}
std::int64_t get_int(const json& j, const char* key, const std::string& name) {
  const json& v = field(j, key, name);
  if (!v.is_number_integer()) fail_key(name, key, std::string("must be an integer, not ") + v.type_name());
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(kIntMax))
    fail_key(name, key, "value " + v.dump() + " is too large");
  return v.get<std::int64_t>();
}
std::string get_string(const json& j, const char* key, const std::string& name) {
  const json& v = field(j, key, name);
  if (!v.is_string()) fail_key(name, key, std::string("must be a string, not ") + v.type_name());
  return v.get<std::string>();
}
bool get_bool(const json& j, const char* key, const std::string& name) {
  const json& v = field(j, key, name);
  if (!v.is_boolean()) fail_key(name, key, std::string("must be a boolean, not ") + v.type_name());
  return v.get<bool>();
}

void check_range(const std::string& name, const char* key, std::int64_t v, std::int64_t lo, std::int64_t hi) {
  if (v < lo || v > hi)
    fail_key(
        name, key,
        "value " + std::to_string(v) + " out of range " + std::to_string(lo) + ".." + std::to_string(hi));
}
void check_one_of(const std::string& name, const char* key, const std::string& v,
                  std::initializer_list<const char*> allowed) {
  std::string list;
  for (const char* a : allowed) {
    if (v == a) return;
    list += std::string(list.empty() ? "" : ", ") + "\"" + a + "\"";
  }
  fail_key(name, key, "\"" + v + "\" is not one of " + list);
}
bool all_of_chars(const std::string& s, bool (*ok)(char)) {
  return !s.empty() && std::all_of(s.begin(), s.end(), ok);
}

bool is_identifier(const std::string& s) {
  const bool ok = all_of_chars(s, [](char c) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  });
  return ok && !(s[0] >= '0' && s[0] <= '9');
}

// The keys every bundle names itself by: its kernel (or symbol prefix), fingerprint and plan summary.
void check_names(const BundleMetadata& md, const std::string& name) {
  if (!is_identifier(md.kernel)) fail_key(name, "kernel", "\"" + md.kernel + "\" is not a C identifier");
  if (!all_of_chars(md.fingerprint, [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }))
    fail_key(name, "fingerprint", "must be a non-empty lowercase hex string");
  if (!md.plan_summary.is_object()) fail_key(name, "plan_summary", "must be an object");
}

void validate_common(const BundleMetadata& md, const std::string& name) {
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  const std::string arch_tail = md.arch.size() > 3 ? md.arch.substr(3) : "";
  const std::size_t digits = std::find_if_not(arch_tail.begin(), arch_tail.end(), digit) - arch_tail.begin();
  if (md.arch.rfind("sm_", 0) != 0 || digits == 0 || arch_tail.size() - digits > 1 ||
      (digits < arch_tail.size() && arch_tail.back() != 'a' && arch_tail.back() != 'f'))
    fail_key(name, "arch", "\"" + md.arch + "\" is not an architecture like \"sm_90\"");
  check_names(md, name);
  if (md.programmatic_launch && !arch_has_programmatic_launch(md.arch))
    fail_key(name, "programmatic_launch", "needs an sm_90 or later arch, not \"" + md.arch + "\"");
}

// A Hines bundle's dtype, rows, cells, right-hand sides and workspace (GPU and CPU executors).
void check_hines_sizes(const BundleMetadata& md, const std::string& name) {
  const HinesMetadata& h = md.hines;
  check_one_of(name, "dtype", md.dtype, {"f64", "f32"});
  check_range(name, "hines.rows", h.rows, 1, kIntMax);
  check_range(name, "hines.cells", h.cells, 1, h.rows);
  check_range(name, "hines.rhs", h.rhs, 1, 1024);
  check_range(name, "hines.workspace_bytes", h.workspace_bytes, 0, std::int64_t{1} << 40);
}

void validate_hines(const BundleMetadata& md, const std::string& name) {
  const HinesMetadata& h = md.hines;
  check_hines_sizes(md, name);
  if (h.launches.empty()) fail_key(name, "hines.launches", "must not be empty");
  for (std::size_t i = 0; i < h.launches.size(); ++i) {
    const KernelLaunch& l = h.launches[i];
    const std::string key = "hines.launches[" + std::to_string(i) + "]";
    if (!is_identifier(l.kernel))
      fail_key(name, key + ".kernel", "\"" + l.kernel + "\" is not a C identifier");
    check_range(name, (key + ".grid").c_str(), l.grid, 1, kIntMax);
    check_range(name, (key + ".block").c_str(), l.block, 1, 1024);
    check_range(name, (key + ".shared_bytes").c_str(), l.shared_bytes, 0, kMaxDynamicShared);
    if (l.grid * l.block > kIntMax)
      fail_key(name, key,
               "a grid of " + std::to_string(l.grid) + " blocks of " + std::to_string(l.block) +
                   " threads exceeds 2^31 - 1 threads");
    for (std::size_t a = 0; a < l.args.size(); ++a) {
      const LaunchArg& arg = l.args[a];
      const std::string akey = key + ".args[" + std::to_string(a) + "]";
      if (arg.buffer == "i32") {
        check_range(name, akey.c_str(), arg.value, std::numeric_limits<std::int32_t>::min(), kIntMax);
      } else if (arg.buffer == "workspace") {
        check_range(name, akey.c_str(), arg.value, 0, h.workspace_bytes);
      } else if (arg.buffer == "tables") {
        check_range(name, akey.c_str(), arg.value, 0, std::int64_t{1} << 40);
        if (arg.value % 4) fail_key(name, akey, "a tables offset must be a multiple of 4");
      } else if (arg.buffer == "d" || arg.buffer == "u" || arg.buffer == "l" || arg.buffer == "b" ||
                 arg.buffer == "x") {
        check_range(name, akey.c_str(), arg.value, 0, 0);
      } else {
        fail_key(name, akey, "\"" + arg.buffer + "\" is not one of d, u, l, b, x, workspace, tables, i32");
      }
    }
  }
}

// An integer of the stored plan, or nullopt when the summary lacks the key (earlier generators).
std::optional<std::int64_t> summary_int(const BundleMetadata& md, const char* key, const std::string& name) {
  const auto it = md.plan_summary.find(key);
  if (it == md.plan_summary.end()) return std::nullopt;
  if (!it->is_number_integer() ||
      (it->is_number_unsigned() && it->get<std::uint64_t>() > std::uint64_t(kIntMax)))
    fail_key(name, std::string("plan_summary.") + key, "must be an integer up to " + std::to_string(kIntMax));
  return it->get<std::int64_t>();
}

[[noreturn]] void contradicts(const std::string& name, const std::string& key, std::int64_t value,
                              const std::string& what) {
  fail_key(name, key, "value " + std::to_string(value) + " contradicts " + what);
}

// The keys that size the launch and the buffers against each other and against the stored plan:
// the grid's block rows cut m into panels of plan_summary.panel_rows rows, none taller than
// rows_per_block; a block's columns and threads follow the plan's tile, groups, columns a thread
// and step lanes; the fragments' words follow their count. (The code contract binds the rest.)
void check_spmm_launch(const BundleMetadata& md, const std::string& name) {
  // Compressed executors opt in to more shared memory (the runtime sets the kernel's limit at load).
  const std::int64_t most = md.values_mode == "compressed" ? kMaxDynamicShared : kMaxSpmmShared;
  if (md.shared_bytes > most)
    fail_key(name, "shared_bytes",
             std::to_string(md.shared_bytes) + " bytes of dynamic shared memory exceed the " +
                 std::to_string(most) + " an SpMM executor is launched with");
  if (md.block_rows > md.m)
    contradicts(name, "block_rows", md.block_rows,
                "m = " + std::to_string(md.m) + " (a block row holds at least one row)");
  if (const auto block_rows = summary_int(md, "block_rows", name); block_rows && *block_rows != md.block_rows)
    contradicts(name, "block_rows", md.block_rows,
                "plan_summary.block_rows = " + std::to_string(*block_rows));
  const auto rows = summary_int(md, "rows_per_block", name);
  if (rows) {
    check_range(name, "plan_summary.rows_per_block", *rows, 1, kMaxAccumulators);
    if (md.m > md.block_rows * *rows)
      contradicts(name, "m", md.m,
                  std::to_string(md.block_rows) + " block rows (block_rows) of at most " +
                      std::to_string(*rows) + " rows (plan_summary.rows_per_block)");
  }
  if (const auto panel = summary_int(md, "panel_rows", name)) {
    check_range(name, "plan_summary.panel_rows", *panel, 1, kMaxAccumulators);
    if (const std::int64_t panels = (md.m + *panel - 1) / *panel; panels != md.block_rows)
      contradicts(name, "block_rows", md.block_rows,
                  "m = " + std::to_string(md.m) + " in panels of " + std::to_string(*panel) +
                      " rows (plan_summary.panel_rows), which make " + std::to_string(panels));
  }
  const auto threads = summary_int(md, "n_tile", name);  // threads of a group
  const auto groups = summary_int(md, "groups", name);
  if (threads && groups) {
    check_range(name, "plan_summary.n_tile", *threads, 1, 1024);
    check_range(name, "plan_summary.groups", *groups, 1, 1024);
    if (*threads * *groups != md.block_x)
      contradicts(name, "block_x", md.block_x,
                  "plan_summary.groups = " + std::to_string(*groups) +
                      " of plan_summary.n_tile = " + std::to_string(*threads) + " threads");
    const std::int64_t cols = summary_int(md, "cols_per_thread", name).value_or(1);
    const std::int64_t lanes = summary_int(md, "step_lanes", name).value_or(1);
    check_range(name, "plan_summary.cols_per_thread", cols, 1, 2);
    check_range(name, "plan_summary.step_lanes", lanes, 1, 32);
    if (*threads % lanes || *threads / lanes * cols != md.n_tile)
      contradicts(name, "n_tile", md.n_tile,
                  "plan_summary.n_tile = " + std::to_string(*threads) + " threads, step_lanes = " +
                      std::to_string(lanes) + " and cols_per_thread = " + std::to_string(cols));
  }
  if (const auto fragments = summary_int(md, "fragments", name)) {
    const std::int64_t per = *fragments > 0 ? md.fragment_words / (*fragments * 8) : 0;  // fragment_k
    if ((*fragments == 0) != (md.fragment_words == 0) ||
        (*fragments > 0 && (md.fragment_words % (*fragments * 8) != 0 || (per != 8 && per != 16))))
      contradicts(
          name, "fragment_words", md.fragment_words,
          "plan_summary.fragments = " + std::to_string(*fragments) + " (8 words a column of 8 or 16)");
    if (md.tile_nnz > *fragments * 16 * per)
      contradicts(name, "tile_nnz", md.tile_nnz,
                  std::to_string(*fragments) + " fragments of 16 x " + std::to_string(per) +
                      " (plan_summary.fragments)");
  }
}

// The stream shape a compressed bundle states in plan_summary (every key required, in range).
CompressedShape compressed_shape(const BundleMetadata& md, const std::string& name) {
  const auto need = [&](const char* key, std::int64_t lo, std::int64_t hi) {
    const auto v = summary_int(md, key, name);
    if (!v || *v < lo || *v > hi)
      fail_key(name, std::string("plan_summary.") + key,
               "a compressed bundle needs an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
    return *v;
  };
  CompressedShape s;
  s.row_blocks = need("row_blocks", 1, kMaxBlockRows);
  s.chunks = need("chunks", 1, kIntMax);
  s.splits = need("splits", 1, kMaxClusterSplits);
  s.strips = need("strips", 1, 64);
  s.chunk_k = need("chunk_k", kRecordCols, 256 * kRecordCols);
  s.stage_bytes = need("stage_bytes", 0, kMaxDynamicShared);
  // Bundles written before the scatter layout existed state no layout: records. 1: the scatter layout
  // with one list a segment (bundles written before the warp lists), 2: a list a warp.
  const auto scatter = summary_int(md, "scatter", name);
  if (scatter && (*scatter < 0 || *scatter > 2))
    fail_key(name, "plan_summary.scatter",
             "must be 0 (records), 1 (the scatter layout, one list a segment) or 2 (a list a warp)");
  s.scatter = scatter.value_or(0) >= 1;
  // 1: the vector layout (a row table and rows of entries; bundles before it state no key).
  const auto vector = summary_int(md, "vector", name);
  if (vector && (*vector < 0 || *vector > 1 || (*vector == 1 && s.scatter)))
    fail_key(name, "plan_summary.vector",
             "must be 0 or 1 (the vector layout, not with plan_summary.scatter)");
  s.vector = vector.value_or(0) == 1;
  if (scatter.value_or(0) == 2) {
    s.warp_lists = need("warps", 1, 32);
    if (s.strips % s.warp_lists)
      fail_key(name, "plan_summary.warps",
               "must divide plan_summary.strips (" + std::to_string(s.strips) + ")");
  }
  return s;
}

void check_compressed_metadata(const BundleMetadata& md, const std::string& name, bool half) {
  if (!half) fail_key(name, "values_mode", "\"compressed\" is f16 / bf16 only");
  const CompressedShape s = compressed_shape(md, name);
  if (s.chunk_k % kRecordCols) fail_key(name, "plan_summary.chunk_k", "must be a multiple of 64");
  if (s.chunks != (md.k + s.chunk_k - 1) / s.chunk_k)
    contradicts(name, "plan_summary.chunks", s.chunks,
                "k = " + std::to_string(md.k) + " in chunks of chunk_k");
  if (s.row_blocks != (md.m + 16 * s.strips - 1) / (16 * s.strips))
    contradicts(name, "plan_summary.row_blocks", s.row_blocks,
                "m = " + std::to_string(md.m) + " in row blocks of 16 x plan_summary.strips rows");
  if (md.block_rows != s.row_blocks * s.splits)
    contradicts(name, "block_rows", md.block_rows, "plan_summary.row_blocks x plan_summary.splits");
  if (s.vector && (md.n_mode != "fixed" || md.n < 1 || md.n > kVectorMaxN || md.k > kVectorMaxK ||
                   md.n_tile != (md.n + 7) / 8 * 8))
    fail_key(name, "plan_summary.vector",
             "the vector layout computes a fixed N of 1.." + std::to_string(kVectorMaxN) +
                 " with K at most " + std::to_string(kVectorMaxK) +
                 " in one column tile (n_tile: N rounded up to 8)");
  if (md.block_x < 32 || md.block_x % 32 || (s.vector ? 16 * s.strips : s.strips) % (md.block_x / 32))
    contradicts(name, "block_x", md.block_x,
                s.vector ? "whole warps sharing the 16 x plan_summary.strips rows"
                         : "whole warps sharing plan_summary.strips");
  if (md.n_tile < 8 || md.n_tile > 64 || md.n_tile % 8)
    contradicts(name, "n_tile", md.n_tile, "the compressed kernel's 8, 16, .., 64 columns");
  if (md.tile_nnz != md.nnz)
    contradicts(name, "tile_nnz", md.tile_nnz, "nnz (the stream holds every nonzero)");
}

// A convolution executor's keys against its geometry (conv_geometry.hpp): the kernels are fp32 (unrolled
// or rolled) or f16 / bf16 (unrolled), of a fixed N of the image's pixels, their K the filter's columns.
void check_conv_metadata(const BundleMetadata& md, const std::string& name) {
  const ConvGeometry& g = *md.conv;
  if (const auto errors = check_conv_geometry(g); !errors.empty()) fail_key(name, "conv", errors.front());
  if (md.dtype != "f32" && md.values_mode == "rolled")
    fail_key(name, "values_mode", "a rolled convolution executor is fp32");
  if (md.n_mode != "fixed" || md.n != g.pixels())
    fail_key(name, "n", "must be the convolution's output pixels " + std::to_string(g.pixels()) + " (fixed)");
  if (md.k != g.k()) fail_key(name, "k", "must be the convolution's I * kh * kw = " + std::to_string(g.k()));
  if (md.values_mode != "baked" && md.values_mode != "streamed" && md.values_mode != "rolled")
    fail_key(name, "values_mode", "a convolution executor is unrolled or rolled");
}

// Ranges and enumerations of every key (the types are checked while reading the JSON).
// A CPU executor's metadata: its code is the objects section (no launch, no contract).
void validate_cpu(const BundleMetadata& md, const std::string& name) {
  check_one_of(name, "arch", md.arch, {"x86-64-avx512", "x86-64-avx2", "native"});
  check_names(md, name);
  if (md.programmatic_launch) fail_key(name, "programmatic_launch", "a CPU executor has no launch");
  const auto summary = [&](const char* key, std::int64_t lo, std::int64_t hi) {
    const std::string full = std::string("plan_summary.") + key;
    const std::optional<std::int64_t> v = summary_int(md, key, name);
    if (!v) fail_key(name, full, "a CPU executor needs an integer");
    check_range(name, full.c_str(), *v, lo, hi);
    return *v;
  };
  if (md.op == "hines") {
    const HinesMetadata& h = md.hines;
    check_hines_sizes(md, name);
    if (!h.launches.empty()) fail_key(name, "hines.launches", "must be empty for a CPU executor");
    summary("items", 1, h.rows);
    return;
  }
  check_range(name, "m", md.m, 1, kIntMax);
  check_range(name, "k", md.k, 1, kIntMax);
  check_range(name, "n", md.n, 1, kIntMax);
  check_range(name, "nnz", md.nnz, 0, md.m * md.k);
  check_one_of(name, "n_mode", md.n_mode, {"fixed"});
  check_one_of(name, "dtype", md.dtype, {"f32", "f16", "bf16"});  // f16 / bf16: fp32 accumulation
  check_one_of(name, "accumulate", md.accumulate, {"f32"});
  check_one_of(name, "layout", md.layout, {"row_major"});
  check_one_of(name, "values_mode", md.values_mode, {"baked"});
  check_range(name, "n_tile", md.n_tile, 1, md.n);
  check_range(name, "block_rows", md.block_rows, 1, md.m);
  if (summary("panels", 1, md.m) != md.block_rows)
    fail_key(name, "block_rows", "must equal plan_summary.panels for a CPU executor");
  if (summary("column_tile", 1, kIntMax) != md.n_tile)
    fail_key(name, "n_tile", "must equal plan_summary.column_tile for a CPU executor");
}

void validate(const BundleMetadata& md, const std::string& name) {
  check_one_of(name, "op", md.op, {"spmm", "hines"});
  check_one_of(name, "target", md.target, {"gpu", "cpu"});
  if (md.target == "cpu") {
    if (md.conv) fail_key(name, "conv", "CPU executors take no convolution");
    return validate_cpu(md, name);
  }
  if (md.conv && md.op != "spmm") fail_key(name, "conv", "only an SpMM bundle describes a convolution");
  validate_common(md, name);
  if (md.op == "hines") return validate_hines(md, name);
  check_range(name, "m", md.m, 1, kIntMax);
  check_range(name, "k", md.k, 1, kIntMax);
  check_range(name, "n", md.n, 1, kIntMax);
  check_range(name, "nnz", md.nnz, 0, md.m * md.k);
  check_one_of(name, "n_mode", md.n_mode, {"fixed", "runtime"});
  check_range(name, "n_tile", md.n_tile, 1, kIntMax);
  check_one_of(name, "dtype", md.dtype, {"f32", "f16", "bf16"});
  const bool half = md.dtype != "f32";
  if (md.accumulate != "f32" && (!half || md.accumulate != md.dtype))
    fail_key(name, "accumulate", "\"" + md.accumulate + "\" is neither \"f32\" nor the dtype");
  check_range(name, "tile_nnz", md.tile_nnz, 0, half ? md.nnz : 0);
  check_range(name, "fragment_words", md.fragment_words, 0, half ? kIntMax : 0);
  check_one_of(name, "layout", md.layout, {"row_major"});
  check_one_of(name, "values_mode", md.values_mode, {"baked", "streamed", "rolled", "compressed"});
  if (md.values_mode == "compressed") check_compressed_metadata(md, name, half);
  if (md.values_mode == "rolled") {
    if (half) fail_key(name, "values_mode", "\"rolled\" is fp32 only");
    for (const auto& [key, most] : {std::pair{"groups", 1024}, {"rows_per_block", 64}}) {
      const auto it = md.plan_summary.find(key);
      if (it == md.plan_summary.end() || !it->is_number_integer() || it->get<std::int64_t>() < 1 ||
          it->get<std::int64_t>() > most)
        fail_key(name, std::string("plan_summary.") + key,
                 "a rolled bundle needs an integer in 1.." + std::to_string(most));
    }
  }
  check_range(name, "block_rows", md.block_rows, 1, kMaxBlockRows);
  check_range(name, "block_x", md.block_x, 1, 1024);
  check_range(name, "shared_bytes", md.shared_bytes, 0, kIntMax);
  if (md.conv && md.params != kConvParams)
    fail_key(name, "params",
             "must be [\"B\", \"C\", \"bias\", \"values\", \"n\", \"zeros\"] for a convolution");
  if (!half && !md.conv && md.params != kSpmmParams)
    fail_key(name, "params", "must be [\"B\", \"C\", \"bias\", \"values\", \"n\"]");
  if (half && !md.conv && md.params != kSpmmHalfParams)
    fail_key(name, "params",
             "must be [\"B\", \"C\", \"bias\", \"values\", \"n\", \"fragments\"] for f16 / bf16");
  check_spmm_launch(md, name);
  if (md.conv) check_conv_metadata(md, name);
}

// A rolled bundle's step table against its metadata: the header's record indices start at 0 and
// never fall, the records fill the rest exactly, and every step's k is a column of A. (The kernel
// trusts the table: a bad one would read out of bounds.)
void check_rolled_table(const Bundle& b, const std::string& name, std::int64_t offset) {
  const BundleMetadata& md = b.metadata;
  const std::int64_t groups = md.plan_summary.at("groups").get<std::int64_t>();
  const std::int64_t rows = md.plan_summary.at("rows_per_block").get<std::int64_t>();
  const std::int64_t slots = md.block_rows * groups + 1;
  const std::int64_t header = (slots + 3) / 4 * 4, record = (1 + rows + 3) / 4 * 4;
  const auto size = static_cast<std::int64_t>(b.values.size());
  const auto word = [&](std::int64_t i) { return std::bit_cast<std::int32_t>(b.values[std::size_t(i)]); };
  if (size < header)
    fail_section(name, SectionKind::values, offset,
                 "holds " + std::to_string(size) + " words, fewer than the step table's header of " +
                     std::to_string(header));
  for (std::int64_t i = 0; i < slots; ++i)
    if (word(i) < (i ? word(i - 1) : 0) || (i == 0 && word(0) != 0))
      fail_section(name, SectionKind::values, offset,
                   "step table header entry " + std::to_string(i) + " (" + std::to_string(word(i)) +
                       ") is out of order");
  if (header + std::int64_t{word(slots - 1)} * record != size)
    fail_section(name, SectionKind::values, offset,
                 "holds " + std::to_string(size) + " words but the step table's header and " +
                     std::to_string(word(slots - 1)) + " records of " + std::to_string(record) + " take " +
                     std::to_string(header + std::int64_t{word(slots - 1)} * record));
  for (std::int64_t at = header; at < size; at += record)
    if (word(at) < 0 || word(at) >= md.k)
      fail_section(name, SectionKind::values, offset,
                   "step table record " + std::to_string((at - header) / record) + " has k " +
                       std::to_string(word(at)) + ", outside 0.." + std::to_string(md.k - 1));
}

// A Hines bundle's tables and permutation against its metadata.
void check_hines_payload(const Bundle& b, const std::string& name,
                         const std::array<std::int64_t, kKinds>& offsets) {
  const HinesMetadata& h = b.metadata.hines;
  const auto at = [&](SectionKind k) { return offsets[static_cast<std::size_t>(k)]; };
  const auto table_bytes = static_cast<std::int64_t>(b.tables.size() * sizeof(std::int32_t));
  if (const auto stored = summary_int(b.metadata, "table_bytes", name); stored && *stored != table_bytes)
    fail_section(name, SectionKind::tables, at(SectionKind::tables),
                 "holds " + std::to_string(table_bytes) + " bytes but plan_summary.table_bytes is " +
                     std::to_string(*stored));
  for (std::size_t i = 0; i < h.launches.size(); ++i)
    for (const LaunchArg& a : h.launches[i].args)
      if (a.buffer == "tables" && a.value > table_bytes)
        fail_key(name, "hines.launches[" + std::to_string(i) + "]",
                 "reads tables at byte " + std::to_string(a.value) + " but the tables section has " +
                     std::to_string(table_bytes) + " bytes");
  if (!b.permutation.empty()) {
    if (b.permutation.size() != std::size_t(h.rows))
      fail_section(name, SectionKind::permutation, at(SectionKind::permutation),
                   "holds " + std::to_string(b.permutation.size()) + " entries but metadata hines.rows is " +
                       std::to_string(h.rows));
    std::vector<char> seen(b.permutation.size(), 0);
    for (std::size_t i = 0; i < b.permutation.size(); ++i) {
      const std::int32_t v = b.permutation[i];
      if (v < 0 || std::size_t(v) >= seen.size() || seen[std::size_t(v)]++)
        fail_section(
            name, SectionKind::permutation, at(SectionKind::permutation),
            "entry " + std::to_string(i) + " (" + std::to_string(v) + ") is out of range or repeated");
    }
  }
}

// A CPU executor's sections: its objects (a static archive), the bias as a GPU bundle's, and for
// Hines its row order (tables: the executor's row -> the Hines row) and the optional permutation
// (the Hines row -> the compartment, as a GPU bundle's).
void check_cpu_sections(const Bundle& b, const std::string& name,
                        const std::array<std::int64_t, kKinds>& offsets) {
  const BundleMetadata& md = b.metadata;
  const auto at = [&](SectionKind k) { return offsets[static_cast<std::size_t>(k)]; };
  constexpr std::string_view kArchiveMagic = "!<arch>\n";
  if (b.objects.empty()) throw BundleError(name + ": a CPU executor without an objects section");
  if (b.objects.size() < kArchiveMagic.size() ||
      std::string_view(reinterpret_cast<const char*>(b.objects.data()), kArchiveMagic.size()) !=
          kArchiveMagic)
    fail_section(name, SectionKind::objects, at(SectionKind::objects),
                 "is not a static archive (\"!<arch>\")");
  for (const auto& [kind, present] : {std::pair{SectionKind::cubin, !b.cubin.empty()},
                                      {SectionKind::ptx, !b.ptx.empty()},
                                      {SectionKind::values, !b.values.empty()},
                                      {SectionKind::fragments, !b.fragments.empty()}})
    if (present) fail_section(name, kind, at(kind), "present in a CPU executor's bundle");
  // A permutation of the rows, or (for `optional` ones) nothing.
  const auto check_rows = [&](SectionKind kind, const std::vector<std::int32_t>& v, bool optional) {
    if (optional && v.empty()) return;
    if (v.size() != std::size_t(md.hines.rows))
      fail_section(
          name, kind, at(kind),
          "holds " + std::to_string(v.size()) + " entries for " + std::to_string(md.hines.rows) + " rows");
    std::vector<bool> seen(v.size(), false);
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (v[i] < 0 || std::size_t(v[i]) >= seen.size() || seen[std::size_t(v[i])])
        fail_section(
            name, kind, at(kind),
            "entry " + std::to_string(i) + " (" + std::to_string(v[i]) + ") is out of range or repeated");
      seen[std::size_t(v[i])] = true;
    }
  };
  if (md.op == "hines") {
    if (!b.bias.empty())
      fail_section(name, SectionKind::bias, at(SectionKind::bias), "present in a Hines bundle");
    check_rows(SectionKind::tables, b.tables, false);  // the executor's row -> the Hines row
    check_rows(SectionKind::permutation, b.permutation, true);
    return;
  }
  if (!b.tables.empty())
    fail_section(name, SectionKind::tables, at(SectionKind::tables), "present in an SpMM bundle");
  if (!b.permutation.empty())
    fail_section(name, SectionKind::permutation, at(SectionKind::permutation), "present in an SpMM bundle");
  if (md.bias != (b.bias.size() == std::size_t(md.m)) || (!md.bias && !b.bias.empty()))
    fail_section(name, SectionKind::bias, at(SectionKind::bias),
                 "holds " + std::to_string(b.bias.size()) + " floats; metadata bias is " +
                     (md.bias ? "true" : "false") + " and m is " + std::to_string(md.m));
  for (std::size_t i = 0; i < b.bias.size(); ++i)
    if (!std::isfinite(b.bias[i]))
      fail_section(name, SectionKind::bias, at(SectionKind::bias),
                   "entry " + std::to_string(i) + " is not finite");
}

// Sections against the metadata; `offsets[kind]` locates each section in the file (kNoOffset when
// writing).
void check_sections(const Bundle& b, const std::string& name,
                    const std::array<std::int64_t, kKinds>& offsets) {
  const BundleMetadata& md = b.metadata;
  const auto at = [&](SectionKind k) { return offsets[static_cast<std::size_t>(k)]; };
  if (md.target == "cpu") return check_cpu_sections(b, name, offsets);
  if (!b.objects.empty())
    fail_section(name, SectionKind::objects, at(SectionKind::objects), "present in a GPU bundle");
  if (b.cubin.empty() && b.ptx.empty()) throw BundleError(name + ": has neither a cubin nor a PTX section");
  if (const auto nul = b.ptx.find('\0'); nul != std::string::npos)
    fail_section(name, SectionKind::ptx, at(SectionKind::ptx),
                 "NUL character at offset " + std::to_string(nul) + " of the PTX text");
  const bool hines = md.op == "hines";
  if (!hines && !b.tables.empty())
    fail_section(name, SectionKind::tables, at(SectionKind::tables),
                 "present in a bundle whose op is not \"hines\"");
  if (hines && !b.fragments.empty())
    fail_section(name, SectionKind::fragments, at(SectionKind::fragments), "present in a Hines bundle");
  if (!hines && !b.permutation.empty())
    fail_section(name, SectionKind::permutation, at(SectionKind::permutation),
                 "present in a bundle whose op is not \"hines\"");
  if (hines) {
    if (!b.values.empty() || !b.bias.empty())
      throw BundleError(name + ": a Hines bundle has values or bias sections");
    return check_hines_payload(b, name, offsets);
  }
  if (md.values_mode == "rolled") check_rolled_table(b, name, at(SectionKind::values));
  if (md.values_mode == "compressed") {
    try {
      if (const CompressedShape shape = compressed_shape(md, name); shape.vector) {
        walk_vector_stream(b.fragments, md.m, md.k, name);
        if (b.fragments[static_cast<std::size_t>(md.m)] != static_cast<std::uint64_t>(md.nnz))
          throw std::invalid_argument(name + ": vector stream: its rows hold " +
                                      std::to_string(b.fragments[static_cast<std::size_t>(md.m)]) +
                                      " entries, not the " + std::to_string(md.nnz) + " nonzeros of nnz");
      } else if (shape.scatter) {
        walk_scatter_stream(b.fragments, shape, md.m, md.k, name);
      } else {
        walk_compressed_stream(b.fragments, shape, md.k, name);
      }
    } catch (const std::invalid_argument& e) {
      fail_section(name, SectionKind::fragments, at(SectionKind::fragments), e.what());
    }
  }
  const bool streamed = md.values_mode == "streamed";
  const std::int64_t unrolled = md.nnz - md.tile_nnz;  // the nonzeros the values section holds
  if (streamed && !b.values.empty() && b.values.size() != std::size_t(unrolled))
    fail_section(name, SectionKind::values, at(SectionKind::values),
                 "holds " + std::to_string(b.values.size()) + " floats but metadata nnz - tile_nnz is " +
                     std::to_string(unrolled));
  if (b.fragments.size() != std::size_t(md.fragment_words))
    fail_section(name, SectionKind::fragments, at(SectionKind::fragments),
                 "holds " + std::to_string(b.fragments.size()) + " words but metadata fragment_words is " +
                     std::to_string(md.fragment_words));
  if (streamed && b.values.empty() && unrolled > 0)
    throw BundleError(name + ": values_mode is \"streamed\" but there is no values section");
  if (md.values_mode == "baked" && !b.values.empty())
    fail_section(name, SectionKind::values, at(SectionKind::values), "present but values_mode is \"baked\"");
  if (md.bias && b.bias.size() != std::size_t(md.m)) {
    if (b.bias.empty()) throw BundleError(name + ": metadata bias is true but there is no bias section");
    fail_section(
        name, SectionKind::bias, at(SectionKind::bias),
        "holds " + std::to_string(b.bias.size()) + " floats but metadata m is " + std::to_string(md.m));
  }
  if (!md.bias && !b.bias.empty())
    fail_section(name, SectionKind::bias, at(SectionKind::bias), "present but metadata bias is false");
  for (const auto& [kind, data] : {std::pair{SectionKind::values, &b.values}, {SectionKind::bias, &b.bias}})
    for (std::size_t i = 0; i < data->size(); ++i)
      if (!std::isfinite((*data)[i]))
        fail_section(name, kind, at(kind), "entry " + std::to_string(i) + " is not finite");
}

// The code contracts the cubin and the PTX define (when they define one), against the metadata and
// the sections.
void check_code_contracts(const Bundle& b, const std::string& name) {
  if (b.metadata.target == "cpu") return;
  if (!b.cubin.empty())
    if (const auto found = cubin_contract(b.cubin, name)) check_contract(b, *found, name, "cubin");
  if (!b.ptx.empty())
    if (const auto found = ptx_contract(b.ptx, name)) check_contract(b, *found, name, "PTX");
}

void check_payload(const Bundle& b, const std::string& name,
                   const std::array<std::int64_t, kKinds>& offsets) {
  check_sections(b, name, offsets);
  check_code_contracts(b, name);
}

std::vector<float> floats_of(std::span<const unsigned char> d, const std::string& name, SectionKind kind,
                             std::uint64_t offset) {
  if (d.size() % sizeof(float))
    fail_section(name, kind, std::int64_t(offset),
                 "size " + std::to_string(d.size()) + " is not a multiple of 4 (float32)");
  std::vector<float> out(d.size() / sizeof(float));
  if (!out.empty()) std::memcpy(out.data(), d.data(), d.size());
  return out;
}

std::vector<std::int32_t> ints_of(std::span<const unsigned char> d, const std::string& name, SectionKind kind,
                                  std::uint64_t offset) {
  if (d.size() % sizeof(std::int32_t))
    fail_section(name, kind, std::int64_t(offset),
                 "size " + std::to_string(d.size()) + " is not a multiple of 4 (int32)");
  std::vector<std::int32_t> out(d.size() / sizeof(std::int32_t));
  if (!out.empty()) std::memcpy(out.data(), d.data(), d.size());
  return out;
}

json parse_metadata(std::span<const unsigned char> d, const std::string& name, std::uint64_t offset) {
  const json::parser_callback_t depth_limit = [&](int depth, json::parse_event_t, json&) {
    if (depth > kMaxJsonDepth)
      fail_section(name, SectionKind::metadata, std::int64_t(offset),
                   "JSON nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    return true;
  };
  json j;
  try {
    j = json::parse(d.begin(), d.end(), depth_limit);
  } catch (const json::parse_error& e) {
    fail_at(name, offset + (e.byte > 0 ? e.byte - 1 : 0),
            std::string("metadata is not valid JSON: ") + e.what());
  } catch (const json::exception& e) {  // e.g. a number too large for a double: no position given
    fail_section(name, SectionKind::metadata, std::int64_t(offset),
                 std::string("is not valid JSON: ") + e.what());
  }
  if (!j.is_object())
    fail_section(name, SectionKind::metadata, std::int64_t(offset),
                 std::string("must be a JSON object, not ") + j.type_name());
  return j;
}

}  // namespace

bool arch_has_programmatic_launch(const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0) return false;
  int major = 0;
  std::size_t i = 3;
  for (; i < arch.size() && i < 7 && arch[i] >= '0' && arch[i] <= '9'; ++i)
    major = major * 10 + (arch[i] - '0');
  return i > 3 && major >= 90;
}

std::uint64_t fnv1a64(std::span<const unsigned char> data) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

namespace {

std::uint64_t dtype_code(const std::string& dtype) {
  return dtype == "f32" ? 0 : dtype == "f16" ? 1 : dtype == "bf16" ? 2 : dtype == "f64" ? 3 : 255;
}

void put_bytes(std::vector<unsigned char>& out, const void* p, std::size_t n) {
  const auto* c = static_cast<const unsigned char*>(p);
  out.insert(out.end(), c, c + n);
}
void put_string(std::vector<unsigned char>& out, const std::string& s) {
  put_bytes(out, s.c_str(), s.size() + 1);
}
void put_int(std::vector<unsigned char>& out, std::int64_t v) { put_bytes(out, &v, sizeof v); }

// FNV-1a of the launch list: every kernel's name, grid, block, dynamic shared memory and arguments.
std::uint64_t launches_digest(const std::vector<KernelLaunch>& launches) {
  std::vector<unsigned char> bytes;
  put_int(bytes, static_cast<std::int64_t>(launches.size()));
  for (const KernelLaunch& l : launches) {
    put_string(bytes, l.kernel);
    for (const std::int64_t v : {l.grid, l.block, l.shared_bytes, static_cast<std::int64_t>(l.args.size())})
      put_int(bytes, v);
    for (const LaunchArg& a : l.args) {
      put_string(bytes, a.buffer);
      put_int(bytes, a.value);
    }
  }
  return fnv1a64(bytes);
}

// A non-negative metadata integer as a contract word.
std::uint64_t word(std::int64_t v) { return static_cast<std::uint64_t>(v); }

}  // namespace

std::vector<ContractField> spmm_contract(const BundleMetadata& md, std::int64_t values_words) {
  const bool rolled = md.values_mode == "rolled";
  const auto summary = [&](const char* key) {
    const auto it = md.plan_summary.find(key);
    return rolled && it != md.plan_summary.end() && it->is_number_integer() ? word(it->get<std::int64_t>())
                                                                            : 0;
  };
  const bool fixed = md.n_mode == "fixed";
  std::vector<ContractField> fields = {
      {"op", 1},
      {"dtype", dtype_code(md.dtype)},
      {"m", word(md.m)},
      {"k", word(md.k)},
      {"n_mode", fixed ? 0u : 1u},
      {"n", fixed ? word(md.n) : 0},  // runtime-N code takes N as an argument
      {"nnz", word(md.nnz)},
      {"tile_nnz", word(md.tile_nnz)},
      {"fragment_words", word(md.fragment_words)},
      {"values_mode", md.values_mode == "baked"      ? 0u
                      : md.values_mode == "streamed" ? 1u
                      : md.values_mode == "rolled"   ? 2u
                                                     : 3u},
      {"section values (words)", word(values_words)},
      {"bias", md.bias ? 1u : 0u},
      {"relu", md.relu ? 1u : 0u},
      {"block_rows", word(md.block_rows)},
      {"block_x", word(md.block_x)},
      {"n_tile", word(md.n_tile)},
      {"shared_bytes", word(md.shared_bytes)},
      {"plan_summary.rows_per_block", summary("rows_per_block")},  // rolled code only: its step table's shape
      {"plan_summary.groups", summary("groups")}};
  if (md.values_mode == "compressed") {
    // The stream's shape is compiled into the code.
    const auto get = [&](const char* key) {
      const auto it = md.plan_summary.find(key);
      return it != md.plan_summary.end() && it->is_number_integer() ? word(it->get<std::int64_t>()) : 0;
    };
    for (const char* key : {"row_blocks", "chunks", "splits", "strips", "chunk_k", "stage_bytes"})
      fields.push_back({std::string("plan_summary.") + key, get(key)});
    // The layout binds only where it is the scatter one, so records bundles keep the contract they
    // were stamped with before the layout existed.
    if (get("scatter")) fields.push_back({"plan_summary.scatter", get("scatter")});
    if (get("vector")) fields.push_back({"plan_summary.vector", get("vector")});
  }
  if (md.conv) {
    // The geometry is compiled into the code: the runtime sizes X and Y from it.
    const ConvGeometry& g = *md.conv;
    fields.push_back({"conv.layout", g.layout == ConvLayout::nhwc ? 1u : 0u});
    for (const auto& [key, v] : {std::pair{"conv.in_channels", g.in_channels},
                                 {"conv.height", g.height},
                                 {"conv.width", g.width},
                                 {"conv.kernel_h", g.kernel_h},
                                 {"conv.kernel_w", g.kernel_w},
                                 {"conv.stride_h", g.stride_h},
                                 {"conv.stride_w", g.stride_w},
                                 {"conv.pad_top", g.pad_top},
                                 {"conv.pad_left", g.pad_left},
                                 {"conv.pad_bottom", g.pad_bottom},
                                 {"conv.pad_right", g.pad_right}})
      fields.push_back({key, word(v)});
  }
  return fields;
}

std::vector<ContractField> hines_contract(const BundleMetadata& md, std::span<const std::int32_t> tables) {
  const HinesMetadata& h = md.hines;
  return {{"op", 2},
          {"dtype", dtype_code(md.dtype)},
          {"hines.rows", word(h.rows)},
          {"hines.cells", word(h.cells)},
          {"hines.rhs", word(h.rhs)},
          {"hines.workspace_bytes", word(h.workspace_bytes)},
          {"section tables (words)", tables.size()},
          {"section tables (digest)",
           fnv1a64({reinterpret_cast<const unsigned char*>(tables.data()), tables.size_bytes()})},
          {"hines.launches (digest)", launches_digest(h.launches)}};
}

std::vector<ContractField> bundle_contract(const Bundle& b) {
  if (b.metadata.op == "hines") return hines_contract(b.metadata, b.tables);
  return spmm_contract(b.metadata, static_cast<std::int64_t>(b.values.size()));
}

std::vector<std::uint64_t> contract_words(const std::vector<ContractField>& fields) {
  std::vector<std::uint64_t> words{kContractMagic, kContractVersion, fields.size()};
  for (const ContractField& f : fields) words.push_back(f.value);
  return words;
}

std::string contract_cuda(const std::vector<ContractField>& fields) {
  std::string s =
      "\n// The code contract (sparsecc/runtime/bundle.hpp): what this module was generated for.\n";
  s += std::string("extern \"C\" __device__ unsigned long long ") + kContractSymbol + "[] = {";
  const std::vector<std::uint64_t> words = contract_words(fields);
  for (std::size_t i = 0; i < words.size(); ++i) s += (i ? ", " : "") + std::to_string(words[i]) + "ull";
  return s + "};\n";
}

std::string contract_ptx(const std::vector<ContractField>& fields) {
  std::string s =
      "\n// The code contract (sparsecc/runtime/bundle.hpp): what this module was generated for.\n";
  const std::vector<std::uint64_t> words = contract_words(fields);
  s += std::string(".visible .global .align 8 .u64 ") + kContractSymbol + "[" + std::to_string(words.size()) +
       "] = {";
  for (std::size_t i = 0; i < words.size(); ++i) s += (i ? ", " : "") + std::to_string(words[i]);
  return s + "};\n";
}

void check_contract(const Bundle& b, std::span<const std::uint64_t> found, const std::string& name,
                    const std::string& where) {
  const std::string what = name + ": the code's " + kContractSymbol + " (" + where + ")";
  if (found.size() < 3 || found[0] != kContractMagic)
    throw BundleError(what + " does not start with the contract's magic number");
  if (found[1] != kContractVersion)
    throw BundleError(what + " has version " + std::to_string(found[1]) + "; this runtime reads version " +
                      std::to_string(kContractVersion) + ": compile the executor again");
  const std::vector<ContractField> expected = bundle_contract(b);
  if (found[2] != expected.size() || found.size() < 3 + expected.size())
    throw BundleError(what + " holds " + std::to_string(found.size() - 3) + " fields (it says " +
                      std::to_string(found[2]) + "); a " + b.metadata.op + " bundle's has " +
                      std::to_string(expected.size()));
  for (std::size_t i = 0; i < expected.size(); ++i)
    if (found[3 + i] != expected[i].value)
      throw BundleError(name + ": " + expected[i].key + " is " + std::to_string(expected[i].value) +
                        " in the bundle but " + std::to_string(found[3 + i]) + " in the code's " +
                        kContractSymbol + " (" + where + "): the metadata does not describe this code");
}

std::optional<std::vector<std::uint64_t>> ptx_contract(std::string_view ptx, const std::string& name) {
  // The definition: [.visible] .global [.align A] .TYPE sparsecc_contract[COUNT] = {V, V, ...};
  // TYPE .b8 / .u8 (bytes, little-endian: NVRTC's form) or .b64 / .u64 / .s64 (words); the values
  // may stop short of COUNT (the rest are zero).
  const std::string symbol = std::string(kContractSymbol) + "[";
  for (std::size_t at = ptx.find(symbol); at != std::string_view::npos; at = ptx.find(symbol, at + 1)) {
    // The declaration's line, looked for within kMaxContractHead characters (a bound on the work).
    const std::size_t from = at > kMaxContractHead ? at - kMaxContractHead : 0;
    const std::size_t newline = ptx.substr(from, at - from).rfind('\n');
    const std::size_t line = newline == std::string_view::npos ? from : from + newline + 1;
    const std::string_view head = ptx.substr(line, at - line);
    if (head.find(".global") == std::string_view::npos || head.find("//") != std::string_view::npos ||
        head.find(".extern") != std::string_view::npos)
      continue;
    const auto bad = [&](const std::string& why) -> std::vector<std::uint64_t> {
      fail_section(name, SectionKind::ptx, kNoOffset,
                   std::string("the definition of ") + kContractSymbol + " at character " +
                       std::to_string(at) + " " + why);
    };
    const bool bytes =
        head.find(".b8 ") != std::string_view::npos || head.find(".u8 ") != std::string_view::npos;
    if (!bytes && head.find(".b64 ") == std::string_view::npos &&
        head.find(".u64 ") == std::string_view::npos && head.find(".s64 ") == std::string_view::npos)
      return bad("has neither a byte nor a 64-bit type");
    std::size_t i = at + symbol.size();
    const auto skip_space = [&] {
      while (i < ptx.size() && (ptx[i] == ' ' || ptx[i] == '\t' || ptx[i] == '\n' || ptx[i] == '\r')) ++i;
    };
    // A decimal or hexadecimal integer below 2^64.
    const auto number = [&](std::uint64_t& v) {
      skip_space();
      const bool hex = ptx.substr(i, 2) == "0x" || ptx.substr(i, 2) == "0X";
      if (hex) i += 2;
      const std::size_t start = i;
      v = 0;
      for (; i < ptx.size(); ++i) {
        const char c = ptx[i];
        const int d = c >= '0' && c <= '9'          ? c - '0'
                      : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                    : -1;
        if (d < 0) break;
        const std::uint64_t base = hex ? 16 : 10;
        if (v > (std::numeric_limits<std::uint64_t>::max() - std::uint64_t(d)) / base) return false;
        v = v * base + std::uint64_t(d);
      }
      if (i < ptx.size() && (ptx[i] == 'U' || ptx[i] == 'u')) ++i;
      return i > start;
    };
    std::uint64_t count = 0;
    if (!number(count) || (skip_space(), i >= ptx.size() || ptx[i] != ']'))
      return bad("has no element count");
    const std::uint64_t elements_max = bytes ? 8 * kMaxContractWords : kMaxContractWords;
    if (count > elements_max || (bytes && count % 8))
      return bad("has " + std::to_string(count) + " elements (at most " + std::to_string(elements_max) +
                 (bytes ? " bytes, whole words)" : " words)"));
    ++i;
    skip_space();
    if (i >= ptx.size() || ptx[i] != '=') return bad("has no initializer");
    ++i;
    skip_space();
    if (i >= ptx.size() || ptx[i] != '{') return bad("has no initializer");
    ++i;
    std::vector<std::uint64_t> elements;
    for (;;) {
      std::uint64_t v = 0;
      if (!number(v) || (bytes && v > 255))
        return bad("has a value that is not a " + std::string(bytes ? "byte" : "64-bit word"));
      elements.push_back(v);
      if (elements.size() > count)
        return bad("has more values than its " + std::to_string(count) + " elements");
      skip_space();
      if (i < ptx.size() && ptx[i] == ',') {
        ++i;
        continue;
      }
      if (i < ptx.size() && ptx[i] == '}') break;
      return bad("has a malformed initializer");
    }
    elements.resize(count, 0);
    if (!bytes) return elements;
    std::vector<std::uint64_t> words(count / 8, 0);
    for (std::size_t e = 0; e < elements.size(); ++e) words[e / 8] |= elements[e] << (8 * (e % 8));
    return words;
  }
  return std::nullopt;
}

std::optional<std::vector<std::uint64_t>> cubin_contract(std::span<const unsigned char> d,
                                                         const std::string& name) {
  // ELF64, little-endian: the symbol table's entry for the contract locates its bytes in the
  // section that holds the initialized globals. Anything that is not such an ELF file has no
  // contract this reader can see (the driver judges the image when it loads).
  const std::uint64_t size = d.size();
  if (size < 64 ||
      std::memcmp(d.data(),
                  "\x7f"
                  "ELF",
                  4) != 0 ||
      d[4] != 2 || d[5] != 1)
    return std::nullopt;
  const auto shoff = load_le<std::uint64_t>(d, 0x28);
  const auto shentsize = load_le<std::uint16_t>(d, 0x3a);
  const auto shnum = load_le<std::uint16_t>(d, 0x3c);
  if (shentsize < 64 || shoff > size || std::uint64_t(shnum) * shentsize > size - shoff) return std::nullopt;
  struct Section {
    std::uint32_t type;
    std::uint64_t addr, offset, size;
    std::uint32_t link;
    std::uint64_t entsize;
  };
  const auto section = [&](std::uint64_t i) {
    const std::uint64_t h = shoff + i * shentsize;
    return Section{load_le<std::uint32_t>(d, h + 4),  load_le<std::uint64_t>(d, h + 16),
                   load_le<std::uint64_t>(d, h + 24), load_le<std::uint64_t>(d, h + 32),
                   load_le<std::uint32_t>(d, h + 40), load_le<std::uint64_t>(d, h + 56)};
  };
  const auto inside = [&](const Section& s) { return s.offset <= size && s.size <= size - s.offset; };
  const std::string symbol = kContractSymbol;
  for (std::uint64_t si = 0; si < shnum; ++si) {
    const Section symtab = section(si);
    if (symtab.type != 2) continue;  // SHT_SYMTAB: an ELF file has one; only the first is read
    if (symtab.entsize < 24 || symtab.entsize > symtab.size || !inside(symtab) || symtab.link >= shnum)
      return std::nullopt;
    const Section strtab = section(symtab.link);
    if (!inside(strtab)) return std::nullopt;
    for (std::uint64_t e = 0; e <= symtab.size - 24; e += symtab.entsize) {
      const std::uint64_t at = symtab.offset + e;
      const auto name_at = load_le<std::uint32_t>(d, at);
      if (name_at >= strtab.size || strtab.size - name_at < symbol.size() + 1 ||
          std::memcmp(d.data() + strtab.offset + name_at, symbol.c_str(), symbol.size() + 1) != 0)
        continue;
      const auto shndx = load_le<std::uint16_t>(d, at + 6);
      const auto value = load_le<std::uint64_t>(d, at + 8);
      const auto bytes = load_le<std::uint64_t>(d, at + 16);
      const auto bad = [&](const std::string& why) -> std::vector<std::uint64_t> {
        fail_section(name, SectionKind::cubin, kNoOffset,
                     std::string("the symbol ") + kContractSymbol + " " + why);
      };
      if (shndx == 0 || shndx >= shnum) return bad("is not defined in a section");
      const Section data = section(shndx);
      if (data.type != 1 || !inside(data)) return bad("is not in a section with contents");  // SHT_PROGBITS
      const std::uint64_t offset = value >= data.addr ? value - data.addr : value;
      if (bytes % 8 || bytes > 8 * kMaxContractWords || offset > data.size || bytes > data.size - offset)
        return bad("(" + std::to_string(bytes) + " bytes at " + std::to_string(value) +
                   ") lies outside its section");
      std::vector<std::uint64_t> words(bytes / 8);
      for (std::size_t w = 0; w < words.size(); ++w)
        words[w] = load_le<std::uint64_t>(d, data.offset + offset + 8 * w);
      return words;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

json to_json(const KernelLaunch& l) {
  json args = json::array();
  for (const LaunchArg& a : l.args) args.push_back(json::array({a.buffer, a.value}));
  json launch{{"kernel", l.kernel}, {"grid", l.grid}, {"block", l.block}, {"args", std::move(args)}};
  if (l.shared_bytes) launch["shared_bytes"] = l.shared_bytes;  // absent: none (earlier generators)
  return launch;
}

json BundleMetadata::to_json() const {
  json j{{"op", op},
         {"dtype", dtype},
         {"arch", arch},
         {"kernel", kernel},
         {"generator_version", generator_version},
         {"fingerprint", fingerprint},
         {"plan_summary", plan_summary}};
  if (target != "gpu") j["target"] = target;  // absent: "gpu" (earlier generators)
  if (op == "hines") {
    json launches = json::array();
    for (const KernelLaunch& l : hines.launches) launches.push_back(rt::to_json(l));
    j["hines"] = {{"rows", hines.rows},
                  {"cells", hines.cells},
                  {"rhs", hines.rhs},
                  {"workspace_bytes", hines.workspace_bytes},
                  {"launches", std::move(launches)}};
    return j;
  }
  j.update(json{{"m", m},
                {"k", k},
                {"n", n},
                {"nnz", nnz},
                {"n_mode", n_mode},
                {"n_tile", n_tile},
                {"layout", layout},
                {"bias", bias},
                {"relu", relu},
                {"values_mode", values_mode},
                {"block_rows", block_rows},
                {"block_x", block_x},
                {"shared_bytes", shared_bytes},
                {"params", params}});
  if (dtype != "f32")  // fp32 bundles keep the keys of earlier generators
    j.update(json{{"accumulate", accumulate}, {"tile_nnz", tile_nnz}, {"fragment_words", fragment_words}});
  if (programmatic_launch) j["programmatic_launch"] = true;  // absent: false (earlier generators)
  if (conv) j["conv"] = rt::to_json(*conv);                  // absent: an SpMM executor
  return j;
}

namespace {

HinesMetadata hines_from_json(const json& j, const std::string& name) {
  const json& h = field(j, "hines", name);
  if (!h.is_object()) fail_key(name, "hines", "must be an object");
  HinesMetadata out;
  out.rows = get_int(h, "rows", name);
  out.cells = get_int(h, "cells", name);
  out.rhs = get_int(h, "rhs", name);
  const json& ws = field(h, "workspace_bytes", name);
  if (!ws.is_number_integer() ||
      (ws.is_number_unsigned() && ws.get<std::uint64_t>() > (std::uint64_t{1} << 40)))
    fail_key(name, "hines.workspace_bytes", "must be an integer up to 2^40");
  out.workspace_bytes = ws.get<std::int64_t>();
  const json& launches = field(h, "launches", name);
  if (!launches.is_array()) fail_key(name, "hines.launches", "must be an array");
  for (std::size_t i = 0; i < launches.size(); ++i) {
    const json& l = launches[i];
    const std::string key = "hines.launches[" + std::to_string(i) + "]";
    if (!l.is_object()) fail_key(name, key, "must be an object");
    KernelLaunch k;
    k.kernel = get_string(l, "kernel", name);
    k.grid = get_int(l, "grid", name);
    k.block = get_int(l, "block", name);
    if (l.contains("shared_bytes")) k.shared_bytes = get_int(l, "shared_bytes", name);
    const json& args = field(l, "args", name);
    if (!args.is_array()) fail_key(name, key + ".args", "must be an array");
    for (const json& a : args) {
      if (!a.is_array() || a.size() != 2 || !a[0].is_string() || !a[1].is_number_integer())
        fail_key(name, key + ".args", "every argument must be [buffer, integer]");
      k.args.push_back({a[0].get<std::string>(), a[1].get<std::int64_t>()});
    }
    out.launches.push_back(std::move(k));
  }
  return out;
}

}  // namespace

BundleMetadata BundleMetadata::from_json(const json& j, const std::string& name) {
  if (!j.is_object()) throw BundleError(name + ": metadata must be a JSON object");
  BundleMetadata md;
  md.op = get_string(j, "op", name);
  md.dtype = get_string(j, "dtype", name);
  md.arch = get_string(j, "arch", name);
  md.kernel = get_string(j, "kernel", name);
  md.generator_version = get_string(j, "generator_version", name);
  md.fingerprint = get_string(j, "fingerprint", name);
  md.plan_summary = field(j, "plan_summary", name);
  if (j.contains("target")) md.target = get_string(j, "target", name);
  if (md.op == "hines") {
    md.hines = hines_from_json(j, name);
    validate(md, name);
    return md;
  }
  md.m = get_int(j, "m", name);
  md.k = get_int(j, "k", name);
  md.n = get_int(j, "n", name);
  md.nnz = get_int(j, "nnz", name);
  md.n_mode = get_string(j, "n_mode", name);
  md.n_tile = get_int(j, "n_tile", name);
  md.layout = get_string(j, "layout", name);
  md.bias = get_bool(j, "bias", name);
  md.relu = get_bool(j, "relu", name);
  md.values_mode = get_string(j, "values_mode", name);
  md.block_rows = get_int(j, "block_rows", name);
  md.block_x = get_int(j, "block_x", name);
  md.shared_bytes = get_int(j, "shared_bytes", name);
  if (j.contains("programmatic_launch")) md.programmatic_launch = get_bool(j, "programmatic_launch", name);
  const json& params = field(j, "params", name);
  if (!params.is_array() ||
      !std::all_of(params.begin(), params.end(), [](const json& p) { return p.is_string(); }))
    fail_key(name, "params", "must be an array of strings");
  md.params = params.get<std::vector<std::string>>();
  if (md.dtype == "f16" || md.dtype == "bf16") {
    md.accumulate = get_string(j, "accumulate", name);
    md.tile_nnz = get_int(j, "tile_nnz", name);
    md.fragment_words = get_int(j, "fragment_words", name);
  }
  if (j.contains("conv")) try {
      md.conv = conv_geometry_from_json(j.at("conv"), name + ": metadata");
    } catch (const std::invalid_argument& e) {
      throw BundleError(e.what());
    }
  validate(md, name);
  return md;
}

void validate_bundle(const Bundle& b, const std::string& name) {
  validate(b.metadata, name);
  std::array<std::int64_t, kKinds> no_offsets;
  no_offsets.fill(kNoOffset);
  check_payload(b, name, no_offsets);
}

std::size_t spmm_resident_bytes(const Bundle& b) {
  return b.cubin.size() + (b.values.size() + b.bias.size()) * sizeof(float) +
         b.fragments.size() * sizeof(std::uint32_t);
}

std::vector<unsigned char> bundle_bytes(const Bundle& b, const std::string& name) {
  validate_bundle(b, name);
  std::string meta;
  try {
    meta = b.metadata.to_json().dump();
  } catch (const json::exception& e) {
    throw BundleError(name + ": metadata cannot be written as JSON: " + e.what());
  }
  const auto bytes_of = [](const auto& v) {
    return std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(v.data()),
                                          v.size() * sizeof(v[0]));
  };
  std::vector<std::pair<SectionKind, std::span<const unsigned char>>> sections{
      {SectionKind::metadata, bytes_of(meta)}};
  if (!b.cubin.empty()) sections.emplace_back(SectionKind::cubin, bytes_of(b.cubin));
  if (!b.ptx.empty()) sections.emplace_back(SectionKind::ptx, bytes_of(b.ptx));
  if (b.metadata.values_mode != "baked") sections.emplace_back(SectionKind::values, bytes_of(b.values));
  if (b.metadata.bias) sections.emplace_back(SectionKind::bias, bytes_of(b.bias));
  if (!b.reference.empty()) sections.emplace_back(SectionKind::reference, bytes_of(b.reference));
  if (!b.tables.empty()) sections.emplace_back(SectionKind::tables, bytes_of(b.tables));
  if (!b.permutation.empty()) sections.emplace_back(SectionKind::permutation, bytes_of(b.permutation));
  if (!b.fragments.empty()) sections.emplace_back(SectionKind::fragments, bytes_of(b.fragments));
  if (!b.plan.empty()) sections.emplace_back(SectionKind::plan, bytes_of(b.plan));
  if (!b.objects.empty()) sections.emplace_back(SectionKind::objects, bytes_of(b.objects));

  const auto align8 = [](std::size_t x) { return (x + 7) / 8 * 8; };
  std::size_t at = align8(kBundleHeaderBytes + kBundleEntryBytes * sections.size());
  std::vector<unsigned char> out(at, 0);
  for (std::size_t i = 0; i < sections.size(); ++i) {
    const auto& [kind, data] = sections[i];
    const std::size_t entry = kBundleHeaderBytes + kBundleEntryBytes * i;
    store_le<std::uint32_t>(out, entry, static_cast<std::uint32_t>(kind));
    store_le<std::uint64_t>(out, entry + 8, at);
    store_le<std::uint64_t>(out, entry + 16, data.size());
    out.insert(out.end(), data.begin(), data.end());
    at = align8(out.size());
    out.resize(at, 0);
  }
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  store_le<std::uint32_t>(out, 8, kBundleFormatVersion);
  store_le<std::uint32_t>(out, 12, static_cast<std::uint32_t>(sections.size()));
  store_le<std::uint64_t>(out, 16, out.size());
  store_le<std::uint64_t>(out, 24, fnv1a64(std::span(out).subspan(kBundleHeaderBytes)));
  return out;
}

Bundle parse_bundle(std::span<const unsigned char> d, const std::string& name) {
  const std::uint64_t size = d.size();
  if (size < kBundleHeaderBytes)
    fail_at(name, size,
            "truncated: the file is " + std::to_string(size) + " bytes, the header alone is " +
                std::to_string(kBundleHeaderBytes));
  if (std::memcmp(d.data(), kMagic, sizeof kMagic) != 0)
    fail_at(name, 0, "not a sparsecc bundle (magic is not \"SPCCBNDL\")");
  const auto version = load_le<std::uint32_t>(d, 8);
  if (version > kBundleFormatVersion)
    fail_at(name, 8,
            "bundle format version " + std::to_string(version) + " is newer than this runtime supports (" +
                std::to_string(kBundleFormatVersion) + ")");
  if (version < kBundleFormatVersion)
    fail_at(name, 8,
            "bundle format version " + std::to_string(version) + " is older than this runtime supports (" +
                std::to_string(kBundleFormatVersion) + "); compile the executor again");
  const auto count = load_le<std::uint32_t>(d, 12);
  if (count == 0 || count > kBundleMaxSections)
    fail_at(
        name, 12,
        "section count " + std::to_string(count) + " out of range 1.." + std::to_string(kBundleMaxSections));
  const auto total = load_le<std::uint64_t>(d, 16);
  if (total != size)
    fail_at(name, 16,
            "header says the file is " + std::to_string(total) + " bytes but it is " + std::to_string(size) +
                (size < total ? " (truncated)" : ""));
  const std::uint64_t table_end = kBundleHeaderBytes + kBundleEntryBytes * std::uint64_t(count);
  if (table_end > size) fail_at(name, kBundleHeaderBytes, "the section table runs past the end of the file");
  const auto stored = load_le<std::uint64_t>(d, 24);
  if (const std::uint64_t actual = fnv1a64(d.subspan(kBundleHeaderBytes)); stored != actual)
    fail_at(name, 24, "checksum mismatch (the file is corrupt)");

  struct Entry {
    std::uint32_t kind;
    std::uint64_t offset, size, table_at;
  };
  std::vector<Entry> entries;
  std::array<std::int64_t, kKinds> offsets;
  offsets.fill(kNoOffset);
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::uint64_t e = kBundleHeaderBytes + kBundleEntryBytes * std::uint64_t(i);
    const Entry s{load_le<std::uint32_t>(d, e), load_le<std::uint64_t>(d, e + 8),
                  load_le<std::uint64_t>(d, e + 16), e};
    if (s.kind == 0 || s.kind >= kKinds) fail_at(name, e, "unknown section kind " + std::to_string(s.kind));
    if (load_le<std::uint32_t>(d, e + 4) != 0) fail_at(name, e + 4, "reserved field is not 0");
    if (offsets[s.kind] != kNoOffset)
      fail_at(name, e, std::string("second ") + kind_name(s.kind) + " section");
    if (s.offset < table_end || s.offset % 8 || s.offset > size || s.size > size - s.offset)
      fail_at(name, e + 8,
              std::string("section ") + kind_name(s.kind) + " at offset " + std::to_string(s.offset) +
                  ", size " + std::to_string(s.size) + " is misaligned or outside the data area " +
                  std::to_string(table_end) + ".." + std::to_string(size));
    offsets[s.kind] = std::int64_t(s.offset);
    entries.push_back(s);
  }
  std::vector<Entry> sorted = entries;
  std::sort(sorted.begin(), sorted.end(), [](const Entry& a, const Entry& b) { return a.offset < b.offset; });
  for (std::size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i - 1].offset + sorted[i - 1].size > sorted[i].offset)
      fail_at(name, sorted[i].table_at + 8,
              std::string("section ") + kind_name(sorted[i].kind) + " overlaps section " +
                  kind_name(sorted[i - 1].kind));

  Bundle b;
  const auto body = [&](SectionKind k) {
    const auto it = std::find_if(entries.begin(), entries.end(),
                                 [&](const Entry& s) { return s.kind == static_cast<std::uint32_t>(k); });
    return it == entries.end() ? std::span<const unsigned char>() : d.subspan(it->offset, it->size);
  };
  const auto offset_of = [&](SectionKind k) { return std::uint64_t(offsets[static_cast<std::size_t>(k)]); };
  if (offsets[std::size_t(SectionKind::metadata)] == kNoOffset)
    throw BundleError(name + ": no metadata section");
  b.metadata = BundleMetadata::from_json(
      parse_metadata(body(SectionKind::metadata), name, offset_of(SectionKind::metadata)), name);
  for (SectionKind k : {SectionKind::cubin, SectionKind::ptx})
    if (offsets[std::size_t(k)] != kNoOffset && body(k).empty())
      fail_section(name, k, offsets[std::size_t(k)], "is empty");
  const auto cubin = body(SectionKind::cubin);
  const auto ptx = body(SectionKind::ptx);
  b.cubin.assign(cubin.begin(), cubin.end());
  b.ptx.assign(ptx.begin(), ptx.end());
  const auto reference = body(SectionKind::reference);
  b.reference.assign(reference.begin(), reference.end());
  const auto plan = body(SectionKind::plan);
  b.plan.assign(plan.begin(), plan.end());
  const auto objects = body(SectionKind::objects);
  b.objects.assign(objects.begin(), objects.end());
  b.values = floats_of(body(SectionKind::values), name, SectionKind::values, offset_of(SectionKind::values));
  b.bias = floats_of(body(SectionKind::bias), name, SectionKind::bias, offset_of(SectionKind::bias));
  b.tables = ints_of(body(SectionKind::tables), name, SectionKind::tables, offset_of(SectionKind::tables));
  b.permutation = ints_of(body(SectionKind::permutation), name, SectionKind::permutation,
                          offset_of(SectionKind::permutation));
  {
    const std::vector<std::int32_t> words = ints_of(
        body(SectionKind::fragments), name, SectionKind::fragments, offset_of(SectionKind::fragments));
    b.fragments.assign(words.begin(), words.end());
  }
  const auto present = [&](SectionKind k) { return offsets[std::size_t(k)] != kNoOffset; };
  if (b.metadata.op == "hines") {
    if (present(SectionKind::values) || present(SectionKind::bias))
      throw BundleError(name + ": a Hines bundle has values or bias sections");
    check_payload(b, name, offsets);
    return b;
  }
  if ((b.metadata.values_mode != "baked") != present(SectionKind::values))
    throw BundleError(name + ": values_mode is \"" + b.metadata.values_mode +
                      "\" but the values section is " +
                      (present(SectionKind::values) ? "present" : "missing"));
  if (b.metadata.bias != present(SectionKind::bias))
    throw BundleError(name + ": metadata bias is " + (b.metadata.bias ? "true" : "false") +
                      " but the bias section is " + (present(SectionKind::bias) ? "present" : "missing"));
  check_payload(b, name, offsets);
  return b;
}

Bundle read_bundle_file(const std::string& path) {
  // Only a regular file is read, into a buffer sized from its real size: a device such as /dev/zero
  // or a FIFO would otherwise be read until memory runs out (O_NONBLOCK: opening a FIFO must not
  // wait for a writer).
  constexpr std::uint64_t kMaxBundleFileBytes = std::uint64_t{8} << 30;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw BundleError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw BundleError(path + ": cannot stat: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "a special file";
    throw BundleError(path + ": is " + kind + ", not a regular file");
  }
  if (static_cast<std::uint64_t>(st.st_size) > kMaxBundleFileBytes) {
    ::close(fd);
    throw BundleError(path + ": file of " + std::to_string(st.st_size) +
                      " bytes is larger than the 8 GiB bundle limit");
  }
  std::vector<unsigned char> data(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  while (got < data.size()) {
    const ssize_t n = ::read(fd, data.data() + got, data.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      throw BundleError(path + ": read error: " + std::strerror(e));
    }
    if (n == 0) break;  // the file shrank: the parser reports the truncation
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  data.resize(got);
  return parse_bundle(data, path);
}

}  // namespace sparsecc::rt
