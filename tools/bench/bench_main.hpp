// What the bench programs' main functions share: comma-separated lists on the command line, and a
// call stack on a crash.
#pragma once

#include <execinfo.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <string>
#include <vector>

namespace sparsecc::bench {

// "a,b,,c" -> {"a", "b", "c"} (empty items dropped).
inline std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = text.find(',', at);
    std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

namespace detail {
inline const char* crash_program = "bench";
inline void print_stack_and_die(int sig) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  const char msg[] = ": fatal signal; call stack:\n";
  (void)!write(STDERR_FILENO, crash_program, std::strlen(crash_program));
  (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}
}  // namespace detail

// A crash (SIGSEGV, SIGABRT) prints the raw call stack (resolve it with addr2line -e PROGRAM) before
// the program dies.
inline void print_stack_on_crash(const char* program) {
  detail::crash_program = program;
  std::signal(SIGSEGV, detail::print_stack_and_die);
  std::signal(SIGABRT, detail::print_stack_and_die);
}

}  // namespace sparsecc::bench
