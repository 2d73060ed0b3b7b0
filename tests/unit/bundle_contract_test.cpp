// Forged bundles: metadata edited after the code was generated, with the checksum recomputed. Every
// quantity that sizes a launch or a buffer is checked against the others and the stored plan when the
// bundle is read, and against the code contract every emitted module carries (found in the PTX text
// and the cubin here; the runtime reads it from the loaded module on the GPU). Each forgery is refused
// with a BundleError naming the file and the key. The emitters' texts carry the plan's contract.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "forge_bundle.hpp"
#include "hines_support.hpp"
#include "sparsecc/bundle/hines_bundle.hpp"
#include "sparsecc/bundle/spmm_bundle.hpp"
#include "sparsecc/compile/compile_hines.hpp"
#include "sparsecc/compile/compile_kernel.hpp"
#include "sparsecc/emit/contract.hpp"
#include "sparsecc/emit/hines_cuda.hpp"
#include "sparsecc/emit/spmm_cuda.hpp"
#include "sparsecc/emit/spmm_ptx.hpp"
#include "sparsecc/inspector/hines_planner.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/plan/hines_schedule.hpp"
#include "test_support.hpp"

using namespace sparsecc;
using nlohmann::json;
using Raw = std::vector<unsigned char>;

namespace {

const CsrMatrix& matrix() {
  static const CsrMatrix a = test::random_csr(40, 30, 0.2, 7);
  return a;
}

SpmmPlan plan_for(SpmmValueMode mode, bool bias = true) {
  SpmmOptions o;
  o.value_mode = mode;
  o.rows_per_block = 4;
  if (mode == SpmmValueMode::rolled) o.groups = 2;
  return plan_spmm(matrix(), test::problem_for(matrix(), 32, bias, true), o);
}

// The bundle `sparsecc compile` writes for `plan`, with `ptx` standing in for the code.
Raw spmm_bytes(const SpmmPlan& plan, const std::string& ptx) {
  const CsrMatrix& a = matrix();
  const std::vector<float> values = plan.value_mode() == SpmmValueMode::rolled ? spmm_rolled_table(plan, a)
                                    : plan.value_mode() == SpmmValueMode::streamed
                                        ? spmm_kernel_values(plan, a)
                                        : std::vector<float>{};
  const std::vector<double> bias(plan.problem.bias ? static_cast<std::size_t>(a.rows) : 0, 0.5);
  return rt::bundle_bytes(make_spmm_bundle(plan, a, gpu_target("sm_90"), {}, ptx, values, {}, bias),
                          "honest.sccb");
}

// Parses `bytes` as forged.sccb: expects a BundleError whose message has every one of `parts`.
void expect_refused(const Raw& bytes, const std::vector<std::string>& parts) {
  try {
    rt::parse_bundle(bytes, "forged.sccb");
    ADD_FAILURE() << "a forged bundle was accepted; expected: " << parts.front();
  } catch (const rt::BundleError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("forged.sccb: ", 0), 0u) << what;
    for (const std::string& p : parts)
      EXPECT_NE(what.find(p), std::string::npos) << "missing '" << p << "' in: " << what;
  }
}

Raw forge(const Raw& honest, const std::function<void(json&)>& edit) {
  return test::forge_bundle(honest, edit);
}

// Cuts the values section by `floats` floats.
Raw forge_values(const Raw& honest, const std::function<void(json&)>& edit, std::size_t floats) {
  return test::forge_bundle(honest, edit, [&](std::uint32_t kind, std::vector<unsigned char>& data) {
    if (kind == static_cast<std::uint32_t>(rt::SectionKind::values)) data.resize(data.size() - 4 * floats);
  });
}

}  // namespace

TEST(BundleForgery, TheForgerRewritesAnHonestBundleThatStillParses) {
  const Raw honest = spmm_bytes(plan_for(SpmmValueMode::streamed), "// no code");
  const Raw same = forge(honest, [](json&) {});
  EXPECT_EQ(rt::parse_bundle(same, "same.sccb"), rt::parse_bundle(honest, "honest.sccb"));
}

// The metadata checks alone (the stand-in code has no contract): each key that sizes the launch or
// a buffer is held to the others and to plan_summary.
TEST(BundleForgery, LaunchKeysThatContradictThePlanAreRefused) {
  const SpmmPlan plan = plan_for(SpmmValueMode::streamed);
  ASSERT_EQ(plan.block_rows(), 10);  // 40 rows in panels of 4
  const Raw honest = spmm_bytes(plan, "// no code");
  // A smaller m: the block rows no longer cut m into panels.
  expect_refused(forge(honest, [](json& j) { j["m"] = 20; }),
                 {"metadata key 'block_rows'", "m = 20 in panels of 4 rows (plan_summary.panel_rows)"});
  // More block rows than the plan has (the grid would run past the kernel's cases).
  expect_refused(forge(honest, [](json& j) { j["block_rows"] = 11; }),
                 {"metadata key 'block_rows'", "plan_summary.block_rows = 10"});
  // Both, consistently: the panels still disagree.
  expect_refused(forge(honest,
                       [](json& j) {
                         j["block_rows"] = 11;
                         j["plan_summary"]["block_rows"] = 11;
                       }),
                 {"metadata key 'block_rows'", "which make 10"});
  // A smaller m with fewer panels: the bias no longer has m entries.
  expect_refused(forge(honest,
                       [](json& j) {
                         j["m"] = 36;
                         j["block_rows"] = 9;
                         j["plan_summary"]["block_rows"] = 9;
                       }),
                 {"section bias", "metadata m is 36"});
  // The block's threads and columns.
  expect_refused(forge(honest, [](json& j) { j["block_x"] = 1024; }),
                 {"metadata key 'block_x'", "plan_summary.groups"});
  expect_refused(forge(honest, [](json& j) { j["n_tile"] = 1024; }),
                 {"metadata key 'n_tile'", "plan_summary.n_tile"});
  // Shared memory past what an SpMM executor is launched with.
  expect_refused(forge(honest, [](json& j) { j["shared_bytes"] = 65536; }),
                 {"metadata key 'shared_bytes'", "exceed the 49152"});
  // Fewer values than the nonzeros the kernel reads: the section must match nnz.
  expect_refused(forge_values(honest, {}, 1), {"section values", "metadata nnz - tile_nnz is"});
  // The plan itself, mistyped.
  expect_refused(forge(honest, [](json& j) { j["plan_summary"]["rows_per_block"] = "4"; }),
                 {"metadata key 'plan_summary.rows_per_block'", "must be an integer"});
}

// The contract in the code (here the emitted PTX itself) binds what the cross-checks cannot: nnz
// and the values with them, N, the value mode.
TEST(BundleForgery, TheContractInThePtxBindsTheMetadataToTheCode) {
  const SpmmPlan plan = plan_for(SpmmValueMode::streamed, false);
  const EmittedKernel k = emit_spmm_ptx(plan, matrix());
  const Raw honest = spmm_bytes(plan, k.source);
  EXPECT_NO_THROW(rt::parse_bundle(honest, "honest.sccb"));
  // The reported attack: m smaller than the kernel writes, with everything around it made consistent.
  expect_refused(forge(honest, [](json& j) { j["m"] = 39; }),
                 {"m is 39 in the bundle but 40 in the code's sparsecc_contract (PTX)"});
  // Fewer values and nonzeros than the kernel reads.
  expect_refused(forge_values(
                     honest, [](json& j) { j["nnz"] = j["nnz"].get<int>() - 1; }, 1),
                 {"nnz is", "sparsecc_contract (PTX)"});
  expect_refused(forge(honest, [](json& j) { j["n"] = 64; }), {"n is 64 in the bundle but 32"});
  expect_refused(forge(honest, [](json& j) { j["k"] = 20; }), {"k is 20 in the bundle but 30"});
  expect_refused(forge(honest, [](json& j) { j["relu"] = false; }), {"relu is 0 in the bundle but 1"});
  // The code's contract itself, edited, is code: it no longer matches the bundle either.
  std::string other = k.source;
  other.replace(other.find("sparsecc_contract["), 17, "sparsecc_kontract");
  EXPECT_NO_THROW(
      rt::parse_bundle(spmm_bytes(plan, other), "no_contract.sccb"));  // absent: the loader decides
}

TEST(BundleForgery, ContractsAreReadFromPtxInBothForms) {
  const std::vector<std::uint64_t> words = rt::contract_words({{"a", 1}, {"b", 258}});
  // The emitters' form (64-bit words) and NVRTC's (bytes, trailing zeros left out).
  EXPECT_EQ(rt::ptx_contract(rt::contract_ptx({{"a", 1}, {"b", 258}}), "x"), words);
  std::string bytes = ".global .align 8 .b8 sparsecc_contract[40] = {";
  for (std::size_t i = 0; i < 8 * words.size() - 6;
       ++i)  // 258 takes two bytes; the six zeros after it are left out
    bytes += (i ? ", " : "") + std::to_string((words[i / 8] >> (8 * (i % 8))) & 0xff);
  bytes += "};\n";
  EXPECT_EQ(rt::ptx_contract(bytes, "x"), words);
  EXPECT_EQ(rt::ptx_contract("// mentions sparsecc_contract[3] in a comment\n", "x"), std::nullopt);
  EXPECT_EQ(rt::ptx_contract(".version 8.0\n", "x"), std::nullopt);
  for (const std::string bad :
       {".global .u64 sparsecc_contract[2] = {1, 2, 3};", ".global .u64 sparsecc_contract[999999] = {1};",
        ".global .b8 sparsecc_contract[8] = {256};", ".global .u64 sparsecc_contract[2];",
        ".global .u64 sparsecc_contract[2] = {1, 2"}) {
    EXPECT_THROW(rt::ptx_contract(bad, "x"), rt::BundleError) << bad;
  }
  EXPECT_EQ(rt::cubin_contract(Raw{1, 2, 3}, "x"), std::nullopt);  // not ELF: nothing this reader can see
}

// Every emitter stamps the contract of the bundle its plan makes into the text.
TEST(BundleForgery, EveryEmitterStampsThePlansContract) {
  const CsrMatrix& a = matrix();
  for (const SpmmValueMode mode : {SpmmValueMode::baked, SpmmValueMode::streamed, SpmmValueMode::rolled}) {
    const SpmmPlan plan = plan_for(mode);
    SCOPED_TRACE(to_string(mode));
    const EmittedKernel cuda = emit_spmm_cuda(plan, a);
    rt::Bundle b;
    b.metadata = spmm_bundle_metadata(plan, a, gpu_target("sm_90"));
    b.values = cuda.packed_values;
    const auto fields = rt::bundle_contract(b);
    EXPECT_NE(cuda.source.find(rt::contract_cuda(fields)), std::string::npos);
    EXPECT_EQ(fields[2].key, "m");
    EXPECT_EQ(fields[2].value, 40u);
    if (mode == SpmmValueMode::rolled) continue;  // the PTX emitter writes unrolled kernels only
    const EmittedKernel ptx = emit_spmm_ptx(plan, a);
    EXPECT_EQ(rt::ptx_contract(ptx.source, "x"), rt::contract_words(fields));
  }
  // Split PTX: the entry module carries it (the one-module form too).
  {
    const CsrMatrix big = test::random_csr(300, 300, 0.1, 4);
    const SpmmPlan plan = plan_spmm(big, test::problem_for(big, 64, false, false, SpmmNMode::runtime), {});
    ASSERT_TRUE(spmm_ptx_splits(plan));
    const EmittedKernel k = emit_spmm_ptx(plan, big);
    ASSERT_GT(k.modules.size(), 1u);
    const auto words =
        rt::contract_words(spmm_plan_contract(plan, big, static_cast<std::int64_t>(k.packed_values.size())));
    EXPECT_EQ(rt::ptx_contract(k.source, "x"), words);
    EXPECT_EQ(rt::ptx_contract(k.modules.front(), "x"), words);
    EXPECT_EQ(rt::ptx_contract(k.modules.back(), "x"), std::nullopt);
  }
  // Half precision with tensor-core fragments.
  {
    const CsrMatrix d = test::random_csr(32, 32, 0.6, 5);
    SpmmOptions o;
    set_blocklets(o, "16x8:0.25");
    SpmmProblem p = test::problem_for(d, 64);
    p.dtype = DType::f16;
    const SpmmPlan plan = plan_spmm(d, p, o);
    ASSERT_GT(plan.fragment_count(), 0);
    const EmittedKernel k = emit_spmm_cuda(plan, d);
    rt::Bundle b;
    b.metadata = spmm_bundle_metadata(plan, d, gpu_target("sm_90"));
    b.values = k.packed_values;
    EXPECT_GT(b.metadata.fragment_words, 0);
    EXPECT_NE(k.source.find(rt::contract_cuda(rt::bundle_contract(b))), std::string::npos);
  }
  // Hines: the launch list and the tables enter as digests.
  {
    const HinesSystem s = test::chain_system(300);
    const HinesPlan plan = plan_hines(s, 1, "f64", {});
    const HinesSchedule schedule = schedule_hines(plan);
    const EmittedHines e = emit_hines_cuda(plan, schedule);
    const rt::Bundle b = hines_bundle(plan, schedule, s, {1, 2, 3}, "// ptx", "sm_90");
    EXPECT_NE(e.source.find(rt::contract_cuda(rt::bundle_contract(b))), std::string::npos);
    rt::Bundle moved = b;
    moved.metadata.hines.launches.front().grid += 1;
    EXPECT_NE(rt::bundle_contract(moved)[8].value, rt::bundle_contract(b)[8].value);
    moved = b;
    moved.tables.front() += 1;
    EXPECT_NE(rt::bundle_contract(moved)[7].value, rt::bundle_contract(b)[7].value);
  }
}

// With the real toolchain (NVRTC, nvJitLink; no GPU): the contract survives compilation into the
// cubin and the PTX the bundle carries, and a forged bundle is refused when it is read.
TEST(BundleForgery, CompiledCodeCarriesTheContract) {
  const CsrMatrix& a = matrix();
  for (const KernelLanguage language : {KernelLanguage::cuda, KernelLanguage::ptx}) {
    SCOPED_TRACE(to_string(language));
    const SpmmPlan plan = plan_for(SpmmValueMode::streamed, false);
    const EmittedKernel k = emit_spmm(plan, a, language, gpu_target("sm_90"));
    const CudaCompileResult r = compile_kernel(k, plan.hints.kernel_name, {});
    const rt::Bundle b =
        make_spmm_bundle(plan, a, gpu_target("sm_90"), r.cubin, r.ptx, k.packed_values, k.fragment_words, {});
    const auto words = rt::contract_words(rt::bundle_contract(b));
    EXPECT_EQ(rt::cubin_contract(r.cubin, "x"), words);
    EXPECT_EQ(rt::ptx_contract(r.ptx, "x"), words);
    const Raw honest = rt::bundle_bytes(b, "honest.sccb");
    expect_refused(forge(honest, [](json& j) { j["m"] = 39; }),
                   {"m is 39 in the bundle but 40 in the code's sparsecc_contract (cubin)"});
    // Without the cubin the PTX still tells.
    rt::Bundle ptx_only = b;
    ptx_only.cubin.clear();
    expect_refused(forge(rt::bundle_bytes(ptx_only), [](json& j) { j["n"] = 16; }),
                   {"n is 16 in the bundle but 32 in the code's sparsecc_contract (PTX)"});
  }
}

TEST(BundleForgery, HinesLaunchesAndTablesAreBound) {
  const HinesSystem s = test::chain_system(300);
  const HinesPlan plan = plan_hines(s, 1, "f64", {});
  const CompiledHines c = compile_hines(plan);
  const rt::Bundle b = hines_bundle(plan, c.schedule, s, c.code.cubin, c.code.ptx, "sm_90");
  const auto words = rt::contract_words(rt::bundle_contract(b));
  EXPECT_EQ(rt::cubin_contract(c.code.cubin, "x"), words);
  EXPECT_EQ(rt::ptx_contract(c.code.ptx, "x"), words);
  const Raw honest = rt::bundle_bytes(b);
  // An argument moved out of the workspace: the metadata checks refuse it.
  expect_refused(forge(honest,
                       [](json& j) {
                         for (auto& l : j["hines"]["launches"])
                           for (auto& arg : l["args"])
                             if (arg[0] == "workspace")
                               arg[1] = j["hines"]["workspace_bytes"].get<std::int64_t>() + 8;
                       }),
                 {"metadata key 'hines.launches[", "out of range"});
  // A table pointer moved within the tables, or the grid raised: the code's contract refuses it.
  expect_refused(forge(honest,
                       [](json& j) {
                         for (auto& l : j["hines"]["launches"])
                           for (auto& arg : l["args"])
                             if (arg[0] == "tables" && arg[1] == 0) arg[1] = 4;
                       }),
                 {"hines.launches (digest) is", "sparsecc_contract (cubin)"});
  expect_refused(forge(honest,
                       [](json& j) {
                         j["hines"]["launches"][0]["grid"] = j["hines"]["launches"][0]["grid"].get<int>() + 1;
                       }),
                 {"hines.launches (digest)"});
  expect_refused(forge(honest,
                       [](json& j) {
                         j["hines"]["workspace_bytes"] =
                             j["hines"]["workspace_bytes"].get<std::int64_t>() * 2;
                       }),
                 {"hines.workspace_bytes is"});
  // Tables edited: their size against the stored plan, their bytes against the contract.
  expect_refused(test::forge_bundle(honest, {},
                                    [](std::uint32_t kind, std::vector<unsigned char>& data) {
                                      if (kind == static_cast<std::uint32_t>(rt::SectionKind::tables))
                                        data.resize(data.size() - 4);
                                    }),
                 {"section tables", "plan_summary.table_bytes"});
  expect_refused(test::forge_bundle(honest, {},
                                    [](std::uint32_t kind, std::vector<unsigned char>& data) {
                                      if (kind == static_cast<std::uint32_t>(rt::SectionKind::tables))
                                        data[0] ^= 1;
                                    }),
                 {"section tables (digest)"});
}

// `sparsecc verify` without a GPU: the bundle's matrix must be the metadata's, and the plan it carries
// must be a plan of that matrix with the metadata's launch.
TEST(BundleForgery, PlanSectionRefusesMetadataThatContradictsThePlan) {
  const CsrMatrix& a = matrix();
  const SpmmPlan plan = plan_for(SpmmValueMode::streamed);
  rt::Bundle b;
  b.metadata = spmm_bundle_metadata(plan, a, gpu_target("sm_90"));
  b.plan = to_json(plan).dump();
  EXPECT_EQ(to_json(spmm_bundle_plan(b, a, "b.sccb")), to_json(plan));
  const auto refused = [&](const std::function<void(rt::Bundle&)>& edit, const std::string& part) {
    rt::Bundle bad = b;
    edit(bad);
    try {
      spmm_bundle_plan(bad, a, "b.sccb");
      ADD_FAILURE() << "accepted; expected " << part;
    } catch (const rt::BundleError& e) {
      EXPECT_NE(std::string(e.what()).find("b.sccb: "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  refused([](auto& x) { x.metadata.m = 39; },
          "metadata key 'm' is 39 but the bundle's matrix (its verification section) has 40 rows");
  refused([](auto& x) { x.metadata.nnz -= 1; }, "metadata key 'nnz'");
  refused([](auto& x) { x.metadata.k = 31; }, "metadata key 'k'");
  refused([](auto& x) { x.metadata.block_x *= 2; }, "block_x is");
  refused([](auto& x) { x.metadata.shared_bytes += 4; }, "shared_bytes is");
  refused([](auto& x) { x.plan.clear(); }, "b.sccb: has no plan section");
  refused([](auto& x) { x.plan = "{"; }, "section plan: not valid JSON");
  refused(
      [&](auto& x) {
        nlohmann::json j = to_json(plan);
        j["layout"]["n_tile"] = "wide";
        x.plan = j.dump();
      },
      "section plan: SpMM plan: malformed JSON");
  refused(
      [&](auto& x) {
        nlohmann::json j = to_json(plan);
        j["blocks"][0]["groups"][0] = nlohmann::json::array();  // its nonzeros appear in no step
        x.plan = j.dump();
      },
      "section plan: not a valid plan for the bundle's matrix");
}

// The cubin reader on damaged ELF files: no read outside the file, no contract where the symbol
// table cannot be read, a clear error where the symbol points outside its section.
TEST(BundleForgery, CubinReaderStaysInsideTheFile) {
  // ELF64 little-endian: a section table of three entries (null, .symtab, .strtab) after the header.
  const auto elf = [](std::uint64_t entsize, std::uint64_t symbol_bytes) {
    Raw d(64 + 3 * 64 + 24 * 2 + 32, 0);
    const auto put = [&](std::size_t at, auto v) { std::memcpy(d.data() + at, &v, sizeof v); };
    std::memcpy(d.data(),
                "\x7f"
                "ELF\x02\x01",
                6);
    put(0x28, std::uint64_t{64});
    put(0x3a, std::uint16_t{64});
    put(0x3c, std::uint16_t{3});
    const std::uint64_t symtab = 64 + 3 * 64, strtab = symtab + 48;
    put(64 + 64 + 4, std::uint32_t{2});  // SHT_SYMTAB
    put(64 + 64 + 24, symtab);
    put(64 + 64 + 32, std::uint64_t{48});
    put(64 + 64 + 40, std::uint32_t{2});
    put(64 + 64 + 56, entsize);
    put(64 + 128 + 4, std::uint32_t{3});  // SHT_STRTAB
    put(64 + 128 + 24, strtab);
    put(64 + 128 + 32, std::uint64_t{32});
    std::memcpy(d.data() + strtab + 1, "sparsecc_contract", 18);
    put(symtab + 24, std::uint32_t{1});  // the second symbol: the contract, in section 2 (not PROGBITS)
    put(symtab + 24 + 6, std::uint16_t{2});
    put(symtab + 24 + 16, symbol_bytes);
    return d;
  };
  EXPECT_EQ(rt::cubin_contract(elf(~std::uint64_t{7}, 8), "x"), std::nullopt);  // entry size past the table
  EXPECT_EQ(rt::cubin_contract(elf(0, 8), "x"), std::nullopt);
  EXPECT_THROW(rt::cubin_contract(elf(24, 8), "x"),
               rt::BundleError);  // found, but not in a section with contents
  Raw cut = elf(24, 8);
  cut.resize(100);  // the section table runs past the end
  EXPECT_EQ(rt::cubin_contract(cut, "x"), std::nullopt);
}
