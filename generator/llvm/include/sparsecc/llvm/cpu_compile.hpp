// The LLVM backend's compile step, shared by every CPU executor family: IR text modules -> object
// files (ELF, position-independent, for the target's CPU) on several threads; the same objects either
// linked in process (CpuJit: verify, bench, tune) or packed into a static archive that a deployment
// binary links (write_cpu_archive: no LLVM at run time). The JIT runs the very bytes a deployment
// links. No LLVM type leaks out of this header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sparsecc/target/target.hpp"

namespace sparsecc {

struct CpuCompileStats {
  double parse_seconds = 0;    // IR text -> modules, summed over the modules
  double compile_seconds = 0;  // IR text -> object files (and, for a JIT, linked), wall clock
  std::size_t ir_bytes = 0;
  std::size_t modules = 0;
  std::size_t object_bytes = 0;
};

// The LLVM target triple and CPU name of `target` ("native": the host's CPU, resolved now).
std::string cpu_triple();
std::string cpu_codegen_name(const CpuTarget& target);

// Parses and compiles each module to an object file, on min(threads, modules) threads (a context
// and a target machine each), at LLVM's code generation level `opt_level` (0..3); "{name}_{i}" names
// module i in errors. Throws UsageError for a bad level or no modules,
// std::runtime_error carrying LLVM's message when a module does not parse or compile.
std::vector<std::string> compile_cpu_objects(const std::vector<std::string>& modules, const CpuTarget& target,
                                             int opt_level, int threads, CpuCompileStats* stats = nullptr,
                                             const std::string& name = "sparsecc_module");

// Object files linked in this process by ORC's LLJIT. Throws UsageError when this CPU cannot run
// the target's code (AVX-512 code on an AVX2 host).
class CpuJit {
 public:
  static CpuJit link(std::vector<std::string> objects, const CpuTarget& target);
  // The address of a defined symbol; std::runtime_error naming it when it is not defined.
  std::uintptr_t lookup(const std::string& symbol) const;

  CpuJit(CpuJit&&) noexcept;
  CpuJit& operator=(CpuJit&&) noexcept;
  ~CpuJit();

 private:
  struct Impl;
  explicit CpuJit(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A static library (the GNU ar format with a symbol table, as `ar rcs` writes it) holding the
// objects as members named by `members[i].first`.
std::string write_cpu_archive(const std::vector<std::pair<std::string, std::string>>& members);

// The members of static archives, in order, as one archive; the same member twice (an executor
// given twice) is kept once. Throws std::runtime_error naming `names[i]` for an archive LLVM cannot read.
std::string merge_cpu_archives(const std::vector<std::string>& archives,
                               const std::vector<std::string>& names);

}  // namespace sparsecc
