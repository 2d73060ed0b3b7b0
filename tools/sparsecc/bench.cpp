// sparsecc bench ARGS...: runs the benchmark harness, the sparsecc_bench program, with ARGS forwarded
// unchanged. The harness links cuBLAS and cuSPARSE for its baselines; the CLI does not, so it stays
// usable where those libraries are absent, and hands the whole command line over instead.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "cli.hpp"

namespace sparsecc::cli {

namespace {

namespace fs = std::filesystem;

constexpr const char* kBenchProgram = "sparsecc_bench";

bool is_executable_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

// The harness next to this executable, then in ../bench/ from it (the build tree), then on PATH.
// `looked` receives the files tried before PATH.
std::optional<fs::path> find_bench_program(std::vector<std::string>& looked) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path dir = self.parent_path();
    for (const fs::path& p : {dir / kBenchProgram, dir.parent_path() / "bench" / kBenchProgram}) {
      const fs::path candidate = p.lexically_normal();
      looked.push_back(candidate.string());
      if (is_executable_file(candidate)) return candidate;
    }
  } else {
    looked.push_back(fmt::format("nothing next to sparsecc (/proc/self/exe: {})", ec.message()));
  }
  const char* path = std::getenv("PATH");
  if (path == nullptr) return std::nullopt;
  const std::string dirs = path;
  std::size_t begin = 0;
  while (begin <= dirs.size()) {
    const std::size_t end = std::min(dirs.find(':', begin), dirs.size());
    const std::string dir = dirs.substr(begin, end - begin);
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / kBenchProgram;
    if (is_executable_file(candidate)) return candidate;
    begin = end + 1;
  }
  return std::nullopt;
}

int run_bench(const std::vector<std::string>& args) {
  std::vector<std::string> looked;
  const std::optional<fs::path> program = find_bench_program(looked);
  if (!program) {
    std::string where;
    for (const std::string& place : looked) where += place + ", ";
    fmt::print(stderr,
               "sparsecc: error: the benchmark harness {} was not found (looked in {}and on PATH); build "
               "the sparsecc_spmm_bench target or put {} on PATH\n",
               kBenchProgram, where, kBenchProgram);
    return kExitBadInput;
  }
  const std::string exe = program->string();
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  ::execv(exe.c_str(), argv.data());
  fmt::print(stderr, "sparsecc: error: cannot run {}: {}\n", exe, std::strerror(errno));
  return kExitBadInput;
}

}  // namespace

void add_bench(CLI::App& app, std::function<int()>& run) {
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Benchmark SpMM executors against cuBLAS and cuSPARSE (runs sparsecc_bench with the arguments; "
      "sparsecc bench --help lists them)");
  // Every word after `bench` belongs to the harness, --help included.
  cmd->prefix_command();
  cmd->allow_extras();
  cmd->set_help_flag();
  cmd->callback([&run, cmd] { run = [args = cmd->remaining()] { return run_bench(args); }; });
}

}  // namespace sparsecc::cli
