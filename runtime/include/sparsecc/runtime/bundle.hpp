// The executor bundle: one file holding everything the runtime needs to launch one generated
// executor: an SpMM (metadata, cubin and/or PTX, streamed values, bias) or a Hines solver
// (metadata with its launch list, cubin and/or PTX, the schedule's tables, the permutation). Plain C++ and
// nlohmann_json only: the generator writes bundles with it and the runtime reads them, and neither side needs
// CUDA here.
//
// Format (version 3), every integer little-endian:
//
//   offset  size  field
//        0     8  magic "SPCCBNDL"
//        8     4  u32 format version (3)
//       12     4  u32 section count (1..16)
//       16     8  u64 total file size in bytes
//       24     8  u64 checksum: FNV-1a 64 over every byte after the 32-byte header
//       32  24*c  section table, one entry a section:
//                   u32 kind, u32 reserved (0), u64 offset, u64 size
//        …        section data, each section starting at an 8-byte aligned offset after the table
//
//   kind  section   contents
//      1  metadata  JSON text (BundleMetadata), required
//      2  cubin     machine code for metadata.arch          } at least one of the two
//      3  ptx       PTX text (driver JIT on other devices)  }
//      4  values    present iff values_mode is not "baked": "streamed": float32[nnz - tile_nnz];
//                   "rolled": the step table (int32 record indices, then per step its k as int32
//                   bits and plan_summary.rows_per_block float32 weights; see the generator's
//                   spmm_rolled_table), checked against the metadata when loaded
//      5  bias      float32[m], present iff bias is true
//      6  reference optional verification data written by the generator (the matrix in CSR, for
//                   `sparsecc verify`); opaque to the runtime, which never reads it
//      7  tables    int32[], Hines only: the chain, junction and segment tables the kernels read
//      8  permutation int32[rows], Hines only, optional: Hines index -> the user's compartment index
//      9  fragments u32[fragment_words], SpMM with tensor-core tiles: the packed fp16/bf16 mma
//                   operands the kernel reads (present iff metadata fragment_words > 0)
//     10  plan      optional JSON text written by the generator: the executor plan the code was
//                   emitted from (the generator's to_json of its SpMM or Hines plan), so that
//                   `sparsecc verify` runs the plan interpreter without re-running the inspector;
//                   opaque to the runtime, which never reads it (version 3)
//     11  objects   CPU executors only (metadata target "cpu"): a static archive (GNU ar) of the
//                   relocatable objects of the executor's code, which a program links (sparsecc
//                   embed); the bundle then has no cubin, PTX, values or fragments, and a Hines
//                   one's tables section is its row order: int32[rows], the Hines row of each of the
//                   executor's rows (a permutation)
//
// Sections may appear in any order but never overlap; each kind appears at most once. The writer
// lays them out in kind order with zero padding, so equal bundles give equal bytes. Unknown
// metadata keys are ignored (later generators may add some); known keys must have the right type.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sparsecc/runtime/conv_geometry.hpp"
#include "sparsecc/runtime/launch.hpp"

namespace sparsecc::rt {

// A malformed, inconsistent or unsupported bundle; what() names the file and the byte offset or the
// metadata key.
class BundleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Versions: 1 launched block rows along grid x; 2 launches column tiles along grid x and block rows
// along grid y; 3 adds the plan section (kind 10), so that a bundle carries its plan instead of the
// generator re-planning its matrix. The runtime reads version 3 only: an older or newer bundle is
// refused with a BundleError naming the file and both versions ("compile the executor again").
inline constexpr std::uint32_t kBundleFormatVersion = 3;
// The CUDA limit on grid y.
inline constexpr std::int64_t kMaxBlockRows = 65535;
inline constexpr std::size_t kBundleHeaderBytes = 32;
inline constexpr std::size_t kBundleEntryBytes = 24;
inline constexpr std::uint32_t kBundleMaxSections = 16;

enum class SectionKind : std::uint32_t {
  metadata = 1,
  cubin = 2,
  ptx = 3,
  values = 4,
  bias = 5,
  reference = 6,
  tables = 7,
  permutation = 8,
  fragments = 9,
  plan = 10,
  objects = 11
};

// Kernel parameters in launch order (the kernel ABI, see executor.hpp): fp32 kernels, and the fp16 /
// bf16 kernels, which take the tensor-core operands as a sixth argument (null without fragments).
inline const std::vector<std::string> kSpmmParams = {"B", "C", "bias", "values", "n"};
inline const std::vector<std::string> kSpmmHalfParams = {"B", "C", "bias", "values", "n", "fragments"};
// Convolution kernels (metadata conv): the images X and Y for B and C, n the batch's pixels, and
// `zeros`, a zero-filled buffer of conv_zero_elements floats the runtime owns (where a tap that falls in
// the padding reads).
inline const std::vector<std::string> kConvParams = {"B", "C", "bias", "values", "n", "zeros"};

// op "hines": solves H x = b for a fixed forest of `cells` neurons (`rows` compartments in Hines
// order) and R right-hand sides; one step is the launch list (KernelLaunch, launch.hpp), in order,
// on one stream.
struct HinesMetadata {
  std::int64_t rows = 0, cells = 0, rhs = 1;
  std::int64_t workspace_bytes = 0;
  std::vector<KernelLaunch> launches;
  bool operator==(const HinesMetadata&) const = default;
};

// What the generator planned and the runtime needs to launch the kernel. op "spmm": C = A·B (+bias,
// ReLU) with A the fixed M×K sparse matrix, B K×N row-major (ld N) and C M×N row-major (ld N); the
// SpMM keys below. op "hines": the common keys (op, dtype, arch, kernel, generator_version,
// fingerprint, plan_summary) and `hines`.
struct BundleMetadata {
  std::string op = "spmm";
  // "gpu", or "cpu": code compiled ahead of time for a CPU (arch a CPU target name such as
  // "x86-64-avx512", kernel the symbol prefix of its entry {kernel}_tile (SpMM) or {kernel}_solve
  // (Hines), n_tile / block_rows the column tile and panels of an SpMM, plan_summary.items the
  // groups of a Hines executor, hines.launches empty); see cpu_executor.hpp.
  std::string target = "gpu";
  std::int64_t m = 0, k = 0, n = 0;  // n: the N of fixed mode (in runtime mode, the N tuned for)
  std::int64_t nnz = 0;
  std::string n_mode = "fixed";     // "fixed" | "runtime"
  std::int64_t n_tile = 1;          // columns of C per blockIdx.x
  std::string dtype = "f32";        // "f32", or "f16" / "bf16": B and C hold 16-bit values
  std::string accumulate = "f32";   // f16 / bf16 only: "f32" or the dtype
  std::int64_t tile_nnz = 0;        // nonzeros of A the tensor-core fragments hold (not in values)
  std::int64_t fragment_words = 0;  // u32 words of the fragments section
  std::string layout = "row_major";
  bool bias = false;
  bool relu = false;
  std::string values_mode = "baked";  // "baked" | "streamed" | "rolled" (fp32 only)
  std::string arch = "sm_90";         // architecture of the cubin
  bool programmatic_launch = false;   // the kernel waits for its predecessor (arch_has_programmatic_launch)
  std::string kernel;
  std::int64_t block_rows = 1;  // grid y: one block row of A each (at most kMaxBlockRows)
  std::int64_t block_x = 1;
  std::int64_t shared_bytes = 0;
  std::vector<std::string> params = kSpmmParams;
  std::string generator_version;
  std::string fingerprint;  // hex digest of the matrix
  nlohmann::json plan_summary = nlohmann::json::object();
  HinesMetadata hines;  // op "hines" only
  // op "spmm", target "gpu": a convolution executor (conv_geometry.hpp; key "conv"): m output channels,
  // k = conv->k(), n = conv->pixels(), fixed N; launched by SpmmExecutor::run_conv.
  std::optional<ConvGeometry> conv;

  nlohmann::json to_json() const;
  // Throws BundleError naming `name` and the key that is missing, mistyped or out of range.
  static BundleMetadata from_json(const nlohmann::json& j, const std::string& name);
  bool operator==(const BundleMetadata&) const = default;
};

struct Bundle {
  BundleMetadata metadata;
  std::vector<unsigned char> cubin;       // empty: absent
  std::string ptx;                        // empty: absent
  std::vector<float> values;              // streamed mode: the nnz values of A in the kernel's order
  std::vector<float> bias;                // m entries when metadata.bias
  std::vector<unsigned char> reference;   // optional verification data (the generator's), opaque here
  std::vector<std::int32_t> tables;       // op "hines": the kernels' tables
  std::vector<std::int32_t> permutation;  // op "hines", optional: Hines index -> compartment index
  std::vector<std::uint32_t> fragments;   // op "spmm" with tensor-core tiles: the mma operands
  std::string plan;                       // optional: the generator's plan as JSON text, opaque here
  std::vector<unsigned char> objects;     // target "cpu": a static archive of the code's objects

  bool operator==(const Bundle&) const = default;
};

// Whether kernels for `arch` ("sm_90", "sm_90a", ...) can take part in programmatic dependent launch:
// sm_90 and later (griddepcontrol). Metadata programmatic_launch says whether a bundle's kernel does
// (the plans the generator's inspector marks): it waits for the grid it depends on before it touches
// B or C (and some fp32 kernels let the next grid launch once a block's sums are done), so a launch
// with the programmatic attribute overlaps its start with the previous kernel's end; under a plain
// launch both are no-ops. The runtime refuses the key for an arch below sm_90.
bool arch_has_programmatic_launch(const std::string& arch);

// FNV-1a, 64 bits.
std::uint64_t fnv1a64(std::span<const unsigned char> data);

// Throws BundleError (naming `name`) when the bundle is inconsistent: bad metadata, metadata keys that
// contradict each other or the stored plan (plan_summary), no code, values or bias not matching the
// metadata, or a code contract (below) found in the cubin or the PTX that differs from the metadata.
void validate_bundle(const Bundle& bundle, const std::string& name);

// The code contract. Every module the generator emits defines the global kContractSymbol, an array
// of u64: kContractMagic, kContractVersion, the field count, then the fields' values, written by
// the emitter from the plan the code was made for. The fields are the quantities that size a launch
// or a buffer the kernel touches (bundle_contract lists them); the runtime reads the array from the
// loaded module and refuses the bundle when it is missing or differs from the metadata, before any
// launch, so metadata edited after the code was generated cannot make a kernel run out of bounds.
// The checksum guards against accidental corruption only; the contract against metadata that lies
// about its code. Neither authenticates the code itself: a bundle is code, to be trusted like a
// shared library.
inline constexpr const char* kContractSymbol = "sparsecc_contract";
inline constexpr std::uint64_t kContractMagic = 0x3154435243435053ull;  // "SPCCRCT1", little-endian
inline constexpr std::uint64_t kContractVersion = 1;

// One field of the contract: `key` names the metadata key (or section) it comes from.
struct ContractField {
  std::string key;
  std::uint64_t value = 0;
};

// The contract the code of a bundle with this metadata must carry. `values_words` is the length of
// the values argument the kernel reads (0 baked, nnz - tile_nnz streamed, the step table's words
// rolled); `tables` the Hines tables.
std::vector<ContractField> spmm_contract(const BundleMetadata& md, std::int64_t values_words);
std::vector<ContractField> hines_contract(const BundleMetadata& md, std::span<const std::int32_t> tables);
// The one for `bundle` (its metadata and sections).
std::vector<ContractField> bundle_contract(const Bundle& bundle);
// The array: magic, version, count, values.
std::vector<std::uint64_t> contract_words(const std::vector<ContractField>& fields);
// The definition an emitter appends to a module: CUDA C++ (an extern "C" __device__ array) or PTX
// (a .visible .global array, which linking keeps).
std::string contract_cuda(const std::vector<ContractField>& fields);
std::string contract_ptx(const std::vector<ContractField>& fields);

// Compares the contract found in the code (`where`: "cubin", "PTX", "loaded module") with `bundle`'s;
// throws BundleError naming `name`, the metadata key and both values at the first difference.
void check_contract(const Bundle& bundle, std::span<const std::uint64_t> found, const std::string& name,
                    const std::string& where);
// The contract in a PTX text or a cubin (ELF); nullopt when the code defines none. Throws BundleError
// naming `name` when the definition is malformed.
std::optional<std::vector<std::uint64_t>> ptx_contract(std::string_view ptx, const std::string& name);
std::optional<std::vector<std::uint64_t>> cubin_contract(std::span<const unsigned char> cubin,
                                                         const std::string& name);

// The bytes of an SpMM bundle that a loaded executor keeps on the device and touches on every
// launch: its cubin (the code) and its values, bias and fragments. What timing with cold L2 must push
// out of the cache besides the executor's operands.
std::size_t spmm_resident_bytes(const Bundle& bundle);

// Serializes a valid bundle (validate_bundle first).
std::vector<unsigned char> bundle_bytes(const Bundle& bundle, const std::string& name = "bundle");

// Parses and validates a bundle; throws BundleError naming `name`.
Bundle parse_bundle(std::span<const unsigned char> data, const std::string& name);

// Reads and parses a bundle file; throws BundleError when it cannot be read or is invalid.
Bundle read_bundle_file(const std::string& path);

}  // namespace sparsecc::rt
