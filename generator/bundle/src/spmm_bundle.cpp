#include "sparsecc/bundle/spmm_bundle.hpp"

#include <fmt/format.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <tuple>

#include "section_bytes.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/plan/launch_metadata.hpp"

namespace sparsecc {

using section_bytes::append;
using section_bytes::take;

std::vector<unsigned char> csr_reference_bytes(const CsrMatrix& a) {
  std::vector<unsigned char> out;
  const std::uint64_t head[3] = {static_cast<std::uint64_t>(a.rows), static_cast<std::uint64_t>(a.cols),
                                 static_cast<std::uint64_t>(a.nnz())};
  append(out, head, 3);
  append(out, a.row_ptr.data(), a.row_ptr.size());
  append(out, a.col_idx.data(), a.col_idx.size());
  std::vector<float> values(a.values.begin(), a.values.end());
  append(out, values.data(), values.size());
  return out;
}

CsrMatrix csr_from_reference_bytes(std::span<const unsigned char> d, const std::string& name) {
  std::size_t at = 0;
  std::uint64_t head[3];
  take(d, at, head, 3, name, "header");
  const std::uint64_t limit = d.size();  // every count is bounded by the bytes present
  if (head[0] >= limit || head[1] > (std::uint64_t{1} << 31) || head[2] > limit)
    throw_at_byte(name, 0,
                  fmt::format("verification section: implausible shape {}x{} with {} nonzeros", head[0],
                              head[1], head[2]));
  CsrMatrix a;
  a.rows = static_cast<std::int64_t>(head[0]);
  a.cols = static_cast<std::int64_t>(head[1]);
  a.source_dtype = DType::f32;
  a.row_ptr.resize(head[0] + 1);
  take(d, at, a.row_ptr.data(), a.row_ptr.size(), name, "row offsets");
  a.col_idx.resize(head[2]);
  take(d, at, a.col_idx.data(), a.col_idx.size(), name, "column indices");
  std::vector<float> values(head[2]);
  take(d, at, values.data(), values.size(), name, "values");
  if (at != d.size())
    throw_at_byte(name, static_cast<std::int64_t>(at), "verification section: trailing bytes");
  a.values.assign(values.begin(), values.end());
  try {
    validate(a);
  } catch (const UsageError& e) {
    throw_at_byte(name, 0, fmt::format("verification section: {}", e.what()));
  }
  return a;
}

std::string matrix_fingerprint(const CsrMatrix& a) {
  return fmt::format("{:016x}", rt::fnv1a64(csr_reference_bytes(a)));
}

rt::BundleMetadata spmm_bundle_metadata(const SpmmPlan& plan, const CsrMatrix& a, const GpuTarget& target) {
  rt::BundleMetadata md = spmm_launch_metadata(plan, a, target);
  md.fingerprint = matrix_fingerprint(a);
  return md;
}

rt::Bundle make_spmm_bundle(const SpmmPlan& plan, const CsrMatrix& a, const GpuTarget& target,
                            std::vector<unsigned char> cubin, std::string ptx, std::vector<float> values,
                            std::vector<std::uint32_t> fragments, const std::vector<double>& bias) {
  rt::Bundle bundle;
  bundle.metadata = spmm_bundle_metadata(plan, a, target);
  bundle.cubin = std::move(cubin);
  bundle.ptx = std::move(ptx);
  bundle.values = std::move(values);
  bundle.fragments = std::move(fragments);
  bundle.bias.assign(bias.begin(), bias.end());
  bundle.reference = csr_reference_bytes(a);
  bundle.plan = to_json(plan).dump();
  return bundle;
}

void check_spmm_bundle_matrix(const rt::BundleMetadata& md, const CsrMatrix& a, const std::string& name) {
  for (const auto& [key, stated, actual, what] : {std::tuple{"m", md.m, a.rows, "rows"},
                                                  {"k", md.k, a.cols, "columns"},
                                                  {"nnz", md.nnz, a.nnz(), "nonzeros"}})
    if (stated != actual)
      throw rt::BundleError(fmt::format(
          "{}: metadata key '{}' is {} but the bundle's matrix (its verification section) has {} {}", name,
          key, stated, actual, what));
}

SpmmPlan spmm_bundle_plan(const rt::Bundle& bundle, const CsrMatrix& a, const std::string& name) {
  const rt::BundleMetadata& md = bundle.metadata;
  check_spmm_bundle_matrix(md, a, name);
  if (bundle.plan.empty())
    throw rt::BundleError(
        fmt::format("{}: has no plan section (written without one); compile the executor again", name));
  SpmmPlan plan;
  try {
    plan = plan_from_json(nlohmann::json::parse(bundle.plan));
  } catch (const UsageError& e) {
    throw rt::BundleError(fmt::format("{}: section plan: {}", name, e.what()));
  } catch (const nlohmann::json::exception& e) {
    throw rt::BundleError(fmt::format("{}: section plan: not valid JSON: {}", name, e.what()));
  }
  if (const auto problems = check_plan(plan, a); !problems.empty())
    throw rt::BundleError(fmt::format("{}: section plan: not a valid plan for the bundle's matrix: {}", name,
                                      problems.front()));
  // Everything the code contract binds, but the values (the plan packs its own).
  const auto stated = rt::spmm_contract(md, 0);
  // The target does not enter the contract: any target's metadata states it.
  const auto planned = rt::spmm_contract(spmm_launch_metadata(plan, a, default_gpu_target()), 0);
  for (std::size_t i = 0; i < stated.size(); ++i)
    if (stated[i].value != planned[i].value)
      throw rt::BundleError(
          fmt::format("{}: {} is {} in the metadata but {} in the plan section: the metadata "
                      "contradicts its plan",
                      name, stated[i].key, stated[i].value, planned[i].value));
  return plan;
}

}  // namespace sparsecc
