// sparsecc embed's text generation: layer names become distinct C++ identifiers, the output is
// deterministic, the generated arrays decode back to the exact bundle bytes and Hines systems, bad
// bundles are rejected by name, and the Hines API appears for Hines layers only.
#include "sparsecc/bundle/embed.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "hines_support.hpp"
#include "sparsecc/bundle/hines_bundle.hpp"
#include "sparsecc/bundle/spmm_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/inspector/hines_planner.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/matrix/prune.hpp"
#include "sparsecc/neuron/morphology.hpp"
#include "sparsecc/plan/hines_schedule.hpp"
#include "test_support.hpp"

using namespace sparsecc;

namespace {

// An SpMM bundle as `sparsecc compile` writes it, with a stand-in for the code (no GPU toolchain).
std::vector<unsigned char> spmm_bundle_bytes(std::uint64_t seed) {
  const CsrMatrix a = magnitude_prune(random_dense(13, 9, seed), 0.7);
  SpmmProblem p;
  p.m = a.rows;
  p.k = a.cols;
  p.n = 32;  // an unrolled plan (N <= 16 plans rolled, with a step table in `values`)
  const SpmmPlan plan = plan_spmm(a, p);
  rt::Bundle b;
  b.metadata = spmm_bundle_metadata(plan, a, gpu_target("sm_90"));
  b.ptx = "// not compiled in this test\n";
  b.reference = csr_reference_bytes(a);
  return rt::bundle_bytes(b);
}

rt::Bundle hines_test_bundle(const HinesSystem& s) {
  const HinesPlan plan = plan_hines(s, 1, "f64", {});
  return hines_bundle(plan, schedule_hines(plan), s, {1, 2, 3}, "// ptx", "sm_90");
}

// The elements of the generated array `name` (e.g. "kBundle0"), checked against its declared size.
std::vector<std::string> array_elements(const std::string& source, const std::string& name) {
  const std::size_t decl = source.find(" " + name + "[");
  if (decl == std::string::npos) {
    ADD_FAILURE() << name << " is not in the source";
    return {};
  }
  const std::size_t size = std::stoull(source.substr(decl + name.size() + 2));
  const std::size_t begin = source.find("= {\n", decl) + 4;
  const std::size_t end = source.find("};", begin);
  std::vector<std::string> out;
  std::string cur;
  for (std::size_t i = begin; i < end; ++i) {
    const char c = source[i];
    if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (c != ' ' && c != '\n') {
      cur += c;
    }
  }
  EXPECT_TRUE(cur.empty()) << name << ": no comma after the last element";
  EXPECT_EQ(out.size(), size) << name;
  return out;
}

std::vector<unsigned char> decode_bytes(const std::string& source, const std::string& name) {
  std::vector<unsigned char> out;
  for (const std::string& e : array_elements(source, name)) {
    EXPECT_EQ(e.size(), 4u) << e;
    EXPECT_EQ(e.substr(0, 2), "0x") << e;
    out.push_back(static_cast<unsigned char>(std::stoul(e, nullptr, 16)));
  }
  return out;
}

// A large bundle's array of little-endian 64-bit words, cut to the size its accessor returns.
std::vector<unsigned char> decode_words(const std::string& source, const std::string& name) {
  std::vector<unsigned char> out;
  for (const std::string& e : array_elements(source, name + "Words")) {
    EXPECT_EQ(e.size(), 18u) << e;
    const std::uint64_t w = std::stoull(e, nullptr, 16);
    for (int b = 0; b < 8; ++b) out.push_back(static_cast<unsigned char>(w >> (8 * b)));
  }
  const std::string access = "reinterpret_cast<const unsigned char*>(" + name + "Words), ";
  const std::size_t at = source.find(access);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no accessor of " << name;
    return {};
  }
  const std::size_t size = std::stoull(source.substr(at + access.size()));
  EXPECT_LT(out.size() - size, 8u);
  out.resize(size);
  return out;
}

template <class T>
std::vector<T> decode_numbers(const std::string& source, const std::string& name) {
  std::vector<T> out;
  for (const std::string& e : array_elements(source, name)) {
    char* end = nullptr;
    out.push_back(static_cast<T>(std::strtod(e.c_str(), &end)));
    EXPECT_EQ(*end, '\0') << e;
  }
  return out;
}

using test::count;

}  // namespace

TEST(Embed, LayerNamesBecomeIdentifiers) {
  EXPECT_EQ(cpp_identifier("encoder.layer.0/fc1"), "encoder_layer_0_fc1");
  EXPECT_EQ(cpp_identifier("fc1"), "fc1");
  EXPECT_EQ(cpp_identifier("0.weight"), "l_0_weight");
  EXPECT_EQ(cpp_identifier("__a..b__"), "a_b");  // no reserved double underscores, no leading '_'
  EXPECT_EQ(cpp_identifier("_Upper"), "Upper");
  EXPECT_EQ(cpp_identifier("conv 3x3 (block 2)"), "conv_3x3_block_2");
  EXPECT_EQ(cpp_identifier("\xc3\xa4rger-1"), "rger_1");  // non-ASCII bytes are separators too
  EXPECT_EQ(cpp_identifier("class"), "class_");
  EXPECT_EQ(cpp_identifier("delete"), "delete_");
  EXPECT_EQ(cpp_identifier("std"), "std_");
  EXPECT_EQ(cpp_identifier("layers"), "layers_");  // names of the generated API
  EXPECT_EQ(cpp_identifier("Kernels"), "Kernels_");
  EXPECT_EQ(cpp_identifier("embedded"), "embedded_");
  EXPECT_EQ(cpp_identifier("class_"), "class_");  // the same as "class": embed_bundles calls it a collision
  EXPECT_THROW(cpp_identifier("..."), UsageError);
  EXPECT_THROW(cpp_identifier(""), UsageError);
}

TEST(Embed, CollidingIdentifiersNameBothLayers) {
  const auto bytes = spmm_bundle_bytes(1);
  try {
    embed_bundles({{"enc.fc1", bytes}, {"other", bytes}, {"enc/fc1", bytes}}, "m", "m.hpp");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("\"enc.fc1\""), std::string::npos) << what;
    EXPECT_NE(what.find("\"enc/fc1\""), std::string::npos) << what;
    EXPECT_NE(what.find("enc_fc1"), std::string::npos) << what;
  }
  EXPECT_THROW(embed_bundles({{"a", bytes}, {"a", bytes}}, "m", "m.hpp"), UsageError);
  EXPECT_THROW(embed_bundles({{"class", bytes}, {"class_", bytes}}, "m", "m.hpp"), UsageError);
}

TEST(Embed, NamespaceAndHeaderNameAreChecked) {
  const std::vector<EmbeddedLayer> one = {{"fc", spmm_bundle_bytes(1)}};
  EXPECT_NO_THROW(embed_bundles(one, "models", "m.hpp"));
  EXPECT_NO_THROW(embed_bundles(one, "my::models_v2", "gen/m.hpp"));
  EXPECT_NO_THROW(embed_bundles(one, "sparsecc::models", "m.hpp"));
  for (const char* bad :
       {"", "a::", "::a", "a:::b", "1a", "a b", "a-b", "class", "a::std", "a::sparsecc", "a__b", "_A"})
    EXPECT_THROW(embed_bundles(one, bad, "m.hpp"), UsageError) << "'" << bad << "'";
  EXPECT_THROW(embed_bundles(one, "m", "a\"b.hpp"), UsageError);
  EXPECT_THROW(embed_bundles(one, "m", ""), UsageError);
  EXPECT_THROW(embed_bundles({}, "m", "m.hpp"), UsageError);
}

TEST(Embed, OutputIsDeterministic) {
  const HinesSystem cell = assemble_hines(make_demo_neuron());
  const std::vector<EmbeddedLayer> layers = {{"encoder.fc1", spmm_bundle_bytes(2)},
                                             {"cell", rt::bundle_bytes(hines_test_bundle(cell))}};
  const EmbedSources a = embed_bundles(layers, "model", "model.hpp");
  const EmbedSources b = embed_bundles(layers, "model", "model.hpp");
  EXPECT_EQ(a.header, b.header);
  EXPECT_EQ(a.source, b.source);
  EXPECT_NE(embed_bundles(layers, "other", "model.hpp").header, a.header);
  EXPECT_NE(a.source.find("#include \"model.hpp\"\n"), std::string::npos);
  EXPECT_EQ(a.header.rfind("// Generated by sparsecc embed; do not edit.\n", 0), 0u);
  EXPECT_EQ(a.source.rfind("// Generated by sparsecc embed; do not edit.\n", 0), 0u);
}

TEST(Embed, ArraysDecodeToTheExactBundleBytes) {
  const HinesSystem cell = assemble_hines(make_demo_neuron());
  const std::vector<EmbeddedLayer> layers = {{"encoder.layer.0/fc1", spmm_bundle_bytes(3)},
                                             {"cell", rt::bundle_bytes(hines_test_bundle(cell))},
                                             {"fc2", spmm_bundle_bytes(4)}};
  const EmbedSources e = embed_bundles(layers, "model", "model.hpp");
  for (std::size_t i = 0; i < layers.size(); ++i) {
    EXPECT_EQ(decode_bytes(e.source, "kBundle" + std::to_string(i)), layers[i].bytes) << i;
    EXPECT_NE(e.source.find("alignas(16) static const unsigned char kBundle" + std::to_string(i) + "["),
              std::string::npos);
  }
  // The bytes are hex, 16 a line: no string literal however large the bundle.
  EXPECT_NE(e.source.find("\n    0x53, 0x50, 0x43, 0x43, 0x42, 0x4e, 0x44, 0x4c,"), std::string::npos);
  EXPECT_NE(e.header.find("inline constexpr std::size_t kLayerCount = 3;"), std::string::npos);
  EXPECT_NE(e.header.find("namespace encoder_layer_0_fc1 {\ninline constexpr const char* kName = "
                          "\"encoder.layer.0/fc1\";\ninline constexpr std::int64_t M = 13, K = 9, N = 32;\n"
                          "inline constexpr std::size_t kIndex = 0;\n"),
            std::string::npos)
      << e.header;
  EXPECT_NE(e.header.find(std::string("namespace cell {\ninline constexpr const char* kName = \"cell\";\n") +
                          "inline constexpr std::int64_t M = " + std::to_string(cell.size()) +
                          ", K = " + std::to_string(cell.size()) +
                          ", N = 1;\ninline constexpr std::size_t kIndex = 1;\n"),
            std::string::npos)
      << e.header;
  EXPECT_NE(e.header.find("  const sparsecc::rt::SpmmExecutor& encoder_layer_0_fc1();\n"), std::string::npos);
  EXPECT_NE(e.header.find("  const sparsecc::rt::HinesExecutor& cell();\n"), std::string::npos);
  EXPECT_NE(e.header.find("  const sparsecc::rt::SpmmExecutor& fc2();\n"), std::string::npos);
  EXPECT_NE(e.source.find("sparsecc::rt::HinesExecutor::load_bytes(embedded::bundle1(), \"cell\", "),
            std::string::npos);
}

TEST(Embed, StripLeavesOutPtxAndReference) {
  rt::Bundle b = rt::parse_bundle(spmm_bundle_bytes(5), "b");
  b.cubin = std::vector<unsigned char>(64, 0x7f);  // a stand-in: the bundle is parsed, never loaded here
  const std::vector<unsigned char> full = rt::bundle_bytes(b);
  EXPECT_EQ(stripped_bundle(full, "b", {}), full);
  const rt::Bundle both =
      rt::parse_bundle(stripped_bundle(full, "b", {.strip_ptx = true, .strip_reference = true}), "b");
  EXPECT_TRUE(both.ptx.empty());
  EXPECT_TRUE(both.reference.empty());
  EXPECT_EQ(both.cubin, b.cubin);
  EXPECT_EQ(both.metadata.fingerprint, b.metadata.fingerprint);
  EXPECT_EQ(rt::parse_bundle(stripped_bundle(full, "b", {.strip_ptx = true}), "b").reference, b.reference);
  // Without a cubin the PTX is the code, and a Hines bundle's verification section is its system:
  // both stay.
  const std::vector<unsigned char> ptx_only = spmm_bundle_bytes(6);
  EXPECT_FALSE(rt::parse_bundle(stripped_bundle(ptx_only, "p", {.strip_ptx = true}), "p").ptx.empty());
  const std::vector<unsigned char> cell =
      rt::bundle_bytes(hines_test_bundle(assemble_hines(make_demo_neuron())));
  EXPECT_EQ(stripped_bundle(cell, "cell", {.strip_reference = true}), cell);
  const rt::Bundle hines =
      rt::parse_bundle(stripped_bundle(cell, "cell", {.strip_ptx = true, .strip_reference = true}), "cell");
  EXPECT_TRUE(hines.ptx.empty());
  EXPECT_EQ(hines.reference, rt::parse_bundle(cell, "cell").reference);
  // The embedded array holds the stripped bytes.
  const EmbedSources e =
      embed_bundles({{"fc", full}, {"cell", cell}}, "m", "m.hpp", {.strip_reference = true});
  EXPECT_EQ(decode_bytes(e.source, "kBundle0"), stripped_bundle(full, "fc", {.strip_reference = true}));
  EXPECT_EQ(decode_bytes(e.source, "kBundle1"), cell);
}

TEST(Embed, LargeBundlesAreWordsThatDecodeToTheExactBytes) {
  // Over 1 MiB a bundle is stored as 64-bit words (compilers choke on tens of millions of elements).
  rt::Bundle b = rt::parse_bundle(spmm_bundle_bytes(8), "b");
  b.ptx.assign((std::size_t{1} << 20) + 13, ' ');
  for (std::size_t i = 0; i < b.ptx.size(); i += 61) b.ptx[i] = static_cast<char>('\n' + i % 7);
  const auto big = rt::bundle_bytes(b);
  const auto small = spmm_bundle_bytes(9);
  const EmbedSources e = embed_bundles({{"small", small}, {"big", big}}, "m", "m.hpp");
  EXPECT_EQ(decode_bytes(e.source, "kBundle0"), small);
  EXPECT_EQ(decode_words(e.source, "kBundle1"), big);
  EXPECT_NE(e.source.find("alignas(16) static const std::uint64_t kBundle1Words["), std::string::npos);
  EXPECT_NE(e.source.find("static_assert(std::endian::native == std::endian::little"), std::string::npos);
  EXPECT_EQ(e.source.find(" kBundle1["), std::string::npos);
  EXPECT_EQ(embed_bundles({{"small", small}}, "m", "m.hpp").source.find("std::endian"), std::string::npos);
}

TEST(Embed, HinesArraysOnlyForHinesLayersAndExact) {
  const HinesSystem cell = assemble_hines(make_demo_neuron());
  const rt::Bundle hb = hines_test_bundle(cell);
  const EmbedSources e =
      embed_bundles({{"fc", spmm_bundle_bytes(5)}, {"cell", rt::bundle_bytes(hb)}}, "model", "model.hpp");
  EXPECT_EQ(count(e.header, "std::span<const std::int32_t> parent();"), 1u);
  EXPECT_EQ(count(e.header, "std::span<const double> cap_over_dt();"), 1u);
  EXPECT_EQ(count(e.header, "kLeakReversalMv = -65.0;"), 1u);
  const std::size_t fc_begin = e.header.find("namespace fc {"), fc_end = e.header.find("}  // namespace fc");
  ASSERT_LT(fc_begin, fc_end);
  EXPECT_EQ(e.header.substr(fc_begin, fc_end - fc_begin).find("parent"), std::string::npos);
  for (const char* a : {"kParent0", "kDiag0", "kCapOverDt0", "kCellOffsets0"})
    EXPECT_EQ(e.source.find(a), std::string::npos) << a;
  // The system round-trips exactly, the passive-step terms included (shortest round-trip decimals).
  EXPECT_EQ(decode_numbers<std::int32_t>(e.source, "kParent1"), cell.parent);
  EXPECT_EQ(decode_numbers<double>(e.source, "kDiag1"), cell.diag);
  EXPECT_EQ(decode_numbers<double>(e.source, "kUpper1"), cell.upper);
  EXPECT_EQ(decode_numbers<double>(e.source, "kLower1"), cell.lower);
  EXPECT_EQ(decode_numbers<double>(e.source, "kCapOverDt1"), cell.cap_over_dt);
  EXPECT_EQ(decode_numbers<double>(e.source, "kLeak1"), cell.leak);
  EXPECT_EQ(decode_numbers<std::int32_t>(e.source, "kCompartmentOf1"), cell.compartment_of);
  EXPECT_EQ(decode_numbers<std::int32_t>(e.source, "kCellOffsets1"), cell.cell_offsets);
}

TEST(Embed, HandBuiltHinesSystemsGiveEmptyOptionalArrays) {
  // No passive-step terms and no permutation: the functions exist and return empty spans.
  const EmbedSources e =
      embed_bundles({{"tree", rt::bundle_bytes(hines_test_bundle(test::notes_tree()))}}, "m", "m.hpp");
  EXPECT_NE(e.source.find("std::span<const double> cap_over_dt() { return {}; }"), std::string::npos);
  EXPECT_NE(e.source.find("std::span<const double> leak() { return {}; }"), std::string::npos);
  EXPECT_NE(e.source.find("std::span<const std::int32_t> compartment_of() { return {}; }"),
            std::string::npos);
  EXPECT_NE(e.header.find("inline constexpr double kLeakReversalMv = 0.0;"), std::string::npos);
  EXPECT_EQ(decode_numbers<double>(e.source, "kDiag0"), test::notes_tree().diag);
}

TEST(Embed, BadBundlesAreRejectedByName) {
  auto bytes = spmm_bundle_bytes(6);
  auto expect_error = [](const std::vector<EmbeddedLayer>& layers, const std::string& part) {
    try {
      embed_bundles(layers, "m", "m.hpp");
      ADD_FAILURE() << "no error";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  auto truncated = bytes;
  truncated.resize(100);
  expect_error({{"good", bytes}, {"dec.fc", truncated}}, "layer \"dec.fc\"");
  EXPECT_THROW(embed_bundles({{"x", truncated}}, "m", "m.hpp"), rt::BundleError);
  auto flipped = bytes;
  flipped[flipped.size() / 2] ^= 1;
  expect_error({{"flip", flipped}}, "layer \"flip\"");
  expect_error({{"empty", {}}}, "layer \"empty\"");
  // Hines bundles need their verification section (the system), and it must be valid.
  rt::Bundle hb = hines_test_bundle(assemble_hines(make_demo_neuron()));
  rt::Bundle no_reference = hb;
  no_reference.reference.clear();
  expect_error({{"cell", rt::bundle_bytes(no_reference)}},
               "layer \"cell\": a Hines bundle without its verification");
  rt::Bundle bad_reference = hb;
  bad_reference.reference.resize(bad_reference.reference.size() - 8);
  EXPECT_THROW(embed_bundles({{"cell", rt::bundle_bytes(bad_reference)}}, "m", "m.hpp"), InputError);
  expect_error({{"cell", rt::bundle_bytes(bad_reference)}}, "layer \"cell\"");
  EXPECT_THROW(parse_embeddable_bundle(rt::bundle_bytes(bad_reference), "cell.sccb"), InputError);
  EXPECT_NO_THROW(parse_embeddable_bundle(rt::bundle_bytes(hb), "cell.sccb"));
}

TEST(Embed, NamesAreEscapedInStringLiterals) {
  const EmbedSources e = embed_bundles({{"a\"b\\c\n\xc3\xa4??", spmm_bundle_bytes(7)}}, "m", "m.hpp");
  EXPECT_NE(e.header.find("namespace a_b_c {"), std::string::npos);
  EXPECT_NE(e.header.find("kName = \"a\\\"b\\\\c\\012\\303\\244\\?\\?\";"), std::string::npos) << e.header;
}
