// sparsecc_cpu_aot_bench: CPU executors compiled ahead of time and linked into this program (the
// library `aot_layers` that sparsecc embed writes from CPU bundles; see tools/bench/cpu_aot_bench.sh,
// which builds it from a folder of matrices), timed on the machine it runs on against OpenBLAS SGEMM
// of the same shapes, with no LLVM and no CUDA. It is how the CPU backend is measured on machines
// where sparsecc itself is not installed (a GPU machine's host CPU).
//
//   sparsecc_cpu_aot_bench [--threads 1,0] [--reps 21] [--json FILE] [--digests FILE | --expect FILE]
//
// Each layer runs first on fresh B (uniform in [-1, 1) from a fixed seed) with C poisoned with NaN:
// every output must be written, and the output's FNV-1a digest is compared with the one another
// machine recorded (--expect; the same code on the same input gives the same bits on any thread
// count), which carries over the fp64 check `sparsecc compile --target` made where the layers were
// compiled. Then each thread count (0: all hardware threads): medians of --reps runs after warm-up,
// and SGEMM on a dense matrix of A's shape with the same threads. Exit status: 0, 1 a failed check,
// 2 bad usage.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "aot_layers.hpp"
#include "bench/cpu_timing.hpp"

extern "C" void openblas_set_num_threads(int threads);
extern "C" char* openblas_get_corename();

namespace {

std::uint64_t fnv1a64(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

float uniform(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(static_cast<double>(z >> 40) / 8388608.0 - 1.0);
}

template <class F>
double median_us(int reps, F&& run) {
  return sparsecc::bench::cpu_median_us(run, reps, 3);
}

struct Args {
  std::vector<int> threads = {1, 0};
  int reps = 21;
  std::string json, digests, expect;
};

bool parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) return false;
    const std::string v = argv[++i];
    if (k == "--threads") {
      a.threads.clear();
      std::stringstream ss(v);
      for (std::string t; std::getline(ss, t, ',');) a.threads.push_back(std::stoi(t));
    } else if (k == "--reps") {
      a.reps = std::max(1, std::stoi(v));
    } else if (k == "--json") {
      a.json = v;
    } else if (k == "--digests") {
      a.digests = v;
    } else if (k == "--expect") {
      a.expect = v;
    } else {
      return false;
    }
  }
  return !a.threads.empty();
}

}  // namespace

int run(int argc, char** argv);

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparsecc_cpu_aot_bench: %s\n", e.what());
    return 1;
  }
}

int run(int argc, char** argv) {
  Args args;
  try {
    if (!parse(argc, argv, args)) {
      std::fprintf(
          stderr,
          "usage: sparsecc_cpu_aot_bench [--threads 1,0] [--reps 21] [--json FILE] [--digests FILE | "
          "--expect FILE]\n");
      return 2;
    }
  } catch (const std::exception&) {
    std::fprintf(stderr, "sparsecc_cpu_aot_bench: --threads and --reps take integers\n");
    return 2;
  }
  std::map<std::string, std::string> expected;
  if (!args.expect.empty()) {
    std::ifstream in(args.expect);
    if (!in) {
      std::fprintf(stderr, "sparsecc_cpu_aot_bench: %s: cannot open\n", args.expect.c_str());
      return 2;
    }
    for (std::string name, digest; in >> name >> digest;) expected[name] = digest;
  }
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  aot_layers::Kernels kernels;
  // OpenBLAS picks its kernels by the CPU it detects (a virtual machine's generic CPU model may give
  // a slow one; OPENBLAS_CORETYPE overrides it): say which.
  std::printf("OpenBLAS core: %s; %d hardware threads\n", openblas_get_corename(), hw);
  std::printf("%-48s %6s %6s %6s %8s %4s %10s %10s %8s %9s %s\n", "layer", "M", "K", "N", "nnz", "thr",
              "sparsecc us", "sgemm us", "x sgemm", "GFLOP/s", "check");
  std::string json = "{\"hardware_threads\": " + std::to_string(hw) + ", \"openblas_core\": \"" +
                     openblas_get_corename() + "\", \"layers\": [";
  std::string digests;
  bool ok = true;
  std::map<int, double> log_ratio;
  std::size_t counted = 0;
  // Two passes: every layer's executor first, then every SGEMM, so that neither library's idle
  // threads (OpenMP's and OpenBLAS's spin before they sleep) compete with the other's for the cores.
  struct Row {
    std::size_t index;
    std::string check, digest;
    std::vector<double> us, sgemm;
  };
  std::vector<Row> rows;
  const auto inputs = [&](std::size_t i, const sparsecc::rt::CpuSpmmExecutor& ex, std::vector<float>& b,
                          std::vector<float>& dense) {
    std::uint64_t seed = 20261128 + i;
    b.resize(static_cast<std::size_t>(ex.k() * ex.n()));
    for (float& v : b) v = uniform(seed);
    dense.resize(static_cast<std::size_t>(ex.m() * ex.k()));
    for (float& v : dense) v = uniform(seed);
  };
  for (std::size_t i = 0; i < aot_layers::kLayerCount; ++i) {
    const aot_layers::LayerInfo& info = aot_layers::layers()[i];
    if (!kernels.spmm(i)) continue;  // Hines layers: sparsecc_cpu_hines_bench
    const sparsecc::rt::CpuSpmmExecutor& ex = *kernels.spmm(i);
    std::vector<float> b, dense;
    inputs(i, ex, b, dense);
    std::vector<float> c(static_cast<std::size_t>(ex.m() * ex.n()), NAN);
    ex.run(b.data(), c.data(), 0);
    const std::size_t unwritten =
        static_cast<std::size_t>(std::count_if(c.begin(), c.end(), [](float v) { return std::isnan(v); }));
    char digest[17];
    std::snprintf(digest, sizeof digest, "%016llx",
                  static_cast<unsigned long long>(fnv1a64(c.data(), c.size() * 4)));
    digests += std::string(info.name) + " " + digest + "\n";
    Row row{i, unwritten ? "UNWRITTEN" : "written", digest, {}, {}};
    if (!args.expect.empty()) {
      const auto it = expected.find(info.name);
      const bool same = it != expected.end() && it->second == digest;
      row.check += same ? ", same bits" : ", DIFFERENT bits";
      ok = ok && same;
    }
    ok = ok && unwritten == 0;
    for (const int t : args.threads)
      row.us.push_back(median_us(args.reps, [&] { ex.run(b.data(), c.data(), t > 0 ? t : hw); }));
    rows.push_back(std::move(row));
  }
  for (Row& row : rows) {
    const sparsecc::rt::CpuSpmmExecutor& ex = *kernels.spmm(row.index);
    std::vector<float> b, dense, cd(static_cast<std::size_t>(ex.m() * ex.n()));
    inputs(row.index, ex, b, dense);
    for (const int t : args.threads) {
      openblas_set_num_threads(t > 0 ? t : hw);
      row.sgemm.push_back(median_us(args.reps, [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(ex.m()),
                    static_cast<int>(ex.n()), static_cast<int>(ex.k()), 1.0f, dense.data(),
                    static_cast<int>(ex.k()), b.data(), static_cast<int>(ex.n()), 0.0f, cd.data(),
                    static_cast<int>(ex.n()));
      }));
    }
  }
  for (const Row& row : rows) {
    const aot_layers::LayerInfo& info = aot_layers::layers()[row.index];
    const sparsecc::rt::CpuSpmmExecutor& ex = *kernels.spmm(row.index);
    json += std::string(counted ? ", " : "") + "{\"name\": \"" + info.name +
            "\", \"m\": " + std::to_string(ex.m()) + ", \"k\": " + std::to_string(ex.k()) +
            ", \"n\": " + std::to_string(ex.n()) + ", \"nnz\": " + std::to_string(info.nnz) +
            ", \"digest\": \"" + row.digest + "\", \"runs\": [";
    for (std::size_t t = 0; t < args.threads.size(); ++t) {
      const int threads = args.threads[t] > 0 ? args.threads[t] : hw;
      const double us = row.us[t], sgemm = row.sgemm[t];
      const double gflops = 2.0 * static_cast<double>(info.nnz) * static_cast<double>(ex.n()) / us * 1e-3;
      std::printf("%-48s %6lld %6lld %6lld %8lld %4d %10.1f %10.1f %8.2f %9.1f %s\n", info.name,
                  static_cast<long long>(ex.m()), static_cast<long long>(ex.k()),
                  static_cast<long long>(ex.n()), static_cast<long long>(info.nnz), threads, us, sgemm,
                  sgemm / us, gflops, row.check.c_str());
      log_ratio[args.threads[t]] += std::log(sgemm / us);
      json += std::string(t ? ", " : "") + "{\"threads\": " + std::to_string(threads) +
              ", \"us\": " + std::to_string(us) + ", \"sgemm_us\": " + std::to_string(sgemm) +
              ", \"gflops\": " + std::to_string(gflops) + "}";
    }
    json += "], \"check\": \"" + row.check + "\"}";
    ++counted;
  }
  json += "], \"geomean_x_sgemm\": {";
  std::size_t j = 0;
  for (const auto& [t, sum] : log_ratio) {
    const double g = std::exp(sum / static_cast<double>(std::max<std::size_t>(counted, 1)));
    std::printf("geomean x SGEMM, %d thread%s: %.2f over %zu layers\n", t > 0 ? t : hw, t == 1 ? "" : "s", g,
                counted);
    json += std::string(j++ ? ", " : "") + "\"" + std::to_string(t > 0 ? t : hw) + "\": " + std::to_string(g);
  }
  json += "}, \"ok\": " + std::string(ok ? "true" : "false") + "}\n";
  if (!args.json.empty()) std::ofstream(args.json) << json;
  if (!args.digests.empty()) std::ofstream(args.digests) << digests;
  std::printf("sparsecc_cpu_aot_bench: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
