// The CPU backend's compile step: IR text -> object files, linked in process or archived
// (sparsecc/llvm/cpu_compile.hpp).
#include "sparsecc/llvm/cpu_compile.hpp"

#include <fmt/format.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/MC/SubtargetFeature.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Object/Archive.h>
#include <llvm/Object/ArchiveWriter.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "sparsecc/common/error.hpp"

namespace sparsecc {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string message(llvm::Error e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << e;
  return os.str();
}

void initialize_llvm() {
  static std::once_flag init;
  std::call_once(init, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
    // The pre-allocation machine scheduler walks every use of a register for each region it
    // schedules: quadratic in the uses of B's base pointer in straight-line SpMM code, and the order
    // the emitters write (loads, then their fused multiply-adds) is already a good one; the
    // post-allocation scheduler costs a tenth of the compile and the code runs as fast without it.
    // Process-wide. Evidence: docs/performance/2026-11-28-cpu-llvm.md#compile-time
    const char* args[] = {"sparsecc", "-enable-misched=false", "-disable-post-ra"};
    llvm::cl::ParseCommandLineOptions(3, args);
  });
}

std::string host_features() {
  llvm::StringMap<bool> features;
  llvm::SubtargetFeatures out;
  if (llvm::sys::getHostCPUFeatures(features))
    for (const auto& f : features) out.AddFeature(f.first(), f.second);
  return out.getString();
}

std::unique_ptr<llvm::TargetMachine> target_machine(const CpuTarget& target, int opt_level) {
  const std::string triple = cpu_triple();
  std::string error;
  const llvm::Target* t = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!t) throw std::runtime_error("LLVM: " + error);
  constexpr llvm::CodeGenOpt::Level levels[] = {llvm::CodeGenOpt::None, llvm::CodeGenOpt::Less,
                                                llvm::CodeGenOpt::Default, llvm::CodeGenOpt::Aggressive};
  // Position-independent code: the objects link into PIE executables and shared libraries, and
  // into the JIT.
  std::unique_ptr<llvm::TargetMachine> tm(t->createTargetMachine(
      triple, cpu_codegen_name(target), target.cpu == "native" ? host_features() : "", llvm::TargetOptions(),
      llvm::Reloc::PIC_, llvm::CodeModel::Small, levels[opt_level]));
  if (!tm) throw std::runtime_error("LLVM: no target machine for " + triple);
  return tm;
}

}  // namespace

std::string cpu_triple() { return llvm::sys::getProcessTriple(); }

std::string cpu_codegen_name(const CpuTarget& target) {
  return target.cpu == "native" ? llvm::sys::getHostCPUName().str() : target.cpu;
}

std::vector<std::string> compile_cpu_objects(const std::vector<std::string>& modules, const CpuTarget& target,
                                             int opt_level, int threads, CpuCompileStats* stats,
                                             const std::string& name) {
  if (opt_level < 0 || opt_level > 3)
    throw UsageError(fmt::format("LLVM opt level {}: expected 0..3", opt_level));
  if (modules.empty()) throw UsageError("compile_cpu_objects: no IR modules");
  initialize_llvm();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> objects(modules.size());
  std::vector<std::string> errors(modules.size());
  std::vector<double> parse_s(modules.size(), 0.0);
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t i = next++; i < modules.size(); i = next++) {
      try {
        const auto tp = std::chrono::steady_clock::now();
        llvm::LLVMContext context;
        llvm::SMDiagnostic diag;
        const std::string module_name = fmt::format("{}_{}", name, i);
        std::unique_ptr<llvm::Module> module =
            llvm::parseIR(llvm::MemoryBufferRef(modules[i], module_name), diag, context);
        if (!module) {
          std::string s;
          llvm::raw_string_ostream os(s);
          diag.print(module_name.c_str(), os);
          throw std::runtime_error("LLVM IR does not parse: " + os.str());
        }
        parse_s[i] = seconds_since(tp);
        const auto tm = target_machine(target, opt_level);
        module->setDataLayout(tm->createDataLayout());
        module->setTargetTriple(tm->getTargetTriple().str());
        llvm::SmallVector<char, 0> bytes;
        llvm::raw_svector_ostream os(bytes);
        llvm::legacy::PassManager pm;
        if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_ObjectFile))
          throw std::runtime_error("LLVM: this target cannot emit object files");
        pm.run(*module);
        objects[i].assign(bytes.begin(), bytes.end());
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    }
  };
  const std::size_t pool =
      std::min<std::size_t>(modules.size(), static_cast<std::size_t>(std::max(threads, 1)));
  std::vector<std::thread> helpers;
  for (std::size_t t = 1; t < pool; ++t) helpers.emplace_back(work);
  work();
  for (std::thread& t : helpers) t.join();
  for (const std::string& e : errors)
    if (!e.empty()) throw std::runtime_error(e);
  if (stats) {
    for (const std::string& m : modules) stats->ir_bytes += m.size();
    for (const double p : parse_s) stats->parse_seconds += p;
    for (const std::string& o : objects) stats->object_bytes += o.size();
    stats->modules += modules.size();
    stats->compile_seconds += seconds_since(t0);
  }
  return objects;
}

struct CpuJit::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
};

CpuJit::CpuJit(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CpuJit::CpuJit(CpuJit&&) noexcept = default;
CpuJit& CpuJit::operator=(CpuJit&&) noexcept = default;
CpuJit::~CpuJit() = default;

CpuJit CpuJit::link(std::vector<std::string> objects, const CpuTarget& target) {
  if (!host_runs(target))
    throw UsageError(
        fmt::format("this CPU cannot run {} code ({}-bit vectors)", target.isa, target.vector_bits));
  initialize_llvm();
  auto host = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!host) throw std::runtime_error("LLVM: " + message(host.takeError()));
  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*host)).create();
  if (!jit) throw std::runtime_error("LLVM: " + message(jit.takeError()));
  auto impl = std::make_unique<Impl>();
  impl->jit = std::move(*jit);
  for (std::size_t i = 0; i < objects.size(); ++i) {
    auto buffer = llvm::MemoryBuffer::getMemBufferCopy(objects[i], fmt::format("object_{}", i));
    if (auto e = impl->jit->addObjectFile(std::move(buffer)))
      throw std::runtime_error("LLVM: " + message(std::move(e)));
  }
  return CpuJit(std::move(impl));
}

std::uintptr_t CpuJit::lookup(const std::string& symbol) const {
  auto sym = impl_->jit->lookup(symbol);
  if (!sym) throw std::runtime_error(fmt::format("LLVM: symbol {}: {}", symbol, message(sym.takeError())));
  return static_cast<std::uintptr_t>(sym->getAddress());
}

std::string write_cpu_archive(const std::vector<std::pair<std::string, std::string>>& members) {
  std::vector<llvm::NewArchiveMember> list;
  list.reserve(members.size());
  for (const auto& [name, bytes] : members) {
    llvm::NewArchiveMember m(llvm::MemoryBufferRef(bytes, name));
    m.MemberName = name;
    list.push_back(std::move(m));
  }
  auto buffer = llvm::writeArchiveToBuffer(list, /*WriteSymtab=*/true, llvm::object::Archive::K_GNU,
                                           /*Deterministic=*/true, /*Thin=*/false);
  if (!buffer) throw std::runtime_error("LLVM: archive: " + message(buffer.takeError()));
  return std::string((*buffer)->getBufferStart(), (*buffer)->getBufferSize());
}

std::string merge_cpu_archives(const std::vector<std::string>& archives,
                               const std::vector<std::string>& names) {
  std::vector<std::pair<std::string, std::string>> members;
  for (std::size_t i = 0; i < archives.size(); ++i) {
    const std::string& name = i < names.size() ? names[i] : fmt::format("archive {}", i);
    auto archive = llvm::object::Archive::create(llvm::MemoryBufferRef(archives[i], name));
    if (!archive) throw std::runtime_error(fmt::format("{}: {}", name, message(archive.takeError())));
    llvm::Error error = llvm::Error::success();
    for (const llvm::object::Archive::Child& child : (*archive)->children(error)) {
      auto member = child.getName();
      auto bytes = child.getBuffer();
      if (!member || !bytes) {
        if (!member) llvm::consumeError(member.takeError());
        if (!bytes) llvm::consumeError(bytes.takeError());
        throw std::runtime_error(fmt::format("{}: a member cannot be read", name));
      }
      std::pair<std::string, std::string> m{member->str(), bytes->str()};
      if (std::find(members.begin(), members.end(), m) == members.end()) members.push_back(std::move(m));
    }
    if (error) throw std::runtime_error(fmt::format("{}: {}", name, message(std::move(error))));
  }
  return write_cpu_archive(members);
}

}  // namespace sparsecc
