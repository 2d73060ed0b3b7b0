#include "sparsecc/tune/predictor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/json_input.hpp"
#include "sparsecc/emit/spmm_ptx.hpp"

namespace sparsecc::tune {

namespace {

using json = nlohmann::json;

// The machine's figures (SMs, clock, registers, threads, blocks and shared memory per SM, DRAM and L2
// bandwidth) come from the GpuTarget; the constants below are the model's: rates measured on the H100
// and fitted numbers.
constexpr double kColdCyclesPerInstruction = 14;  // a warp running code not yet in its SM's cache
constexpr double kSupplyPerCycle = 1;             // instructions an SM's cache hands its schedulers
constexpr double kFetchBytesPerCycle = 2;         // instruction fetch per SM from L2
constexpr double kIssuePerCycle = 4;              // warp instructions per SM per cycle
// Nominal instruction fetch (fetch_us) up to which the other work hides it (fetch_excess_us), chosen
// by cross-validation over the ResNet-50 timings (9-12 us score alike).
constexpr double kFetchHiddenUs = 10;
constexpr double kBarrierCycles = 64;
constexpr double kInstructionBytes = 16;
// Rolled plans (not in the fitted timings; modelled on the same scale, and ranked only against each
// other by `compile --db`): the loop's code, fetched once, and the cost of one round trip to L2 (for
// the step records or for the B rows they name; see the round trips in spmm_features), counted in
// cold-instruction equivalents so the latency term's coefficient applies.
constexpr double kRolledCodeInstructions = 256;
constexpr double kRolledRoundTripCycles = 400;

const std::vector<std::string>& names() {
  static const std::vector<std::string> n{"launch",  "bound_us",  "fetch_us",  "issue_us",
                                          "dram_us", "reduce_us", "imbalance", "l2_us"};
  return n;
}

// The features followed by the terms derived from them (see spmm_predictor_terms).
const std::vector<std::string>& term_names() {
  static const std::vector<std::string> n = [] {
    std::vector<std::string> t = names();
    t.push_back("bound_imbalance_us");
    t.push_back("fetch_excess_us");
    return t;
  }();
  return n;
}

// Registers a thread of the kernel takes: the plan's cap, or what lets one block fit the SM where
// that is less (ptxas keeps to it through .maxntid); fp32 plans that the PTX emitter writes in the
// split layout (every block row a function) take the split layout's cap.
std::int64_t kernel_registers(const SpmmPlan& p, const GpuTarget& target) {
  std::int64_t regs =
      std::min<std::int64_t>(std::max<std::int64_t>({p.hints.max_registers, p.hints.estimated_registers, 1}),
                             target.registers_per_sm / std::max(p.layout.block_x, 1) / 8 * 8);
  if (spmm_ptx_splits(p))
    regs = std::max<std::int64_t>(spmm_ptx_split_registers(p, target), p.hints.estimated_registers);
  return std::max<std::int64_t>(ceil_div(regs, 8) * 8, 8);
}

// Blocks of the plan one SM holds at once (at least 1).
std::int64_t resident_blocks(const SpmmPlan& p, const GpuTarget& target) {
  const std::int64_t warps = std::max<std::int64_t>(1, ceil_div(p.layout.block_x, 32));
  const std::int64_t unit = std::max(target.register_allocation_unit, 1);
  const std::int64_t regs_per_warp = ceil_div(kernel_registers(p, target) * 32, unit) * unit;
  const std::int64_t by_threads = target.max_threads_per_sm / (warps * 32);
  const std::int64_t by_registers = target.registers_per_sm / (warps * regs_per_warp);
  const std::int64_t by_shared = target.shared_per_sm / (std::max<std::int64_t>(p.layout.shared_bytes, 0) +
                                                         target.shared_reserved_per_block);
  return std::max<std::int64_t>(
      1, std::min({std::int64_t{target.max_blocks_per_sm}, by_threads, by_registers, by_shared}));
}

// Warps with at least one live column, summed over the column tiles, for one thread group.
std::int64_t live_warps_over_tiles(const SpmmPlan& p, std::int64_t n) {
  const std::int64_t bc = std::max<std::int64_t>(1, p.block_columns());
  const std::int64_t cpt = std::max<std::int32_t>(1, p.layout.cols_per_thread);
  const std::int64_t full = n / bc;
  const std::int64_t warps_full = ceil_div(std::max(p.layout.n_tile, 1), 32);
  const std::int64_t rest_threads = ceil_div(n - full * bc, cpt);
  return full * warps_full + ceil_div(rest_threads, 32);
}

double finite_or_zero(double v) { return std::isfinite(v) ? v : 0.0; }

}  // namespace

std::vector<std::string> spmm_feature_names() { return names(); }

std::vector<std::string> spmm_predictor_term_names() { return term_names(); }

std::vector<double> spmm_predictor_terms(const std::vector<double>& f) {
  if (f.size() != names().size())
    throw UsageError(
        fmt::format("spmm_predictor_terms: {} feature values for the {} features", f.size(), names().size()));
  std::vector<double> t = f;
  t.push_back(f[1] * f[6]);                           // bound_imbalance_us = bound_us x imbalance
  t.push_back(std::max(0.0, f[2] - kFetchHiddenUs));  // fetch_excess_us
  return t;
}

std::vector<double> spmm_features(const SpmmPlan& plan, const CsrMatrix& a, const GpuTarget& target) {
  const SpmmProblem& pr = plan.problem;
  if (pr.m != a.rows || pr.k != a.cols)
    throw UsageError(
        fmt::format("spmm_features: the plan is for {}x{} but A is {}x{}", pr.m, pr.k, a.rows, a.cols));
  if (plan.layout.n_tile < 1 || plan.layout.block_x < 1 || plan.layout.cols_per_thread < 1)
    throw UsageError("spmm_features: the plan has no launch configuration (n_tile, block_x)");
  const std::int64_t n = std::max<std::int64_t>(pr.n, 1);
  const std::int64_t tiles = std::max<std::int64_t>(1, plan.column_tiles(n));
  const std::int64_t block_rows = std::max<std::int64_t>(1, plan.block_rows());
  const std::int64_t grid = block_rows * tiles;
  const std::int64_t groups = std::max(plan.layout.groups, 1);
  const std::int64_t sms = std::max(target.sm_count, 1);
  const double sms_d = static_cast<double>(sms);
  const double cycles_per_us = target.clock_mhz;  // sustained SM clock under load, MHz
  const std::int64_t resident = resident_blocks(plan, target);
  const double waves = static_cast<double>(ceil_div(grid, resident * sms));
  const std::int64_t busiest = ceil_div(grid, sms);  // blocks of the busiest SM
  const double rounds = static_cast<double>(ceil_div(busiest, resident));
  const std::int64_t live_warps = live_warps_over_tiles(plan, n);  // one group's, all tiles
  // SMSPs a group's warps run on, each fetching the group's code into its own instruction cache.
  const double smsps_per_group =
      static_cast<double>(std::clamp<std::int64_t>(ceil_div(plan.layout.n_tile, 32), 1, 4));
  const bool streamed = plan.value_mode() == SpmmValueMode::streamed;
  const bool rolled = plan.value_mode() == SpmmValueMode::rolled;
  const double record_loads = rolled ? spmm_rolled_record_words(plan) / 4 : 0;
  const bool warp_groups =
      plan.layout.n_tile % 32 == 0;  // rolled: a group's warps share its records by shuffles
  // Two FMAs an entry where a thread owns two columns summed separately (half in fp32, fp32 pairs).
  const double fma_per_entry =
      (plan.half() && plan.epilogue.accumulate == DType::f32) || plan.fp32_pairs() ? 2 : 1;
  const double in_bytes = plan.half() ? 2 : 4;
  const std::int64_t fk = plan.fragment_k();
  const double fragment_instructions = fk ? 1.0 + 8.0 * (fk / 2 + fk / 4 + 1) : 0.0;
  const double fragment_bytes = 32.0 * fk;  // one fragment's operand words: 8 * fk of 4 bytes

  double code_instructions = 0;    // every block row's code
  double thread_instructions = 0;  // summed over block rows and groups, per thread
  double path_sum = 0;             // block rows' critical paths (their slowest group)
  double supply_sum = 0;           // block rows' instructions times the SMSPs fetching them
  double fragments = 0, unrolled_nnz = 0;
  double steps_all = 0;  // steps of every group of every block row
  double max_nnz = 0, total_nnz = 0;
  bool reduces_any = false;
  for (const SpmmBlockRow& b : plan.layout.blocks) {
    const double rows = static_cast<double>(b.row_end - b.row_begin);
    const bool reduces = groups > 1 && spmm_block_reduces(plan, b);
    reduces_any = reduces_any || reduces;
    // Group 0's epilogue: the other groups' sums, bias, ReLU, address and store per row.
    const double epilogue0 = rows * (2.0 + (reduces ? 2.0 * static_cast<double>(groups - 1) : 0.0) +
                                     (pr.bias ? 2.0 : 0.0) + (pr.relu ? 1.0 : 0.0));
    const double hand_over = reduces ? rows : 0.0;  // groups 1..: one shared store per row
    double block_code = epilogue0 + (reduces ? rows * static_cast<double>(groups - 1) : 0.0);
    double block_path = 0;
    for (std::int64_t g = 0; g < static_cast<std::int64_t>(b.groups.size()); ++g) {
      const SpmmGroup& group = b.groups[static_cast<std::size_t>(g)];
      const double steps = static_cast<double>(group.steps.size());
      steps_all += steps;
      double entries = 0;
      for (const SpmmStep& s : group.steps) entries += static_cast<double>(s.entries.size());
      const auto [f0, f1] = spmm_group_fragments(b, plan.layout.groups, static_cast<std::int32_t>(g));
      const double frags = static_cast<double>(f1 - f0);
      // Per thread: the B address and load of every step, the FMAs (two for a pair of columns summed
      // apart), the value loads of streamed plans, the fragments, and zeroing the accumulators.
      // Rolled: per step its record loads (a warp-wide group: one shuffle for k and one a row
      // instead), the k, two B addresses and loads, two FMAs a row of the block row (zeros
      // included), and the round trips.
      const double ny = static_cast<double>(plan.layout.rows_per_block);
      const double step_words = warp_groups ? 1.0 + ny : record_loads;
      const double body = rolled ? steps * (step_words + 5.0 + 2.0 * ny) + 2.0 * ny
                                 : 2.0 * steps + fma_per_entry * entries + (streamed ? entries : 0.0) +
                                       frags * fragment_instructions + rows;
      // Round trips. A warp-wide group: one for the table per 32 steps and one for B per batch
      // (the last one partial). Narrower: the table and B once each per batch, and once per step
      // of the remainder (that loop is not batched).
      const double trips =
          warp_groups ? std::ceil(steps / 32.0) + std::ceil(steps / kSpmmRolledBatch)
                      : 2.0 * (std::floor(steps / kSpmmRolledBatch) + std::fmod(steps, kSpmmRolledBatch));
      const double waits = rolled ? trips * kRolledRoundTripCycles / kColdCyclesPerInstruction : 0.0;
      const double path = body + (g == 0 ? epilogue0 : hand_over);
      block_path = std::max(block_path, path + waits);
      // A rolled loop sits in every SMSP's cache: its instructions are supplied 4 at a time.
      supply_sum += rolled ? path / 4.0 : path * smsps_per_group;
      thread_instructions += path;
      if (!rolled) block_code += body + 2.0;  // the group's entry and exit branches
      fragments += frags;
      unrolled_nnz += entries;
    }
    path_sum += block_path;
    if (!rolled) code_instructions += block_code;
    double nnz = 0;
    if (b.row_begin >= 0 && b.row_end <= a.rows && b.row_begin <= b.row_end)
      for (std::int64_t r = b.row_begin; r < b.row_end; ++r)
        nnz += static_cast<double>(a.row_nnz(spmm_row(plan, r)));
    max_nnz = std::max(max_nnz, nnz);
    total_nnz += nnz;
  }
  if (rolled) code_instructions = kRolledCodeInstructions;
  const double rows_d = static_cast<double>(block_rows);
  const double busiest_d = static_cast<double>(busiest);
  // Latency: rounds of resident blocks, each as long as the average block row's critical path run
  // cold; supply: the busiest SM's instructions as its SMSPs fetch them.
  const double latency_cycles = rounds * path_sum / rows_d * kColdCyclesPerInstruction;
  const double supply_cycles = busiest_d * supply_sum / rows_d / kSupplyPerCycle;
  const double code_bytes = code_instructions * kInstructionBytes;
  const double fetch_bytes_per_sm = code_bytes * std::min<double>(static_cast<double>(tiles), sms_d) / sms_d;
  // Issue: warp instructions of the average block times the blocks of the busiest SM.
  const double warp_instructions = thread_instructions * static_cast<double>(live_warps);
  const double issue_cycles = warp_instructions / static_cast<double>(grid) * busiest_d / kIssuePerCycle;
  const double nd = static_cast<double>(n);
  const double dram_bytes = static_cast<double>(pr.k) * nd * in_bytes +
                            static_cast<double>(pr.m) * nd * in_bytes +
                            (streamed ? unrolled_nnz * 4.0 : 0.0) + fragments * fragment_bytes +
                            (rolled ? record_loads * 16.0 * static_cast<double>(spmm_plan_loads(plan)) : 0.0);
  // Every step reads its row of B across the columns of each column tile: N columns in all.
  const double l2_bytes = steps_all * nd * in_bytes;
  const double reduce_cycles =
      reduces_any ? kBarrierCycles + 2.0 * static_cast<double>(groups - 1) * plan.layout.rows_per_block : 0.0;
  const double mean_nnz = total_nnz / rows_d;

  std::vector<double> f{1.0,
                        std::max(latency_cycles, supply_cycles) / cycles_per_us,
                        fetch_bytes_per_sm / kFetchBytesPerCycle / cycles_per_us,
                        issue_cycles / cycles_per_us,
                        dram_bytes / target.dram_bytes_per_us,
                        waves * reduce_cycles / cycles_per_us,
                        mean_nnz > 0 ? max_nnz / mean_nnz - 1.0 : 0.0,
                        l2_bytes / target.l2_bytes_per_us};
  for (double& v : f) v = finite_or_zero(v);
  return f;
}

json features_json(const std::vector<double>& f) {
  const auto& n = names();
  if (f.size() != n.size())
    throw UsageError(fmt::format("features_json: {} values for {} features", f.size(), n.size()));
  json j = json::object();
  for (std::size_t i = 0; i < n.size(); ++i) j[n[i]] = f[i];
  return j;
}

std::vector<double> features_from_json(const json& j) {
  if (!j.is_object()) throw UsageError("predictor features: expected an object {name: number}");
  std::vector<double> f;
  for (const std::string& name : names()) {
    const auto it = j.find(name);
    if (it == j.end()) throw UsageError(fmt::format("predictor features: feature '{}' is missing", name));
    if (!it->is_number())
      throw UsageError(fmt::format("predictor features: feature '{}' is not a number", name));
    f.push_back(it->get<double>());
  }
  return f;
}

double Predictor::predict_us(const std::vector<double>& f) const {
  const auto& all = term_names();
  if (f.size() != names().size())
    throw UsageError(
        fmt::format("predict_us: {} feature values for the {} features", f.size(), names().size()));
  if (coefficients.size() != features.size())
    throw UsageError(
        fmt::format("predict_us: {} coefficients for {} terms", coefficients.size(), features.size()));
  const std::vector<double> x = spmm_predictor_terms(f);
  double t = 0;
  if (features == all) {
    for (std::size_t i = 0; i < x.size(); ++i) t += coefficients[i] * x[i];
  } else {
    for (std::size_t i = 0; i < features.size(); ++i) {
      const auto it = std::find(all.begin(), all.end(), features[i]);
      if (it == all.end()) throw UsageError(fmt::format("predict_us: unknown term '{}'", features[i]));
      t += coefficients[i] * x[static_cast<std::size_t>(it - all.begin())];
    }
  }
  return std::isfinite(t) ? std::max(t, 1e-3) : std::numeric_limits<double>::max();
}

json to_json(const Predictor& p) {
  json c = json::object();
  for (std::size_t i = 0; i < p.features.size() && i < p.coefficients.size(); ++i)
    c[p.features[i]] = p.coefficients[i];
  // nlohmann's object keeps keys sorted; the order of `features` is kept separately.
  return {{"version", p.version},
          {"fitted_on", p.fitted_on},
          {"samples", p.samples},
          {"features", p.features},
          {"coefficients", c}};
}

Predictor load_predictor(const std::string& path) {
  return predictor_from_json(read_json_file(path, kMaxPredictorBytes, "predictor"), path);
}

Predictor predictor_from_json(const json& j, const std::string& name) {
  const auto fail = [&](const std::string& field, const std::string& what) -> void {
    throw InputError(SourceLocation::in_file(name), fmt::format("predictor field '{}': {}", field, what));
  };
  if (!j.is_object()) fail("(document)", "expected a JSON object");
  for (const char* key : {"version", "fitted_on", "samples", "features", "coefficients"})
    if (!j.contains(key)) fail(key, "missing");
  Predictor p;
  if (!j["version"].is_number_integer()) fail("version", "expected an integer");
  p.version = j["version"].get<int>();
  if (p.version != kSpmmFeatureVersion)
    fail("version", fmt::format("{} is not this build's feature version {}; refit the predictor", p.version,
                                kSpmmFeatureVersion));
  if (!j["fitted_on"].is_string()) fail("fitted_on", "expected a string");
  p.fitted_on = j["fitted_on"].get<std::string>();
  if (!j["samples"].is_number_integer() || j["samples"].get<std::int64_t>() < 0)
    fail("samples", "expected a non-negative integer");
  p.samples = j["samples"].get<std::int64_t>();
  const json& fs = j["features"];
  const json& cs = j["coefficients"];
  if (!fs.is_array() || fs.empty()) fail("features", "expected a non-empty array of term names");
  if (!cs.is_object()) fail("coefficients", "expected an object {feature: number}");
  const auto& all = term_names();
  for (const json& f : fs) {
    if (!f.is_string()) fail("features", "expected term names (strings)");
    const std::string s = f.get<std::string>();
    if (std::find(all.begin(), all.end(), s) == all.end())
      fail("features", fmt::format("unknown term '{}'", s));
    if (std::find(p.features.begin(), p.features.end(), s) != p.features.end())
      fail("features", fmt::format("term '{}' listed twice", s));
    const auto it = cs.find(s);
    if (it == cs.end()) fail("coefficients." + s, "missing");
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0)
      fail("coefficients." + s, "expected a finite non-negative number");
    p.features.push_back(s);
    p.coefficients.push_back(it->get<double>());
  }
  for (const auto& [key, value] : cs.items())
    if (std::find(p.features.begin(), p.features.end(), key) == p.features.end())
      fail("coefficients." + key, "not in 'features'");
  return p;
}

const Predictor& shipped_predictor() {
  static const Predictor p = [] {
    const std::string source = "generator/tune/data/spmm_predictor.json (built in)";
    json j;
    try {
      j = json::parse(shipped_predictor_json());
    } catch (const json::exception& e) {
      throw InputError(SourceLocation::in_file(source), fmt::format("not JSON: {}", e.what()));
    }
    return predictor_from_json(j, source);
  }();
  return p;
}

Predictor fit_predictor(const std::vector<PredictorSample>& samples, const std::string& fitted_on) {
  const std::size_t nf = names().size();
  const auto& all = term_names();
  const std::size_t d = all.size();
  if (samples.empty()) throw UsageError("fit_predictor: no samples");
  // Samples by problem, problems in order of first appearance, samples in input order.
  std::vector<std::vector<std::size_t>> problems;
  std::map<std::string, std::size_t> problem_index;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const PredictorSample& s = samples[i];
    if (s.features.size() != nf)
      throw UsageError(fmt::format("fit_predictor: sample {} ({}) has {} features, expected {}", i, s.problem,
                                   s.features.size(), nf));
    for (double v : s.features)
      if (!std::isfinite(v))
        throw UsageError(fmt::format("fit_predictor: sample {} ({}) has a non-finite feature", i, s.problem));
    if (!(s.median_us > 0) || !std::isfinite(s.median_us))
      throw UsageError(fmt::format("fit_predictor: sample {} ({}) has time {}, expected a positive number", i,
                                   s.problem, s.median_us));
    const auto [it, fresh] = problem_index.try_emplace(s.problem, problems.size());
    if (fresh) problems.emplace_back();
    problems[it->second].push_back(i);
  }
  // Normal equations. A problem's rows are a_i = x_i / t_i (target 1, weight 1 / n_p) for the
  // relative error of the times, and the same rows with the problem's constant eliminated, a_i and
  // the target each minus u_i (sum_k u_k a_k) / (sum_k u_k^2) with u_i = 1 / t_i, for the relative
  // error of the differences (weight alpha / n_p).
  constexpr double kRankWeight = 5;  // alpha
  std::vector<double> g(d * d, 0.0), h(d, 0.0);
  std::vector<double> a, pa(d), row(d);
  for (const std::vector<std::size_t>& members : problems) {
    const std::size_t n = members.size();
    const double w = 1.0 / static_cast<double>(n);
    a.assign(n * d, 0.0);
    std::vector<double> u(n);
    double uu = 0, uy = 0;
    std::fill(pa.begin(), pa.end(), 0.0);
    for (std::size_t r = 0; r < n; ++r) {
      const PredictorSample& s = samples[members[r]];
      const std::vector<double> x = spmm_predictor_terms(s.features);
      u[r] = 1.0 / s.median_us;
      for (std::size_t j = 0; j < d; ++j) a[r * d + j] = x[j] / s.median_us;
      uu += u[r] * u[r];
      uy += u[r];
      for (std::size_t j = 0; j < d; ++j) pa[j] += u[r] * a[r * d + j];
    }
    for (std::size_t r = 0; r < n; ++r) {
      const double* ar = &a[r * d];
      // Relative error of the times.
      for (std::size_t j = 0; j < d; ++j) {
        h[j] += w * ar[j];
        for (std::size_t k = 0; k < d; ++k) g[j * d + k] += w * ar[j] * ar[k];
      }
      // Relative error of the differences: the row and target projected off u.
      const double scale = u[r] / uu;
      for (std::size_t j = 0; j < d; ++j) row[j] = ar[j] - scale * pa[j];
      const double y = 1.0 - scale * uy;
      for (std::size_t j = 0; j < d; ++j) {
        h[j] += kRankWeight * w * row[j] * y;
        for (std::size_t k = 0; k < d; ++k) g[j * d + k] += kRankWeight * w * row[j] * row[k];
      }
    }
  }
  const double norm = static_cast<double>(problems.size()) * (1.0 + kRankWeight);
  for (double& v : g) v /= norm;
  for (double& v : h) v /= norm;
  // Scale-free ridge: lambda * s_j^2 with s_j^2 = G_jj.
  constexpr double kLambda = 1e-4;
  for (std::size_t j = 0; j < d; ++j) g[j * d + j] *= 1.0 + kLambda;
  // Cyclic projected coordinate descent from 0 (terms that are 0 everywhere keep coefficient 0).
  std::vector<double> c(d, 0.0);
  for (int sweep = 0; sweep < 200000; ++sweep) {
    double change = 0, size = 0;
    for (std::size_t j = 0; j < d; ++j) {
      const double gjj = g[j * d + j];
      if (!(gjj > 0)) continue;
      double grad = -h[j];
      for (std::size_t k = 0; k < d; ++k) grad += g[j * d + k] * c[k];
      const double next = std::max(0.0, c[j] - grad / gjj);
      change = std::max(change, std::fabs(next - c[j]) * std::sqrt(gjj));
      size = std::max(size, std::fabs(next) * std::sqrt(gjj));
      c[j] = next;
    }
    if (change <= 1e-13 * std::max(size, 1e-300)) break;
  }
  Predictor p;
  p.version = kSpmmFeatureVersion;
  p.fitted_on = fitted_on;
  p.samples = static_cast<std::int64_t>(samples.size());
  p.features = all;
  p.coefficients = c;
  return p;
}

std::vector<std::size_t> rank_candidates(const Predictor& p,
                                         const std::vector<std::vector<double>>& features) {
  std::vector<double> t;
  t.reserve(features.size());
  for (const auto& f : features) t.push_back(p.predict_us(f));
  std::vector<std::size_t> order(features.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return t[x] < t[y]; });
  return order;
}

PredictorEvaluation evaluate_predictor(const Predictor& p, const std::vector<PredictorSample>& samples,
                                       bool fold_variants) {
  // Problems in order of first appearance.
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::size_t>> members;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    auto [it, fresh] = members.try_emplace(samples[i].problem);
    if (fresh) order.push_back(samples[i].problem);
    it->second.push_back(i);
  }
  // The plan a sample times: its own, unless it is a tuner's variant of another (folded).
  const auto plan_of = [&](std::size_t i) {
    return fold_variants && !samples[i].plan.empty() ? samples[i].plan : fmt::format("#{}", i);
  };
  PredictorEvaluation e;
  double top1 = 0, top3 = 0, log_sum = 0;
  for (const std::string& problem : order) {
    const auto& all = members[problem];
    std::vector<std::size_t> idx;  // the ranked samples
    for (std::size_t i : all)
      if (!(fold_variants && samples[i].variant)) idx.push_back(i);
    if (idx.size() < 2) continue;
    std::vector<std::vector<double>> f;
    for (std::size_t i : idx) f.push_back(samples[i].features);
    const std::vector<std::size_t> ranked = rank_candidates(p, f);
    double best = std::numeric_limits<double>::infinity();
    std::size_t best_sample = all.front();
    for (std::size_t i : all)
      if (samples[i].median_us < best) {
        best = samples[i].median_us;
        best_sample = i;
      }
    const double chosen = samples[idx[ranked[0]]].median_us;
    std::size_t best_rank = ranked.size() + 1;  // past the end: the best is a variant of no ranked plan
    for (std::size_t r = 0; r < ranked.size(); ++r) {
      const std::size_t i = idx[ranked[r]];
      if (samples[i].median_us <= best || plan_of(i) == plan_of(best_sample)) {
        best_rank = r + 1;
        break;
      }
    }
    const double ratio = chosen / best;
    ++e.problems;
    top1 += ratio <= 1.10 ? 1 : 0;
    top3 += best_rank <= 3 ? 1 : 0;
    log_sum += std::log(ratio);
    e.per_problem.push_back({{"problem", problem},
                             {"candidates", idx.size()},
                             {"best_us", best},
                             {"chosen_us", chosen},
                             {"ratio", ratio},
                             {"best_rank", best_rank},
                             {"predicted_best_us", p.predict_us(f[ranked[0]])}});
  }
  if (e.problems > 0) {
    const auto np = static_cast<double>(e.problems);
    e.top1_within_10pct = top1 / np;
    e.top3_contains_best = top3 / np;
    e.geomean_top1_over_best = std::exp(log_sum / np);
  }
  return e;
}

}  // namespace sparsecc::tune
