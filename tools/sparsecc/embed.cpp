// sparsecc embed BUNDLE... [--manifest manifest.json] --name NAMESPACE -o OUT.hpp: writes OUT.hpp and
// OUT.cpp, a header and source that hold the bundles as byte arrays with a typed API per layer and a
// Kernels class that loads the executors through the runtime on first use (sparsecc/bundle/embed.hpp).
// Layers are the manifest's (written by `sparsecc compile-model`, in its order and with its names, files
// relative to the manifest's folder and inside it: sparsecc::read_model_manifest), then the BUNDLE arguments,
// named by their file stems.
// --strip ptx,reference leaves those sections out of the embedded bytes (EmbedOptions).
#include "sparsecc/bundle/embed.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "cli.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "sparsecc/common/output.hpp"
#include "sparsecc/model/manifest.hpp"
#if SPARSECC_HAVE_LLVM
#include "sparsecc/llvm/cpu_compile.hpp"
#endif

namespace sparsecc::cli {

namespace {

namespace fs = std::filesystem;

struct EmbedArgs {
  std::vector<std::string> bundles;
  std::string manifest;
  std::string name;
  std::string output;
  std::vector<std::string> strip;  // "ptx", "reference"
};

struct Input {
  std::string path;  // as given (or as the manifest names it, joined to its folder)
  std::string name;  // the layer's name
};

struct Outputs {
  std::string header, source;
  std::string archive;  // OUT.a: the CPU executors' code (written for CPU bundles only)
};

// How errors name the source: "-o OUT.hpp: the source OUT.cpp: ...".
std::string source_label(const Outputs& out) { return fmt::format("-o {}: the source", out.header); }

// OUT.hpp, or OUT without an extension: the header and the source beside it, each a place an output
// may go (sparsecc/common/output.hpp), checked before any bundle is read.
Outputs output_paths(const std::string& output) {
  fs::path p(output);
  if (p.filename().empty() || p.filename() == "." || p.filename() == "..")
    throw UsageError(fmt::format("-o {}: give the header's path (OUT.hpp)", output));
  if (p.extension() == ".hpp")
    p.replace_extension();
  else if (!p.extension().empty())
    throw UsageError(
        fmt::format("-o {}: the header must end in .hpp (or give the path without an extension)", output));
  const Outputs out{p.string() + ".hpp", p.string() + ".cpp", p.string() + ".a"};
  check_output_file(out.header, {}, "-o");
  check_output_file(out.source, {}, source_label(out));
  return out;
}

// Neither output may be an input (a bundle, the manifest, or a file the manifest lists).
void check_outputs_against(const Outputs& out, const std::vector<std::string>& inputs) {
  check_output_file(out.header, inputs, "-o");
  check_output_file(out.source, inputs, source_label(out));
}

// Both files or neither: each is written completely beside its destination first, and the two are
// renamed into place only when both were written; if the second rename fails, the first file's
// previous contents are put back.
// With an archive (CPU executors) all three files, the same way.
void write_both(const Outputs& out, const EmbedSources& text, const std::string& archive) {
  const auto bytes = [](const std::string& s) {
    return std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(s.data()), s.size());
  };
  StagedOutput header(out.header, bytes(text.header), "-o");
  StagedOutput source(out.source, bytes(text.source), source_label(out));
  if (archive.empty()) {
    StagedOutput* const both[] = {&source, &header};
    return commit_outputs(both);
  }
  StagedOutput library(out.archive, bytes(archive), fmt::format("-o {}: the library", out.header));
  StagedOutput* const all[] = {&library, &source, &header};
  commit_outputs(all);
}

// The CPU layers' archives as one static library (LLVM's archive reader and writer).
std::string merged_archive(const std::vector<std::string>& archives, const std::vector<std::string>& names) {
#if SPARSECC_HAVE_LLVM
  return merge_cpu_archives(archives, names);
#else
  (void)archives;
  (void)names;
  throw UsageError("embed: CPU executors need the CPU backend, and this sparsecc was built without LLVM");
#endif
}

int run_embed(const EmbedArgs& a) {
  if (a.bundles.empty() && a.manifest.empty())
    throw UsageError("embed: give bundle files, --manifest, or both");
  const Outputs out = output_paths(a.output);
  std::vector<Input> inputs;
  if (!a.manifest.empty())
    for (ManifestLayer& l : read_model_manifest(a.manifest))
      inputs.push_back({std::move(l.path), std::move(l.name)});
  for (const std::string& b : a.bundles) inputs.push_back({b, fs::path(b).stem().string()});
  std::vector<std::string> input_files = {a.manifest};
  for (const Input& in : inputs) input_files.push_back(in.path);
  check_outputs_against(out, input_files);

  EmbedOptions options;
  for (const std::string& s : a.strip) (s == "ptx" ? options.strip_ptx : options.strip_reference) = true;
  std::vector<EmbeddedLayer> layers;
  std::vector<fs::path> seen;
  std::uint64_t total = 0, given = 0;
  std::string listing;  // printed once both files are written
  for (const Input& in : inputs) {
    EmbeddedLayer l{in.name, read_file(in.path)};
    const fs::path canonical = fs::weakly_canonical(in.path);
    for (std::size_t i = 0; i < seen.size(); ++i)
      if (seen[i] == canonical)
        throw UsageError(fmt::format("embed: {} is given twice (as layers '{}' and '{}')", in.path,
                                     layers[i].name, in.name));
    seen.push_back(canonical);
    // Parsed (and stripped) here under its path, so that a bad bundle is reported by file name (exit 2).
    given += l.bytes.size();
    rt::Bundle b = parse_embeddable_bundle(l.bytes, in.path);
    if (strip_bundle(b, options)) l.bytes = rt::bundle_bytes(b, in.path);
    const rt::BundleMetadata& md = b.metadata;
    const std::string what = md.op == "hines"
                                 ? fmt::format("hines, {} compartments in {} cells, R = {}", md.hines.rows,
                                               md.hines.cells, md.hines.rhs)
                                 : fmt::format("spmm, {} x {}, N = {} ({})", md.m, md.k, md.n, md.n_mode);
    listing += fmt::format("  {:<28} {}, {}, {} bytes ({})\n", cpp_identifier(in.name), what, md.dtype,
                           l.bytes.size(), in.path);
    total += l.bytes.size();
    layers.push_back(std::move(l));
  }
  const EmbedSources text = embed_bundles(layers, a.name, fs::path(out.header).filename().string());
  std::string archive;
  if (!text.archives.empty()) {
    check_output_file(out.archive, input_files, fmt::format("-o {}: the library", out.header));
    std::vector<std::string> names;
    for (const Input& in : inputs) names.push_back(in.path);
    archive = merged_archive(text.archives, names);
  }
  write_both(out, text, archive);
  fmt::print("{}", listing);
  if (!archive.empty())
    fmt::print("wrote {} ({} bytes): the CPU executors' code; link it with the source\n", out.archive,
               archive.size());
  fmt::print("wrote {} and {}: {} layer{} in namespace {}, {} bundle bytes{}\n", out.header, out.source,
             layers.size(), layers.size() == 1 ? "" : "s", a.name, total,
             total == given ? std::string() : fmt::format(" ({} before --strip)", given));
  return kExitOk;
}

}  // namespace

void add_embed(CLI::App& app, std::function<int()>& run) {
  auto args = std::make_shared<EmbedArgs>();
  CLI::App* cmd = app.add_subcommand(
      "embed", "Write a C++ header and source holding bundles as byte arrays, with a typed API per layer");
  cmd->add_option("bundles", args->bundles, "Bundle files (.sccb); each layer is named by its file stem");
  cmd->add_option("--manifest", args->manifest,
                  "A manifest.json of sparsecc compile-model: embeds its layers first, by their names");
  cmd->add_option("--name", args->name, "C++ namespace of the generated API (nested a::b allowed)")
      ->required();
  cmd->add_option("--strip", args->strip,
                  "Sections to leave out of the embedded bundles: ptx (the fallback for other GPU "
                  "architectures; kept where a bundle has no cubin), reference (what verify checks "
                  "against; SpMM bundles only)")
      ->delimiter(',')
      ->check(CLI::IsMember({"ptx", "reference"}));
  cmd->add_option("-o,--output", args->output,
                  "Header to write (OUT.hpp; OUT.cpp is written beside it, and OUT.a for CPU executors)")
      ->check(kOutputPath)
      ->required();
  cmd->callback([&run, args] { run = [args]() -> int { return run_embed(*args); }; });
}

}  // namespace sparsecc::cli
