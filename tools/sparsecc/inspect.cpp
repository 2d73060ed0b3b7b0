// sparsecc inspect FILE[:tensor]: a summary of a matrix or a morphology, as text or JSON.
#include <fmt/format.h>

#include <cstdio>

#include "cli.hpp"
#include "sparsecc/inspector/matrix_summary.hpp"
#include "sparsecc/inspector/morphology_summary.hpp"
#include "sparsecc/io/load.hpp"
#include "sparsecc/neuron/morphology.hpp"

namespace sparsecc::cli {

namespace {
struct InspectArgs {
  std::string input;
  bool json = false;
  std::uint64_t seed = 1;
  int resolution = 1;
  int grid = 16;
};
}  // namespace

void add_inspect(CLI::App& app, std::function<int()>& run) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand("inspect", "Summarize a sparse matrix or a neuron morphology");
  cmd->add_option("input", args->input,
                  "FILE or FILE:TENSOR (.mtx, .smtx, .npy, .npz, .safetensors, .swc; .gz accepted)")
      ->required();
  cmd->add_flag("--json", args->json, "Print JSON instead of text");
  cmd->add_option("--seed", args->seed, "Seed for the values of pattern-only .smtx files")
      ->check(kNotNegative)
      ->capture_default_str();
  cmd->add_option("--resolution", args->resolution, "Compartments per SWC segment (morphologies)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--grid", args->grid, "Cells per side of the block-density view (matrices)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->callback([&run, args] {
    run = [args]() -> int {
      const InputSpec spec = parse_input_spec(args->input);
      if (detect_format(spec.path) == InputFormat::swc) {
        const NeuronModel model = load_neuron(spec.path);
        const MorphologySummary s = summarize_morphology(model, args->resolution);
        if (args->json)
          fmt::print("{}\n", to_json(s).dump(2));
        else
          fmt::print("{}", to_text(s));
        return kExitOk;
      }
      LoadOptions opts;
      opts.seed = args->seed;
      const CsrMatrix a = load_matrix(args->input, opts);
      const MatrixSummary s = summarize_matrix(a, args->grid);
      if (args->json) {
        auto j = to_json(s);
        j["input"] = args->input;
        fmt::print("{}\n", j.dump(2));
      } else {
        fmt::print("{}\n{}", args->input, to_text(s));
      }
      return kExitOk;
    };
  });
}

}  // namespace sparsecc::cli
