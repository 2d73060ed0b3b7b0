// sparsecc: ahead-of-time inspector-executor compiler for fixed sparse matrices.
#include <fmt/format.h>

#include <cstdio>
#include <functional>
#include <new>

#include "cli.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/version.hpp"
#include "sparsecc/compile/nvrtc.hpp"
#include "sparsecc/runtime/bundle.hpp"

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
  cli::add_compile(app, run);
  cli::add_compile_model(app, run);
  cli::add_verify(app, run);
  cli::add_embed(app, run);
  cli::add_hines(app, run);
  cli::add_prune(app, run);
  cli::add_tune(app, run);
  cli::add_targets(app, run);
  cli::add_demo(app, run);
  cli::add_bench(app, run);

  // A first word that is neither an option nor a command is a mistyped command: say so by name.
  auto is_command = [&app](const std::string& word) {
    for (const CLI::App* sub : app.get_subcommands({}))
      if (sub->check_name(word)) return true;
    return false;
  };
  if (argc > 1 && argv[1][0] != '-' && !is_command(argv[1])) {
    fmt::print(stderr, "sparsecc: error: unknown command '{}' (see sparsecc --help)\n", argv[1]);
    return cli::kExitBadInput;
  }
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
  } catch (const rt::BundleError& e) {
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
