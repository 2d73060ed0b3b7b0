#include "sparsecc/compile/nvrtc.hpp"

#include <fmt/format.h>
#include <nvrtc.h>

#include <chrono>
#include <memory>
#include <stdexcept>

namespace sparsecc {

namespace {

void check(nvrtcResult rc, const char* call) {
  if (rc != NVRTC_SUCCESS)
    throw std::runtime_error(fmt::format("{} failed: {}", call, nvrtcGetErrorString(rc)));
}

struct Program {
  nvrtcProgram prog{};
  ~Program() {
    if (prog) nvrtcDestroyProgram(&prog);
  }
};

std::string program_log(nvrtcProgram prog) {
  std::size_t n = 0;
  check(nvrtcGetProgramLogSize(prog, &n), "nvrtcGetProgramLogSize");
  std::string log(n, '\0');
  if (n) check(nvrtcGetProgramLog(prog, log.data()), "nvrtcGetProgramLog");
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

// Compiles once for `target` (e.g. "sm_90" or "compute_90"); returns the log.
std::string run(const std::string& source, const std::string& name, const std::string& target,
                const CudaCompileOptions& o, Program& p) {
  check(nvrtcCreateProgram(&p.prog, source.c_str(), name.c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram");
  std::vector<std::string> opts = {"--gpu-architecture=" + target, "--std=c++17", "-default-device"};
  if (o.line_info) opts.push_back("-lineinfo");
  opts.insert(opts.end(), o.extra.begin(), o.extra.end());
  std::vector<const char*> argv;
  for (const auto& s : opts) argv.push_back(s.c_str());
  const nvrtcResult rc = nvrtcCompileProgram(p.prog, static_cast<int>(argv.size()), argv.data());
  std::string log = program_log(p.prog);
  if (rc != NVRTC_SUCCESS)
    throw CompileError(
        fmt::format("NVRTC could not compile {} for {}: {}\n{}", name, target, nvrtcGetErrorString(rc), log),
        log);
  return log;
}

}  // namespace

CudaCompileResult compile_cuda(const std::string& source, const std::string& name,
                               const CudaCompileOptions& options) {
  if (options.arch.rfind("sm_", 0) != 0)
    throw std::invalid_argument("compile_cuda: arch must be a real architecture such as sm_90, got " +
                                options.arch);
  const auto t0 = std::chrono::steady_clock::now();
  CudaCompileResult r;
  {
    Program p;
    r.log = run(source, name, options.arch, options, p);
    std::size_t n = 0;
    check(nvrtcGetCUBINSize(p.prog, &n), "nvrtcGetCUBINSize");
    r.cubin.resize(n);
    check(nvrtcGetCUBIN(p.prog, reinterpret_cast<char*>(r.cubin.data())), "nvrtcGetCUBIN");
  }
  {
    Program p;
    run(source, name, "compute_" + options.arch.substr(3), options, p);
    std::size_t n = 0;
    check(nvrtcGetPTXSize(p.prog, &n), "nvrtcGetPTXSize");
    r.ptx.assign(n, '\0');
    check(nvrtcGetPTX(p.prog, r.ptx.data()), "nvrtcGetPTX");
    while (!r.ptx.empty() && r.ptx.back() == '\0') r.ptx.pop_back();
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  check(nvrtcVersion(&major, &minor), "nvrtcVersion");
  return fmt::format("{}.{}", major, minor);
}

std::vector<std::string> nvrtc_architectures() {
  int n = 0;
  check(nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
  std::vector<int> archs(static_cast<std::size_t>(n));
  check(nvrtcGetSupportedArchs(archs.data()), "nvrtcGetSupportedArchs");
  std::vector<std::string> out;
  for (int a : archs) out.push_back(fmt::format("sm_{}", a));
  return out;
}

}  // namespace sparsecc
