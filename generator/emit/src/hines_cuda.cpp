#include "sparsecc/emit/hines_cuda.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "sparsecc/common/error.hpp"
#include "sparsecc/emit/template.hpp"

namespace sparsecc {

EmittedHines emit_hines_cuda(const HinesPlan& plan, const HinesSchedule& s, const std::string& template_dir) {
  const bool f32 = plan.problem.dtype == "f32";
  if (s.rhs != plan.problem.rhs || s.real_bytes != (f32 ? 4 : 8) ||
      s.first_block_level + s.block_levels != plan.depth() ||
      s.level_offsets.size() != static_cast<std::size_t>(plan.depth()))
    throw UsageError("emit_hines_cuda: the schedule was made for another plan");
  std::string layout = fmt::format("constexpr int kFirst = {}, kLevels = {}, kSegStride = {};\n", s.first_block_level,
                                   s.block_levels, s.segment_stride);
  // At least one row, so that the array exists when the plan has no levels.
  layout += fmt::format("__constant__ long long kOff[{}][kArrays] = {{", std::max<std::size_t>(1, s.level_offsets.size()));
  if (s.level_offsets.empty()) layout += "{0}";
  for (std::size_t l = 0; l < s.level_offsets.size(); ++l)
    layout += fmt::format("{}{{{}}}", l ? ",\n    " : "\n    ", fmt::join(s.level_offsets[l], ", "));
  layout += fmt::format("}};\nconstexpr long long kBasePiv = {};\nconstexpr int kChainMax = {}, kBaseMax = {};\n",
                        s.base_pivot_offset, s.chain_max, s.base_max);
  EmittedHines out;
  out.source = KernelTemplate::load("hines_edd.cu", template_dir)
                   .render({{"REAL", f32 ? "float" : "double"},
                            {"RHS", std::to_string(s.rhs)},
                            {"BLOCK_THREADS", std::to_string(s.block_threads)},
                            {"LAYOUT", layout}});
  for (const HinesLaunch& l : s.launches)
    if (std::find(out.kernels.begin(), out.kernels.end(), l.kernel) == out.kernels.end()) out.kernels.push_back(l.kernel);
  return out;
}

}  // namespace sparsecc
