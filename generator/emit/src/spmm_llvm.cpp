// LLVM IR for CPU SpMM plans (sparsecc/emit/spmm_llvm.hpp).
#include "sparsecc/emit/spmm_llvm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <iterator>
#include <vector>

#include "sparsecc/common/error.hpp"

namespace sparsecc {

namespace {

constexpr std::int64_t kCpuBlockNonzeros = 16;

// An fp32 constant as LLVM IR writes it: the double of the same value in hexadecimal.
std::string float_literal(double v) {
  const double d = static_cast<double>(static_cast<float>(v));
  return fmt::format("0x{:016X}", std::bit_cast<std::uint64_t>(d));
}

std::string vec(std::int64_t w) { return w == 1 ? std::string("float") : fmt::format("<{} x float>", w); }

std::string zero_of(std::int64_t w) { return w == 1 ? std::string("0.0") : std::string("zeroinitializer"); }

// The widths of a row's accumulators over `width` columns: full vectors of `lanes`, then the rest.
std::vector<std::int64_t> vector_widths(std::int64_t width, std::int64_t lanes) {
  std::vector<std::int64_t> widths;
  for (std::int64_t c = 0; c < width; c += lanes) widths.push_back(std::min(lanes, width - c));
  return widths;
}

// `name` = `scalar` in each of w lanes (through `name`.i); the scalar itself when w is 1.
std::string emit_splat(std::string& out, const std::string& scalar, std::int64_t w, const std::string& name) {
  if (w == 1) return scalar;
  fmt::format_to(std::back_inserter(out),
                 "  {0}.i = insertelement {1} undef, float {2}, i32 0\n"
                 "  {0} = shufflevector {1} {0}.i, {1} undef, <{3} x i32> zeroinitializer\n",
                 name, vec(w), scalar, w);
  return name;
}

// The element type of B and C in the IR: float for f32, i16 (the dtype's bits) for f16 and bf16.
std::string elem(DType t) { return t == DType::f32 ? std::string("float") : std::string("i16"); }

// A w-lane value of `scalar` type (the scalar itself at w 1), and a constant of it in every lane.
std::string vty(std::int64_t w, const std::string& scalar) {
  return w == 1 ? scalar : fmt::format("<{} x {}>", w, scalar);
}
std::string splat_const(std::int64_t w, const std::string& scalar, std::uint32_t v) {
  if (w == 1) return std::to_string(v);
  std::string s = "<";
  for (std::int64_t i = 0; i < w; ++i) s += fmt::format("{}{} {}", i ? ", " : "", scalar, v);
  return s + ">";
}

// x = the w elements of dtype t at `ptr` (an elem(t) pointer; `ptr`.v its vector pointer) as floats,
// then sum = fma(x, splat, acc). f16 widens with fpext (vcvtph2ps), bf16 by moving its bits into
// the upper half of an i32 (exact either way).
void emit_load_fma(std::string& out, DType t, std::int64_t w, const std::string& ptr, const std::string& x,
                   const std::string& splat, const std::string& acc, const std::string& sum) {
  const std::string e = elem(t), ev = vty(w, e);
  std::string loaded = x;
  if (t != DType::f32) loaded = x + ".h";
  if (w > 1)
    fmt::format_to(std::back_inserter(out),
                   "  {0}.v = bitcast {1}* {0} to {2}*\n  {3} = load {2}, {2}* {0}.v, align {4}\n", ptr, e,
                   ev, loaded, t == DType::f32 ? 4 : 2);
  else
    fmt::format_to(std::back_inserter(out), "  {2} = load {1}, {1}* {0}, align {3}\n", ptr, e, loaded,
                   t == DType::f32 ? 4 : 2);
  if (t == DType::f16)
    fmt::format_to(std::back_inserter(out),
                   "  {0}.f = bitcast {1} {0}.h to {2}\n  {0} = fpext {2} {0}.f to {3}\n", x, ev,
                   vty(w, "half"), vec(w));
  else if (t == DType::bf16)
    fmt::format_to(
        std::back_inserter(out),
        "  {0}.z = zext {1} {0}.h to {2}\n  {0}.s = shl {2} {0}.z, {3}\n  {0} = bitcast {2} {0}.s to {4}\n",
        x, ev, vty(w, "i32"), splat_const(w, "i32", 16), vec(w));
  if (w > 1)
    fmt::format_to(std::back_inserter(out), "  {0} = call {1} @llvm.fma.v{2}f32({1} {3}, {1} {4}, {1} {5})\n",
                   sum, vec(w), w, x, splat, acc);
  else
    fmt::format_to(std::back_inserter(out),
                   "  {0} = call float @llvm.fma.f32(float {1}, float {2}, float {3})\n", sum, x, splat, acc);
}

// `name` = max(v, 0) as std::max(v, 0.f) computes it: v < 0 ? 0 : v (`name`.lt the comparison).
std::string emit_relu(std::string& out, std::int64_t w, const std::string& v, const std::string& name) {
  fmt::format_to(std::back_inserter(out),
                 "  {0}.lt = fcmp olt {1} {2}, {3}\n  {0} = select {4} {0}.lt, {1} {3}, {1} {2}\n", name,
                 vec(w), v, zero_of(w), w == 1 ? std::string("i1") : fmt::format("<{} x i1>", w));
  return name;
}

// The w floats v stored at `ptr` (an elem(t) pointer; `ptr`.v its vector pointer) as dtype t: f16
// through fptrunc (vcvtps2ph), bf16 rounded to nearest even in integer operations (the upper half of
// u + 0x7fff + bit 16 of u), a NaN stored as the quiet NaN of its sign (double_to_bf16_bits').
void emit_store(std::string& out, DType t, std::int64_t w, const std::string& ptr, const std::string& v) {
  const std::string e = elem(t), ev = vty(w, e);
  std::string value = v;
  if (t == DType::f16) {
    fmt::format_to(std::back_inserter(out),
                   "  {0}.n = fptrunc {1} {2} to {3}\n  {0}.b = bitcast {3} {0}.n to {4}\n", ptr, vec(w), v,
                   vty(w, "half"), ev);
    value = ptr + ".b";
  } else if (t == DType::bf16) {
    const std::string i = vty(w, "i32");
    fmt::format_to(std::back_inserter(out),
                   "  {0}.u = bitcast {1} {2} to {3}\n"
                   "  {0}.hi = lshr {3} {0}.u, {4}\n"
                   "  {0}.lsb = and {3} {0}.hi, {5}\n"
                   "  {0}.k = add {3} {0}.lsb, {6}\n"
                   "  {0}.r = add {3} {0}.u, {0}.k\n"
                   "  {0}.t = lshr {3} {0}.r, {4}\n"
                   "  {0}.sg = and {3} {0}.hi, {7}\n"
                   "  {0}.q = or {3} {0}.sg, {8}\n"
                   "  {0}.nan = fcmp uno {1} {2}, {2}\n"
                   "  {0}.m = select {9} {0}.nan, {3} {0}.q, {3} {0}.t\n"
                   "  {0}.b = trunc {3} {0}.m to {10}\n",
                   ptr, vec(w), v, i, splat_const(w, "i32", 16), splat_const(w, "i32", 1),
                   splat_const(w, "i32", 0x7fff), splat_const(w, "i32", 0x8000),
                   splat_const(w, "i32", 0x7fc0), vty(w, "i1"), ev);
    value = ptr + ".b";
  }
  if (w > 1)
    fmt::format_to(std::back_inserter(out),
                   "  {0}.v = bitcast {1}* {0} to {2}*\n  store {2} {3}, {2}* {0}.v, align {4}\n", ptr, e, ev,
                   value, t == DType::f32 ? 4 : 2);
  else
    fmt::format_to(std::back_inserter(out), "  store {1} {2}, {1}* {0}, align {3}\n", ptr, e, value,
                   t == DType::f32 ? 4 : 2);
}

// A panel function's signature and entry block (B and C offset to the argument %col).
void emit_panel_head(std::string& out, const std::string& prefix, DType t, std::int64_t panel, bool full) {
  fmt::format_to(std::back_inserter(out),
                 "define hidden void @{1}_panel_{2}_{3}({0}* noalias readonly %B, {0}* noalias %C, float* "
                 "noalias readonly %bias, i64 %col) #0 {{\nentry:\n"
                 "  %Bc = getelementptr inbounds {0}, {0}* %B, i64 %col\n"
                 "  %Cc = getelementptr inbounds {0}, {0}* %C, i64 %col\n",
                 elem(t), prefix, panel, full ? "full" : "rest");
}

// One function: rows [r0, r1) of A over `width` columns starting at the argument %col; A's values
// from the module's table @values of `table` entries, which starts at nonzero `base`.
void emit_panel(std::string& out, const std::string& prefix, const SpmmCpuPlan& p, const CsrMatrix& a,
                std::int64_t panel, bool full, std::int64_t width, std::int64_t base, std::int64_t table) {
  const std::int64_t n = p.problem.n, lanes = p.lanes;
  const std::vector<std::int64_t> widths = vector_widths(width, lanes);
  emit_panel_head(out, prefix, p.problem.dtype, panel, full);
  std::int64_t id = 0, blocks = 0;  // SSA names, basic blocks
  const auto fresh = [&] { return fmt::format("%t{}", id++); };
  // `scalar` as a vector of w lanes, written once a width (cache: the full width's and the rest's).
  const auto splat_of = [&](const std::string& scalar, std::int64_t w, std::string(&cache)[2]) {
    std::string& v = cache[w == lanes ? 0 : 1];
    if (v.empty()) v = emit_splat(out, scalar, w, fresh());
    return v;
  };
  for (std::int64_t r = p.panels[static_cast<std::size_t>(panel)];
       r < p.panels[static_cast<std::size_t>(panel + 1)]; ++r) {
    std::vector<std::string> acc(widths.size());
    for (std::size_t j = 0; j < widths.size(); ++j) acc[j] = zero_of(widths[j]);
    for (std::int64_t e = a.row_ptr[r]; e < a.row_ptr[r + 1]; ++e) {
      // A basic block a row and every kCpuBlockNonzeros of its nonzeros: the code generator's
      // per-block work (instruction selection, scheduling) grows faster than linearly in a block.
      if ((e - a.row_ptr[r]) % kCpuBlockNonzeros == 0) {
        fmt::format_to(std::back_inserter(out), "  br label %b{0}\nb{0}:\n", blocks);
        ++blocks;
      }
      // The value from the module's table (one constant array: the code generator's constant pool
      // would hold a splatted copy of every value).
      const std::string vp = fresh(), lit = fresh();
      fmt::format_to(std::back_inserter(out),
                     "  {} = getelementptr inbounds [{} x float], [{} x float]* @values, i64 0, i64 {}\n"
                     "  {} = load float, float* {}, align 4\n",
                     vp, table, table, e - base, lit, vp);
      const std::int64_t row_off = static_cast<std::int64_t>(a.col_idx[static_cast<std::size_t>(e)]) * n;
      std::string splats[2];
      for (std::size_t j = 0; j < widths.size(); ++j) {
        const std::int64_t w = widths[j];
        const std::string splat = splat_of(lit, w, splats);
        const std::string ptr = fresh(), x = fresh(), sum = fresh();
        fmt::format_to(std::back_inserter(out), "  {0} = getelementptr inbounds {2}, {2}* %Bc, i64 {1}\n",
                       ptr, row_off + static_cast<std::int64_t>(j) * lanes, elem(p.problem.dtype));
        emit_load_fma(out, p.problem.dtype, w, ptr, x, splat, acc[j], sum);
        acc[j] = sum;
      }
    }
    // Epilogue: bias, ReLU, the stores.
    std::string bias_splats[2];
    if (p.problem.bias) {
      const std::string bp = fresh(), bv = fresh();
      fmt::format_to(std::back_inserter(out),
                     "  {} = getelementptr inbounds float, float* %bias, i64 {}\n  {} = load float, float* "
                     "{}, align 4\n",
                     bp, r, bv, bp);
      for (std::size_t j = 0; j < widths.size(); ++j) {
        const std::int64_t w = widths[j];
        const std::string s = fresh();
        fmt::format_to(std::back_inserter(out), "  {} = fadd {} {}, {}\n", s, vec(w), acc[j],
                       splat_of(bv, w, bias_splats));
        acc[j] = s;
      }
    }
    for (std::size_t j = 0; j < widths.size(); ++j) {
      const std::int64_t w = widths[j];
      std::string v = acc[j];
      if (v == zero_of(w)) {  // an empty row without bias: materialize the zeros
        v = fresh();
        fmt::format_to(std::back_inserter(out), "  {} = fadd {} {}, {}\n", v, vec(w), zero_of(w), zero_of(w));
      }
      if (p.problem.relu) v = emit_relu(out, w, v, fresh());
      const std::string ptr = fresh();
      fmt::format_to(std::back_inserter(out), "  {0} = getelementptr inbounds {2}, {2}* %Cc, i64 {1}\n", ptr,
                     r * n + static_cast<std::int64_t>(j) * lanes, elem(p.problem.dtype));
      emit_store(out, p.problem.dtype, w, ptr, v);
    }
  }
  out += "  ret void\n}\n\n";
}

// The same function rolled: a loop over the panel's rows, and in each row a loop over its nonzeros,
// reading their columns from the module's table @cols and their values from @values (both from
// nonzero `base`), the row bounds from @rows (from row `row_base`, relative to `base`); the same fused
// multiply-adds in the same order as emit_panel.
void emit_panel_rolled(std::string& out, const std::string& prefix, const SpmmCpuPlan& p, std::int64_t panel,
                       bool full, std::int64_t width, std::int64_t table, std::int64_t row_base,
                       std::int64_t row_table) {
  const std::int64_t n = p.problem.n, lanes = p.lanes;
  const std::int64_t r0 = p.panels[static_cast<std::size_t>(panel)],
                     r1 = p.panels[static_cast<std::size_t>(panel + 1)];
  const std::vector<std::int64_t> widths = vector_widths(width, lanes);
  emit_panel_head(out, prefix, p.problem.dtype, panel, full);
  fmt::format_to(std::back_inserter(out),
                 "  br label %row\n"
                 "row:\n"
                 "  %r = phi i64 [ {0}, %entry ], [ %rn, %done ]\n"
                 "  %ri = sub i64 %r, {1}\n"
                 "  %ri1 = add i64 %ri, 1\n"
                 "  %p0 = getelementptr inbounds [{2} x i32], [{2} x i32]* @rows, i64 0, i64 %ri\n"
                 "  %p1 = getelementptr inbounds [{2} x i32], [{2} x i32]* @rows, i64 0, i64 %ri1\n"
                 "  %e0i = load i32, i32* %p0, align 4\n  %e1i = load i32, i32* %p1, align 4\n"
                 "  %e0 = zext i32 %e0i to i64\n  %e1 = zext i32 %e1i to i64\n"
                 "  %empty = icmp eq i64 %e0, %e1\n"
                 "  br i1 %empty, label %done, label %loop\n"
                 "loop:\n"
                 "  %e = phi i64 [ %e0, %row ], [ %en, %loop ]\n",
                 r0, row_base, row_table);
  for (std::size_t j = 0; j < widths.size(); ++j)
    fmt::format_to(std::back_inserter(out), "  %a{0} = phi {1} [ {2}, %row ], [ %s{0}, %loop ]\n", j,
                   vec(widths[j]), zero_of(widths[j]));
  fmt::format_to(std::back_inserter(out),
                 "  %vp = getelementptr inbounds [{0} x float], [{0} x float]* @values, i64 0, i64 %e\n"
                 "  %v = load float, float* %vp, align 4\n"
                 "  %cp = getelementptr inbounds [{0} x i32], [{0} x i32]* @cols, i64 0, i64 %e\n"
                 "  %ci = load i32, i32* %cp, align 4\n  %c = zext i32 %ci to i64\n"
                 "  %off = mul i64 %c, {1}\n",
                 table, n);
  std::string splats[2];
  for (std::size_t j = 0; j < widths.size(); ++j) {
    const std::int64_t w = widths[j];
    std::string& sp = splats[w == lanes ? 0 : 1];
    if (sp.empty()) sp = emit_splat(out, "%v", w, fmt::format("%vs{}", j));
    fmt::format_to(
        std::back_inserter(out),
        "  %o{0} = add i64 %off, {1}\n  %bp{0} = getelementptr inbounds {2}, {2}* %Bc, i64 %o{0}\n", j,
        static_cast<std::int64_t>(j) * lanes, elem(p.problem.dtype));
    emit_load_fma(out, p.problem.dtype, w, fmt::format("%bp{}", j), fmt::format("%x{}", j), sp,
                  fmt::format("%a{}", j), fmt::format("%s{}", j));
  }
  out += "  %en = add i64 %e, 1\n  %more = icmp ult i64 %en, %e1\n  br i1 %more, label %loop, label %done\n";
  out += "done:\n";
  for (std::size_t j = 0; j < widths.size(); ++j)
    fmt::format_to(std::back_inserter(out), "  %f{0} = phi {1} [ {2}, %row ], [ %s{0}, %loop ]\n", j,
                   vec(widths[j]), zero_of(widths[j]));
  std::string bias_splats[2];
  if (p.problem.bias)
    out +=
        "  %biasp = getelementptr inbounds float, float* %bias, i64 %r\n"
        "  %biasv = load float, float* %biasp, align 4\n";
  out += fmt::format("  %crow = mul i64 %r, {}\n", n);
  for (std::size_t j = 0; j < widths.size(); ++j) {
    const std::int64_t w = widths[j];
    std::string v = fmt::format("%f{}", j);
    if (p.problem.bias) {
      std::string& bs = bias_splats[w == lanes ? 0 : 1];
      if (bs.empty()) bs = emit_splat(out, "%biasv", w, fmt::format("%bs{}", j));
      fmt::format_to(std::back_inserter(out), "  %g{0} = fadd {1} {2}, {3}\n", j, vec(w), v, bs);
      v = fmt::format("%g{}", j);
    }
    if (p.problem.relu) v = emit_relu(out, w, v, fmt::format("%h{}", j));
    fmt::format_to(
        std::back_inserter(out),
        "  %co{0} = add i64 %crow, {1}\n  %cp{0} = getelementptr inbounds {2}, {2}* %Cc, i64 %co{0}\n", j,
        static_cast<std::int64_t>(j) * lanes, elem(p.problem.dtype));
    emit_store(out, p.problem.dtype, w, fmt::format("%cp{}", j), v);
  }
  fmt::format_to(
      std::back_inserter(out),
      "  %rn = add i64 %r, 1\n  %last = icmp eq i64 %rn, {}\n  br i1 %last, label %exit, label %row\n"
      "exit:\n  ret void\n}}\n\n",
      r1);
}

}  // namespace

std::vector<std::string> emit_spmm_llvm_modules(const SpmmCpuPlan& plan, const CsrMatrix& a,
                                                std::int64_t modules, const std::string& prefix) {
  if (const auto errors = check_cpu_plan(plan, a); !errors.empty())
    throw UsageError("emit_spmm_llvm_ir: the plan does not fit: " + errors.front());
  const std::int64_t panels = plan.panel_count();
  const std::int64_t parts = std::clamp<std::int64_t>(modules, 1, std::max<std::int64_t>(panels, 1));
  const std::int64_t n = plan.problem.n, tile = std::min<std::int64_t>(plan.column_tile, n);
  const std::int64_t rest = n % tile;
  // The fma intrinsics of every width the code uses.
  std::vector<std::int64_t> ws;
  for (const std::int64_t width : {tile, rest})
    if (width > 0) {
      ws.push_back(std::min<std::int64_t>(plan.lanes, width));
      if (width % plan.lanes) ws.push_back(width % plan.lanes);
    }
  std::sort(ws.begin(), ws.end());
  ws.erase(std::unique(ws.begin(), ws.end()), ws.end());
  const std::string e = elem(plan.problem.dtype);
  const auto panel_signature = [&prefix, &e](std::int64_t q, const char* kind) {
    return fmt::format("hidden void @{0}_panel_{1}_{2}({3}*, {3}*, float*, i64)", prefix, q, kind, e);
  };

  std::vector<std::string> out(static_cast<std::size_t>(parts));
  for (std::int64_t m = 0; m < parts; ++m) {
    // Module m: panels [q0, q1), their nonzeros [e0, e1); the last one also holds the entry.
    const std::int64_t q0 = m * panels / parts, q1 = (m + 1) * panels / parts;
    const std::int64_t e0 = a.row_ptr[static_cast<std::size_t>(plan.panels[static_cast<std::size_t>(q0)])];
    const std::int64_t e1 = a.row_ptr[static_cast<std::size_t>(plan.panels[static_cast<std::size_t>(q1)])];
    const std::int64_t table = std::max<std::int64_t>(e1 - e0, 1);
    std::string& text = out[static_cast<std::size_t>(m)];
    text = fmt::format(
        "; sparsecc CPU SpMM: {} x {} ({} nonzeros), N = {}, {}, {} ({} fp32 lanes), {} panels; module {} of "
        "{}: "
        "panels {} .. {}\n\n",
        a.rows, a.cols, a.nnz(), n, plan.problem.dtype, plan.target.isa, plan.lanes, panels, m + 1, parts, q0,
        q1);
    for (const std::int64_t w : ws)
      text += w == 1 ? "declare float @llvm.fma.f32(float, float, float)\n"
                     : fmt::format("declare {} @llvm.fma.v{}f32({}, {}, {})\n", vec(w), w, vec(w), vec(w),
                                   vec(w));
    // The module's values of A, in CSR order.
    fmt::format_to(std::back_inserter(text), "\n@values = internal unnamed_addr constant [{} x float] [",
                   table);
    for (std::int64_t e = 0; e < table; ++e)
      fmt::format_to(
          std::back_inserter(text), "{}float {}", e ? (e % 8 ? ", " : ",\n  ") : "",
          float_literal(e0 + e < e1 ? spmm_cpu_weight(plan, a.values[static_cast<std::size_t>(e0 + e)])
                                    : 0.0));
    text += "], align 64\n\n";
    const std::int64_t row0 = plan.panels[static_cast<std::size_t>(q0)];
    const std::int64_t row1 = plan.panels[static_cast<std::size_t>(q1)];
    if (plan.rolled) {
      // The module's columns of A (nonzero by nonzero) and row bounds (from row0, relative to e0).
      fmt::format_to(std::back_inserter(text), "@cols = internal unnamed_addr constant [{} x i32] [", table);
      for (std::int64_t e = 0; e < table; ++e)
        fmt::format_to(std::back_inserter(text), "{}i32 {}", e ? (e % 16 ? ", " : ",\n  ") : "",
                       e0 + e < e1 ? a.col_idx[static_cast<std::size_t>(e0 + e)] : 0);
      fmt::format_to(std::back_inserter(text),
                     "], align 64\n\n@rows = internal unnamed_addr constant [{} x i32] [", row1 - row0 + 1);
      for (std::int64_t r = row0; r <= row1; ++r)
        fmt::format_to(std::back_inserter(text), "{}i32 {}",
                       r > row0 ? ((r - row0) % 16 ? ", " : ",\n  ") : "",
                       a.row_ptr[static_cast<std::size_t>(r)] - e0);
      text += "], align 64\n\n";
    }
    for (std::int64_t q = q0; q < q1; ++q)
      for (const bool full : {true, false}) {
        if (!full && !rest) continue;
        const std::int64_t width = full ? tile : rest;
        if (plan.rolled)
          emit_panel_rolled(text, prefix, plan, q, full, width, table, row0, row1 - row0 + 1);
        else
          emit_panel(text, prefix, plan, a, q, full, width, e0, table);
      }
    if (m + 1 < parts) {
      text += "attributes #0 = { nounwind }\n";
      continue;
    }
    // The entry: a switch over the panels (those of the other modules declared).
    for (std::int64_t q = 0; q < q0; ++q) {
      fmt::format_to(std::back_inserter(text), "declare {}\n", panel_signature(q, "full"));
      if (rest) fmt::format_to(std::back_inserter(text), "declare {}\n", panel_signature(q, "rest"));
    }
    fmt::format_to(
        std::back_inserter(text),
        "define void @{0}_tile(i64 %panel, i64 %col, i32 %full, {1}* %B, {1}* %C, float* %bias) #0 {{\n"
        "entry:\n  switch i64 %panel, label %done [\n",
        prefix, e);
    for (std::int64_t q = 0; q < panels; ++q)
      fmt::format_to(std::back_inserter(text), "    i64 {}, label %p{}\n", q, q);
    text += "  ]\n";
    for (std::int64_t q = 0; q < panels; ++q) {
      if (rest) {
        fmt::format_to(std::back_inserter(text),
                       "p{0}:\n  %f{0} = icmp ne i32 %full, 0\n  br i1 %f{0}, label %p{0}f, label %p{0}r\n"
                       "p{0}f:\n  call void @{1}_panel_{0}_full({2}* %B, {2}* %C, float* %bias, i64 %col)\n  "
                       "br label %done\n"
                       "p{0}r:\n  call void @{1}_panel_{0}_rest({2}* %B, {2}* %C, float* %bias, i64 %col)\n  "
                       "br label %done\n",
                       q, prefix, e);
      } else {
        fmt::format_to(
            std::back_inserter(text),
            "p{0}:\n  call void @{1}_panel_{0}_full({2}* %B, {2}* %C, float* %bias, i64 %col)\n  br "
            "label %done\n",
            q, prefix, e);
      }
    }
    text += "done:\n  ret void\n}\n\nattributes #0 = { nounwind }\n";
  }
  return out;
}

std::string emit_spmm_llvm_ir(const SpmmCpuPlan& plan, const CsrMatrix& a, const std::string& prefix) {
  return std::move(emit_spmm_llvm_modules(plan, a, 1, prefix).front());
}

}  // namespace sparsecc
