#include "sparsecc/emit/spmm_ptx.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <utility>

#include "sparsecc/common/error.hpp"
#include "sparsecc/emit/contract.hpp"
#include "sparsecc/target/target.hpp"

namespace sparsecc {

namespace {

using Out = fmt::memory_buffer;

template <typename... Args>
void put(Out& out, fmt::format_string<Args...> f, Args&&... args) {
  fmt::format_to(std::back_inserter(out), f, std::forward<Args>(args)...);
}

constexpr std::int64_t kMaxImmediateOffset = std::numeric_limits<std::int32_t>::max();

// Register set of the case code, declared by whatever holds it (the entry, or a case function).
// With fp32 pairs the second column has its own accumulators (%e) and B values (%z).
void declare_case_registers(Out& o, const SpmmPlan& p, std::size_t steps, std::size_t entries) {
  put(o,
      "  .reg .pred %live, %helper, %p;\n  .reg .b32 %tix, %t, %grp, %cx, %cy, %n32, %ldw, %red, %redw, "
      "%redr, %flag, %info, %stg, %erow, %eend;\n");
  put(o, "  .reg .b64 %col, %ld, %ldb, %b, %c, %bias, %vals, %q, %u, %bp;\n  .reg .f32 %y, %a<{}>, %x<{}>",
      p.layout.rows_per_block, std::max<std::size_t>(steps, 1));
  if (p.fp32_pairs())
    put(o, ", %v, %e<{}>, %z<{}>", p.layout.rows_per_block, std::max<std::size_t>(steps, 1));
  if (p.value_mode() == SpmmValueMode::streamed) put(o, ", %w<{}>", std::max<std::size_t>(entries, 1));
  put(o, ";\n");
  // Convolutions: a pointer a tap (conv_taps), and the prologue's pixel arithmetic.
  if (p.problem.conv)
    put(o, "  .reg .b64 %t<{}>, %img, %oy, %ox, %iy, %ix;\n  .reg .pred %in;\n", p.problem.conv->taps());
}

class PtxWriter {
 public:
  PtxWriter(const SpmmPlan& p, const std::vector<float>& weights, const GpuTarget& target)
      : p_(p), w_(weights), target_(target) {
    fixed_ = p.problem.n_mode == SpmmNMode::fixed;
    ld_bytes_ = (p.problem.conv ? p.problem.conv->output_strides(p.problem.m).channel : p.problem.n) * 4;
    for (const auto& b : p_.layout.blocks) {
      std::size_t steps = 0, entries = 0;
      for (const auto& g : b.groups) {
        steps += g.steps.size();
        for (const auto& s : g.steps) entries += s.entries.size();
      }
      steps_.push_back(steps);
      entries_.push_back(entries);
      max_steps_ = std::max(max_steps_, steps);
      max_entries_ = std::max(max_entries_, entries);
      empty_.push_back(spmm_plain_empty_block(p_, empty_.size()) ? 1 : 0);
    }
  }

  // The whole kernel in one module, cases inline behind the jump table.
  std::string inline_module() {
    Out o;
    header(o);
    entry_open(o, true);
    declare_case_registers(o, p_, max_steps_, max_entries_);
    put(o, "\n");
    prologue(o);
    std::int64_t packed = 0;
    for (std::size_t bi = 0; bi < p_.layout.blocks.size(); ++bi) {
      if (empty_[bi]) continue;
      put(o, "$Lb{}:\n", bi);
      case_body(o, bi, packed, false);
    }
    empty_rows(o);
    put(o, "$Lexit:\n  ret;\n}}\n");
    return fmt::to_string(o);
  }

  // The split layout: every block row a .visible .func; `modules` gets the entry module (extern
  // declarations and call sites) and then modules of about `module_instructions` instructions of
  // case functions; the return value is the same program as one module.
  std::string split_modules(std::vector<std::string>& modules, std::int64_t module_instructions) {
    Out entry, whole;
    header(entry);
    header(whole);
    for (std::size_t bi = 0; bi < p_.layout.blocks.size(); ++bi)
      if (!empty_[bi]) put(entry, ".extern .func {};\n", signature(bi));
    put(entry, "\n");
    std::vector<Out> parts(1);
    header(parts.back());
    std::int64_t in_part = 0, packed = 0;
    for (std::size_t bi = 0; bi < p_.layout.blocks.size(); ++bi) {
      if (empty_[bi]) continue;
      const auto size = static_cast<std::int64_t>(steps_[bi] + entries_[bi]);
      if (in_part > 0 && in_part + size > module_instructions) {
        parts.emplace_back();
        header(parts.back());
        in_part = 0;
      }
      in_part += size;
      Out f;
      case_function(f, bi, packed);
      parts.back().append(f.data(), f.data() + f.size());
      whole.append(f.data(), f.data() + f.size());
    }
    Out kernel;
    entry_open(kernel, false);
    declare_case_registers(kernel, p_, 0, 0);
    put(kernel, "\n");
    prologue(kernel);
    for (std::size_t bi = 0; bi < p_.layout.blocks.size(); ++bi) {
      if (empty_[bi]) continue;
      put(kernel, "$Lb{}:\n  {{\n", bi);
      for (const char* name : kWideArgs) put(kernel, "  .param .b64 q_{};\n", name);
      for (const char* name : kNarrowArgs) put(kernel, "  .param .b32 q_{};\n", name);
      for (const char* name : kWideArgs) put(kernel, "  st.param.b64 [q_{0}], %{0};\n", name);
      for (const char* name : kNarrowArgs) put(kernel, "  st.param.b32 [q_{0}], %{0};\n", name);
      put(kernel, "  call.uni {}_case{}, (q_b, q_c, q_bias, q_vals, q_ldb, q_info, q_redr);\n  }}\n  ret;\n",
          p_.hints.kernel_name, bi);
    }
    empty_rows(kernel);
    put(kernel, "}}\n");
    entry.append(kernel.data(), kernel.data() + kernel.size());
    whole.append(kernel.data(), kernel.data() + kernel.size());
    modules.push_back(fmt::to_string(entry));
    for (auto& part : parts) modules.push_back(fmt::to_string(part));
    return fmt::to_string(whole);
  }

 private:
  void header(Out& o) {
    put(o,
        "//\n// sparsecc SpMM executor ({}x{}, N {}, {} block rows, {} groups of {} threads, {} "
        "values)\n//\n",
        p_.problem.m, p_.problem.k, fixed_ ? std::to_string(p_.problem.n) : "runtime",
        p_.layout.blocks.size(), p_.layout.groups, p_.layout.n_tile,
        p_.value_mode() == SpmmValueMode::baked ? "baked" : "streamed");
    put(o, ".version {}\n.target {}\n.address_size 64\n\n", target_.ptx_isa, target_.arch);
  }

  // A case function takes seven parameters, all passed in registers (with more, the ABI passes the
  // last on the stack and the entry gets a stack frame): the B and C pointers at the thread's
  // column, bias, values, N * 4, `info` (live flag | group << 1) and the group's reduction slot.
  // They stay in registers while it runs (an entry reads its own parameters from the constant bank
  // when it needs them), which is why the split layout's cap is higher (spmm_ptx_split_registers).
  // It never returns (it ends the thread with exit), so under a cap it has no callee-saved
  // registers to keep on the stack.
  static constexpr const char* kWideArgs[] = {"b", "c", "bias", "vals", "ldb"};
  static constexpr const char* kNarrowArgs[] = {"info", "redr"};

  std::string signature(std::size_t bi) const {
    return fmt::format(
        "{}_case{}(.param .b64 p_b, .param .b64 p_c, .param .b64 p_bias, .param .b64 p_vals, .param .b64 "
        "p_ldb, .param .b32 p_info, .param .b32 p_redr) .noreturn",
        p_.hints.kernel_name, bi);
  }

  // `cap`: the plan's register cap in the text (.maxnreg). The split layout takes the cap as an
  // assembler option instead (a .func has no .maxnreg; see emit_spmm_ptx).
  void entry_open(Out& o, bool cap) {
    if (shares_) put(o, ".extern .shared .align 16 .b8 {}_red[];\n\n", p_.hints.kernel_name);
    put(o,
        ".visible .entry {0}(\n  .param .u64 {0}_B,\n  .param .u64 {0}_C,\n  .param .u64 {0}_bias,\n"
        "  .param .u64 {0}_values,\n  .param .u32 {0}_n{2}\n)\n.maxntid {1}, 1, 1\n",
        p_.hints.kernel_name, p_.layout.block_x,
        conv_ ? fmt::format(",\n  .param .u64 {}_zeros", p_.hints.kernel_name) : "");
    if (cap) put(o, ".maxnreg {}\n", p_.hints.max_registers);
    put(o, "{{\n");
  }

  void case_function(Out& o, std::size_t bi, std::int64_t& packed) {
    put(o, ".visible .func {}\n{{\n", signature(bi));
    declare_case_registers(o, p_, steps_[bi], entries_[bi]);
    for (const char* name : kWideArgs) put(o, "  ld.param.b64 %{0}, [p_{0}];\n", name);
    for (const char* name : kNarrowArgs) put(o, "  ld.param.b32 %{0}, [p_{0}];\n", name);
    put(o, "  and.b32 %flag, %info, 1;\n  shr.u32 %grp, %info, 1;\n");
    if (conv_) put(o, "  and.b32 %grp, %grp, {};\n", (1u << (kConvMaskBit - 1)) - 1);  // the taps above
    put(o, "  setp.ne.u32 %live, %flag, 0;\n  setp.ne.u32 %helper, %grp, 0;\n");
    reduction_slot(o);
    stage_slot(o);
    if (!fixed_) put(o, "  cvt.u32.u64 %ldw, %ldb;\n");
    conv_taps(o);
    case_body(o, bi, packed, true);
    put(o, "}}\n\n");
  }

  // Programmatic plans (SpmmPlan::programmatic, for an arch that has it): the thread waits for the
  // grid it depends on before anything below touches B or C.
  void prologue(Out& o) {
    const std::string& k = p_.hints.kernel_name;
    if (programmatic_) put(o, "  griddepcontrol.wait;\n");
    const std::pair<const char*, const char*> params[] = {
        {"%b", "B"}, {"%c", "C"}, {"%bias", "bias"}, {"%vals", "values"}};
    for (const auto& [reg, name] : params)
      put(o, "  ld.param.u64 {0}, [{1}_{2}];\n  cvta.to.global.u64 {0}, {0};\n", reg, k, name);
    put(o, "  mov.u32 %tix, %tid.x;\n  rem.u32 %t, %tix, {0};\n  div.u32 %grp, %tix, {0};\n",
        p_.layout.n_tile);
    put(o, "  mov.u32 %cy, %ctaid.x;\n  mul.wide.u32 %col, %cy, {};\n  cvt.u64.u32 %u, %t;\n",
        p_.layout.n_tile);
    put(o, "  add.s64 %col, %col, %u;\n");
    if (pairs_) put(o, "  shl.b64 %col, %col, 1;\n");  // the first of the thread's two columns
    if (fixed_ && !conv_)
      put(o, "  mov.u64 %ld, {};\n", p_.problem.n);
    else  // convolutions: n is the batch's pixels
      put(o, "  ld.param.u32 %n32, [{}_n];\n  cvt.s64.s32 %ld, %n32;\n", k);
    put(o, "  setp.lt.s64 %live, %col, %ld;\n  shl.b64 %ldb, %ld, 2;\n  shl.b64 %u, %col, 2;\n");
    if (!fixed_) put(o, "  cvt.u32.u64 %ldw, %ldb;\n");
    if (conv_)
      conv_prologue(o);
    else
      put(o, "  add.s64 %b, %b, %u;\n  add.s64 %c, %c, %u;\n");
    put(o, "  setp.ne.u32 %helper, %grp, 0;\n");
    // Group 0 reads the partial sums of the others from red + t * 4 on (see reduction_slot); staged
    // steps find the thread's slots from there too (stage_slot).
    if (shares_)
      put(o, "  mov.u32 %red, {}_red;\n  mad.lo.u32 %redr, %t, {}, %red;\n", k,
          4 * p_.layout.cols_per_thread);
    else
      put(o, "  mov.u32 %redr, 0;\n");
    reduction_slot(o);
    stage_slot(o);
    put(o, "  selp.u32 %flag, 1, 0, %live;\n  shl.b32 %info, %grp, 1;\n  or.b32 %info, %info, %flag;\n");
    if (conv_) put(o, "  or.b32 %info, %info, %stg;\n");  // the taps inside the image (conv_prologue)
    // Inline, the entry holds the tap pointers itself; case functions make their own (conv_taps).
    if (conv_ && !split_) conv_taps(o);
    put(o, "  mov.u32 %cx, %ctaid.y;\n");
    dispatch(o);
  }

  // Convolutions (SpmmPlan "Convolution"; at most kSpmmConvTapPointers taps): column %col is pixel
  // (%oy, %ox) of image %img; %b becomes the pixel's window corner in X and %c its element of Y's channel
  // 0; %stg holds the mask of its taps inside the image at bit kConvMaskBit (merged into %info, which
  // case functions receive), and %ldb the zero buffer (the `ldb` parameter of case functions).
  static constexpr int kConvMaskBit = 16;
  void conv_prologue(Out& o) {
    const rt::ConvGeometry& g = *p_.problem.conv;
    const auto xs = g.input_strides();
    const auto ys = g.output_strides(p_.problem.m);
    // 32-bit divisions (the run's pixels are fewer than 2^30: SpmmExecutor::run_conv), whose divisors
    // are immediates the assembler turns into multiplications.
    put(o, "  cvt.u32.u64 %erow, %col;\n  div.u32 %eend, %erow, {0};\n  cvt.u64.u32 %img, %eend;\n",
        g.pixels());
    put(o, "  mul.lo.u32 %eend, %eend, {0};\n  sub.u32 %erow, %erow, %eend;\n", g.pixels());
    put(o, "  div.u32 %eend, %erow, {0};\n  cvt.u64.u32 %oy, %eend;\n", g.out_width());
    put(o, "  mul.lo.u32 %eend, %eend, {0};\n  sub.u32 %erow, %erow, %eend;\n  cvt.u64.u32 %ox, %erow;\n",
        g.out_width());
    put(o, "  mul.lo.s64 %iy, %oy, {};\n  sub.s64 %iy, %iy, {};\n", g.stride_h, g.pad_top);
    put(o, "  mul.lo.s64 %ix, %ox, {};\n  sub.s64 %ix, %ix, {};\n", g.stride_w, g.pad_left);
    put(o, "  mul.lo.s64 %u, %img, {};\n  mad.lo.s64 %u, %iy, {}, %u;\n  mad.lo.s64 %u, %ix, {}, %u;\n",
        xs.image, xs.row, xs.col);
    put(o, "  shl.b64 %u, %u, 2;\n  add.s64 %b, %b, %u;\n");
    put(o, "  mul.lo.s64 %u, %img, {};\n  mad.lo.s64 %u, %oy, {}, %u;\n  mad.lo.s64 %u, %ox, {}, %u;\n",
        ys.image, ys.row, ys.col);
    put(o, "  shl.b64 %u, %u, 2;\n  add.s64 %c, %c, %u;\n");
    put(o, "  ld.param.u64 %ldb, [{}_zeros];\n  cvta.to.global.u64 %ldb, %ldb;\n  mov.u32 %stg, 0;\n",
        p_.hints.kernel_name);
    for (std::int64_t t = 0; t < g.taps(); ++t) {
      const std::int64_t dy = t / g.kernel_w, dx = t % g.kernel_w;
      // inside: 0 <= iy + dy < H and 0 <= ix + dx < W, as unsigned compares
      put(o, "  add.s64 %q, %iy, {};\n  setp.lt.u64 %in, %q, {};\n", dy, g.height);
      put(o, "  add.s64 %q, %ix, {};\n  setp.lt.and.u64 %in, %q, {}, %in;\n", dx, g.width);
      put(o, "  selp.u32 %flag, {}, 0, %in;\n  or.b32 %stg, %stg, %flag;\n",
          std::uint32_t{1} << (kConvMaskBit + t));
    }
  }

  // The tap pointers %t<d>: the window corner plus the tap's offset where its mask bit is set, else
  // the zero buffer (%ldb).
  void conv_taps(Out& o) {
    if (!conv_) return;
    const rt::ConvGeometry& g = *p_.problem.conv;
    for (std::int64_t t = 0; t < g.taps(); ++t) {
      put(o, "  and.b32 %flag, %info, {};\n  setp.ne.u32 %in, %flag, 0;\n",
          std::uint32_t{1} << (kConvMaskBit + t));
      put(o, "  add.s64 %q, %b, {};\n  selp.b64 %t{}, %q, %ldb, %in;\n", g.tap_offset(t) * 4, t);
    }
  }

  // The jump to the thread's block row. Up to kSpmmPtxJumpTableEntries block rows, one table; beyond,
  // a table of chunks of that many block rows (a chunk of plain empty block rows goes straight to
  // their shared code), then the chunk's own table: the assembler fails on longer tables.
  void dispatch(Out& o) {
    const std::size_t n = p_.layout.blocks.size(), chunk = kSpmmPtxJumpTableEntries;
    const auto target = [&](std::size_t bi) {
      return empty_[bi] ? std::string("$Lempty") : fmt::format("$Lb{}", bi);
    };
    if (n <= chunk) {
      put(o, "  $Lcases: .branchtargets ");
      for (std::size_t bi = 0; bi < n; ++bi) put(o, "{}{}", bi ? ", " : "", target(bi));
      put(o, ";\n  brx.idx %cx, $Lcases;\n");
      return;
    }
    const std::size_t chunks = (n + chunk - 1) / chunk;
    std::vector<char> all_empty(chunks, 1);
    for (std::size_t bi = 0; bi < n; ++bi) all_empty[bi / chunk] &= empty_[bi];
    put(o, "  shr.u32 %erow, %cx, {};\n  and.b32 %eend, %cx, {};\n  $Lchunks: .branchtargets ",
        std::countr_zero(chunk), chunk - 1);
    for (std::size_t c = 0; c < chunks; ++c)
      put(o, "{}{}", c ? ", " : "", all_empty[c] ? std::string("$Lempty") : fmt::format("$Lchunk{}", c));
    put(o, ";\n  brx.idx %erow, $Lchunks;\n");
    for (std::size_t c = 0; c < chunks; ++c) {
      if (all_empty[c]) continue;
      put(o, "$Lchunk{0}:\n  $Lcases{0}: .branchtargets ", c);
      for (std::size_t bi = c * chunk; bi < std::min(n, (c + 1) * chunk); ++bi)
        put(o, "{}{}", bi > c * chunk ? ", " : "", target(bi));
      put(o, ";\n  brx.idx %eend, $Lcases{};\n", c);
    }
  }

  // The plain empty block rows (spmm_plain_empty_block) share one piece of the entry that the jump
  // table sends them to: the live threads of group 0 store the epilogue of zero sums (0, plus the
  // bias, through ReLU) to the rows the block row's index gives, one row at a time.
  void empty_rows(Out& o) {
    if (std::find(empty_.begin(), empty_.end(), 1) == empty_.end()) return;
    put(o, "$Lempty:\n");
    if (programmatic_ && p_.hints.programmatic_trigger) put(o, "  griddepcontrol.launch_dependents;\n");
    put(o,
        "  @!%live ret;\n  @%helper ret;\n  mov.u32 %erow, %ctaid.y;\n  mul.lo.u32 %erow, %erow, {0};\n"
        "  add.u32 %eend, %erow, {0};\n  min.u32 %eend, %eend, {1};\n$Lempty_row:\n  mov.f32 %a0, "
        "0f00000000;\n",
        p_.layout.panel_rows, p_.problem.m);
    if (p_.epilogue.bias)
      put(o,
          "  mul.wide.u32 %u, %erow, 4;\n  add.s64 %u, %u, %bias;\n  ld.global.nc.f32 %y, [%u];\n"
          "  add.rn.f32 %a0, %a0, %y;\n");
    if (p_.epilogue.relu) put(o, "  max.f32 %a0, %a0, 0f00000000;\n");
    if (fixed_)
      put(o, "  mul.wide.u32 %q, %erow, {};\n", ld_bytes_);
    else
      put(o, "  mul.wide.u32 %q, %erow, %ldw;\n");
    put(o, "  add.s64 %q, %q, %c;\n");
    if (pairs_)
      put(o, "  st.global.v2.f32 [%q], {{%a0, %a0}};\n");
    else
      put(o, "  st.global.f32 [%q], %a0;\n");
    put(o, "  add.u32 %erow, %erow, 1;\n  setp.lt.u32 %p, %erow, %eend;\n  @%p bra $Lempty_row;\n  ret;\n");
  }

  // Group g > 0 stores its row i at red[((g - 1) * rows_per_block + i) * T + t] (pairs: a float2
  // there): %redw from %redr.
  void reduction_slot(Out& o) {
    if (p_.layout.groups > 1) {
      const std::int64_t slab =
          std::int64_t{p_.layout.rows_per_block} * p_.layout.n_tile * 4 * p_.layout.cols_per_thread;
      put(o, "  mad.lo.u32 %redw, %grp, {}, %redr;\n  sub.u32 %redw, %redw, {};\n", slab, slab);
    } else {
      put(o, "  mov.u32 %redw, 0;\n");
    }
  }

  // Staged plans: %stg, the thread's first slot less the stage offset (see SpmmPlan): red + x * 4 *
  // cols_per_thread for thread x = group * T + t, from %redr = red + t * 4 * cols_per_thread.
  void stage_slot(Out& o) {
    if (p_.stage_slots() > 0)
      put(o, "  mad.lo.u32 %stg, %grp, {}, %redr;\n",
          std::int64_t{p_.layout.n_tile} * 4 * p_.layout.cols_per_thread);
  }

  // Byte offset of slot j from %stg.
  std::int64_t slot_offset(std::int64_t j) const {
    return spmm_stage_offset(p_) + j * p_.layout.block_x * 4 * p_.layout.cols_per_thread;
  }

  // The cp.async copies of a group's staged steps into its slots, kSpmmStageChunk steps a commit.
  void stage_copies(Out& o, const SpmmGroup& group, const std::vector<char>& staged) {
    const int bytes = 4 * p_.layout.cols_per_thread;
    const auto copies = static_cast<std::int64_t>(std::count(staged.begin(), staged.end(), 1));
    std::int64_t j = 0;
    for (std::size_t si = 0; si < group.steps.size(); ++si) {
      if (!staged[si]) continue;
      std::string addr;
      if (fixed_) {
        addr = address(o, "%b", group.steps[si].k);
      } else {
        put(o, "  mad.wide.u32 %q, %ldw, {}, %b;\n", group.steps[si].k);
        addr = "[%q]";
      }
      put(o, "  cp.async.ca.shared.global [%stg+{}], {}, {};\n", slot_offset(j), addr, bytes);
      if (spmm_stage_commit_after(j++, copies)) put(o, "  cp.async.commit_group;\n");
    }
  }

  // Address of B[k][col] or C[row][col] from the base `base` (fixed N: an immediate offset when it
  // fits; runtime N: one multiply-add).
  std::string address(Out& o, const char* base, std::int64_t index) {
    if (!fixed_) {
      put(o, "  mad.wide.u32 %q, %ldw, {}, {};\n", index, base);
      return "[%q]";
    }
    const std::int64_t off = index * ld_bytes_;
    if (off <= kMaxImmediateOffset) return fmt::format("[{}+{}]", base, off);
    put(o, "  add.s64 %q, {}, {};\n", base, off);
    return "[%q]";
  }

  // Convolutions: the address of step k, its tap's pointer plus the channel's offset.
  std::string conv_address(std::int64_t k) const {
    const rt::ConvGeometry& g = *p_.problem.conv;
    const rt::ConvGeometry::Tap tap = g.tap_of(k);
    return fmt::format("[%t{}+{}]", tap.tap, tap.channel * g.input_strides().channel * 4);
  }

  // Address of B[k][col]. Runtime N walks one pointer down the group's rows of B (one multiply-add
  // from the previous step's row): independent multiply-adds from %b for every step make ptxas hoist
  // and keep them all, and spill.
  std::string b_address(Out& o, std::int64_t k, std::int64_t prev_k) {
    if (fixed_) return address(o, "%b", k);
    if (prev_k < 0)
      put(o, "  mad.wide.u32 %bp, %ldw, {}, %b;\n", k);
    else
      put(o, "  mad.wide.u32 %bp, %ldw, {}, %bp;\n", k - prev_k);
    return "[%bp]";
  }

  // One block row: zero the accumulators, jump to the thread's group, its steps, then the epilogue.
  // Inline (`in_function` false), a thread reaches its group through brx.idx and leaves by a branch
  // to the kernel's exit. A case function of the split layout reaches it through compare-and-branch
  // (ptxas keeps a jump table in constant bank 2, and those offsets are not relocated when modules
  // assembled on their own are linked; see assemble_ptx_modules) and leaves by exit.
  void case_body(Out& o, std::size_t bi, std::int64_t& packed, bool in_function) {
    const bool jump_table = !in_function;
    const SpmmBlockRow& block = p_.layout.blocks[bi];
    const auto rows = static_cast<std::int32_t>(block.row_end - block.row_begin);
    for (std::int32_t i = 0; i < rows; ++i) put(o, "  mov.f32 %a{}, 0f00000000;\n", i);
    if (pairs_)
      for (std::int32_t i = 0; i < rows; ++i) put(o, "  mov.f32 %e{}, 0f00000000;\n", i);
    bool any = false;
    for (const auto& g : block.groups) any = any || !g.steps.empty();
    if (any) {
      put(o, "  @!%live bra $Le{};\n", bi);
      const auto target = [&](std::size_t gi) {
        return block.groups[gi].steps.empty() ? fmt::format("$Le{}", bi) : fmt::format("$Lb{}g{}", bi, gi);
      };
      if (p_.layout.groups > 1 && jump_table) {
        put(o, "  $Lg{}: .branchtargets ", bi);
        for (std::size_t gi = 0; gi < block.groups.size(); ++gi) put(o, "{}{}", gi ? ", " : "", target(gi));
        put(o, ";\n  brx.idx %grp, $Lg{};\n", bi);
      }
    }
    std::size_t x = 0, w = 0;
    for (std::size_t gi = 0; gi < block.groups.size(); ++gi) {
      const SpmmGroup& group = block.groups[gi];
      if (group.steps.empty()) continue;
      if (p_.layout.groups > 1 && jump_table) put(o, "$Lb{}g{}:\n", bi, gi);
      // Without the jump table each group is an if: threads of other groups skip to the next test
      // (and those of a group without steps past the last one, to the epilogue).
      if (p_.layout.groups > 1 && !jump_table)
        put(o, "  setp.ne.u32 %p, %grp, {};\n  @%p bra $Ln{}g{};\n", gi, bi, gi);
      std::vector<char> touched(static_cast<std::size_t>(p_.layout.rows_per_block), 0);
      const std::vector<char> staged = spmm_staged_steps(p_, group);
      const std::int64_t commits = spmm_stage_commits(staged);
      stage_copies(o, group, staged);
      std::int64_t prev_k = -1, slot = 0;
      for (std::size_t si = 0; si < group.steps.size(); ++si) {
        const SpmmStep& step = group.steps[si];
        const std::size_t xs = x++;
        if (staged[si]) {
          // The first step of a commit waits for it (and the commits before it).
          if (const std::int64_t wait = spmm_stage_wait(slot, commits); wait >= 0)
            put(o, "  cp.async.wait_group {};\n", wait);
          if (pairs_)
            put(o, "  ld.shared.v2.f32 {{%x{0}, %z{0}}}, [%stg+{1}];\n", xs, slot_offset(slot));
          else
            put(o, "  ld.shared.f32 %x{}, [%stg+{}];\n", xs, slot_offset(slot));
          ++slot;
        } else {
          const std::string addr = conv_ ? conv_address(step.k) : b_address(o, step.k, prev_k);
          prev_k = step.k;
          if (pairs_)
            put(o, "  ld.global.nc.v2.f32 {{%x{0}, %z{0}}}, {1};\n", xs, addr);
          else
            put(o, "  ld.global.nc.f32 %x{}, {};\n", xs, addr);
        }
        for (const auto& e : step.entries) {
          std::string weight;
          if (p_.value_mode() == SpmmValueMode::streamed) {
            put(o, "  ld.global.nc.f32 %w{}, [%vals+{}];\n", w, packed * 4);
            weight = fmt::format("%w{}", w++);
          } else {
            weight = ptx_float_literal(w_[static_cast<std::size_t>(e.value_index)]);
          }
          ++packed;
          auto& seen = touched[static_cast<std::size_t>(e.row)];
          for (std::int32_t c = 0; c < p_.layout.cols_per_thread; ++c) {
            const auto [acc, x] = kColumnRegs[c];
            if (seen)
              put(o, "  fma.rn.f32 %{0}{1}, %{2}{3}, {4}, %{0}{1};\n", acc, e.row, x, xs, weight);
            else
              put(o, "  mul.rn.f32 %{}{}, %{}{}, {};\n", acc, e.row, x, xs, weight);
          }
          seen = 1;
        }
      }
      if (p_.layout.groups > 1) put(o, "  bra $Le{};\n", bi);
      if (p_.layout.groups > 1 && !jump_table) put(o, "$Ln{}g{}:\n", bi, gi);
    }
    put(o, "$Le{}:\n", bi);
    epilogue(o, block, rows, in_function);
  }

  // Every thread first lets the next grid launch (programmatic plans with programmatic_trigger: its
  // blocks take the SMs' free slots and wait in their prologue until this grid has finished). Groups 1..
  // leave their sums in shared memory, every thread reaches the barrier, then the live threads of group 0 add
  // them in group order, add the bias, apply ReLU and store.
  void epilogue(Out& o, const SpmmBlockRow& block, std::int32_t rows, bool in_function) {
    const char* leave = in_function ? "exit" : "bra $Lexit";
    if (programmatic_ && p_.hints.programmatic_trigger) put(o, "  griddepcontrol.launch_dependents;\n");
    const std::int64_t slot =
        std::int64_t{p_.layout.n_tile} * 4 * p_.layout.cols_per_thread;  // bytes of a row's slots
    if (p_.layout.groups > 1) {
      put(o, "  and.pred %p, %helper, %live;\n");
      for (std::int32_t i = 0; i < rows; ++i) {
        if (pairs_)
          put(o, "  @%p st.shared.v2.f32 [%redw+{}], {{%a{}, %e{}}};\n", i * slot, i, i);
        else
          put(o, "  @%p st.shared.f32 [%redw+{}], %a{};\n", i * slot, i);
      }
      put(o, "  bar.sync 0;\n  @%helper {};\n", leave);
    }
    put(o, "  @!%live {};\n", leave);
    for (std::int32_t i = 0; i < rows; ++i) {
      const std::int64_t row = spmm_row(p_, block.row_begin + i);
      for (std::int32_t g = 1; g < p_.layout.groups; ++g) {
        const std::int64_t at = (std::int64_t{g - 1} * p_.layout.rows_per_block + i) * slot;
        if (pairs_) {
          put(o, "  ld.shared.v2.f32 {{%y, %v}}, [%redr+{}];\n", at);
          put(o, "  add.rn.f32 %a{0}, %a{0}, %y;\n  add.rn.f32 %e{0}, %e{0}, %v;\n", i);
        } else {
          put(o, "  ld.shared.f32 %y, [%redr+{}];\n", at);
          put(o, "  add.rn.f32 %a{0}, %a{0}, %y;\n", i);
        }
      }
      if (p_.epilogue.bias) {
        put(o, "  ld.global.nc.f32 %y, [%bias+{}];\n", row * 4);
        put(o, "  add.rn.f32 %a{0}, %a{0}, %y;\n", i);
        if (pairs_) put(o, "  add.rn.f32 %e{0}, %e{0}, %y;\n", i);
      }
      if (p_.epilogue.relu) put(o, "  max.f32 %a{0}, %a{0}, 0f00000000;\n", i);
      if (p_.epilogue.relu && pairs_) put(o, "  max.f32 %e{0}, %e{0}, 0f00000000;\n", i);
      const std::string addr = address(o, "%c", row);
      if (pairs_)
        put(o, "  st.global.v2.f32 {}, {{%a{}, %e{}}};\n", addr, i, i);
      else
        put(o, "  st.global.f32 {}, %a{};\n", addr, i);
    }
    put(o, "  {};\n", leave);
  }

  // Accumulator and B register names of a thread's first and (fp32 pairs) second column.
  static constexpr std::pair<const char*, const char*> kColumnRegs[] = {{"a", "x"}, {"e", "z"}};

  const SpmmPlan& p_;
  const std::vector<float>& w_;
  bool pairs_ = p_.fp32_pairs();
  bool shares_ = p_.layout.groups > 1 || p_.stage_slots() > 0;  // the kernel takes dynamic shared memory
  const GpuTarget& target_;
  bool programmatic_ = p_.hints.programmatic && target_.programmatic_launch;
  bool fixed_ = true;
  bool conv_ = p_.problem.conv.has_value();
  bool split_ = spmm_ptx_splits(p_);
  std::int64_t ld_bytes_ = 0;  // C's row pitch (a convolution's: Y's channel stride)
  std::vector<std::size_t> steps_, entries_;
  std::vector<char> empty_;  // spmm_plain_empty_block, one flag a block row
  std::size_t max_steps_ = 0, max_entries_ = 0;
};

}  // namespace

bool spmm_ptx_splits(const SpmmPlan& plan) {
  if (plan.half() || plan.value_mode() == SpmmValueMode::rolled) return false;
  const std::int64_t instructions =
      spmm_plan_loads(plan) + spmm_plan_nnz(plan) * (plan.value_mode() == SpmmValueMode::streamed ? 2 : 1);
  return instructions > (plan.problem.n_mode == SpmmNMode::fixed ? kSpmmPtxSplitInstructions
                                                                 : kSpmmPtxRuntimeNSplitInstructions);
}

std::int32_t spmm_ptx_split_registers(const SpmmPlan& plan, const GpuTarget& target) {
  const std::int32_t fit = target.registers_per_block / std::max(plan.layout.block_x, 1) / 8 * 8;
  return std::min(
      {plan.hints.max_registers + kSpmmPtxSplitExtraRegisters, target.max_registers_per_thread, fit});
}

std::string ptx_float_literal(float v) { return fmt::format("0f{:08X}", std::bit_cast<std::uint32_t>(v)); }

EmittedKernel emit_spmm_ptx(const SpmmPlan& plan, const CsrMatrix& a, const GpuTarget& target) {
  if (const auto errors = check_plan(plan, a); !errors.empty())
    throw UsageError(fmt::format("emit_spmm_ptx: invalid plan: {}", errors.front()));
  if (plan.half())
    throw UsageError(
        fmt::format("the PTX emitter writes fp32 kernels; {} plans take the CUDA C++ emitter (--emit cuda)",
                    plan.problem.dtype));
  if (plan.value_mode() == SpmmValueMode::rolled)
    throw UsageError(
        "the PTX emitter writes unrolled kernels; rolled plans take the CUDA C++ emitter (--emit cuda)");
  if (plan.problem.conv && !spmm_conv_tap_pointers(plan.problem))
    throw UsageError(
        fmt::format("the PTX emitter writes convolutions of at most {} taps; this {}x{} kernel takes the "
                    "CUDA C++ emitter "
                    "(--emit cuda)",
                    kSpmmConvTapPointers, plan.problem.conv->kernel_h, plan.problem.conv->kernel_w));
  if (!is_c_identifier(plan.hints.kernel_name))
    throw UsageError(
        fmt::format("emit_spmm_ptx: kernel name '{}' is not an identifier", plan.hints.kernel_name));
  if (target.ptx_isa.empty())
    throw UsageError(fmt::format("emit_spmm_ptx: the target {} has no PTX ISA version", target.arch));
  EmittedKernel out;
  out.language = KernelLanguage::ptx;
  out.kernel_name = plan.hints.kernel_name;
  const std::vector<float> weights = spmm_kernel_values(plan, a);
  if (plan.value_mode() == SpmmValueMode::streamed) out.packed_values = weights;
  PtxWriter writer(plan, weights, target);
  out.opt_level = plan.hints.assembler_opt_level;
  if (spmm_ptx_splits(plan)) {
    out.source = writer.split_modules(out.modules, kSpmmPtxModuleInstructions);
    out.max_registers = spmm_ptx_split_registers(plan, target);
  } else {
    out.source = writer.inline_module();
    out.max_registers = plan.hints.max_registers;
  }
  stamp_spmm_contract(out, plan, a);
  return out;
}

}  // namespace sparsecc

#include "sparsecc/emit/spmm_cuda.hpp"

namespace sparsecc {

EmittedKernel emit_spmm(const SpmmPlan& plan, const CsrMatrix& a, KernelLanguage language,
                        const GpuTarget& target) {
  // A rolled kernel is a small loop: NVRTC compiles it in well under a second, so it has no PTX form.
  // Nor has a compressed kernel, whose code does not depend on the matrix either.
  const bool ptx =
      language == KernelLanguage::ptx && plan.value_mode() != SpmmValueMode::rolled && !plan.compressed();
  return ptx ? emit_spmm_ptx(plan, a, target) : emit_spmm_cuda(plan, a);
}

}  // namespace sparsecc
