// Embedding bundles in a program: a C++ header and source that hold the bundle files as byte arrays,
// with a typed API per layer and a Kernels class that loads each executor on first use through the
// runtime (sparsecc::rt), so the program needs no bundle files and no generator at run time.
//
// The generated header (namespace NS, one nested namespace per layer, in input order):
//   struct LayerInfo { name, op ("spmm" | "hines"), m, k, n, nnz, dtype, n_mode, fingerprint };
//   kLayerCount, layers(), bundle_bytes(index);
//   namespace <ident> { kName, M, K, N, kIndex, bundle(); }
//     SpMM: M x K the sparse matrix, N the compiled N (in runtime-N mode, the N tuned for);
//     Hines: M = K = rows, N = the right-hand sides; and, from the verification section, the system
//     in Hines order: parent(), diag(), upper(), lower(), cap_over_dt(), leak(), kLeakReversalMv,
//     cell_offsets(), and compartment_of() (from the permutation section; empty when absent), so a
//     simulation can build its right-hand sides without the generator;
//   class Kernels { Kernels(const rt::Context&, rt::LoadOptions = {}); const rt::SpmmExecutor& <ident>();
//                   const rt::HinesExecutor& <ident>(); } (std::call_once per layer).
// The source holds each bundle as a 16-byte aligned array of hex bytes, 16 a line (never one giant
// string literal, which compilers limit); a bundle over 1 MiB as little-endian 64-bit words instead
// (compilers spend time and memory per element: GCC 12 needs 8 GB and 150 s for 40 MB of bytes, 1.4
// GB and 17 s as words). Output is deterministic: the same layers give the same bytes.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "sparsecc/runtime/bundle.hpp"

namespace sparsecc {

struct EmbeddedLayer {
  std::string name;                  // the layer's name (e.g. from a compile-model manifest)
  std::vector<unsigned char> bytes;  // the bundle file
};

// Sections left out of the embedded bytes (the bundle is written again, with its own checksum): the
// PTX (the fallback for GPUs of another architecture than the cubin's; a bundle keeps it when it
// has no cubin) and the verification and plan sections of SpMM bundles (what `sparsecc verify` checks
// against and interprets; a Hines bundle keeps both: its verification section holds the system).
// Together they are most of an SpMM bundle.
struct EmbedOptions {
  bool strip_ptx = false;
  bool strip_reference = false;
};

// CPU executors (bundles of target "cpu", all the layers' or none): the header declares the same
// LayerInfo, layers(), per-layer namespaces (with the Hines systems) and a Kernels class, whose
// accessors return sparsecc::rt::CpuSpmmExecutor / CpuHinesExecutor (sparsecc/runtime/cpu_executor.hpp)
// over the layers' code, which the program links: `archives` holds each layer's static archive, in
// order (sparsecc embed merges them into OUT.a); the source embeds the biases and row orders, not the
// bundles. Kernels() takes no context.
struct EmbedSources {
  std::string header;
  std::string source;
  std::vector<std::string> archives;  // CPU layers only
};

// The C++ identifier of a layer: every character other than a letter, digit or '_' becomes '_', runs
// of '_' collapse to one and leading or trailing ones are dropped ("encoder.layer.0/fc1" ->
// "encoder_layer_0_fc1"); a leading digit gets the prefix "l_"; a C++ keyword, or a name the
// generated API uses itself (LayerInfo, kLayerCount, layers, bundle_bytes, Kernels, State,
// embedded), gets a trailing '_'. Throws UsageError when no letter or digit is left.
std::string cpp_identifier(const std::string& layer_name);

// Parses and validates one bundle for embedding (rt::BundleError naming `name`): op "spmm", or op
// "hines" with a verification section that decodes to a valid system (InputError naming `name`).
rt::Bundle parse_embeddable_bundle(std::span<const unsigned char> bytes, const std::string& name);

// The header and source for `layers`, in order. `ns` is the namespace (nested "a::b" allowed; each
// part an identifier that is no keyword), `header_name` what the source includes. Throws UsageError
// for no layers, a bad namespace or header name, or two layers with the same identifier (naming
// both); rt::BundleError or InputError naming the layer for a bad bundle.
EmbedSources embed_bundles(const std::vector<EmbeddedLayer>& layers, const std::string& ns,
                           const std::string& header_name, const EmbedOptions& options = {});

// Clears the sections of `b` that `options` leaves out; true when it cleared any.
bool strip_bundle(rt::Bundle& b, const EmbedOptions& options);

// The bundle `bytes` without the sections `options` leaves out (unchanged when there are none to
// leave out); `name` names it in errors.
std::vector<unsigned char> stripped_bundle(std::span<const unsigned char> bytes, const std::string& name,
                                           const EmbedOptions& options);

}  // namespace sparsecc
