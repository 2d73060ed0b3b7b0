// The Hines EDD kernels of templates/hines_edd_tables.cu (tables mode) on a GPU, launched level by
// level in the order of interpret_hines: stage 1 and 2 down the levels, the base by one thread, stage 4
// back up. Checked against the serial fp64 reference on NaN-poisoned outputs: fp64 max relative error
// <= 1e-12 on random right-hand sides, fp32 <= 1e-4 on the right-hand sides of a time step of a
// well-conditioned cell. This drives the kernels from the test; the bundled executor is not built yet.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "gpu_skip.hpp"
#include "hines_support.hpp"
#include "sparsecc/compile/nvrtc.hpp"
#include "sparsecc/emit/template.hpp"
#include "sparsecc/inspector/hines_planner.hpp"
#include "sparsecc/neuron/morphology.hpp"
#include "sparsecc/plan/hines_interpreter.hpp"
#include "sparsecc/reference/hines_solve.hpp"
#include "sparsecc/runtime/device.hpp"
#include "sparsecc/runtime/driver.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

template <typename T>
rt::DeviceBuffer upload(const std::vector<T>& v) {
  rt::DeviceBuffer buf(std::max<std::size_t>(v.size() * sizeof(T), 8));
  if (!v.empty()) buf.upload(v.data(), v.size() * sizeof(T));
  return buf;
}

struct Kernels {
  rt::Module module;
  CUfunction stage1, stage2, base, stage4;
  explicit Kernels(const std::string& real, const std::string& arch)
      : module(compile(real, arch), "hines_edd_tables_" + real) {
    stage1 = module.function("hines_stage1");
    stage2 = module.function("hines_stage2");
    base = module.function("hines_base");
    stage4 = module.function("hines_stage4");
  }
  static std::vector<unsigned char> compile(const std::string& real, const std::string& arch) {
    CudaCompileOptions o;
    o.arch = arch;
    return compile_cuda(KernelTemplate::load("hines_edd_tables.cu").render({{"REAL", real}}), "hines.cu", o).cubin;
  }
};

unsigned blocks(std::int64_t threads, int per_block) { return static_cast<unsigned>((threads + per_block - 1) / per_block); }

// Runs the plan on the GPU; values and b in Real, returns x (N x R).
template <typename Real>
std::vector<Real> run_edd(const rt::Context& ctx, const Kernels& k, const HinesPlan& plan, const std::vector<Real>& d0,
                          const std::vector<Real>& u0, const std::vector<Real>& l0, const std::vector<Real>& b0) {
  const int r = plan.problem.rhs, tpb = plan.threads_per_block;
  const std::size_t depth = plan.levels.size();
  // Matrices of levels 0..D (level l + 1 is level l's domain) and per level the stage buffers.
  std::vector<rt::DeviceBuffer> d, u, l, b;
  d.push_back(upload(d0));
  u.push_back(upload(u0));
  l.push_back(upload(l0));
  b.push_back(upload(b0));
  std::vector<rt::DeviceBuffer> chains, junctions, direct, goff, gather, rv, pv, qv, piv, w, x;
  for (const HinesLevel& L : plan.levels) {
    std::vector<int> flat;
    for (const HinesChain& c : L.chains) flat.insert(flat.end(), {c.begin, c.end, c.parent_junction, c.child_junction});
    chains.push_back(upload(flat));
    junctions.push_back(upload(L.junctions));
    direct.push_back(upload(L.direct));
    goff.push_back(upload(L.gather_offsets));
    gather.push_back(upload(L.gather));
    const std::size_t n = static_cast<std::size_t>(L.size), nj = L.junctions.size();
    for (auto* v : {&pv, &qv, &piv, &w}) v->emplace_back(std::max<std::size_t>(n * sizeof(Real), 8));
    rv.emplace_back(std::max<std::size_t>(n * r * sizeof(Real), 8));
    x.emplace_back(std::max<std::size_t>(n * r * sizeof(Real), 8));
    x.back().fill32(0x7fc00000u);  // NaN (fp32) / a NaN pattern in each fp64 word: unwritten rows fail
    for (auto* v : {&d, &u, &l}) v->emplace_back(std::max<std::size_t>(nj * sizeof(Real), 8));
    b.emplace_back(std::max<std::size_t>(nj * r * sizeof(Real), 8));
  }
  for (std::size_t li = 0; li < depth; ++li) {
    const HinesLevel& L = plan.levels[li];
    int nc = static_cast<int>(L.chains.size()), nj = L.domain_size(), rr = r;
    CUdeviceptr pc = chains[li].get(), pd = d[li].get(), pu = u[li].get(), pl = l[li].get(), pb = b[li].get(),
                prv = rv[li].get(), ppv = pv[li].get(), pqv = qv[li].get(), ppiv = piv[li].get(), pw = w[li].get();
    void* a1[] = {&pc, &nc, &pd, &pu, &pl, &pb, &rr, &prv, &ppv, &pqv, &ppiv, &pw};
    if (nc) rt::launch(k.stage1, blocks(nc, tpb), tpb, a1);
    CUdeviceptr pj = junctions[li].get(), pdir = direct[li].get(), pgo = goff[li].get(), pg = gather[li].get(),
                md = d[li + 1].get(), mu = u[li + 1].get(), ml = l[li + 1].get(), mb = b[li + 1].get();
    void* a2[] = {&pj, &pdir, &pgo, &pg, &pc, &nj, &pd, &pu, &pl, &pb, &rr, &prv, &ppv, &pqv, &md, &mu, &ml, &mb};
    if (nj) rt::launch(k.stage2, blocks(nj, tpb), tpb, a2);
  }
  {
    std::vector<int> bp = plan.base_parent;
    rt::DeviceBuffer parent = upload(bp);
    int n = plan.base_size(), rr = r;
    CUdeviceptr pp = parent.get(), pd = d[depth].get(), pu = u[depth].get(), pl = l[depth].get(), pb = b[depth].get();
    void* a[] = {&pp, &n, &pd, &pu, &pl, &pb, &rr};
    if (n) rt::launch(k.base, 1, 1, a);
    ctx.synchronize();
  }
  for (std::size_t li = depth; li-- > 0;) {
    const HinesLevel& L = plan.levels[li];
    int nc = static_cast<int>(L.chains.size()), nj = L.domain_size(), rr = r;
    CUdeviceptr pc = chains[li].get(), pj = junctions[li].get(), prv = rv[li].get(), ppv = pv[li].get(),
                pqv = qv[li].get(), pmx = li + 1 == depth ? b[depth].get() : x[li + 1].get(), px = x[li].get();
    void* a[] = {&pc, &nc, &pj, &nj, &prv, &ppv, &pqv, &pmx, &rr, &px};
    rt::launch(k.stage4, blocks(std::int64_t{nc} + nj, tpb), tpb, a);
  }
  ctx.synchronize();
  std::vector<Real> out(b0.size());
  (depth ? x[0] : b[0]).download(out.data(), out.size() * sizeof(Real));
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

void expect_gpu_solves(const rt::Context& ctx, const Kernels& k64, const Kernels& k32, const HinesSystem& s, int r, const HinesOptions& o,
                       const std::string& label, bool f32) {
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
  const HinesPlan plan = plan_hines(s, r, f32 ? "f32" : "f64", o);
  ASSERT_TRUE(check_hines_plan(plan).empty()) << label;
  std::vector<double> x;
  if (f32) {
    const auto f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
    const auto xf = run_edd<float>(ctx, k32, plan, f(s.diag), f(s.upper), f(s.lower), f(b));
    x.assign(xf.begin(), xf.end());
  } else {
    x = run_edd<double>(ctx, k64, plan, s.diag, s.upper, s.lower, b);
  }
  std::int64_t nans = 0;
  const double err = test::max_rel_error(x, ref, &nans);
  const double tol = f32 ? 1e-4 : 1e-12;
  std::printf("[ hines gpu ] %-34s %s %8d rows %5d cells R %2d depth %d base %5d  max rel err %.2e\n", label.c_str(),
              f32 ? "f32" : "f64", s.size(), s.num_cells(), r, plan.depth(), plan.base_size(), err);
  EXPECT_EQ(nans, 0) << label;
  EXPECT_LE(err, tol) << label;
}

TEST(HinesGpu, TablesKernelsMatchTheSerialReference) {
  SPARSECC_GPU_OR_SKIP();
  rt::Context ctx(0);
  const std::string arch = ctx.device().arch();
  const Kernels k64("double", arch), k32("float", arch);
  std::mt19937_64 rng(7);
  expect_gpu_solves(ctx, k64, k32, test::chain_system(100000), 1, {}, "chain 100000", false);
  HinesOptions o;
  o.base_rows = 100;
  expect_gpu_solves(ctx, k64, k32, test::random_system(rng, 20000, 1, 0.1), 3, o, "random tree 20000", false);
  expect_gpu_solves(ctx, k64, k32, test::random_system(rng, 40000, 1000, 0.2), 2, o, "forest of 1000 cells", false);
  HinesOptions minimal = o;
  minimal.decomposition = HinesDecomposition::minimal;
  expect_gpu_solves(ctx, k64, k32, test::random_system(rng, 5000, 2, 0.5), 16, minimal, "minimal, R 16", false);
  const HinesSystem demo = assemble_hines(make_demo_neuron());
  std::vector<HinesSystem> copies(200, demo);
  expect_gpu_solves(ctx, k64, k32, concatenate_hines(copies), 4, o, "200 demo neurons", true);
}

TEST(HinesGpu, RealCells) {
  SPARSECC_GPU_OR_SKIP();
  SPARSECC_DATA_OR_SKIP(dir, "swc/jaxley/morph_ca1_n120.swc");
  rt::Context ctx(0);
  const std::string arch = ctx.device().arch();
  const Kernels k64("double", arch), k32("float", arch);
  const HinesSystem ca1 = assemble_hines(load_neuron(dir.string()));
  std::vector<HinesSystem> copies(500, ca1);
  const HinesSystem forest = concatenate_hines(copies);
  for (const int r : {1, 8}) {
    expect_gpu_solves(ctx, k64, k32, forest, r, {}, "500 x CA1 n120", false);
    expect_gpu_solves(ctx, k64, k32, forest, r, {}, "500 x CA1 n120", true);
  }
}

}  // namespace
}  // namespace sparsecc
