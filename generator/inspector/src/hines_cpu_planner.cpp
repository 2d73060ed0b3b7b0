// The CPU Hines planner (sparsecc/inspector/hines_cpu_planner.hpp).
#include "sparsecc/inspector/hines_cpu_planner.hpp"

#include <fmt/format.h>

#include <map>

#include "sparsecc/common/error.hpp"

namespace sparsecc {

HinesCpuPlan plan_hines_cpu(const HinesSystem& s, const CpuTarget& target, DType dtype, std::int32_t rhs) {
  if (dtype != DType::f64 && dtype != DType::f32)
    throw UsageError(fmt::format("plan_hines_cpu: dtype {} is not f64 or f32", dtype_name(dtype)));
  if (rhs < 1) throw UsageError(fmt::format("plan_hines_cpu: rhs {} is not positive", rhs));
  if (s.num_cells() < 1 || s.cell_offsets.front() != 0 || s.cell_offsets.back() != s.size())
    throw UsageError("plan_hines_cpu: the system's cell_offsets do not cover its rows");
  HinesCpuPlan p;
  p.target = target;
  p.dtype = dtype;
  p.rhs = rhs;
  p.lanes = hines_cpu_lanes(target, dtype);
  p.cell_offsets = s.cell_offsets;
  // Shapes in the order of their first cell, and each shape's cells.
  std::map<std::vector<std::int32_t>, std::int32_t> index;
  std::vector<std::vector<std::int32_t>> members;
  for (std::int32_t c = 0; c < s.num_cells(); ++c) {
    const std::int32_t b = s.cell_offsets[static_cast<std::size_t>(c)],
                       e = s.cell_offsets[static_cast<std::size_t>(c + 1)];
    std::vector<std::int32_t> shape;
    for (std::int32_t i = b; i < e; ++i) {
      const std::int32_t q = s.parent[static_cast<std::size_t>(i)];
      shape.push_back(q < 0 ? -1 : q - b);
    }
    const auto [it, added] = index.try_emplace(shape, static_cast<std::int32_t>(p.shapes.size()));
    if (added) {
      p.shapes.push_back(std::move(shape));
      members.emplace_back();
    }
    members[static_cast<std::size_t>(it->second)].push_back(c);
  }
  std::int64_t row = 0;
  const auto add = [&](std::int32_t shape, std::vector<std::int32_t> cells) {
    const auto width = static_cast<std::int32_t>(cells.size());
    p.groups.push_back({shape, width, row, std::move(cells)});
    row += static_cast<std::int64_t>(p.shapes[static_cast<std::size_t>(shape)].size()) * width;
  };
  for (std::size_t sh = 0; sh < members.size(); ++sh) {
    const std::vector<std::int32_t>& m = members[sh];
    for (std::size_t k = 0; k + static_cast<std::size_t>(p.lanes) <= m.size();
         k += static_cast<std::size_t>(p.lanes))
      add(static_cast<std::int32_t>(sh),
          {m.begin() + static_cast<std::ptrdiff_t>(k), m.begin() + static_cast<std::ptrdiff_t>(k) + p.lanes});
  }
  for (std::size_t sh = 0; sh < members.size(); ++sh) {
    const std::vector<std::int32_t>& m = members[sh];
    for (std::size_t k = m.size() - m.size() % static_cast<std::size_t>(p.lanes); k < m.size(); ++k)
      add(static_cast<std::int32_t>(sh), {m[k]});
  }
  if (const auto errors = check_hines_cpu_plan(p, s.parent); !errors.empty())
    throw UsageError("plan_hines_cpu: the system is not a valid post-order forest: " + errors.front());
  return p;
}

}  // namespace sparsecc
