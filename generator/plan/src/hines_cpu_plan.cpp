// HinesCpuPlan: JSON, checks, the permutation and the interpreter (sparsecc/plan/hines_cpu_plan.hpp).
#include "sparsecc/plan/hines_cpu_plan.hpp"

#include <fmt/format.h>

#include <cmath>

#include "sparsecc/common/error.hpp"

namespace sparsecc {

namespace {

// j[key] as T; UsageError naming the key (under `where`) when it is missing or of another type.
template <typename T>
T field(const nlohmann::json& j, const char* key, const std::string& where) {
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(fmt::format("Hines CPU plan JSON: key '{}{}': {}", where, key, e.what()));
  }
}

}  // namespace

std::int32_t hines_cpu_lanes(const CpuTarget& target, DType dtype) {
  return target.vector_bits / static_cast<std::int32_t>(8 * dtype_size(dtype));
}

std::vector<std::int32_t> HinesCpuPlan::permutation() const {
  std::vector<std::int32_t> perm(static_cast<std::size_t>(rows()), -1);
  for (const HinesCpuGroup& g : groups) {
    const auto n = static_cast<std::int64_t>(shapes[static_cast<std::size_t>(g.shape)].size());
    for (std::int64_t j = 0; j < g.width; ++j) {
      const std::int32_t start = cell_offsets[static_cast<std::size_t>(g.cells[static_cast<std::size_t>(j)])];
      for (std::int64_t i = 0; i < n; ++i)
        perm[static_cast<std::size_t>(g.first_row + i * g.width + j)] = start + static_cast<std::int32_t>(i);
    }
  }
  return perm;
}

nlohmann::json to_json(const HinesCpuPlan& p) {
  nlohmann::json groups = nlohmann::json::array();
  for (const HinesCpuGroup& g : p.groups)
    groups.push_back(
        {{"shape", g.shape}, {"width", g.width}, {"first_row", g.first_row}, {"cells", g.cells}});
  return {{"family", "hines_cpu"},
          {"target", to_json(p.target)},
          {"dtype", std::string(dtype_name(p.dtype))},
          {"rhs", p.rhs},
          {"lanes", p.lanes},
          {"shapes", p.shapes},
          {"groups", std::move(groups)},
          {"cell_offsets", p.cell_offsets}};
}

HinesCpuPlan hines_cpu_plan_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw UsageError("Hines CPU plan JSON: not an object");
  HinesCpuPlan p;
  const nlohmann::json& target = [&]() -> const nlohmann::json& {
    if (!j.contains("target") || !j["target"].is_object())
      throw UsageError("Hines CPU plan JSON: key 'target': missing or not an object");
    return j["target"];
  }();
  p.target = cpu_target(field<std::string>(target, "isa", "target."));
  const auto dtype = field<std::string>(j, "dtype", "");
  p.dtype = require_dtype(dtype, "Hines CPU plan JSON: key 'dtype'", {DType::f64, DType::f32});
  p.rhs = field<std::int32_t>(j, "rhs", "");
  p.lanes = field<std::int32_t>(j, "lanes", "");
  p.shapes = field<std::vector<std::vector<std::int32_t>>>(j, "shapes", "");
  p.cell_offsets = field<std::vector<std::int32_t>>(j, "cell_offsets", "");
  const auto groups = field<std::vector<nlohmann::json>>(j, "groups", "");
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::string where = fmt::format("groups[{}].", g);
    if (!groups[g].is_object())
      throw UsageError(fmt::format("Hines CPU plan JSON: key 'groups[{}]': not an object", g));
    HinesCpuGroup group;
    group.shape = field<std::int32_t>(groups[g], "shape", where);
    group.width = field<std::int32_t>(groups[g], "width", where);
    group.first_row = field<std::int64_t>(groups[g], "first_row", where);
    group.cells = field<std::vector<std::int32_t>>(groups[g], "cells", where);
    p.groups.push_back(std::move(group));
  }
  return p;
}

std::vector<std::string> check_hines_cpu_plan(const HinesCpuPlan& p, std::span<const std::int32_t> parent) {
  std::vector<std::string> errors;
  const auto err = [&](std::string s) { errors.push_back(std::move(s)); };
  if (p.dtype != DType::f64 && p.dtype != DType::f32)
    err(fmt::format("dtype {} is not f64 or f32", dtype_name(p.dtype)));
  else if (p.lanes != hines_cpu_lanes(p.target, p.dtype))
    err(fmt::format("lanes {} are not the target's {} {} lanes", p.lanes, hines_cpu_lanes(p.target, p.dtype),
                    dtype_name(p.dtype)));
  if (p.rhs < 1) err(fmt::format("rhs {} is not positive", p.rhs));
  for (std::size_t s = 0; s < p.shapes.size(); ++s) {
    const std::vector<std::int32_t>& par = p.shapes[s];
    const auto n = static_cast<std::int32_t>(par.size());
    if (n == 0) {
      err(fmt::format("shape {} is empty", s));
      continue;
    }
    for (std::int32_t i = 0; i < n; ++i) {
      const std::int32_t q = par[static_cast<std::size_t>(i)];
      if (i + 1 < n ? (q <= i || q >= n) : q != -1) {
        err(fmt::format("shape {}: parent {} of node {} breaks the post-order (parent > node, root last)", s,
                        q, i));
        break;
      }
    }
  }
  const auto cells = static_cast<std::int64_t>(p.cell_offsets.size()) - 1;
  if (cells < 1 || p.cell_offsets.front() != 0)
    err("cell_offsets do not start at row 0 with one cell at least");
  for (std::int64_t c = 0; c < cells; ++c)
    if (p.cell_offsets[static_cast<std::size_t>(c + 1)] <= p.cell_offsets[static_cast<std::size_t>(c)]) {
      err(fmt::format("cell {} is empty or out of order in cell_offsets", c));
      return errors;
    }
  if (!errors.empty()) return errors;
  std::vector<std::uint8_t> seen(static_cast<std::size_t>(cells), 0);
  std::int64_t row = 0;
  bool narrow = false;
  for (std::size_t g = 0; g < p.groups.size(); ++g) {
    const HinesCpuGroup& gr = p.groups[g];
    if (gr.shape < 0 || static_cast<std::size_t>(gr.shape) >= p.shapes.size()) {
      err(fmt::format("group {}: shape {} is not one of the {} shapes", g, gr.shape, p.shapes.size()));
      return errors;
    }
    if (gr.width != p.lanes && gr.width != 1)
      err(fmt::format("group {}: width {} is neither the {} lanes nor 1", g, gr.width, p.lanes));
    if (gr.width > 1 && narrow) err(fmt::format("group {}: a full-width group after a width-1 group", g));
    narrow = narrow || gr.width == 1;
    if (static_cast<std::int64_t>(gr.cells.size()) != gr.width) {
      err(fmt::format("group {}: {} cells for width {}", g, gr.cells.size(), gr.width));
      return errors;
    }
    if (gr.first_row != row) err(fmt::format("group {}: first_row {} is not row {}", g, gr.first_row, row));
    const auto n = static_cast<std::int64_t>(p.shapes[static_cast<std::size_t>(gr.shape)].size());
    for (const std::int32_t c : gr.cells) {
      if (c < 0 || c >= cells) {
        err(fmt::format("group {}: cell {} is not one of the {} cells", g, c, cells));
        return errors;
      }
      if (seen[static_cast<std::size_t>(c)]++)
        err(fmt::format("group {}: cell {} is in a group already", g, c));
      const std::int64_t size =
          p.cell_offsets[static_cast<std::size_t>(c + 1)] - p.cell_offsets[static_cast<std::size_t>(c)];
      if (size != n) {
        err(fmt::format("group {}: cell {} has {} rows, its shape {} has {}", g, c, size, gr.shape, n));
        continue;
      }
      if (!parent.empty() && static_cast<std::int64_t>(parent.size()) == p.rows()) {
        const std::int32_t start = p.cell_offsets[static_cast<std::size_t>(c)];
        for (std::int64_t i = 0; i < n; ++i) {
          const std::int32_t q = parent[static_cast<std::size_t>(start + i)];
          const std::int32_t want = p.shapes[static_cast<std::size_t>(gr.shape)][static_cast<std::size_t>(i)];
          if ((want < 0 ? q : q - start) != want) {
            err(fmt::format("group {}: cell {} node {} has parent {}, its shape {} says {}", g, c, i, q,
                            gr.shape, want < 0 ? want : want + start));
            break;
          }
        }
      }
    }
    row += n * gr.width;
  }
  if (row != p.rows()) err(fmt::format("the groups hold {} rows, the cells {}", row, p.rows()));
  for (std::int64_t c = 0; c < cells; ++c)
    if (!seen[static_cast<std::size_t>(c)]) {
      err(fmt::format("cell {} is in no group", c));
      break;
    }
  if (!parent.empty() && static_cast<std::int64_t>(parent.size()) != p.rows())
    err(fmt::format("the system has {} rows, the plan {}", parent.size(), p.rows()));
  return errors;
}

template <typename T>
void interpret_hines_cpu(const HinesCpuPlan& p, const T* d, const T* u, const T* l, const T* b, T* x,
                         T* work) {
  if (p.dtype != (sizeof(T) == 8 ? DType::f64 : DType::f32))
    throw UsageError(fmt::format("interpret_hines_cpu: a {} plan run in {}", dtype_name(p.dtype),
                                 sizeof(T) == 8 ? "f64" : "f32"));
  const std::int64_t r = p.rhs;
  for (const HinesCpuGroup& g : p.groups) {
    const std::vector<std::int32_t>& par = p.shapes[static_cast<std::size_t>(g.shape)];
    const auto n = static_cast<std::int64_t>(par.size());
    for (std::int64_t j = 0; j < g.width; ++j) {
      const auto row = [&](std::int64_t i) { return g.first_row + i * g.width + j; };
      // D in the workspace, B in x, until they are final.
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t ri = row(i);
        work[ri] = d[ri];
        for (std::int64_t c = 0; c < r; ++c) x[ri * r + c] = b[ri * r + c];
      }
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t ri = row(i);
        const T inv = T(1) / work[ri];
        work[ri] = inv;
        const std::int32_t q = par[static_cast<std::size_t>(i)];
        if (q < 0) continue;
        const std::int64_t rp = row(q);
        work[rp] = std::fma(-(l[ri] * u[ri]), inv, work[rp]);
        const T f = l[ri] * inv;
        for (std::int64_t c = 0; c < r; ++c) x[rp * r + c] = std::fma(-f, x[ri * r + c], x[rp * r + c]);
      }
      for (std::int64_t i = n; i-- > 0;) {
        const std::int64_t ri = row(i);
        const T inv = work[ri];
        const std::int32_t q = par[static_cast<std::size_t>(i)];
        if (q < 0) {
          for (std::int64_t c = 0; c < r; ++c) x[ri * r + c] = x[ri * r + c] * inv;
        } else {
          const std::int64_t rp = row(q);
          for (std::int64_t c = 0; c < r; ++c)
            x[ri * r + c] = std::fma(-u[ri], x[rp * r + c], x[ri * r + c]) * inv;
        }
      }
    }
  }
}

template void interpret_hines_cpu<double>(const HinesCpuPlan&, const double*, const double*, const double*,
                                          const double*, double*, double*);
template void interpret_hines_cpu<float>(const HinesCpuPlan&, const float*, const float*, const float*,
                                         const float*, float*, float*);

}  // namespace sparsecc
