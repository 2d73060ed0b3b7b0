// Whole networks timed end to end: the layers of a network in one CUDA graph, checked, then timed.
#include "bench/network_pass.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <stdexcept>

namespace sparsecc::bench {
namespace {

using Enqueue = std::function<void(cudaStream_t)>;

void run_sparsecc(const PassLayer& l, cudaStream_t stream, bool programmatic) {
  rt::RunOptions options;
  options.programmatic = programmatic;
  l.executor->run(reinterpret_cast<CUdeviceptr>(l.b->get()), reinterpret_cast<CUdeviceptr>(l.c->get()), l.n,
                  reinterpret_cast<CUstream>(stream), options);
}

// One pass of `kind` over `layers`, or empty with `why` set when a layer has no such baseline.
Enqueue pass_of(const std::vector<const PassLayer*>& layers, const std::string& kind, std::string& why) {
  std::vector<Enqueue> steps;
  for (const PassLayer* l : layers) {
    Enqueue one;
    if (kind == "sparsecc" || kind == "sparsecc_programmatic") {
      const bool programmatic = kind == "sparsecc_programmatic";
      one = [l, programmatic](cudaStream_t s) { run_sparsecc(*l, s, programmatic); };
    } else {
      const auto it = l->baselines.find(kind);
      if (it == l->baselines.end() || !it->second.ok || !it->second.enqueue) {
        why = fmt::format("no checked {} for layer {}", kind, l->name);
        return {};
      }
      one = it->second.enqueue;
    }
    for (int i = 0; i < l->count; ++i) steps.push_back(one);
  }
  return [steps = std::move(steps)](cudaStream_t s) {
    for (const Enqueue& e : steps) e(s);
  };
}

// One pass of sparsecc's executors on poisoned outputs; every layer's C must equal its stand-alone
// output bit for bit.
void check_pass(const std::vector<const PassLayer*>& layers, bool programmatic) {
  for (const PassLayer* l : layers) SPARSECC_CUDA_CHECK(cudaMemset(l->c->get(), 0xff, l->c->bytes()));  // NaN
  SPARSECC_CUDA_CHECK(cudaDeviceSynchronize());
  {
    Stream stream;
    for (const PassLayer* l : layers)
      for (int i = 0; i < l->count; ++i) run_sparsecc(*l, stream.s, programmatic);
    SPARSECC_CUDA_CHECK(cudaStreamSynchronize(stream.s));
  }
  std::vector<float> c;
  for (const PassLayer* l : layers) {
    c.resize(l->expected.size());
    l->c->download(c.data(), c.size() * sizeof(float));
    if (std::memcmp(c.data(), l->expected.data(), c.size() * sizeof(float)) != 0)
      throw std::runtime_error(
          fmt::format("network pass ({} launches): layer {} did not reproduce its checked "
                      "output bit for bit",
                      programmatic ? "programmatic" : "plain", l->name));
  }
}

std::string us_or_dash(const PassTiming& p, const std::string& kind) {
  const auto it = p.times.find(kind);
  return it == p.times.end() ? std::string("-") : fmt::format("{:.1f}", it->second.median_us);
}

std::string ratio_or_dash(const PassTiming& p, const std::string& base, const std::string& ours) {
  const auto b = p.times.find(base), o = p.times.find(ours);
  if (b == p.times.end() || o == p.times.end()) return "-";
  return fmt::format("{:.2f}", b->second.median_us / o->second.median_us);
}

}  // namespace

std::vector<PassTiming> time_network_passes(const std::vector<PassLayer>& layers,
                                            const TimingOptions& timing) {
  std::vector<std::string> networks;
  for (const PassLayer& l : layers)
    if (std::find(networks.begin(), networks.end(), l.network) == networks.end())
      networks.push_back(l.network);
  std::vector<PassTiming> out;
  for (const std::string& network : networks) {
    std::vector<const PassLayer*> members;
    PassTiming p;
    p.network = network;
    for (const PassLayer& l : layers) {
      if (l.network != network) continue;
      members.push_back(&l);
      ++p.layers;
      p.launches += l.count;
      p.sparsecc_bytes += l.sparsecc_bytes;
      p.dense_bytes += l.dense_bytes;
      p.alone_sum_us["sparsecc"] += l.count * l.alone_us;
      p.alone_sum_us["sparsecc_programmatic"] += l.count * l.alone_programmatic_us;
      for (const auto& [kind, r] : l.baselines)
        if (r.ok) p.alone_sum_us[kind] += l.count * r.us;
    }
    check_pass(members, false);
    check_pass(members, true);
    // About timing.launches_per_graph launches a graph, at least two passes.
    TimingOptions t = timing;
    t.launches_per_graph = std::max(2, (timing.launches_per_graph + p.launches - 1) / p.launches);
    for (const std::string& kind : kPassKinds) {
      std::string why;
      const Enqueue pass = pass_of(members, kind, why);
      if (!pass) {
        p.skipped[kind] = why;
        p.alone_sum_us.erase(kind);
        continue;
      }
      p.times[kind] = time_steady(pass, t);
    }
    out.push_back(std::move(p));
  }
  return out;
}

void print_passes(const std::vector<PassTiming>& passes) {
  if (passes.empty()) return;
  fmt::print(
      "network passes: each network's layers in suite order, every layer `count` times on its own B and C, "
      "one CUDA graph of whole passes (median of the replays), us a pass; 'alone' is the same ratio of the "
      "stand-alone times summed\n");
  fmt::print(
      "{:<12} {:>6} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>7} {:>7} {:>7} {:>8} {:>9} "
      "{:>9}\n",
      "network", "layers", "launches", "ours", "ours pdl", "fp32", "tf32", "fp16", "cusp", "x fp32",
      "pdl x32", "x tf32", "x fp16", "x cusp", "alone x32", "ours MB", "dense MB");
  for (const PassTiming& p : passes) {
    const auto alone = [&](const std::string& kind) {
      const auto it = p.alone_sum_us.find(kind);
      return it == p.alone_sum_us.end() ? 0.0 : it->second;
    };
    const double alone_ratio = alone("sparsecc") > 0 ? alone("cublas_fp32") / alone("sparsecc") : 0;
    fmt::print(
        "{:<12} {:>6} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>7} {:>7} {:>7} {:>8} {:>9.1f} "
        "{:>9.1f}\n",
        p.network, p.layers, p.launches, us_or_dash(p, "sparsecc"), us_or_dash(p, "sparsecc_programmatic"),
        us_or_dash(p, "cublas_fp32"), us_or_dash(p, "cublas_tf32"), us_or_dash(p, "cublas_fp16"),
        us_or_dash(p, "cusparse_best"), ratio_or_dash(p, "cublas_fp32", "sparsecc"),
        ratio_or_dash(p, "cublas_fp32", "sparsecc_programmatic"), ratio_or_dash(p, "cublas_tf32", "sparsecc"),
        ratio_or_dash(p, "cublas_fp16", "sparsecc"), ratio_or_dash(p, "cusparse_best", "sparsecc"),
        alone_ratio > 0 ? fmt::format("{:.2f}", alone_ratio) : std::string("-"),
        static_cast<double>(p.sparsecc_bytes) / 1e6, static_cast<double>(p.dense_bytes) / 1e6);
    for (const auto& [kind, why] : p.skipped) fmt::print("  {}: {} not timed: {}\n", p.network, kind, why);
  }
}

nlohmann::json to_json(const PassTiming& p) {
  nlohmann::json j = {{"network", p.network},
                      {"layers", p.layers},
                      {"launches", p.launches},
                      {"sparsecc_bytes", p.sparsecc_bytes},
                      {"dense_bytes", p.dense_bytes}};
  for (const auto& [kind, t] : p.times) {
    j["pass_us"][kind] = timing_json(t);
    const auto it = p.alone_sum_us.find(kind);
    if (it != p.alone_sum_us.end()) j["alone_sum_us"][kind] = it->second;
  }
  for (const auto& [kind, why] : p.skipped) j["skipped"][kind] = why;
  return j;
}

}  // namespace sparsecc::bench
