// The emitted kernels are a function of the matrix and the options alone: for a fixed set of cases
// (synthetic matrices of every executor family and option, the shipped example cell, and where the
// shared data is present the SparseRT suite and real cells), the text every emitter produces — with
// the values and fragment arrays it hands the bundle — hashes to the value recorded in
// tests/data/emit_golden.json. A change that alters any kernel fails here; one that means to
// regenerates the file with SPARSECC_UPDATE_GOLDEN=1 and says why in its commit.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../../tools/bench/suites.hpp"
#include "sparsecc/emit/hines_cuda.hpp"
#include "sparsecc/emit/spmm_ptx.hpp"
#include "sparsecc/inspector/hines_planner.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/neuron/forest.hpp"
#include "sparsecc/plan/hines_schedule.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

// FNV-1a over bytes, as 16 hex digits.
struct Fnv {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  void add(const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ULL;
  }
  void add(const std::string& s) {
    const std::uint64_t n = s.size();
    add(&n, sizeof n);
    add(s.data(), s.size());
  }
  std::string hex() const {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
  }
};

std::string hash_kernel(const EmittedKernel& k) {
  Fnv f;
  f.add(std::string(to_string(k.language)));
  f.add(k.kernel_name);
  f.add(k.source);
  for (const auto& m : k.modules) f.add(m);
  f.add(&k.max_registers, sizeof k.max_registers);
  f.add(&k.opt_level, sizeof k.opt_level);
  f.add(k.packed_values.data(), k.packed_values.size() * sizeof(float));
  f.add(k.fragment_words.data(), k.fragment_words.size() * sizeof(std::uint32_t));
  return f.hex();
}

struct SpmmCase {
  std::string name;
  std::int64_t n = 16;
  bool runtime_n = false, bias = false, relu = false;
  std::string dtype = "f32";
  KernelLanguage language = KernelLanguage::ptx;
  std::function<void(SpmmOptions&)> options = [](SpmmOptions&) {};
};

std::vector<SpmmCase> synthetic_cases() {
  using L = KernelLanguage;
  return {
      {"auto_ptx", 16},
      {"auto_cuda", 16, false, false, false, "f32", L::cuda},
      {"runtime_bias_relu_ptx", 64, true, true, true},
      {"runtime_bias_relu_cuda", 64, true, true, true, "f32", L::cuda},
      {"n1_ptx", 1},
      {"n256_ptx", 256},
      {"n2048_ptx", 2048},
      {"streamed_ptx", 64, false, false, false, "f32", L::ptx,
       [](SpmmOptions& o) { o.value_mode = SpmmValueMode::streamed; }},
      {"streamed_cuda", 64, false, false, false, "f32", L::cuda,
       [](SpmmOptions& o) { o.value_mode = SpmmValueMode::streamed; }},
      {"rolled_n16", 16, false, false, false, "f32", L::cuda,
       [](SpmmOptions& o) { o.value_mode = SpmmValueMode::rolled; }},
      {"rolled_n4_lanes", 4, false, true, true, "f32", L::cuda,
       [](SpmmOptions& o) { o.value_mode = SpmmValueMode::rolled; }},
      {"rolled_runtime", 64, true, false, false, "f32", L::cuda,
       [](SpmmOptions& o) { o.value_mode = SpmmValueMode::rolled; }},
      {"staged_ptx", 32, false, false, false, "f32", L::ptx, [](SpmmOptions& o) { o.stage_min_entries = 2; }},
      {"staged_cuda", 32, false, false, false, "f32", L::cuda,
       [](SpmmOptions& o) { o.stage_min_entries = 2; }},
      {"clustered_ptx", 64, false, false, false, "f32", L::ptx,
       [](SpmmOptions& o) { o.row_split = SpmmRowSplit::clustered; }},
      {"balanced_ptx", 64, false, false, false, "f32", L::ptx,
       [](SpmmOptions& o) { o.row_split = SpmmRowSplit::balanced; }},
      {"pairs_ptx", 64, false, false, false, "f32", L::ptx, [](SpmmOptions& o) { o.cols_per_thread = 2; }},
      {"tiles_ptx", 64, false, false, false, "f32", L::ptx,
       [](SpmmOptions& o) {
         o.rows_per_block = 8;
         o.n_tile = 32;
         o.groups = 4;
         o.max_registers = 128;
         o.assembler_opt_level = 1;
       }},
      {"programmatic_off", 16, false, false, false, "f32", L::ptx,
       [](SpmmOptions& o) { o.programmatic = SpmmProgrammatic::off; }},
      {"programmatic_trigger_cuda", 16, false, false, false, "f32", L::cuda,
       [](SpmmOptions& o) { o.programmatic = SpmmProgrammatic::trigger; }},
      {"f16_auto", 64, false, true, true, "f16", L::cuda},
      {"f16_runtime", 64, true, false, false, "f16", L::cuda},
      {"bf16_acc_bf16", 64, false, false, false, "bf16", L::cuda,
       [](SpmmOptions& o) { o.accumulate = DType::bf16; }},
      {"f16_blocklets_auto", 64, false, false, false, "f16", L::cuda,
       [](SpmmOptions& o) { set_blocklets(o, "auto"); }},
      {"f16_blocklets_16x8", 64, false, true, false, "f16", L::cuda,
       [](SpmmOptions& o) { set_blocklets(o, "16x8:0.25"); }},
      {"bf16_blocklets_16x16", 64, false, false, true, "bf16", L::cuda,
       [](SpmmOptions& o) { set_blocklets(o, "16x16:0.1"); }},
      {"f16_blocklets_8x8_runtime", 64, true, false, false, "f16", L::cuda,
       [](SpmmOptions& o) { set_blocklets(o, "8x8:0.25"); }},
  };
}

std::string spmm_hash(const CsrMatrix& a, const SpmmCase& c) {
  SpmmProblem p;
  p.m = a.rows;
  p.k = a.cols;
  p.n = c.n;
  p.n_mode = c.runtime_n ? SpmmNMode::runtime : SpmmNMode::fixed;
  p.bias = c.bias;
  p.relu = c.relu;
  p.dtype = *parse_dtype(c.dtype);
  SpmmOptions o;
  c.options(o);
  const SpmmPlan plan = plan_spmm(a, p, o);
  return hash_kernel(emit_spmm(plan, a, c.language, gpu_target("sm_90")));
}

std::string hines_hash(const HinesSystem& s, std::int32_t rhs, const std::string& dtype,
                       const HinesOptions& o) {
  const HinesPlan plan = plan_hines(s, rhs, dtype, o);
  const EmittedHines e = emit_hines_cuda(plan, schedule_hines(plan));
  Fnv f;
  f.add(e.source);
  for (const auto& k : e.kernels) f.add(k);
  return f.hex();
}

// The recorded hashes, and the ones computed in this run.
class Golden {
 public:
  Golden() : path_(test::source_dir() / "tests" / "data" / "emit_golden.json") {
    const char* env = std::getenv("SPARSECC_UPDATE_GOLDEN");
    update_ = env && *env && std::string(env) != "0";
    std::ifstream in(path_);
    if (in) recorded_ = nlohmann::json::parse(in);
  }
  // Records or checks one case.
  void check(const std::string& name, const std::string& hash) {
    if (update_) {
      recorded_[name] = hash;
      return;
    }
    ASSERT_TRUE(recorded_.contains(name))
        << name << " has no recorded hash in " << path_ << " (SPARSECC_UPDATE_GOLDEN=1 records it)";
    EXPECT_EQ(recorded_[name].get<std::string>(), hash) << name << ": the emitted kernel changed";
  }
  ~Golden() {
    if (!update_) return;
    std::ofstream out(path_);
    out << recorded_.dump(1) << "\n";
  }

 private:
  std::filesystem::path path_;
  bool update_ = false;
  nlohmann::json recorded_ = nlohmann::json::object();
};

TEST(EmitGolden, SyntheticMatricesEveryFamily) {
  Golden golden;
  const std::vector<std::pair<std::string, CsrMatrix>> matrices = {
      {"64x96", test::random_csr(64, 96, 0.1, 1)},
      {"300x200_empty", test::random_csr(300, 200, 0.05, 2, 7, 3)},
      {"1000x512", test::random_csr(1000, 512, 0.02, 3)},
      {"256x256_dense_tiles", test::random_csr(256, 256, 0.4, 4)},
  };
  for (const auto& [mname, a] : matrices)
    for (const SpmmCase& c : synthetic_cases()) {
      SCOPED_TRACE(mname + "/" + c.name);
      golden.check("spmm/" + mname + "/" + c.name, spmm_hash(a, c));
    }
}

TEST(EmitGolden, ExampleCellHines) {
  Golden golden;
  const std::string swc = (test::source_dir() / "kernels_generated/examples/data/example_cell.swc").string();
  for (const int copies : {1, 50})
    for (const std::string dtype : {"f64", "f32"})
      for (const std::int32_t rhs : {1, 4}) {
        const HinesSystem s = load_hines_forest({swc}, copies, 2);
        const std::string name = fmt::format("hines/example_cell/x{}/{}/r{}", copies, dtype, rhs);
        SCOPED_TRACE(name);
        golden.check(name, hines_hash(s, rhs, dtype, {}));
        HinesOptions flat;
        flat.depth = 0;
        golden.check(name + "/depth0", hines_hash(s, rhs, dtype, flat));
      }
}

TEST(EmitGolden, SparsertSuite) {
  SPARSECC_DATA_OR_SKIP(data, "sparsert/mobilenet_v1_sparse90.npz");
  Golden golden;
  for (const double sparsity : {0.9, 0.95})
    for (const bench::BenchProblem& p : bench::sparsert_suite(*data_root, sparsity, 1)) {
      const CsrMatrix a = bench::load_problem_matrix(p);
      const std::string base = fmt::format("sparsert/{}/{}", sparsity, p.name);
      SCOPED_TRACE(base);
      golden.check(base + "/auto_ptx", spmm_hash(a, {"", p.N}));
      golden.check(base + "/auto_cuda",
                   spmm_hash(a, {"", p.N, false, false, false, "f32", KernelLanguage::cuda}));
      golden.check(base + "/rolled_b16",
                   spmm_hash(a, {"", p.N * 16, false, false, false, "f32", KernelLanguage::cuda,
                                 [](SpmmOptions& o) { o.value_mode = SpmmValueMode::rolled; }}));
      golden.check(base + "/f16_b16",
                   spmm_hash(a, {"", p.N * 16, false, true, true, "f16", KernelLanguage::cuda,
                                 [](SpmmOptions& o) { set_blocklets(o, "auto"); }}));
    }
}

TEST(EmitGolden, RealCells) {
  SPARSECC_DATA_OR_SKIP(data, "swc/jaxley/morph_ca1_n120.swc");
  Golden golden;
  for (const std::string cell : {"jaxley/morph_ca1_n120.swc", "jaxley/morph_l5pc_with_axon.swc",
                                 "jaxley/morph_flywire_t4_720575940626407426.swc", "neurom/Neuron.swc"})
    for (const int copies : {1, 500}) {
      const HinesSystem s = load_hines_forest({(*data_root / "swc" / cell).string()}, copies, 1);
      const std::string name = fmt::format("hines/{}/x{}/f64/r1", cell, copies);
      SCOPED_TRACE(name);
      golden.check(name, hines_hash(s, 1, "f64", {}));
    }
}

}  // namespace
}  // namespace sparsecc
