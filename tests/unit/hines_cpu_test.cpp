// Hines on the CPU: plans (grouping by shape, JSON, checks), their interpreter against the
// extended-precision reference, and (where LLVM is built) the emitted IR compiled and run on
// NaN-poisoned outputs, checked bit for bit against the interpreter and against the reference.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/random.hpp"
#include "sparsecc/emit/hines_llvm.hpp"
#include "sparsecc/inspector/hines_cpu_planner.hpp"
#include "sparsecc/neuron/forest.hpp"
#include "sparsecc/plan/hines_cpu_plan.hpp"
#include "sparsecc/reference/hines_accuracy.hpp"
#include "test_support.hpp"
#if SPARSECC_HAVE_LLVM
#include "sparsecc/llvm/hines_jit.hpp"
#endif

using namespace sparsecc;

namespace {

double uniform01(SplitMix64& rng) { return 0.5 * (rng.uniform_pm1() + 1); }

// A random tree of n nodes in post-order numbering (parent[i] > i, the root last): each node hangs
// under one of the next few nodes, so that there are chains and branch points.
std::vector<std::int32_t> random_shape(std::int32_t n, std::uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<std::int32_t> parent(static_cast<std::size_t>(n), -1);
  for (std::int32_t i = 0; i + 1 < n; ++i) {
    const auto reach = static_cast<std::int32_t>(std::min<std::int64_t>(n - 1 - i, 4));
    const double r = uniform01(rng);
    parent[static_cast<std::size_t>(i)] = i + 1 + (r < 0.7 ? 0 : static_cast<std::int32_t>(r * 10) % reach);
  }
  return parent;
}

// A forest of the given shapes, cell c of shape cell_shape[c], with random diagonally dominant
// values (upper and lower negative and unequal, the diagonal above the row's off-diagonal sum).
HinesSystem forest(const std::vector<std::vector<std::int32_t>>& shapes, const std::vector<int>& cell_shape,
                   std::uint64_t seed) {
  SplitMix64 rng(seed);
  HinesSystem s;
  s.cell_offsets = {0};
  for (const int k : cell_shape) {
    const auto start = static_cast<std::int32_t>(s.parent.size());
    for (const std::int32_t q : shapes[static_cast<std::size_t>(k)])
      s.parent.push_back(q < 0 ? -1 : q + start);
    s.cell_offsets.push_back(static_cast<std::int32_t>(s.parent.size()));
  }
  const std::size_t n = s.parent.size();
  s.upper.assign(n, 0);
  s.lower.assign(n, 0);
  s.diag.assign(n, 0);
  std::vector<double> off(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    if (s.parent[i] < 0) continue;
    s.upper[i] = -(0.1 + uniform01(rng));
    s.lower[i] = -(0.1 + uniform01(rng));
    off[i] += -s.upper[i];
    off[static_cast<std::size_t>(s.parent[i])] += -s.lower[i];
  }
  for (std::size_t i = 0; i < n; ++i) s.diag[i] = off[i] + 0.05 + uniform01(rng);
  s.hines_of.resize(n);
  std::iota(s.hines_of.begin(), s.hines_of.end(), 0);
  s.compartment_of = s.hines_of;
  return s;
}

std::vector<double> random_b(std::size_t values, std::uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<double> b(values);
  for (double& v : b) v = rng.uniform_pm1();
  return b;
}

// The system's arrays in the plan's row order, in T.
template <typename T>
struct PlanArrays {
  std::vector<T> d, u, l, b;
  PlanArrays(const HinesSystem& s, const HinesCpuPlan& p, const std::vector<double>& b_hines) {
    const std::vector<std::int32_t> perm = p.permutation();
    const std::size_t r = static_cast<std::size_t>(p.rhs);
    for (const std::int32_t h : perm) {
      d.push_back(static_cast<T>(s.diag[static_cast<std::size_t>(h)]));
      u.push_back(static_cast<T>(s.upper[static_cast<std::size_t>(h)]));
      l.push_back(static_cast<T>(s.lower[static_cast<std::size_t>(h)]));
      for (std::size_t c = 0; c < r; ++c)
        b.push_back(static_cast<T>(b_hines[static_cast<std::size_t>(h) * r + c]));
    }
  }
};

// x (plan order) back in Hines order, as doubles.
template <typename T>
std::vector<double> to_hines(const HinesCpuPlan& p, const std::vector<T>& x) {
  const std::vector<std::int32_t> perm = p.permutation();
  const std::size_t r = static_cast<std::size_t>(p.rhs);
  std::vector<double> out(x.size());
  for (std::size_t k = 0; k < perm.size(); ++k)
    for (std::size_t c = 0; c < r; ++c) out[static_cast<std::size_t>(perm[k]) * r + c] = x[k * r + c];
  return out;
}

template <typename T>
std::size_t differing(const std::vector<T>& a, const std::vector<T>& b) {
  std::size_t n = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    n += std::memcmp(&a[i], &b[i], sizeof(T)) != 0;
  return n;
}

// Two shapes x 11 cells each, interleaved: full groups of 8 (AVX-512 f64) and leftovers.
struct MixedForest {
  std::vector<std::vector<std::int32_t>> shapes;
  HinesSystem s;
  explicit MixedForest(std::int32_t big = 300) {
    shapes = {random_shape(big, 1), random_shape(37, 2)};
    std::vector<int> cells;
    for (int c = 0; c < 22; ++c) cells.push_back(c % 2);
    s = forest(shapes, cells, 3);
  }
};

}  // namespace

TEST(HinesCpuPlan, GroupsCellsByShapeAndTheJsonRoundTrips) {
  const MixedForest f;
  ASSERT_TRUE(validate_hines(f.s).empty()) << validate_hines(f.s).front();
  const HinesCpuPlan p = plan_hines_cpu(f.s, cpu_target("x86-64-avx512"), DType::f64, 3);
  EXPECT_EQ(p.lanes, 8);
  ASSERT_EQ(p.shapes.size(), 2u);
  EXPECT_EQ(p.shapes[0], f.shapes[0]);
  // One full group a shape, then 3 + 3 cells of width 1.
  ASSERT_EQ(p.groups.size(), 8u);
  EXPECT_EQ(p.groups[0].width, 8);
  EXPECT_EQ(p.groups[0].cells, (std::vector<std::int32_t>{0, 2, 4, 6, 8, 10, 12, 14}));
  EXPECT_EQ(p.groups[1].shape, 1);
  EXPECT_EQ(p.groups[1].first_row, 8 * 300);
  for (std::size_t g = 2; g < 8; ++g) EXPECT_EQ(p.groups[g].width, 1);
  EXPECT_EQ(p.groups[2].cells, std::vector<std::int32_t>{16});
  EXPECT_TRUE(check_hines_cpu_plan(p, f.s.parent).empty());
  EXPECT_EQ(p.workspace_elements(), f.s.size());
  // The permutation: node i of lane j of a group at first_row + i * W + j.
  const std::vector<std::int32_t> perm = p.permutation();
  EXPECT_EQ(perm[9], f.s.cell_offsets[2] + 1);  // node 1, lane 1 of group 0 (cell 2)
  std::vector<std::int32_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t k = 0; k < sorted.size(); ++k) ASSERT_EQ(sorted[k], static_cast<std::int32_t>(k));
  EXPECT_EQ(to_json(hines_cpu_plan_from_json(to_json(p))), to_json(p));
  // AVX2 and f32 lanes.
  EXPECT_EQ(plan_hines_cpu(f.s, cpu_target("x86-64-avx2"), DType::f64, 1).lanes, 4);
  EXPECT_EQ(plan_hines_cpu(f.s, cpu_target("x86-64-avx512"), DType::f32, 1).groups.size(), 22u);
  EXPECT_THROW(plan_hines_cpu(f.s, cpu_target("x86-64-avx512"), DType::f16, 1), UsageError);
  EXPECT_THROW(plan_hines_cpu(f.s, cpu_target("x86-64-avx512"), DType::f64, 0), UsageError);

  // Malformed JSON names the key.
  const auto message = [](const nlohmann::json& j) {
    try {
      (void)hines_cpu_plan_from_json(j);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  nlohmann::json j = to_json(p);
  j.erase("rhs");
  EXPECT_NE(message(j).find("'rhs'"), std::string::npos) << message(j);
  j = to_json(p);
  j["groups"][1]["width"] = "wide";
  EXPECT_NE(message(j).find("'groups[1].width'"), std::string::npos) << message(j);
  j = to_json(p);
  j["dtype"] = "f16";
  EXPECT_NE(message(j).find("dtype"), std::string::npos) << message(j);
  j = to_json(p);
  j["target"].erase("isa");
  EXPECT_NE(message(j).find("'target.isa'"), std::string::npos) << message(j);
  j = to_json(p);
  j["shapes"] = 3;
  EXPECT_NE(message(j).find("'shapes'"), std::string::npos) << message(j);

  // The checks.
  HinesCpuPlan broken = p;
  broken.groups[1].first_row += 1;
  EXPECT_FALSE(check_hines_cpu_plan(broken).empty());
  broken = p;
  std::swap(broken.groups[0].cells[0], broken.groups[1].cells[0]);
  EXPECT_FALSE(check_hines_cpu_plan(broken, f.s.parent).empty());  // cell 1 is not of shape 0
  broken = p;
  broken.groups[2].width = 2;
  EXPECT_FALSE(check_hines_cpu_plan(broken).empty());
  broken = p;
  broken.shapes[1][0] = 0;
  EXPECT_FALSE(check_hines_cpu_plan(broken).empty());
  broken = p;
  broken.groups.pop_back();
  EXPECT_FALSE(check_hines_cpu_plan(broken).empty());
}

TEST(HinesCpuPlan, InterpreterMatchesTheReference) {
  const MixedForest f;
  for (const int r : {1, 3})
    for (const DType dt : {DType::f64, DType::f32}) {
      SCOPED_TRACE(fmt::format("{} R={}", dtype_name(dt), r));
      const HinesCpuPlan p = plan_hines_cpu(f.s, cpu_target("x86-64-avx512"), dt, r);
      const std::vector<double> b = random_b(static_cast<std::size_t>(f.s.size() * r), 7);
      const HinesAccuracy acc = hines_accuracy(f.s, b, r);
      const auto check = [&]<typename T>(T) {
        PlanArrays<T> a(f.s, p, b);
        std::vector<T> x(a.b.size(), std::numeric_limits<T>::quiet_NaN()),
            w(static_cast<std::size_t>(p.workspace_elements()));
        interpret_hines_cpu(p, a.d.data(), a.u.data(), a.l.data(), a.b.data(), x.data(), w.data());
        EXPECT_LE(hines_max_rel_error(to_hines(p, x), acc.ref), acc.tolerance(std::string(dtype_name(dt))));
        // In place (x = b): the same bits.
        std::vector<T> y = a.b;
        interpret_hines_cpu(p, a.d.data(), a.u.data(), a.l.data(), y.data(), y.data(), w.data());
        EXPECT_EQ(differing(x, y), 0u);
      };
      if (dt == DType::f64)
        check(0.0);
      else
        check(0.0f);
    }
  const HinesCpuPlan p = plan_hines_cpu(f.s, cpu_target("x86-64-avx2"), DType::f64, 1);
  std::vector<float> v(static_cast<std::size_t>(f.s.size()));
  EXPECT_THROW(interpret_hines_cpu(p, v.data(), v.data(), v.data(), v.data(), v.data(), v.data()),
               UsageError);
}

TEST(HinesCpuPlan, IrHasAFunctionAShapeAndWidthCutIntoParts) {
  const MixedForest f(1500);  // 2 parts of the big shape
  const HinesCpuPlan p = plan_hines_cpu(f.s, cpu_target("x86-64-avx512"), DType::f64, 1);
  const std::vector<std::string> ir = emit_hines_llvm_modules(p, "hx", 3);
  ASSERT_EQ(ir.size(), 3u);
  std::string all;
  for (const std::string& m : ir) all += m;
  for (const char* name :
       {"define hidden void @hx_shape0_w8(", "define hidden void @hx_shape1_w8(",
        "define hidden void @hx_shape0_w1(", "define hidden void @hx_shape1_w1(",
        "define hidden void @hx_shape0_w8_f1(", "define hidden void @hx_shape0_w8_b1(", "@llvm.fma.v8f64"})
    EXPECT_EQ(test::count(all, name) > 0, true) << name;
  EXPECT_EQ(test::count(all, "define hidden void @hx_shape0_w8_f2("), 0u);
  EXPECT_EQ(test::count(ir.back(), "define void @hx_solve(i64 %item, double* %d"), 1u);
  EXPECT_EQ(test::count(all, "define void @hx_solve("), 1u);
  // Single module; bad prefixes.
  EXPECT_EQ(test::count(emit_hines_llvm_ir(p), "@sparsecc_cpu_hines_solve("), 1u);
  EXPECT_THROW(emit_hines_llvm_ir(p, "9x"), UsageError);
  EXPECT_THROW(emit_hines_llvm_ir(p, "a-b"), UsageError);
  HinesCpuPlan broken = p;
  broken.rhs = 0;
  EXPECT_THROW(emit_hines_llvm_ir(broken), UsageError);
}

#if SPARSECC_HAVE_LLVM

namespace {

// Runs the kernel on NaN-poisoned x (and in place, x = b) and expects the interpreter's bits and
// the accuracy bound; returns the largest relative error.
template <typename T>
double run_and_check(CpuHinesKernel& k, const HinesSystem& s, const std::vector<double>& b, int threads) {
  const HinesCpuPlan& p = k.plan();
  const HinesAccuracy acc = hines_accuracy(s, b, p.rhs);
  PlanArrays<T> a(s, p, b);
  std::vector<T> want(a.b.size(), std::numeric_limits<T>::quiet_NaN()),
      w(static_cast<std::size_t>(p.workspace_elements()));
  interpret_hines_cpu(p, a.d.data(), a.u.data(), a.l.data(), a.b.data(), want.data(), w.data());
  std::vector<T> x(a.b.size(), std::numeric_limits<T>::quiet_NaN());
  k.run(a.d.data(), a.u.data(), a.l.data(), a.b.data(), x.data(), threads);
  EXPECT_EQ(differing(x, want), 0u) << "outputs differing from the interpreter's";
  std::vector<T> y = a.b;
  k.run(a.d.data(), a.u.data(), a.l.data(), y.data(), y.data(), threads);
  EXPECT_EQ(differing(y, want), 0u) << "in place: outputs differing from the interpreter's";
  const double error = hines_max_rel_error(to_hines(p, x), acc.ref);
  EXPECT_LE(error, acc.tolerance(sizeof(T) == 8 ? "f64" : "f32"));
  return error;
}

}  // namespace

TEST(HinesCpuJit, BitExactWithTheInterpreterOnEveryTargetDtypeAndRhs) {
  const MixedForest f(1300);  // the big shape in two parts
  int ran = 0;
  for (const char* isa : {"x86-64-avx2", "x86-64-avx512"}) {
    const CpuTarget t = cpu_target(isa);
    if (!host_runs(t)) continue;
    for (const DType dt : {DType::f64, DType::f32})
      for (const int r : {1, 3}) {
        SCOPED_TRACE(fmt::format("{} {} R={}", isa, dtype_name(dt), r));
        const HinesCpuPlan p = plan_hines_cpu(f.s, t, dt, r);
        CpuHinesKernel k = CpuHinesKernel::compile(emit_hines_llvm_modules(p, "hx", 3), p, 2, 2, "hx");
        EXPECT_EQ(k.stats().modules, 3u);
        const std::vector<double> b = random_b(static_cast<std::size_t>(f.s.size() * r), 11 + r);
        if (dt == DType::f64)
          run_and_check<double>(k, f.s, b, 2);
        else
          run_and_check<float>(k, f.s, b, 1);
        ++ran;
      }
  }
  EXPECT_GT(ran, 0);
}

TEST(HinesCpuJit, BuildRunsAndRefusesTheWrongDtype) {
  const MixedForest f(50);
  const HinesCpuPlan p = plan_hines_cpu(f.s, cpu_target("native"), DType::f64, 2);
  CpuHinesKernel k = CpuHinesKernel::build(p, 2, 2);
  run_and_check<double>(k, f.s, random_b(static_cast<std::size_t>(f.s.size() * 2), 5), 0);
  std::vector<float> v(static_cast<std::size_t>(f.s.size() * 2));
  EXPECT_THROW(k.run(v.data(), v.data(), v.data(), v.data(), v.data()), UsageError);
  std::vector<std::string> broken = emit_hines_llvm_modules(p, kCpuHinesPrefix, 2);
  broken.front() += "define void @x( {";
  EXPECT_THROW((void)CpuHinesKernel::compile(broken, p, 2, 2, kCpuHinesPrefix), std::runtime_error);
}

TEST(HinesCpuJit, RealMorphologies) {
  const auto dir = test::data_dir();
  if (!dir) GTEST_SKIP() << "no shared data folder";
  std::vector<std::string> files;
  for (const char* name : {"morph_ca1_n120.swc", "morph_l5pc_with_axon.swc"}) {
    const auto path = *dir / "swc" / "jaxley" / name;
    if (std::filesystem::exists(path)) files.push_back(path.string());
  }
  if (files.empty()) GTEST_SKIP() << "no CA1 or L5PC SWC file in the shared data";
  const HinesSystem s = load_hines_forest(files, 9, 1);  // 8 cells a full group and one left over each
  const CpuTarget t = cpu_target("native");
  for (const DType dt : {DType::f64, DType::f32}) {
    SCOPED_TRACE(dtype_name(dt));
    const HinesCpuPlan p = plan_hines_cpu(s, t, dt, 1);
    EXPECT_EQ(p.shapes.size(), files.size());
    CpuHinesKernel k = CpuHinesKernel::build(p, 2, 2);
    const std::vector<double> b = random_step_rhs(s, 1, 3);
    if (dt == DType::f64)
      run_and_check<double>(k, s, b, 2);
    else
      run_and_check<float>(k, s, b, 2);
  }
}

#else

TEST(HinesCpuJit, NotBuilt) {
  GTEST_SKIP() << "the CPU backend needs LLVM 14 (tools/setup.sh --llvm); not built";
}

#endif
