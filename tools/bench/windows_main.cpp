// sparsecc_windows: how much dense tensor-core work condensed windows keep on the bench's matrices
// (CPU only; no kernel is run). For every matrix of the chosen suites, every window height, both row
// orders (none, greedy) and every k granule: the share of dense work kept (inspector/
// condensed_windows.hpp: window_rows x padded union per window, over M x K), the useful fraction
// (nonzeros / kept work) and the planner's seconds. Per suite: the geometric mean of the kept shares
// and the aggregate share (sum of kept over sum of dense work, each layer weighted by its count in
// the network), with the bound they put on the speedup over dense at equal tensor-core efficiency
// (1 / share) and the efficiency, relative to dense cuBLAS, that a kernel needs to reach a bar
// (bar x share).
//
// Suites (names for --suites):
//   sparsert90, sparsert95  SparseRT Table 1 at 90 / 95 % (bench/suites.hpp; batch 16)
//   rn50-90, rn50-95        DLMC ResNet-50, magnitude pruning at 0.9 / 0.95 (every .smtx of the folder)
//   transformer90           DLMC Transformer, magnitude pruning at 0.9
//   llm90                   the LLM-shaped layers of bench/llm_suite.hpp, random pattern at 90 %
// Data: --data, else $SPARSECC_DATA_DIR, else ../shared/data.
// Exit: 0 ok, 1 a plan failed its check or a matrix could not be read, 2 bad usage.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "bench/llm_suite.hpp"
#include "bench/suites.hpp"
#include "bench_main.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/inspector/condensed_windows.hpp"
#include "sparsecc/io/load.hpp"

using namespace sparsecc;
using namespace sparsecc::bench;
namespace fs = std::filesystem;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<std::int64_t> parse_ints(const std::string& text, const char* what) {
  std::vector<std::int64_t> out;
  for (const std::string& w : split_list(text)) {
    try {
      std::size_t used = 0;
      out.push_back(std::stoll(w, &used));
      if (used != w.size()) throw std::invalid_argument(w);
    } catch (const std::exception&) {
      throw UsageError(fmt::format("{}: '{}' is not an integer", what, w));
    }
  }
  if (out.empty()) throw UsageError(fmt::format("{}: empty list", what));
  return out;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  return "unknown";
}

// A matrix of a suite, loaded on demand.
struct Entry {
  std::string name;
  int count = 1;  // instances in the network (SparseRT Table 1), the aggregate's weight
  std::function<CsrMatrix()> load;
};

struct Suite {
  std::string name, description;
  std::vector<Entry> entries;
};

Suite make_suite(const std::string& name, const fs::path& data, int limit) {
  Suite s;
  s.name = name;
  const auto from_problems = [&](const std::vector<BenchProblem>& problems, const std::string& network) {
    for (const BenchProblem& p : problems) {
      if (!network.empty() && p.network != network) continue;
      s.entries.push_back({p.name, p.count, [p] { return load_problem_matrix(p); }});
    }
  };
  if (name == "sparsert90" || name == "sparsert95") {
    const double sparsity = name == "sparsert90" ? 0.9 : 0.95;
    s.description = fmt::format("SparseRT Table 1 at {:g} % (batch 16)", sparsity * 100);
    from_problems(sparsert_suite(data, sparsity, 16), "");
  } else if (name == "rn50-90") {
    s.description = "DLMC rn50 magnitude pruning 0.9";
    from_problems(dlmc_suite(data), "rn50");
  } else if (name == "transformer90") {
    s.description = "DLMC transformer magnitude pruning 0.9";
    from_problems(dlmc_suite(data), "transformer");
  } else if (name == "rn50-95") {
    s.description = "DLMC rn50 magnitude pruning 0.95";
    const fs::path folder = data / "dlmc" / "rn50" / "magnitude_pruning" / "0.95";
    if (!fs::is_directory(folder)) throw_in_file(folder.string(), "folder not found in the data folder");
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(folder))
      if (e.path().filename().string().ends_with(".smtx.gz") ||
          e.path().filename().string().ends_with(".smtx"))
        files.push_back(e.path());
    std::sort(files.begin(), files.end());
    if (files.empty()) throw_in_file(folder.string(), "holds no .smtx files");
    for (const fs::path& f : files) {
      std::string stem = f.filename().string();
      stem = stem.substr(0, stem.find(".smtx"));
      s.entries.push_back({"rn50/" + stem, 1, [f] { return load_matrix(f.string()); }});
    }
  } else if (name == "llm90") {
    s.description = "LLM-shaped layers, random pattern at 90 % (seed 1)";
    for (const LlmShape& shape : llm_shapes())
      s.entries.push_back({shape.name(), 1, [shape] {
                             return make_llm_matrix(shape.m, shape.k, 0.9, LlmPattern::random, 1);
                           }});
  } else {
    throw UsageError(fmt::format(
        "--suites: unknown suite '{}' (sparsert90, sparsert95, rn50-90, rn50-95, transformer90, llm90)",
        name));
  }
  if (limit > 0 && static_cast<int>(s.entries.size()) > limit)
    s.entries.resize(static_cast<std::size_t>(limit));
  return s;
}

struct Config {
  std::int64_t rows;
  WindowReorder reorder;
  std::int64_t granule;
  bool operator<(const Config& o) const {
    return std::tie(rows, reorder, granule) < std::tie(o.rows, o.reorder, o.granule);
  }
};

struct Accumulator {
  std::vector<double> shares;
  double kept = 0, dense = 0, seconds = 0;
  int reordered = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::string data = default_data_dir();
  std::string suites = "sparsert90,sparsert95,rn50-90,rn50-95,transformer90,llm90";
  std::string rows_list = "4,8,16,32", granules_list = "16,1";
  std::string json_path;
  int limit = 0;
  WindowOptions base;
  CLI::App app{"sparsecc_windows: the share of dense tensor-core work condensed windows keep (CPU only)"};
  app.add_option("--data", data, "the data folder")->capture_default_str();
  app.add_option("--suites", suites, "comma-separated suites")->capture_default_str();
  app.add_option("--rows", rows_list, "window heights")->capture_default_str();
  app.add_option("--granules", granules_list, "k granules (the first one is the headline)")
      ->capture_default_str();
  app.add_option("--candidates", base.candidates, "greedy: candidate rows a window compares")
      ->capture_default_str();
  app.add_option("--scan", base.scan_rows, "greedy: column-index entries a window reads")
      ->capture_default_str();
  app.add_option("--fallback", base.fallback_fraction,
                 "CUDA-core fallback above this fraction of K (1: never)")
      ->capture_default_str();
  app.add_option("--limit", limit, "at most this many matrices a suite (0: all)")->capture_default_str();
  app.add_option("--json", json_path, "write every result and the summary as JSON");
  CLI11_PARSE(app, argc, argv);

  try {
    const std::vector<std::int64_t> heights = parse_ints(rows_list, "--rows");
    const std::vector<std::int64_t> granules = parse_ints(granules_list, "--granules");
    std::vector<Config> configs;
    for (const std::int64_t h : heights)
      for (const WindowReorder r : {WindowReorder::none, WindowReorder::greedy})
        for (const std::int64_t g : granules) {
          WindowOptions o = base;
          o.window_rows = h;
          o.reorder = r;
          o.k_granule = g;
          check_window_options(o);
          configs.push_back({h, r, g});
        }
    std::vector<Suite> suite_list;
    for (const std::string& name : split_list(suites)) suite_list.push_back(make_suite(name, data, limit));

    fmt::print("sparsecc_windows on {}; data {}\n", cpu_model(), data);
    nlohmann::json results = nlohmann::json::array(), summary = nlohmann::json::array();
    nlohmann::json sample_plan;  // to_json of the first plan, to show the planner's summary
    int failures = 0;
    for (const Suite& suite : suite_list) {
      fmt::print("\n== {}: {} ({} matrices)\n", suite.name, suite.description, suite.entries.size());
      fmt::print("{:<52} {:>11} {:>9} {:>6} {:>5}", "matrix", "MxK", "nnz", "sp%", "load");
      for (const std::int64_t h : heights) fmt::print("  h{:<2} none/greedy", h);
      fmt::print("   (kept %, granule {})\n", granules.front());
      std::map<Config, Accumulator> acc;
      for (const Entry& entry : suite.entries) {
        const double t0 = now_s();
        CsrMatrix a;
        try {
          a = entry.load();
        } catch (const std::exception& e) {
          fmt::print(stderr, "{}: {}\n", entry.name, e.what());
          ++failures;
          continue;
        }
        const double load_s = now_s() - t0;
        const double sparsity = 1.0 - static_cast<double>(a.nnz()) / static_cast<double>(a.rows * a.cols);
        std::map<Config, CondensedWindows> plans;
        nlohmann::json configs_json = nlohmann::json::array();
        for (const Config& c : configs) {
          WindowOptions o = base;
          o.window_rows = c.rows;
          o.reorder = c.reorder;
          o.k_granule = c.granule;
          const double p0 = now_s();
          CondensedWindows w = plan_condensed_windows(a, o);
          const double plan_s = now_s() - p0;
          try {
            check_condensed_windows(a, w);
          } catch (const std::exception& e) {
            fmt::print(stderr, "{} h {} {} granule {}: {}\n", entry.name, c.rows,
                       window_reorder_name(c.reorder), c.granule, e.what());
            ++failures;
          }
          Accumulator& s = acc[c];
          s.shares.push_back(w.kept_share());
          s.kept += static_cast<double>(w.kept_work + w.cuda_core_nnz) * entry.count;
          s.dense += static_cast<double>(w.dense_work) * entry.count;
          s.seconds += plan_s;
          s.reordered += w.reordered;
          configs_json.push_back({c.rows, window_reorder_name(c.reorder), c.granule, w.kept_share(),
                                  w.useful_fraction(), w.reordered, w.cuda_core_nnz, plan_s});
          if (sample_plan.is_null()) sample_plan = to_json(w);
          plans.emplace(c, std::move(w));
        }
        results.push_back({{"suite", suite.name},
                           {"matrix", entry.name},
                           {"rows", a.rows},
                           {"cols", a.cols},
                           {"nnz", a.nnz()},
                           {"count", entry.count},
                           {"load_seconds", load_s},
                           {"configs", std::move(configs_json)}});
        fmt::print("{:<52} {:>11} {:>9} {:>6.2f} {:>5.2f}", entry.name.substr(0, 52),
                   fmt::format("{}x{}", a.rows, a.cols), a.nnz(), 100 * sparsity, load_s);
        for (const std::int64_t h : heights)
          fmt::print("  {:>6.1f} / {:>6.1f}",
                     100 * plans.at({h, WindowReorder::none, granules.front()}).kept_share(),
                     100 * plans.at({h, WindowReorder::greedy, granules.front()}).kept_share());
        fmt::print("\n");
        std::fflush(stdout);
      }
      fmt::print(
          "\n{} summary: kept share of dense work (geomean over matrices | aggregate, count-weighted), "
          "bound 1/share, planner seconds (sum)\n",
          suite.name);
      fmt::print("{:>4} {:>7} {:>7} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9}\n", "h", "order", "granule",
                 "geomean%", "aggr%", "bound", "bound agg", "reordered", "plan s");
      for (const Config& c : configs) {
        const Accumulator& s = acc[c];
        if (s.shares.empty()) continue;
        const double g = geomean(s.shares), aggr = s.kept / s.dense;
        fmt::print("{:>4} {:>7} {:>7} {:>9.1f} {:>9.1f} {:>8.2f}x {:>8.2f}x {:>6}/{:<3} {:>9.2f}\n", c.rows,
                   window_reorder_name(c.reorder), c.granule, 100 * g, 100 * aggr, 1 / g, 1 / aggr,
                   s.reordered, s.shares.size(), s.seconds);
        summary.push_back({{"suite", suite.name},
                           {"description", suite.description},
                           {"window_rows", c.rows},
                           {"reorder", window_reorder_name(c.reorder)},
                           {"k_granule", c.granule},
                           {"matrices", s.shares.size()},
                           {"kept_share_geomean", g},
                           {"kept_share_aggregate", aggr},
                           {"bound_geomean", 1 / g},
                           {"bound_aggregate", 1 / aggr},
                           {"reordered", s.reordered},
                           {"plan_seconds", s.seconds}});
      }
    }
    if (!json_path.empty()) {
      nlohmann::json out = {{"program", "sparsecc_windows"},
                            {"cpu", cpu_model()},
                            {"data", data},
                            {"options",
                             {{"suites", suites},
                              {"rows", heights},
                              {"granules", granules},
                              {"candidates", base.candidates},
                              {"scan_rows", base.scan_rows},
                              {"fallback_fraction", base.fallback_fraction},
                              {"limit", limit}}},
                            {"config_fields",
                             {"window_rows", "reorder", "k_granule", "kept_share", "useful_fraction",
                              "reordered", "cuda_core_nnz", "plan_seconds"}},
                            {"sample_plan", sample_plan}};
      std::ofstream f(json_path);
      if (!f) throw_in_file(json_path, "cannot be written");
      // One summary row and one matrix a line.
      std::string text = out.dump(1);
      text.pop_back();  // the closing brace
      text.pop_back();  // the newline before it
      for (const auto& [key, rows] : {std::pair{"summary", &summary}, std::pair{"results", &results}}) {
        text += fmt::format(",\n \"{}\": [", key);
        for (std::size_t i = 0; i < rows->size(); ++i) text += (i ? ",\n  " : "\n  ") + (*rows)[i].dump();
        text += "\n ]";
      }
      text += "\n}";
      f << text << "\n";
    }
    return failures ? 1 : 0;
  } catch (const UsageError& e) {
    fmt::print(stderr, "sparsecc_windows: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "sparsecc_windows: {}\n", e.what());
    return 1;
  }
}
