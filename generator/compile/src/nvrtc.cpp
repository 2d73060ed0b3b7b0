#include "sparsecc/compile/nvrtc.hpp"

#include <fmt/format.h>
#include <nvJitLink.h>
#include <nvrtc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <regex>
#include <stdexcept>
#include <thread>

namespace sparsecc {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void check(nvrtcResult rc, const char* call) {
  if (rc != NVRTC_SUCCESS)
    throw std::runtime_error(fmt::format("{} failed: {}", call, nvrtcGetErrorString(rc)));
}

void trim_end(std::string& s) {
  while (!s.empty() && (s.back() == '\0' || s.back() == '\n')) s.pop_back();
}

// Joins two logs with a newline, skipping empty ones.
std::string join_logs(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + "\n" + b;
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
  trim_end(log);
  return log;
}

// True for the options that belong to ptxas (and so reach nvJitLink in assemble_ptx).
bool is_ptxas_option(const std::string& o) {
  for (const char* prefix : {"--ptxas-options=", "-Xptxas=", "-maxrregcount=", "--maxrregcount="})
    if (o.rfind(prefix, 0) == 0) return true;
  return false;
}

// The nvJitLink spelling of a ptxas option.
std::string to_nvjitlink_option(const std::string& o) {
  if (o.rfind("--ptxas-options=", 0) == 0) return "-Xptxas=" + o.substr(16);
  if (o.rfind("--maxrregcount=", 0) == 0) return o.substr(1);
  return o;
}

// Checks that `arch` is a real architecture (sm_NN, optionally with an a or f suffix) of one the
// toolkit supports, before nvJitLink sees it (some malformed names make it exit the process).
void validate_arch(const std::string& arch, const char* who) {
  static const std::regex form(R"(sm_(\d+)[af]?)");
  std::smatch m;
  bool known = false;
  if (std::regex_match(arch, m, form)) {
    const auto archs = nvrtc_architectures();
    known = std::find(archs.begin(), archs.end(), "sm_" + m[1].str()) != archs.end();
  }
  if (!known)
    throw std::invalid_argument(fmt::format(
        "{}: arch must be a real architecture this toolkit supports, such as sm_90 or sm_90a, got "
        "'{}'",
        who, arch));
}

// The NVRTC spelling of an option: nvJitLink's -Xptxas=X becomes --ptxas-options=X.
std::string to_nvrtc_option(const std::string& o) {
  if (o.rfind("-Xptxas=", 0) == 0) return "--ptxas-options=" + o.substr(8);
  return o;
}

// Source -> cubin and PTX in one NVRTC compilation for the real architecture o.arch (NVRTC keeps
// the PTX it hands ptxas, identical to a compilation for the virtual architecture); sets `log`.
void compile_source(const std::string& source, const std::string& name, const CudaCompileOptions& o,
                    CudaCompileResult& r) {
  Program p;
  check(nvrtcCreateProgram(&p.prog, source.c_str(), name.c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram");
  std::vector<std::string> opts = {"--gpu-architecture=" + o.arch, "--std=c++17", "-default-device"};
  if (o.line_info) opts.push_back("-lineinfo");
  for (const auto& e : o.extra) opts.push_back(to_nvrtc_option(e));
  std::vector<const char*> argv;
  for (const auto& s : opts) argv.push_back(s.c_str());
  const nvrtcResult rc = nvrtcCompileProgram(p.prog, static_cast<int>(argv.size()), argv.data());
  r.log = program_log(p.prog);
  if (rc != NVRTC_SUCCESS)
    throw CompileError(fmt::format("NVRTC could not compile {} for {}: {}\n{}", name, o.arch,
                                   nvrtcGetErrorString(rc), r.log),
                       r.log);
  std::size_t n = 0;
  check(nvrtcGetCUBINSize(p.prog, &n), "nvrtcGetCUBINSize");
  r.cubin.resize(n);
  check(nvrtcGetCUBIN(p.prog, reinterpret_cast<char*>(r.cubin.data())), "nvrtcGetCUBIN");
  check(nvrtcGetPTXSize(p.prog, &n), "nvrtcGetPTXSize");
  r.ptx.assign(n, '\0');
  check(nvrtcGetPTX(p.prog, r.ptx.data()), "nvrtcGetPTX");
  while (!r.ptx.empty() && r.ptx.back() == '\0') r.ptx.pop_back();
}

const char* nvjitlink_error_string(nvJitLinkResult rc) {
  switch (rc) {
    case NVJITLINK_SUCCESS:
      return "NVJITLINK_SUCCESS";
    case NVJITLINK_ERROR_UNRECOGNIZED_OPTION:
      return "NVJITLINK_ERROR_UNRECOGNIZED_OPTION";
    case NVJITLINK_ERROR_MISSING_ARCH:
      return "NVJITLINK_ERROR_MISSING_ARCH";
    case NVJITLINK_ERROR_INVALID_INPUT:
      return "NVJITLINK_ERROR_INVALID_INPUT";
    case NVJITLINK_ERROR_PTX_COMPILE:
      return "NVJITLINK_ERROR_PTX_COMPILE";
    case NVJITLINK_ERROR_NVVM_COMPILE:
      return "NVJITLINK_ERROR_NVVM_COMPILE";
    case NVJITLINK_ERROR_INTERNAL:
      return "NVJITLINK_ERROR_INTERNAL";
    case NVJITLINK_ERROR_THREADPOOL:
      return "NVJITLINK_ERROR_THREADPOOL";
    case NVJITLINK_ERROR_UNRECOGNIZED_INPUT:
      return "NVJITLINK_ERROR_UNRECOGNIZED_INPUT";
    case NVJITLINK_ERROR_FINALIZE:
      return "NVJITLINK_ERROR_FINALIZE";
    case NVJITLINK_ERROR_NULL_INPUT:
      return "NVJITLINK_ERROR_NULL_INPUT";
    case NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS:
      return "NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS";
    case NVJITLINK_ERROR_INCORRECT_INPUT_TYPE:
      return "NVJITLINK_ERROR_INCORRECT_INPUT_TYPE";
    case NVJITLINK_ERROR_ARCH_MISMATCH:
      return "NVJITLINK_ERROR_ARCH_MISMATCH";
    case NVJITLINK_ERROR_OUTDATED_LIBRARY:
      return "NVJITLINK_ERROR_OUTDATED_LIBRARY";
    case NVJITLINK_ERROR_MISSING_FATBIN:
      return "NVJITLINK_ERROR_MISSING_FATBIN";
    case NVJITLINK_ERROR_UNRECOGNIZED_ARCH:
      return "NVJITLINK_ERROR_UNRECOGNIZED_ARCH";
    case NVJITLINK_ERROR_UNSUPPORTED_ARCH:
      return "NVJITLINK_ERROR_UNSUPPORTED_ARCH";
    case NVJITLINK_ERROR_LTO_NOT_ENABLED:
      return "NVJITLINK_ERROR_LTO_NOT_ENABLED";
  }
  return "unknown nvJitLink error";
}

// One nvJitLink session; every call is checked and a failure throws CompileError with both logs.
class Linker {
 public:
  Linker(const std::string& name, const std::string& arch) : name_(name), arch_(arch) {}
  Linker(const Linker&) = delete;
  Linker& operator=(const Linker&) = delete;
  ~Linker() {
    if (h_) nvJitLinkDestroy(&h_);
  }

  void create(const std::vector<std::string>& options) {
    std::vector<const char*> argv;
    for (const auto& s : options) argv.push_back(s.c_str());
    check(nvJitLinkCreate(&h_, static_cast<std::uint32_t>(argv.size()), argv.data()), "nvJitLinkCreate");
  }

  void check(nvJitLinkResult rc, const char* call) {
    if (rc == NVJITLINK_SUCCESS) return;
    const std::string log = join_logs(error_log(), info_log());
    throw CompileError(fmt::format("nvJitLink could not assemble {} for {}: {} failed: {}\n{}", name_, arch_,
                                   call, nvjitlink_error_string(rc), log),
                       log);
  }

  std::string info_log() { return read_log(nvJitLinkGetInfoLogSize, nvJitLinkGetInfoLog); }
  std::string error_log() { return read_log(nvJitLinkGetErrorLogSize, nvJitLinkGetErrorLog); }

  nvJitLinkHandle get() const { return h_; }

 private:
  // Reads one of the handle's logs; empty when there is no handle or the log cannot be read (it is
  // only ever read to report, so a failure here must not hide the original one).
  template <typename SizeFn, typename ReadFn>
  std::string read_log(SizeFn size_fn, ReadFn read_fn) {
    if (!h_) return {};
    std::size_t n = 0;
    if (size_fn(h_, &n) != NVJITLINK_SUCCESS || n == 0) return {};
    std::string log(n, '\0');
    if (read_fn(h_, log.data()) != NVJITLINK_SUCCESS) return {};
    trim_end(log);
    return log;
  }

  std::string name_, arch_;
  nvJitLinkHandle h_{};
};

// Adds `data` of `type` to the session as input `part`, completes it and returns the linked cubin
// (relocatable when the session was created with -r); sets `log` to the info log.
std::vector<unsigned char> run_linker(Linker& link, const std::vector<std::string>& inputs,
                                      nvJitLinkInputType type, const std::string& name, std::string& log) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::string part = inputs.size() == 1 ? name : fmt::format("{}#{}", name, i);
    link.check(nvJitLinkAddData(link.get(), type, inputs[i].data(), inputs[i].size(), part.c_str()),
               "nvJitLinkAddData");
  }
  link.check(nvJitLinkComplete(link.get()), "nvJitLinkComplete");
  std::size_t n = 0;
  link.check(nvJitLinkGetLinkedCubinSize(link.get(), &n), "nvJitLinkGetLinkedCubinSize");
  std::vector<unsigned char> cubin(n);
  link.check(nvJitLinkGetLinkedCubin(link.get(), cubin.data()), "nvJitLinkGetLinkedCubin");
  log = link.info_log();
  return cubin;
}

// Runs job(i) for i in 0..count on up to `threads` threads; rethrows the first failure (by index).
template <typename Job>
void parallel_for(std::size_t count, unsigned threads, const Job& job) {
  std::vector<std::exception_ptr> errors(count);
  std::atomic<std::size_t> next{0};
  const auto worker = [&] {
    for (std::size_t i = next++; i < count; i = next++) {
      try {
        job(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < std::min<std::size_t>(threads, count); ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// True when relocatable code from one module can be linked with the others: it has no constant
// bank besides the parameters (bank 0). ptxas keeps jump tables and some literals in bank 2, and
// nvJitLink does not relocate the offsets into it when objects made with -r are linked.
bool links_cleanly(const std::string& object) {
  const auto sections = elf_sections({reinterpret_cast<const unsigned char*>(object.data()), object.size()});
  if (sections.empty()) return false;
  for (const auto& [name, bytes] : sections)
    if (name.rfind(".nv.constant", 0) == 0 && name.rfind(".nv.constant0", 0) != 0) return false;
  return true;
}

// PTX -> cubin for o.arch; returns the cubin, sets `log` to nvJitLink's info log. Several modules
// are assembled on o.threads threads, each to relocatable code, and then linked: one nvJitLink
// session would run ptxas over them one after another.
std::vector<unsigned char> link_ptx(const std::vector<std::string>& modules, const std::string& name,
                                    const CudaCompileOptions& o, std::string& log) {
  std::vector<std::string> opts = {"-arch=" + o.arch};
  if (o.line_info) opts.push_back("-lineinfo");
  bool verbose = false;
  for (const auto& e : o.extra)
    if (is_ptxas_option(e)) {
      opts.push_back(to_nvjitlink_option(e));
      verbose = verbose || opts.back() == "-Xptxas=-v";
    }
  unsigned threads = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  if (const char* env = std::getenv("SPARSECC_ASSEMBLY_THREADS"); env && !o.threads)
    threads = std::max(1, std::atoi(env));
  const auto one_session = [&] {
    // Linked case functions: only the linker's summary has the kernel's real register count.
    if (verbose && modules.size() > 1) opts.push_back("-verbose");
    Linker link(name, o.arch);
    link.create(opts);
    return run_linker(link, modules, NVJITLINK_INPUT_PTX, name, log);
  };
  if (modules.size() == 1 || threads == 1) return one_session();
  // The first module (the entry) is assembled in the final session, the others to relocatable
  // objects on their own threads first.
  std::vector<std::string> objects(modules.size() - 1), logs(modules.size() - 1);
  std::vector<std::string> module_opts = opts;
  module_opts.push_back("-r");
  parallel_for(objects.size(), threads, [&](std::size_t i) {
    const std::string part = fmt::format("{}#{}", name, i + 1);
    Linker link(part, o.arch);
    link.create(module_opts);
    const auto object = run_linker(link, {modules[i + 1]}, NVJITLINK_INPUT_PTX, part, logs[i]);
    objects[i].assign(object.begin(), object.end());
  });
  if (!std::all_of(objects.begin(), objects.end(), links_cleanly)) return one_session();
  if (verbose) opts.push_back("-verbose");
  Linker link(name, o.arch);
  link.create(opts);
  const std::string entry = fmt::format("{}#0", name);
  link.check(
      nvJitLinkAddData(link.get(), NVJITLINK_INPUT_PTX, modules[0].data(), modules[0].size(), entry.c_str()),
      "nvJitLinkAddData");
  std::string link_log;
  auto cubin = run_linker(link, objects, NVJITLINK_INPUT_CUBIN, name + "-object", link_log);
  log.clear();
  for (const auto& l : logs) log = join_logs(log, l);
  log = join_logs(log, link_log);
  return cubin;
}

}  // namespace

CudaCompileResult compile_cuda(const std::string& source, const std::string& name,
                               const CudaCompileOptions& options) {
  validate_arch(options.arch, "compile_cuda");
  const auto t0 = Clock::now();
  CudaCompileResult r;
  compile_source(source, name, options, r);
  r.seconds = r.ptx_seconds = since(t0);
  return r;
}

CudaCompileResult assemble_ptx(const std::string& ptx, const std::string& name,
                               const CudaCompileOptions& options) {
  validate_arch(options.arch, "assemble_ptx");
  const auto t0 = Clock::now();
  CudaCompileResult r;
  r.cubin = link_ptx({ptx}, name, options, r.log);
  r.ptx = ptx;
  r.cubin_seconds = r.seconds = since(t0);
  return r;
}

CudaCompileResult assemble_ptx_modules(const std::vector<std::string>& modules, const std::string& whole,
                                       const std::string& name, const CudaCompileOptions& options) {
  validate_arch(options.arch, "assemble_ptx_modules");
  if (modules.empty()) throw std::invalid_argument("assemble_ptx_modules: no modules");
  const auto t0 = Clock::now();
  CudaCompileResult r;
  r.cubin = link_ptx(modules, name, options, r.log);
  r.ptx = whole;
  r.cubin_seconds = r.seconds = since(t0);
  return r;
}

std::map<std::string, std::vector<unsigned char>> elf_sections(std::span<const unsigned char> elf) {
  const auto read = [&](std::size_t at, std::size_t bytes, std::size_t& v) {
    if (at > elf.size() || bytes > elf.size() - at) return false;
    std::uint64_t x = 0;
    std::memcpy(&x, elf.data() + at, bytes);  // ELF64 little endian
    v = static_cast<std::size_t>(x);
    return true;
  };
  std::size_t shoff = 0, entsize = 0, count = 0, strndx = 0, strtab = 0;
  if (elf.size() < 64 ||
      std::memcmp(elf.data(),
                  "\x7f"
                  "ELF",
                  4) != 0 ||
      !read(0x28, 8, shoff) || !read(0x3a, 2, entsize) || !read(0x3c, 2, count) || !read(0x3e, 2, strndx) ||
      strndx >= count || !read(shoff + strndx * entsize + 0x18, 8, strtab))
    return {};
  std::map<std::string, std::vector<unsigned char>> out;
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t h = shoff + i * entsize;
    std::size_t name = 0, type = 0, off = 0, size = 0;
    if (!read(h, 4, name) || !read(h + 4, 4, type) || !read(h + 0x18, 8, off) || !read(h + 0x20, 8, size) ||
        strtab + name >= elf.size())
      return {};
    const auto* first = reinterpret_cast<const char*>(elf.data() + strtab + name);
    const auto* nul = static_cast<const char*>(std::memchr(first, 0, elf.size() - (strtab + name)));
    if (!nul) return {};
    std::vector<unsigned char>& bytes = out[std::string(first, nul)];
    if (type == 8) continue;  // SHT_NOBITS: no contents in the file
    if (off > elf.size() || size > elf.size() - off) return {};
    bytes.assign(elf.begin() + static_cast<std::ptrdiff_t>(off),
                 elf.begin() + static_cast<std::ptrdiff_t>(off + size));
  }
  return out;
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
