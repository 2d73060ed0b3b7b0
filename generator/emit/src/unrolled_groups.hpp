// What the two CUDA C++ emitters (spmm_cuda.cpp for fp32, spmm_half_cuda.cpp for fp16 / bf16) share:
// the start of a kernel, and the unrolled path of one block row: "if (live)" — a switch on the thread's group
// when there are several — then per group its steps in order, each a B load followed by one operation per
// entry (a multiply at an accumulator's first touch, a fused multiply-add after), and "break;" per case.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "sparsecc/common/error.hpp"
#include "sparsecc/emit/emitted_kernel.hpp"
#include "sparsecc/plan/spmm_plan.hpp"

namespace sparsecc::emit_detail {

// What both CUDA C++ emitters do first: refuse a plan that is not valid for `a` or whose kernel name
// is not an identifier (UsageError), fill the kernel's name, register cap, assembler level and, in
// streamed and rolled mode, the values array it reads; returns the weights the kernel uses
// (spmm_kernel_values).
inline std::vector<float> start_cuda_kernel(const SpmmPlan& plan, const CsrMatrix& a, EmittedKernel& out) {
  if (const auto errors = check_plan(plan, a); !errors.empty())
    throw UsageError(fmt::format("emit_spmm_cuda: invalid plan: {}", errors.front()));
  if (!is_c_identifier(plan.hints.kernel_name))
    throw UsageError(
        fmt::format("emit_spmm_cuda: kernel name '{}' is not an identifier", plan.hints.kernel_name));
  out.language = KernelLanguage::cuda;
  out.kernel_name = plan.hints.kernel_name;
  out.max_registers = plan.hints.max_registers;
  out.opt_level = plan.hints.assembler_opt_level;
  std::vector<float> weights = spmm_kernel_values(plan, a);
  if (plan.value_mode() != SpmmValueMode::baked) out.packed_values = weights;
  return weights;
}

// `load(k)` returns the text of the B load of step k; `entry(e, packed, first)` the text of entry e,
// whose value is the `packed`-th of the emission order, `first` at its accumulator's first touch.
// `packed` advances by the entries written. Staged plans (SpmmPlan): `copies(group, staged)` returns
// the text that starts a group's copies (spmm_staged_steps flags), and `staged_load(slot, wait)` the
// text of a staged step's read of its slot, `wait` the commits still allowed in flight (-1: no wait
// before it).
template <class Load, class Entry, class Copies, class StagedLoad>
std::string unrolled_groups(const SpmmPlan& p, const SpmmBlockRow& block, std::int64_t& packed, Load load,
                            Entry entry, Copies copies, StagedLoad staged_load) {
  std::string s;
  bool any = false;
  for (const auto& g : block.groups) any = any || !g.steps.empty();
  if (any) s += p.layout.groups > 1 ? "      if (live) switch (group) {\n" : "      if (live) {\n";
  for (std::size_t gi = 0; gi < block.groups.size(); ++gi) {
    const SpmmGroup& group = block.groups[gi];
    if (group.steps.empty()) continue;
    if (p.layout.groups > 1) s += fmt::format("      case {}:\n", gi);
    const std::vector<char> staged = spmm_staged_steps(p, group);
    const std::int64_t commits = spmm_stage_commits(staged);
    if (commits > 0) s += copies(group, staged);
    std::vector<char> touched(static_cast<std::size_t>(p.layout.rows_per_block), 0);
    std::int64_t slot = 0;
    for (std::size_t si = 0; si < group.steps.size(); ++si) {
      const SpmmStep& step = group.steps[si];
      if (staged[si]) {
        s += staged_load(slot, spmm_stage_wait(slot, commits));
        ++slot;
      } else {
        s += load(step.k);
      }
      for (const auto& e : step.entries) {
        s += entry(e, packed, !touched[e.row]);
        ++packed;
        touched[e.row] = 1;
      }
      s += "\n";
    }
    if (p.layout.groups > 1) s += "        break;\n";
  }
  if (any) s += "      }\n";
  return s;
}

// The same for plans without staged steps (check_plan refuses them outside fp32 unrolled plans).
template <class Load, class Entry>
std::string unrolled_groups(const SpmmPlan& p, const SpmmBlockRow& block, std::int64_t& packed, Load load,
                            Entry entry) {
  const auto none = [](auto&&...) -> std::string {
    throw std::logic_error("unrolled_groups: staged steps in a plan whose emitter does not stage");
  };
  return unrolled_groups(p, block, packed, load, entry, none, none);
}

}  // namespace sparsecc::emit_detail
