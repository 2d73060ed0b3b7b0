// Tree validation, compartments, the demo cell, the morphology summary, and every real SWC file pinned.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <numbers>
#include <string>

#include "sparsecc/common/error.hpp"
#include "sparsecc/inspector/morphology_summary.hpp"
#include "sparsecc/neuron/hines.hpp"
#include "sparsecc/reference/hines_solve.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

NeuronModel model_of(const std::string& text, const std::string& name = "cell.swc") {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  return build_neuron_model(parse_swc(std::span<const unsigned char>(p, text.size()), name));
}

std::string error_of(const std::string& text) {
  try {
    model_of(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Morphology, RejectsBrokenTreesWithFileAndLine) {
  EXPECT_EQ(error_of("1 1 0 0 0 1 -1\n13 3 0 0 1 1 40\n"),
            "cell.swc:2: parent 40 of sample 13 does not exist");
  EXPECT_EQ(error_of("1 1 0 0 0 1 -1\n2 3 0 0 1 1 1\n2 3 0 0 2 1 1\n"),
            "cell.swc:3: duplicate sample id 2 (first defined at line 2)");
  EXPECT_EQ(error_of("1 1 0 0 0 1 -1\n5 3 0 0 1 1 5\n"), "cell.swc:2: sample 5 is its own parent");
  EXPECT_EQ(error_of("1 1 0 0 0 1 -1\n3 3 0 0 1 1 4\n4 3 0 0 2 1 3\n"),
            "cell.swc:2: samples 3 -> 4 -> 3 form a parent cycle (not connected to any root)");
  EXPECT_EQ(error_of("# nothing\n"), "cell.swc: no samples");
  EXPECT_EQ(error_of("1 3 0 0 0 1 -1\n2 1 0 0 1 3 1\n"),
            "cell.swc:2: soma sample 2 has parent 1 of type 3 (basal dendrite): a soma must not hang off a "
            "neurite");
  EXPECT_NE(error_of("1 1 0 0 0 1 -1\n2 1 0 0 1 1 1\n3 1 0 1 0 1 1\n4 1 1 0 0 1 1\n")
                .find("soma branches at sample 1"),
            std::string::npos);
}

TEST(Morphology, CycleWithoutRootIsRejected) {
  // Only a cycle, no root at all: no crash, no hang.
  EXPECT_NE(error_of("1 3 0 0 0 1 2\n2 3 0 0 1 1 1\n").find("form a parent cycle"), std::string::npos);
}

TEST(Morphology, UnorderedSamplesAndForests) {
  const NeuronModel m =
      model_of("9 3 0 0 3 1 7\n7 3 0 0 2 1 100\n100 1 0 0 0 4 -1\n50 1 5 5 5 2 -1\n8 3 0 0 4 1 7\n");
  ASSERT_EQ(m.num_cells(), 2);
  EXPECT_EQ(m.samples[m.roots[0]].id, 50);  // cells ordered by root id
  EXPECT_EQ(m.samples[m.roots[1]].id, 100);
  EXPECT_EQ(m.samples[m.parent[0]].id, 7);
  const std::int32_t seven = 1;
  ASSERT_EQ(m.num_children(seven), 2);
  EXPECT_EQ(m.samples[m.children[m.child_offsets[seven]]].id, 8);  // children by id
  EXPECT_EQ(m.samples[m.children[m.child_offsets[seven] + 1]].id, 9);
  EXPECT_EQ(m.cell[0], 1);
  EXPECT_EQ(m.cell[3], 0);
}

TEST(Morphology, DeepChainIsIterative) {
  std::string text = "1 1 0 0 0 5 -1\n";
  for (int i = 2; i <= 200000; ++i)
    text += std::to_string(i) + " 3 0 0 " + std::to_string(i) + " 1 " + std::to_string(i - 1) + "\n";
  const NeuronModel m = model_of(text);
  EXPECT_EQ(m.size(), 200000);
  EXPECT_EQ(summarize_morphology(m).max_depth, 199999);
}

TEST(Morphology, CompartmentGeometry) {
  // Point soma (r 5) with one 100 um cylinder of radius 1 in two samples of 50 um each.
  const NeuronModel m = model_of("1 1 0 0 0 5 -1\n2 3 50 0 0 1 1\n3 3 100 0 0 1 2\n");
  const Compartments c = compartmentalize(m);
  ASSERT_EQ(c.size(), 3);
  const double pi = std::numbers::pi;
  EXPECT_DOUBLE_EQ(c.length[1], 50);
  EXPECT_DOUBLE_EQ(c.proximal_radius[1], 1);  // point-soma edge: a cylinder of the child's radius
  EXPECT_NEAR(c.area[0], 4 * pi * 25 + pi * 50, 1e-9);
  EXPECT_NEAR(c.area[1], 2 * pi * 50, 1e-9);
  EXPECT_NEAR(c.area[2], pi * 50, 1e-9);

  CompartmentOptions o;
  o.resolution = 4;
  const Compartments r = compartmentalize(m, o);
  ASSERT_EQ(r.size(), 1 + 4 * 2);
  double len = 0, area = 0;
  for (int i = 0; i < r.size(); ++i) {
    len += r.length[i];
    area += r.area[i];
  }
  EXPECT_NEAR(len, 100, 1e-12);
  EXPECT_NEAR(area, 4 * pi * 25 + 2 * pi * 100, 1e-9);
  EXPECT_EQ(r.of_sample[1], 4);  // intermediates 1..3, then sample 2's node
  EXPECT_NEAR(r.x[2], 25, 1e-12);
  EXPECT_EQ(r.parent[1], 0);
  EXPECT_EQ(r.parent[4], 3);
  EXPECT_THROW(compartmentalize(m, CompartmentOptions{0}), UsageError);
  EXPECT_THROW(compartmentalize(m, CompartmentOptions{kMaxResolution + 1}), UsageError);
}

TEST(Morphology, TaperedFrustumInterpolatesRadius) {
  const NeuronModel m = model_of("1 3 0 0 0 2 -1\n2 3 0 0 10 1 1\n");
  const Compartments c = compartmentalize(m, CompartmentOptions{2});
  ASSERT_EQ(c.size(), 3);
  EXPECT_DOUBLE_EQ(c.radius[1], 1.5);
  EXPECT_DOUBLE_EQ(c.proximal_radius[1], 2);
  EXPECT_DOUBLE_EQ(c.proximal_radius[2], 1.5);
  const double full = std::numbers::pi * 3 * std::hypot(10.0, 1.0);
  EXPECT_NEAR(c.area[0] + c.area[1] + c.area[2], full, 1e-9);
}

TEST(Morphology, ZeroLengthSegmentsMergeAndZeroRadiiAreRaised) {
  // 2 sits on 1, 3 on 2: both merge into 1; 4 continues from there with 3's radius as proximal radius.
  const NeuronModel m = model_of("1 3 0 0 0 0 -1\n2 3 0 0 0 0.5 1\n3 3 0 0 0 0.7 2\n4 3 0 0 10 0 3\n");
  const Compartments c = compartmentalize(m);
  ASSERT_EQ(c.size(), 2);
  EXPECT_EQ(c.merged_samples, 2);
  EXPECT_EQ(c.of_sample[1], 0);
  EXPECT_EQ(c.of_sample[2], 0);
  EXPECT_DOUBLE_EQ(c.proximal_radius[1], 0.7);
  EXPECT_DOUBLE_EQ(c.radius[1], 0.05);
  EXPECT_DOUBLE_EQ(c.radius[0], 0.05);
  const HinesSystem h = assemble_hines(c);
  EXPECT_TRUE(validate_hines(h).empty());
  // An isolated zero-radius sample is a sphere of the minimum radius: positive area, finite matrix.
  const Compartments single = compartmentalize(model_of("1 3 0 0 0 0 -1\n"));
  EXPECT_GT(single.area[0], 0);
  EXPECT_TRUE(validate_hines(assemble_hines(single)).empty());
}

TEST(Morphology, DemoNeuron) {
  const NeuronModel m = make_demo_neuron();
  EXPECT_EQ(m.size(), 357);
  EXPECT_EQ(m.num_cells(), 1);
  const MorphologySummary s = summarize_morphology(m);
  EXPECT_EQ(s.compartments, 357);
  EXPECT_EQ(s.branch_points, 1 + 4 * 3 + 3);  // soma, 3 per basal tree, 3 in the tuft
  EXPECT_EQ(s.terminals, 1 + 4 * 4 + 4);
  const HinesSystem h = assemble_hines(m);
  EXPECT_TRUE(validate_hines(h).empty());
  EXPECT_EQ(make_demo_neuron().samples.size(), m.samples.size());
}

TEST(Morphology, SummaryOfSimpleCell) {
  // NeuroM's simple.swc: samples 2 and 6 sit on the soma and merge into it.
  const NeuronModel m = model_of(
      " 1 1  0  0 0 1. -1\n 2 3  0  0 0 1.  1\n 3 3  0  5 0 1.  2\n 4 3 -5  5 0 0.  3\n 5 3  6  5 0 0.  3\n"
      " 6 2  0  0 0 1.  1\n 7 2  0 -4 0 1.  6\n 8 2  6 -4 0 0.  7\n 9 2 -5 -4 0 0.  7\n",
      "simple.swc");
  const MorphologySummary s = summarize_morphology(m);
  EXPECT_EQ(s.cells, 1);
  EXPECT_EQ(s.samples, 9);
  EXPECT_EQ(s.merged_samples, 2);
  EXPECT_EQ(s.compartments, 7);
  EXPECT_EQ(s.branch_points, 3);
  EXPECT_EQ(s.terminals, 4);
  EXPECT_EQ(s.max_depth, 2);
  EXPECT_NEAR(s.total_length_um, 5 + 5 + 6 + 4 + 6 + 5, 1e-12);
  EXPECT_EQ(s.samples_per_type.at(3), 4);
  const nlohmann::json j = to_json(s);
  for (const char* key : {"cells", "samples", "compartments", "branch_points", "max_depth", "terminals"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["compartments"], 7);
  EXPECT_EQ(j["samples_per_type"]["2"], 4);
  EXPECT_EQ(summarize_morphology(m, 3).compartments, 1 + 3 * 6);
  EXPECT_EQ(summarize_morphology(m, 3).max_depth, 6);
  const std::string text = to_text(s);
  EXPECT_NE(text.find("compartments   7"), std::string::npos);
  EXPECT_NE(text.find("simple.swc"), std::string::npos);
}

// Every file of the shared SWC set: accepted with its cell/sample/compartment counts, or rejected.
struct Expected {
  const char* path;
  int cells, samples, compartments;
  const char* error;  // message substring when rejected
};

const Expected kFiles[] = {
    {"jaxley/morph_3_types.swc", 1, 4, 4, nullptr},
    {"jaxley/morph_3_types_single_point_soma.swc", 1, 6, 6, nullptr},
    {"jaxley/morph_allen_485574832.swc", 1, 3573, 3573, nullptr},
    {"jaxley/morph_ca1_n120.swc", 1, 2630, 2630, nullptr},
    {"jaxley/morph_ca1_n120_250.swc", 1, 250, 250, nullptr},
    {"jaxley/morph_ca1_n120_250_single_point_soma.swc", 1, 242, 242, nullptr},
    {"jaxley/morph_ca1_n120_single_point_soma.swc", 1, 2619, 2619, nullptr},
    {"jaxley/morph_flywire_t4_720575940626407426.swc", 1, 2455, 2455, nullptr},  // unordered, nm units
    {"jaxley/morph_interrupted_soma.swc", 1, 6, 6, nullptr},
    {"jaxley/morph_l5pc_with_axon.swc", 1, 10617, 10514, nullptr},  // 103 zero-length merged
    {"jaxley/morph_minimal.swc", 1, 8, 8, nullptr},
    {"jaxley/morph_multiple_roots.swc", 0, 0, 0, ":9: duplicate sample id 3 (first defined at line 7)"},
    {"jaxley/morph_non_somatic_branchpoint.swc", 1, 8, 8, nullptr},
    {"jaxley/morph_retina_20161028_1.swc", 1, 7213, 7135, nullptr},  // all radii 0: raised to 0.05
    {"jaxley/morph_single_branch.swc", 1, 4, 3, nullptr},
    {"jaxley/morph_soma_both_ends.swc", 1, 6, 6, nullptr},
    {"jaxley/morph_somatic_branchpoint.swc", 1, 8, 8, nullptr},
    {"jaxley/morph_variable_radiuses_multi_branch.swc", 1, 24, 24, nullptr},
    {"jaxley/morph_variable_radiuses_within_branch.swc", 1, 4, 4, nullptr},
    {"neurom/Neuron-flat.swc", 1, 847, 839, nullptr},
    {"neurom/Neuron-monotonic.swc", 1, 927, 843, nullptr},
    {"neurom/Neuron.swc", 1, 847, 843, nullptr},
    {"neurom/Neuron_3_random_walker_branches.swc", 1, 1503, 1503, nullptr},
    {"neurom/Neuron_disconnected_components.swc", 5, 843, 839, nullptr},  // soma + 4 detached neurites
    {"neurom/Neuron_missing_ids.swc", 0, 0, 0, ":42: parent 7 of sample 8 does not exist"},
    {"neurom/Neuron_missing_parents.swc", 0, 0, 0, ":40: parent 5 of sample 6 does not exist"},
    {"neurom/Neuron_no_missing_ids_no_zero_segs.swc", 1, 843, 839, nullptr},
    {"neurom/Neuron_small_radius.swc", 1, 847, 839, nullptr},
    {"neurom/Neuron_zero_length_sections.swc", 1, 847, 824, nullptr},
    {"neurom/Neuron_zero_length_segments.swc", 1, 847, 839, nullptr},
    {"neurom/Neuron_zero_radius.swc", 1, 9, 9, nullptr},
    {"neurom/Single_apical.swc", 1, 214, 212, nullptr},
    {"neurom/Single_apical_no_soma.swc", 1, 211, 210, nullptr},
    {"neurom/Single_axon.swc", 1, 214, 212, nullptr},
    {"neurom/Single_basal.swc", 1, 214, 212, nullptr},
    {"neurom/Soma_origin.swc", 1, 3, 3, nullptr},
    {"neurom/Soma_translated_1.swc", 1, 3, 3, nullptr},
    {"neurom/Soma_translated_2.swc", 1, 3, 3, nullptr},
    {"neurom/custom_type.swc", 1, 9, 7, nullptr},
    {"neurom/dangling_axon.swc", 1, 9, 8, nullptr},
    {"neurom/dangling_dendrite.swc", 1, 9, 8, nullptr},
    {"neurom/empty_segments.swc", 1, 4, 4, nullptr},
    {"neurom/fat_end.swc", 1, 10, 9, nullptr},
    {"neurom/heterogeneous_morphology.swc", 1, 23, 23, nullptr},
    {"neurom/multiple_somata.swc", 2, 10, 8, nullptr},  // the second soma is its own one-compartment cell
    {"neurom/narrow_start.swc", 1, 4, 4, nullptr},
    {"neurom/no-axon.swc", 1, 9, 7, nullptr},
    {"neurom/non_increasing_trunk_off_1_16pt.swc", 1, 16, 16, nullptr},
    {"neurom/ordering/reversed_NRN_neurite_order.swc", 1, 4, 1, nullptr},  // all four samples coincide
    {"neurom/ordering/sample.swc", 1, 53, 51, nullptr},
    {"neurom/ordering/sample_disordered.swc", 1, 53, 51, nullptr},
    {"neurom/ordering/sample_mixed_tree_sections.swc", 1, 53, 51, nullptr},
    {"neurom/point_soma.swc", 1, 1, 1, nullptr},
    {"neurom/point_soma_single_neurite.swc", 1, 5, 5, nullptr},
    {"neurom/point_soma_single_neurite2.swc", 1, 5, 5, nullptr},
    {"neurom/random_trunk_off_0_16pt.swc", 1, 16, 16, nullptr},
    {"neurom/repeated_id.swc", 0, 0, 0, ":6: duplicate sample id 4 (first defined at line 5)"},
    {"neurom/root_node_jump.swc", 1, 9, 8, nullptr},
    {"neurom/sequential_trunk_off_0_16pt.swc", 1, 16, 16, nullptr},
    {"neurom/sequential_trunk_off_1_16pt.swc", 1, 16, 16, nullptr},
    {"neurom/sequential_trunk_off_42_16pt.swc", 1, 16, 16, nullptr},
    {"neurom/simple-different-section-types.swc", 1, 9, 7, nullptr},
    {"neurom/simple-different-soma.swc", 1, 9, 9, nullptr},
    {"neurom/simple.swc", 1, 9, 7, nullptr},
    {"neurom/simple_reversed.swc", 1, 9, 7, nullptr},
    {"neurom/simple_trunk.swc", 1, 9, 9, nullptr},
    {"neurom/soma/bifurcating_soma.swc", 0, 0, 0, ":5: soma branches at sample 1 (3 soma neighbours)"},
    {"neurom/soma/three_pt_soma.swc", 1, 23, 23, nullptr},
    {"neurom/soma_with_neurite_parent.swc", 0, 0, 0, ":8: soma sample 6 has parent 5 of type 3"},
    {"neurom/soma_zero_radius.swc", 1, 9, 7, nullptr},
    {"neurom/split_soma_two_neurites.swc", 1, 11, 11, nullptr},
    {"neurom/strahler.swc", 1, 21, 20, nullptr},
    {"neurom/test_morph.swc", 1, 29, 29, nullptr},
    {"neurom/undefined_type.swc", 1, 9, 7, nullptr},
    {"neurom/z_jump.swc", 1, 11, 11, nullptr},
};

TEST(NeuronRealData, EveryFileIsPinned) {
  SPARSECC_DATA_OR_SKIP(dir, "swc");
  std::map<std::string, const Expected*> table;
  for (const Expected& e : kFiles) table[e.path] = &e;
  int seen = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.path().extension() != ".swc") continue;
    const std::string rel = std::filesystem::relative(entry.path(), dir).generic_string();
    ASSERT_TRUE(table.count(rel)) << rel << " is not in the table";
    ++seen;
  }
  EXPECT_EQ(seen, static_cast<int>(std::size(kFiles)));
  for (const Expected& e : kFiles) {
    SCOPED_TRACE(e.path);
    const std::string path = (dir / e.path).string();
    if (e.error) {
      try {
        load_neuron(path);
        ADD_FAILURE() << "accepted, expected: " << e.error;
      } catch (const InputError& err) {
        EXPECT_NE(std::string(err.what()).find(path + e.error), std::string::npos) << err.what();
      }
      continue;
    }
    const NeuronModel m = load_neuron(path);
    EXPECT_EQ(m.num_cells(), e.cells);
    EXPECT_EQ(m.size(), e.samples);
    const HinesSystem h = assemble_hines(m);
    EXPECT_EQ(h.size(), e.compartments);
    EXPECT_EQ(h.num_cells(), e.cells);
    const auto issues = validate_hines(h);
    EXPECT_TRUE(issues.empty()) << issues.front();
    std::vector<double> off(h.size(), 0.0);
    for (int i = 0; i < h.size(); ++i) {
      if (h.parent[i] < 0) continue;
      off[i] += std::fabs(h.upper[i]);
      off[h.parent[i]] += std::fabs(h.lower[i]);
      ASSERT_EQ(h.upper[i], h.lower[i]);
      ASSERT_LT(h.upper[i], 0);
    }
    for (int i = 0; i < h.size(); ++i) {  // strictly dominant by exactly the membrane terms
      const double margin = h.cap_over_dt[i] + h.leak[i];
      ASSERT_GT(margin, 0);
      ASSERT_NEAR(h.diag[i] - off[i], margin, 1e-12 * h.diag[i]);
    }
    const std::vector<double> v(h.size(), -65.0), i_ext(h.size(), 0.01);
    const std::vector<double> x = hines_solve(h, hines_rhs(h, v, i_ext));
    for (const double xi : x) ASSERT_TRUE(std::isfinite(xi));
    EXPECT_EQ(summarize_morphology(m).compartments, e.compartments);
  }
}

TEST(NeuronRealData, OrderingVariantsGiveTheSameSystem) {
  SPARSECC_DATA_OR_SKIP(dir, "swc/neurom/ordering");
  const HinesSystem a = assemble_hines(load_neuron((dir / "sample.swc").string()));
  for (const char* other : {"sample_disordered.swc", "sample_mixed_tree_sections.swc"}) {
    SCOPED_TRACE(other);
    const HinesSystem b = assemble_hines(load_neuron((dir / other).string()));
    EXPECT_EQ(a.parent, b.parent);
    EXPECT_LT(test::rel_l2_error(b.diag, a.diag), 1e-15);
    EXPECT_EQ(a.upper, b.upper);
    EXPECT_EQ(a.lower, b.lower);
  }
}

}  // namespace
}  // namespace sparsecc
