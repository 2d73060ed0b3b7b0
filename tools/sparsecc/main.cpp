// sparsecc: ahead-of-time inspector-executor compiler for fixed sparse matrices.
#include <fmt/format.h>

#include <cstdio>
#include <functional>
#include <new>

#include "cli.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/version.hpp"
#include "sparsecc/compile/nvrtc.hpp"

int main(int argc, char** argv) {
  using namespace sparsecc;
  CLI::App app{
      "sparsecc: an ahead-of-time inspector-executor compiler for fixed sparse matrices\n"
      "(pruned neural-network layers and Hines matrices of neuron models)",
      "sparsecc"};
  app.set_version_flag("--version", [] {
    std::string nvrtc;
    try {
      nvrtc = nvrtc_version();
    } catch (const std::exception&) {
      nvrtc = "unavailable";
    }
    return fmt::format("sparsecc {} (NVRTC {})", kVersion, nvrtc);
  });
  app.require_subcommand(1);
  std::function<int()> run;
  cli::add_inspect(app, run);
  cli::add_demo(app, run);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return cli::kExitBadInput;
  }

  try {
    return run();
  } catch (const InputError& e) {
    fmt::print(stderr, "sparsecc: error: {}\n", e.what());
    return cli::kExitBadInput;
  } catch (const UsageError& e) {
    fmt::print(stderr, "sparsecc: error: {}\n", e.what());
    return cli::kExitBadInput;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "sparsecc: error: out of memory\n");
    return cli::kExitCheckFailed;
  } catch (const std::exception& e) {
    fmt::print(stderr, "sparsecc: internal error: {}\n", e.what());
    return cli::kExitCheckFailed;
  }
}
