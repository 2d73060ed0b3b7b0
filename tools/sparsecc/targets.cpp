// sparsecc targets: the GPU target table that --arch picks from, and the live GPU's own target.
#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli.hpp"
#include "sparsecc/runtime/driver.hpp"
#include "sparsecc/target/target.hpp"
#include "target_flags.hpp"

namespace sparsecc::cli {

namespace {

std::string features(const GpuTarget& t) {
  std::string s;
  const auto add = [&](bool on, const char* name) {
    if (on) s += s.empty() ? name : fmt::format(",{}", name);
  };
  add(t.programmatic_launch, "pdl");
  add(t.wgmma, "wgmma");
  add(t.cp_async, "cp.async");
  add(t.mma_f16, "mma.f16");
  return s.empty() ? "-" : s;
}

std::string row(const GpuTarget& t) {
  return fmt::format(
      "{:<8} {:<28} {:>2}.{:<1} {:>4} {:>4} {:>6} {:>6} {:>6} {:>9} {:>7} {:>6} {:>5} {:>6} {:>6}  {}",
      t.arch, t.name.substr(0, 28), t.cc_major, t.cc_minor, t.ptx_isa, t.sm_count, t.max_threads_per_sm,
      t.max_blocks_per_sm, t.registers_per_sm, t.shared_per_sm / 1024, t.shared_per_block_optin / 1024,
      t.l2_bytes / (1024 * 1024), t.clock_mhz, t.dram_bytes_per_us / 1e3, t.l2_bytes_per_us / 1e3,
      features(t));
}

}  // namespace

void add_targets(CLI::App& app, std::function<int()>& run) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "targets", "List the GPU targets --arch names (one table row each) and, with a GPU, --arch native's");
  cmd->add_flag("--json", *json, "Print every target as JSON: {\"table\": [...], \"device\": {...} or null}");
  cmd->callback([&run, json] {
    run = [json]() -> int {
      std::optional<GpuTarget> device;
      std::string why;
      if (rt::driver_available(&why)) {
        try {
          device = device_target();
        } catch (const std::exception& e) {
          why = e.what();
        }
      }
      if (*json) {
        nlohmann::json out = {{"table", nlohmann::json::array()}, {"device", nullptr}};
        for (const std::string& arch : known_gpu_archs()) out["table"].push_back(to_json(gpu_target(arch)));
        if (device) out["device"] = to_json(*device);
        fmt::print("{}\n", out.dump(2));
        return kExitOk;
      }
      fmt::print("{:<8} {:<28} {:>4} {:>4} {:>4} {:>6} {:>6} {:>6} {:>9} {:>7} {:>6} {:>5} {:>6} {:>6}  {}\n",
                 "arch", "part", "cc", "PTX", "SMs", "thr/SM", "blk/SM", "reg/SM", "smem KiB", "opt-in",
                 "L2 MiB", "MHz", "DRAM", "L2", "features");
      for (const std::string& arch : known_gpu_archs()) fmt::print("{}\n", row(gpu_target(arch)));
      if (device)
        fmt::print("\nthis machine's GPU (--arch native):\n{}\n", row(*device));
      else
        fmt::print("\nno GPU here for --arch native ({})\n", why);
      fmt::print("(DRAM and L2: GB/s; MHz: the sustained clock the predictor assumes)\n");
      return kExitOk;
    };
  });
}

}  // namespace sparsecc::cli
