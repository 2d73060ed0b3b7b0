// The sparsecc command line: one function a sub-command. Exit statuses: 0 success, 1 a failed
// check, 2 bad usage or bad input (errors go to stderr).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "sparsecc/pipeline/inputs.hpp"
#include "sparsecc/pipeline/run.hpp"

namespace sparsecc::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;
inline constexpr int kExitBadInput = 2;

// For unsigned options such as --seed: refuses a negative number, which would otherwise wrap to a
// huge one (2^64 - 1 for -1).
inline const CLI::Validator kNotNegative(
    [](const std::string& v) {
      const std::size_t first = v.find_first_not_of(" \t");
      return first != std::string::npos && v[first] == '-' ? "must not be negative, got " + v : std::string();
    },
    "NONNEGATIVE", "not negative");

// For output paths (-o): an empty one is refused, not taken as no output.
inline const CLI::Validator kOutputPath(
    [](const std::string& v) { return v.empty() ? std::string("the output path is empty") : std::string(); },
    "PATH", "an output path");

// The library's names the commands use unqualified.
using pipeline::compare_spmm;
using pipeline::input_paths;
using pipeline::random_check_input;
using pipeline::run_spmm_on_gpu;
using pipeline::spmm_check_tolerance;
using pipeline::SpmmCheck;
using pipeline::SpmmGpuInputs;

// Each registers its sub-command on `app`; the callback stored in `run` executes it and returns the
// exit status.
void add_inspect(CLI::App& app, std::function<int()>& run);
void add_demo(CLI::App& app, std::function<int()>& run);
void add_compile(CLI::App& app, std::function<int()>& run);
void add_compile_model(CLI::App& app, std::function<int()>& run);
void add_verify(CLI::App& app, std::function<int()>& run);
void add_embed(CLI::App& app, std::function<int()>& run);
void add_hines(CLI::App& app, std::function<int()>& run);
void add_prune(CLI::App& app, std::function<int()>& run);
void add_tune(CLI::App& app, std::function<int()>& run);
void add_targets(CLI::App& app, std::function<int()>& run);
// Forwards every argument to the sparsecc_bench program (execv); its callback returns only on failure.
void add_bench(CLI::App& app, std::function<int()>& run);

}  // namespace sparsecc::cli
