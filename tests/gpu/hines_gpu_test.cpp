// Hines executors on a GPU, through the whole route: plan, schedule, emit, NVRTC, bundle bytes, the
// runtime's HinesExecutor. Checked against the serial fp64 reference on NaN-poisoned outputs (or in
// place, x = b): fp64 max relative error <= 1e-12 on random right-hand sides, fp32 <= 1e-4 on the
// right-hand sides of a time step of a well-conditioned cell. Covers the grid levels, the per-cell
// block kernel alone, both together, a base-only plan, forests, R up to 16 and minimal decomposition,
// each in tables mode and with unrolled bases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>

#include "gpu_skip.hpp"
#include "hines_support.hpp"
#include "sparsecc/bundle/hines_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/compile/compile_hines.hpp"
#include "sparsecc/inspector/hines_planner.hpp"
#include "sparsecc/neuron/morphology.hpp"
#include "sparsecc/plan/hines_schedule.hpp"
#include "sparsecc/reference/hines_solve.hpp"
#include "sparsecc/runtime/device.hpp"
#include "sparsecc/runtime/driver.hpp"
#include "sparsecc/runtime/hines_executor.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

template <typename T>
rt::DeviceBuffer upload(const std::vector<T>& v) {
  rt::DeviceBuffer buf(std::max<std::size_t>(v.size() * sizeof(T), 8));
  if (!v.empty()) buf.upload(v.data(), v.size() * sizeof(T));
  return buf;
}

// Plans, compiles and bundles the executor, loads it from the bundle's bytes, runs one step on a
// NaN-poisoned x (or in place, x = b) and returns x (N x R).
template <typename Real>
std::vector<Real> run_executor(const rt::Context& ctx, const HinesSystem& s, const HinesPlan& plan,
                               const std::vector<Real>& b0, bool in_place) {
  CudaCompileOptions o;
  o.arch = ctx.device().arch();
  const CompiledHines c = compile_hines(plan, o);
  const rt::Bundle bundle = hines_bundle(plan, c.schedule, s, c.code.cubin, c.code.ptx, o.arch);
  const auto bytes = rt::bundle_bytes(bundle);
  const rt::HinesExecutor ex = rt::HinesExecutor::load_bytes(bytes, "hines test bundle", ctx);
  const auto cast = [](const std::vector<double>& v) { return std::vector<Real>(v.begin(), v.end()); };
  rt::DeviceBuffer d = upload(cast(s.diag)), u = upload(cast(s.upper)), l = upload(cast(s.lower)),
                   b = upload(b0);
  rt::DeviceBuffer x(std::max<std::size_t>(b0.size() * sizeof(Real), 8));
  x.fill32(0x7fc00000u);  // NaN (fp32) / a NaN pattern in each fp64 word: unwritten rows fail
  ex.run(d.get(), u.get(), l.get(), b.get(), in_place ? b.get() : x.get());
  ctx.synchronize();
  std::vector<Real> out(b0.size());
  (in_place ? b : x).download(out.data(), out.size() * sizeof(Real));
  return out;
}

// Right-hand sides of a time step: potentials in -80..-50 mV, currents in -0.1..0.1 nA (N x R).
std::vector<double> step_rhs(const HinesSystem& s, int r, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> v(-80, -50), i(-0.1, 0.1);
  const auto n = static_cast<std::size_t>(s.size());
  std::vector<double> b(n * r), vo(n), ie(n);
  for (int c = 0; c < r; ++c) {
    for (std::size_t j = 0; j < n; ++j) {
      vo[j] = v(rng);
      ie[j] = i(rng);
    }
    const auto col = hines_rhs(s, vo, ie);
    for (std::size_t j = 0; j < n; ++j) b[j * r + c] = col[j];
  }
  return b;
}

// Every code mode the plan admits: tables always, unrolled bases where they fit in shared memory;
// then, where the plan keeps levels in shared memory, tables again with the whole workspace global.
void expect_gpu_solves(const rt::Context& ctx, const HinesSystem& s, int r, const HinesOptions& options,
                       const std::string& label, bool f32, bool in_place = false) {
  std::mt19937_64 rng(42);
  std::vector<double> b;
  if (f32) {
    b = step_rhs(s, r, rng);
  } else {
    std::uniform_real_distribution<double> u(-1, 1);
    b.resize(static_cast<std::size_t>(s.size()) * r);
    for (auto& v : b) v = u(rng);
  }
  const std::vector<double> ref = hines_solve_many(s, b, static_cast<std::size_t>(r));
  bool shared_levels = false;
  for (const char* code : {"tables", "unrolled", "global"}) {
    HinesOptions o = options;
    o.code = code;
    if (o.code == "global") {
      if (!shared_levels) continue;
      o.code = "tables";
      o.shared_workspace = 0;
    }
    HinesPlan plan;
    try {
      plan = plan_hines(s, r, f32 ? "f32" : "f64", o);
    } catch (const UsageError& e) {
      ASSERT_STREQ(code, "unrolled") << label << ": " << e.what();
      std::printf("[ hines gpu ] %-30s no unrolled plan: %s\n", label.c_str(), e.what());
      continue;
    }
    ASSERT_TRUE(check_hines_plan(plan).empty()) << label;
    const HinesSchedule schedule = schedule_hines(plan);
    if (schedule.shared_from < plan.depth()) shared_levels = true;
    std::vector<double> x;
    if (f32) {
      const auto xf = run_executor<float>(ctx, s, plan, std::vector<float>(b.begin(), b.end()), in_place);
      x.assign(xf.begin(), xf.end());
    } else {
      x = run_executor<double>(ctx, s, plan, b, in_place);
    }
    std::int64_t nans = 0;
    const double err = test::max_rel_error(x, ref, &nans);
    const double tol = f32 ? 1e-4 : 1e-12;
    std::printf(
        "[ hines gpu ] %-30s %-8s %s %8d rows %5d cells R %2d depth %d grid %d shared from %d (%6lld B) "
        "threads %4d "
        "base %5d  max rel err %.2e\n",
        label.c_str(), code, f32 ? "f32" : "f64", s.size(), s.num_cells(), r, plan.depth(), plan.grid_levels,
        schedule.shared_from, static_cast<long long>(schedule.shared_bytes()), plan.block_threads,
        plan.base_size(), err);
    EXPECT_EQ(nans, 0) << label << " " << code;
    EXPECT_LE(err, tol) << label << " " << code;
  }
}

TEST(HinesGpu, ExecutorsMatchTheSerialReference) {
  SPARSECC_GPU_OR_SKIP();
  rt::Context ctx(0);
  std::mt19937_64 rng(7);
  const HinesSystem chain = test::chain_system(100000);
  expect_gpu_solves(ctx, chain, 1, {}, "chain 100000", false);
  HinesOptions all_grid;
  all_grid.grid_levels = 7;  // every level on the grid, the block kernel solves the base only
  all_grid.k = 3;
  all_grid.k_large = 0;  // K = 3 on every level: 7 levels
  expect_gpu_solves(ctx, chain, 2, all_grid, "chain 100000, all levels on grid", false);
  HinesOptions one_block;
  one_block.grid_levels = 0;
  expect_gpu_solves(ctx, chain, 1, one_block, "chain 100000, one block", false, true);
  expect_gpu_solves(ctx, test::random_system(rng, 20000, 1, 0.1), 3, {}, "random tree 20000", false);
  expect_gpu_solves(ctx, test::random_system(rng, 40000, 1000, 0.2), 2, {}, "forest of 1000 cells", false);
  HinesOptions minimal;
  minimal.decomposition = HinesDecomposition::minimal;
  expect_gpu_solves(ctx, test::random_system(rng, 5000, 2, 0.5), 16, minimal, "minimal, R 16", false);
  HinesOptions none;
  none.depth = 0;
  expect_gpu_solves(ctx, test::random_system(rng, 300, 3, 0.3), 1, none, "depth 0 (base only)", false);
  const HinesSystem demo = assemble_hines(make_demo_neuron());
  std::vector<HinesSystem> copies(200, demo);
  expect_gpu_solves(ctx, concatenate_hines(copies), 4, {}, "200 demo neurons", true);
  HinesOptions star;
  star.k = 7;
  expect_gpu_solves(ctx, test::random_system(rng, 100000, 1, 0.6), 8, star, "random tree 100000, K 7", false,
                    true);
  HinesOptions long_chains;  // chains of 15 rows: their pivots and w in shared memory too
  long_chains.k = 16;
  expect_gpu_solves(ctx, test::random_system(rng, 30000, 100, 0.02), 1, long_chains, "forest of 100, K 16",
                    false);
  expect_gpu_solves(ctx, test::random_system(rng, 30000, 100, 0.02), 2, long_chains,
                    "forest of 100, K 16, R 2", false);
}

// A forest whose block kernel keeps 48 KiB or a little less of workspace in dynamic shared memory
// while its staged base adds static shared memory on top: static and dynamic together exceed
// 48 KiB, which the runtime must allow the kernel before launching it. The cell, a chain, is found by
// its length; the search runs on the CPU, before the GPU check.
TEST(HinesGpu, StaticAndDynamicSharedMemoryAbove48KiB) {
  constexpr std::int64_t k48 = 48 * 1024;
  HinesOptions o;
  o.shared_workspace = k48;
  o.code = "tables";
  int found = 0;
  for (int n = 200; n <= 4000 && !found; ++n) {
    const HinesPlan plan = plan_hines(test::chain_system(n), 1, "f64", o);
    const std::int64_t dynamic = schedule_hines(plan).shared_bytes();
    const std::int64_t base = hines_base_shared_bytes(hines_block_base_max(plan), 1, 8);
    if (dynamic <= k48 && base <= kHinesBaseSharedLimit && dynamic + base > k48) found = n;
  }
  ASSERT_GT(found, 0) << "no chain length puts static and dynamic shared memory across 48 KiB";
  std::vector<HinesSystem> copies(64, test::chain_system(found));
  const HinesSystem forest = concatenate_hines(copies);
  const HinesPlan plan = plan_hines(forest, 1, "f64", o);
  const HinesSchedule schedule = schedule_hines(plan);
  ASSERT_LE(schedule.shared_bytes(), k48);
  ASSERT_GT(schedule.shared_bytes() + hines_base_shared_bytes(hines_block_base_max(plan), 1, 8), k48);
  std::printf("[ hines gpu ] chains of %d rows: %lld B dynamic, %lld B of staged base\n", found,
              static_cast<long long>(schedule.shared_bytes()),
              static_cast<long long>(hines_base_shared_bytes(hines_block_base_max(plan), 1, 8)));
  SPARSECC_GPU_OR_SKIP();
  rt::Context ctx(0);
  expect_gpu_solves(ctx, forest, 1, o, "64 chains, shared across 48 KiB", false);
  expect_gpu_solves(ctx, forest, 1, o, "64 chains, shared across 48 KiB, in place", false, true);
}

TEST(HinesGpu, RealCells) {
  SPARSECC_GPU_OR_SKIP();
  SPARSECC_DATA_OR_SKIP(dir, "swc/jaxley/morph_ca1_n120.swc");
  rt::Context ctx(0);
  const HinesSystem ca1 = assemble_hines(load_neuron(dir.string()));
  std::vector<HinesSystem> copies(500, ca1);
  const HinesSystem forest = concatenate_hines(copies);
  for (const int r : {1, 8}) {
    expect_gpu_solves(ctx, forest, r, {}, "500 x CA1 n120", false);
    expect_gpu_solves(ctx, forest, r, {}, "500 x CA1 n120", true);
  }
  // Its workspace fills exactly 48 KiB of dynamic shared memory, its staged base adds static.
  const auto neuron = dir.parent_path().parent_path() / "neurom" / "Neuron.swc";
  if (std::filesystem::exists(neuron)) {
    std::vector<HinesSystem> many(200, assemble_hines(load_neuron(neuron.string())));
    expect_gpu_solves(ctx, concatenate_hines(many), 1, {}, "200 x NeuroM Neuron", false);
  }
}

TEST(HinesGpu, ForgedLaunchesAreRefusedBeforeLaunch) {
  SPARSECC_GPU_OR_SKIP();
  const rt::Context ctx(0);
  const HinesSystem s = test::chain_system(3000);
  const HinesPlan plan = plan_hines(s, 1, "f64", {});
  CudaCompileOptions o;
  o.arch = ctx.device().arch();
  const CompiledHines c = compile_hines(plan, o);
  const rt::Bundle honest = hines_bundle(plan, c.schedule, s, c.code.cubin, c.code.ptx, o.arch);
  rt::Bundle forged = honest;
  forged.metadata.hines.launches.front().grid += 1;  // one block more than the tables describe
  EXPECT_THROW(rt::HinesExecutor::load(forged, "forged.sccb", ctx), rt::BundleError);
  const rt::Module module(honest.cubin, "honest.cubin");
  EXPECT_NO_THROW(rt::check_loaded_contract(honest, module, "honest.sccb", "cubin"));
  try {
    rt::check_loaded_contract(forged, module, "forged.sccb", "cubin");
    ADD_FAILURE() << "forged launches passed the loaded module's contract";
  } catch (const rt::BundleError& e) {
    EXPECT_NE(std::string(e.what()).find("forged.sccb: hines.launches (digest) is"), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(rt::HinesExecutor::load(honest, "honest.sccb", ctx));
}

}  // namespace
}  // namespace sparsecc
