// CpuSpmmKernel: LLJIT over the LLVM emitter's IR text (sparsecc/llvm/cpu_jit.hpp).
#include "sparsecc/llvm/cpu_jit.hpp"

#include <fmt/format.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SmallVectorMemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "sparsecc/common/error.hpp"
#include "sparsecc/emit/spmm_llvm.hpp"

namespace sparsecc {

namespace {

using TileFn = void (*)(std::int64_t, std::int64_t, std::int32_t, const float*, float*, const float*);

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string message(llvm::Error e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << e;
  return os.str();
}

}  // namespace

struct CpuSpmmKernel::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  TileFn tile = nullptr;
  SpmmCpuPlan plan;
  CpuCompileStats stats;
};

CpuSpmmKernel::CpuSpmmKernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CpuSpmmKernel::CpuSpmmKernel(CpuSpmmKernel&&) noexcept = default;
CpuSpmmKernel& CpuSpmmKernel::operator=(CpuSpmmKernel&&) noexcept = default;
CpuSpmmKernel::~CpuSpmmKernel() = default;

const CpuCompileStats& CpuSpmmKernel::stats() const { return impl_->stats; }

CpuSpmmKernel CpuSpmmKernel::compile(const std::string& ir, const SpmmCpuPlan& plan, int opt_level) {
  return compile(std::vector<std::string>{ir}, plan, opt_level, 1);
}

CpuSpmmKernel CpuSpmmKernel::compile(const std::vector<std::string>& modules, const SpmmCpuPlan& plan,
                                     int opt_level, int threads) {
  if (!host_runs(plan.target))
    throw UsageError(fmt::format("this CPU cannot run {} code ({}-bit vectors)", plan.target.isa,
                                 plan.target.vector_bits));
  if (opt_level < 0 || opt_level > 3)
    throw UsageError(fmt::format("LLVM opt level {}: expected 0..3", opt_level));
  if (modules.empty()) throw UsageError("CpuSpmmKernel::compile: no IR modules");
  static std::once_flag init;
  std::call_once(init, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
    // The pre-allocation machine scheduler walks every use of a register for each region it
    // schedules: quadratic in the uses of B's base pointer in this straight-line code, and the order
    // the emitter writes (loads, then their fused multiply-adds) is already a good one; the
    // post-allocation scheduler costs a tenth of the compile and the code runs as fast without it.
    // Process-wide. Evidence: docs/performance/2026-11-28-cpu-llvm.md#compile-time
    const char* args[] = {"sparsecc", "-enable-misched=false", "-disable-post-ra"};
    llvm::cl::ParseCommandLineOptions(3, args);
  });
  auto impl = std::make_unique<Impl>();
  impl->plan = plan;
  for (const std::string& m : modules) impl->stats.ir_bytes += m.size();

  auto host = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!host) throw std::runtime_error("LLVM: " + message(host.takeError()));
  llvm::orc::JITTargetMachineBuilder jtmb = std::move(*host);
  if (plan.target.cpu != "native") {
    jtmb.setCPU(plan.target.cpu);
    jtmb.getFeatures() = llvm::SubtargetFeatures();  // the named CPU's own features, not the host's
  }
  constexpr llvm::CodeGenOpt::Level levels[] = {llvm::CodeGenOpt::None, llvm::CodeGenOpt::Less,
                                                llvm::CodeGenOpt::Default, llvm::CodeGenOpt::Aggressive};
  jtmb.setCodeGenOptLevel(levels[opt_level]);
  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(jtmb).create();
  if (!jit) throw std::runtime_error("LLVM: " + message(jit.takeError()));
  impl->jit = std::move(*jit);

  // Every module parsed and compiled to an object file on its own thread (a context and a target
  // machine each), the objects then linked by the JIT.
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<llvm::MemoryBuffer>> objects(modules.size());
  std::vector<std::string> errors(modules.size());
  std::vector<double> parse_s(modules.size(), 0.0);
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t i = next++; i < modules.size(); i = next++) {
      try {
        const auto tp = std::chrono::steady_clock::now();
        llvm::LLVMContext context;
        llvm::SMDiagnostic diag;
        const std::string name = fmt::format("sparsecc_cpu_spmm_{}", i);
        std::unique_ptr<llvm::Module> module =
            llvm::parseIR(llvm::MemoryBufferRef(modules[i], name), diag, context);
        if (!module) {
          std::string s;
          llvm::raw_string_ostream os(s);
          diag.print(name.c_str(), os);
          throw std::runtime_error("LLVM IR does not parse: " + os.str());
        }
        parse_s[i] = seconds_since(tp);
        auto tm = jtmb.createTargetMachine();
        if (!tm) throw std::runtime_error("LLVM: " + message(tm.takeError()));
        module->setDataLayout((*tm)->createDataLayout());
        module->setTargetTriple((*tm)->getTargetTriple().str());
        llvm::SmallVector<char, 0> bytes;
        llvm::raw_svector_ostream os(bytes);
        llvm::legacy::PassManager pm;
        if ((*tm)->addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_ObjectFile))
          throw std::runtime_error("LLVM: this target cannot emit object files");
        pm.run(*module);
        objects[i] = std::make_unique<llvm::SmallVectorMemoryBuffer>(std::move(bytes), name, false);
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
  for (const double p : parse_s) impl->stats.parse_seconds += p;
  for (auto& object : objects)
    if (auto e = impl->jit->addObjectFile(std::move(object)))
      throw std::runtime_error("LLVM: " + message(std::move(e)));
  auto sym = impl->jit->lookup(kCpuTileSymbol);
  if (!sym) throw std::runtime_error("LLVM: " + message(sym.takeError()));
  impl->stats.compile_seconds = seconds_since(t0);
  impl->stats.modules = modules.size();
  impl->tile = reinterpret_cast<TileFn>(static_cast<std::uintptr_t>(sym->getAddress()));
  return CpuSpmmKernel(std::move(impl));
}

CpuSpmmKernel CpuSpmmKernel::build(const CsrMatrix& a, const SpmmCpuPlan& plan, int opt_level, int threads) {
  const int t = threads > 0 ? threads : std::max(plan.target.cores, 1);
  return compile(emit_spmm_llvm_modules(plan, a, std::int64_t{kCpuModulesPerThread} * t), plan, opt_level, t);
}

void CpuSpmmKernel::run(const float* b, float* c, const float* bias, int threads) const {
  const SpmmCpuPlan& p = impl_->plan;
  const std::int64_t n = p.problem.n, tile = std::min<std::int64_t>(p.column_tile, n);
  const std::int64_t full = n / tile, rest = n % tile;
  const std::int64_t per_panel = full + (rest ? 1 : 0), items = p.panel_count() * per_panel;
  const int t = threads > 0 ? threads : p.target.cores;
  const TileFn fn = impl_->tile;
  // A work item is one column tile of one panel, so that layers of few panels still spread over
  // the threads; a thread takes a panel's tiles in order where it can.
#pragma omp parallel for num_threads(t) schedule(dynamic, 1)
  for (std::int64_t item = 0; item < items; ++item) {
    const std::int64_t q = item / per_panel, i = item % per_panel;
    fn(q, i * tile, i < full ? 1 : 0, b, c, bias);
  }
}

}  // namespace sparsecc
