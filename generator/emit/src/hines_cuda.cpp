#include "sparsecc/emit/hines_cuda.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "sparsecc/common/error.hpp"
#include "sparsecc/emit/contract.hpp"
#include "sparsecc/emit/template.hpp"

namespace sparsecc {

namespace {

// The base of a segment type: its rows' parents (relative, -1 for roots), read from the type's table
// after its block levels (LevelTable in templates/hines_edd.cu).
std::vector<std::int32_t> type_base(const HinesSchedule& s, std::int32_t offset) {
  std::size_t at = static_cast<std::size_t>(offset);
  const auto need = [&](std::size_t n) {
    if (at + n > s.tables.size()) throw UsageError("emit_hines_cuda: a segment type runs past the tables");
  };
  for (std::int32_t i = 0; i < s.block_levels; ++i) {
    need(3);
    const std::size_t nc = static_cast<std::size_t>(s.tables[at]),
                      nj = static_cast<std::size_t>(s.tables[at + 1]),
                      ng = static_cast<std::size_t>(s.tables[at + 2]);
    at += 3 + 4 * nc + 3 * nj + 1 + ng;
  }
  need(1);
  const auto n = static_cast<std::size_t>(s.tables[at]);
  need(1 + n);
  return {s.tables.begin() + static_cast<std::ptrdiff_t>(at + 1),
          s.tables.begin() + static_cast<std::ptrdiff_t>(at + 1 + n)};
}

// One function per distinct base structure (base_solve's arithmetic in place, row by row, with the
// parent offsets as immediates) and the dispatch from segment-type offsets to them. The staged
// arrays are volatile: ptxas keeps their accesses in program order, row after row. Without it, it
// hoisted the loads and divisions of many rows together (168 registers and spills for a 25-row base;
// compiler fences in the CUDA source do not reach ptxas).
std::string unrolled_bases(const HinesSchedule& s) {
  std::map<std::vector<std::int32_t>, std::vector<std::int32_t>> shapes;  // base parents -> type offsets
  std::vector<const std::vector<std::int32_t>*> order;
  for (const std::int32_t t : s.type_offsets) {
    auto [it, fresh] = shapes.try_emplace(type_base(s, t));
    if (fresh) order.push_back(&it->first);
    it->second.push_back(t);
  }
  const auto cols = [&](const std::string& body) {
    return s.rhs == 1 ? body + "\n"
                      : fmt::format("\n#pragma unroll\n    for (int c = 0; c < R; ++c) {}\n", body);
  };
  const auto xi = [&](std::int32_t i) {
    return s.rhs == 1 ? fmt::format("x[{}]", i) : fmt::format("x[{} * R + c]", i);
  };
  std::string out;
  for (std::size_t f = 0; f < order.size(); ++f) {
    const std::vector<std::int32_t>& parent = *order[f];
    const auto n = static_cast<std::int32_t>(parent.size());
    out += fmt::format(
        "// Base structure {}: {} rows.\n__device__ __forceinline__ void base_unrolled_{}(volatile real* "
        "piv, "
        "volatile const real* u, volatile const real* l, volatile real* x) {{\n  real f;\n",
        f, n, f);
    // One division a row: piv[i] becomes its reciprocal once final (base_solve's arithmetic).
    for (std::int32_t i = 0; i < n; ++i) {
      const std::int32_t p = parent[static_cast<std::size_t>(i)];
      out += fmt::format("  piv[{}] = real(1) / piv[{}];\n", i, i);
      if (p < 0) continue;
      out += fmt::format("  f = l[{}] * piv[{}];\n  piv[{}] -= f * u[{}];\n  ", i, i, p, i);
      out += cols(fmt::format("{} -= f * {};", xi(p), xi(i)));
    }
    for (std::int32_t i = n; i-- > 0;) {
      const std::int32_t p = parent[static_cast<std::size_t>(i)];
      out += "  ";
      out += cols(p < 0 ? fmt::format("{} = {} * piv[{}];", xi(i), xi(i), i)
                        : fmt::format("{} = ({} - u[{}] * {}) * piv[{}];", xi(i), xi(i), i, xi(p), i));
    }
    out += "}\n\n";
  }
  out +=
      "__device__ __forceinline__ void base_unrolled(int type, real* piv, const real* u, const real* l, "
      "real* x) {\n"
      "  switch (type) {\n";
  for (std::size_t f = 0; f < order.size(); ++f) {
    for (const std::int32_t t : shapes.at(*order[f])) out += fmt::format("    case {}:\n", t);
    out += fmt::format("      base_unrolled_{}(piv, u, l, x);\n      return;\n", f);
  }
  out += "    default:\n      __trap();  // a segment type the module was not generated for\n  }\n}\n";
  return out;
}

}  // namespace

EmittedHines emit_hines_cuda(const HinesPlan& plan, const HinesSchedule& s, const std::string& template_dir) {
  const bool f32 = plan.problem.dtype == "f32";
  if (s.rhs != plan.problem.rhs || s.real_bytes != (f32 ? 4 : 8) ||
      s.first_block_level + s.block_levels != plan.depth() ||
      s.level_offsets.size() != static_cast<std::size_t>(plan.depth()))
    throw UsageError("emit_hines_cuda: the schedule was made for another plan");
  if (s.shared_from < s.first_block_level || s.shared_from > plan.depth())
    throw UsageError("emit_hines_cuda: the schedule's shared levels are not block levels");
  std::string layout =
      fmt::format("constexpr int kFirst = {}, kLevels = {}, kSegStride = {}, kSharedFrom = {};\n",
                  s.first_block_level, s.block_levels, s.segment_stride, s.shared_from);
  // At least one row, so that the array exists when the plan has no levels.
  layout += fmt::format("__constant__ long long kOff[{}][kArrays] = {{",
                        std::max<std::size_t>(1, s.level_offsets.size()));
  if (s.level_offsets.empty()) layout += "{0}";
  for (std::size_t l = 0; l < s.level_offsets.size(); ++l)
    layout += fmt::format("{}{{{}}}", l ? ",\n    " : "\n    ", fmt::join(s.level_offsets[l], ", "));
  // kBaseMax sizes the shared-memory base arrays, which are declared (not used) when the bases are
  // empty: at least 1 keeps them legal.
  layout += fmt::format(
      "}};\nconstexpr long long kBasePiv = {};\nconstexpr int kChainMax = {}, kBaseMax = {}, kRegChainMax = "
      "{};\n",
      s.base_pivot_offset, s.chain_max, std::max<std::int64_t>(1, s.base_max), kHinesRegisterChain);
  const bool shared =
      s.base_max > 0 && hines_base_shared_bytes(s.base_max, s.rhs, s.real_bytes) <= kHinesBaseSharedLimit;
  const bool unrolled = plan.code == HinesCode::unrolled;
  if (unrolled && !shared)
    throw UsageError("emit_hines_cuda: unrolled code needs the bases in shared memory");
  layout += fmt::format("constexpr bool kBaseShared = {}, kUnrolledBase = {};\n", shared, unrolled);
  EmittedHines out;
  out.source =
      KernelTemplate::load("hines_edd.cu", template_dir)
          .render(
              {{"REAL", f32 ? "float" : "double"},
               {"RHS", std::to_string(s.rhs)},
               {"BLOCK_THREADS", std::to_string(s.block_threads)},
               {"LAYOUT", layout},
               {"BASE", unrolled ? unrolled_bases(s)
                                 : "__device__ __forceinline__ void base_unrolled(int, real*, const real*, "
                                   "const real*, real*) {}\n"}});
  out.source += rt::contract_cuda(hines_plan_contract(plan, s));
  for (const HinesLaunch& l : s.launches)
    if (std::find(out.kernels.begin(), out.kernels.end(), l.kernel) == out.kernels.end())
      out.kernels.push_back(l.kernel);
  return out;
}

}  // namespace sparsecc
