// LLVM IR for CPU Hines plans (sparsecc/emit/hines_llvm.hpp).
#include "sparsecc/emit/hines_llvm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <set>

#include "sparsecc/common/error.hpp"

namespace sparsecc {

namespace {

// One function of the code: a forward or backward part of a (shape, width) kernel, or the kernel's
// own function, which calls its parts in order.
struct Function {
  enum Kind { forward, backward, kernel } kind = kernel;
  std::int32_t k = 0;           // the kernel
  std::int64_t lo = 0, hi = 0;  // nodes [lo, hi) of a part
  std::string name;
  std::vector<std::string> calls;  // what it calls (a kernel's parts)
};

struct Kernel {
  std::int32_t shape = 0, width = 1;
};

// The text of one function body: SSA names, typed loads and stores at constant offsets.
class Writer {
 public:
  Writer(std::string& out, const HinesCpuPlan& p, std::int32_t width) : out_(out), w_(width), r_(p.rhs) {
    t_ = p.dtype == DType::f64 ? "double" : "float";
    vt_ = w_ == 1 ? t_ : fmt::format("<{} x {}>", w_, t_);
    align_ = p.dtype == DType::f64 ? 8 : 4;
    fma_ = w_ == 1 ? fmt::format("llvm.fma.{}", p.dtype == DType::f64 ? "f64" : "f32")
                   : fmt::format("llvm.fma.v{}{}", w_, p.dtype == DType::f64 ? "f64" : "f32");
    if (w_ == 1) {
      one_ = "1.0";
    } else {
      one_ = "<";
      for (std::int32_t j = 0; j < w_; ++j) one_ += fmt::format("{}{} 1.0", j ? ", " : "", t_);
      one_ += ">";
    }
  }

  void head(const std::string& name) {
    fmt::format_to(std::back_inserter(out_),
                   "define hidden void @{0}({1}* noalias readonly %d, {1}* noalias readonly %u, {1}* noalias "
                   "readonly %l, {1}* readonly %b, {1}* %x, {1}* noalias %w) #0 {{\nentry:\n",
                   name, t_);
    for (const char* a : {"d", "u", "l", "b", "x", "w"})
      if (w_ > 1)
        fmt::format_to(std::back_inserter(out_), "  %{0}v = bitcast {1}* %{0} to {2}*\n", a, t_, vt_);
  }
  void block() {
    fmt::format_to(std::back_inserter(out_), "  br label %b{0}\nb{0}:\n", blocks_);
    ++blocks_;
  }
  std::string fresh() { return fmt::format("%v{}", id_++); }
  // The vector at vector index `at` of array `a` (d u l w: a node; b x: a node's chunk).
  std::string ptr(const char* a, std::int64_t at) {
    const std::string p = fresh();
    fmt::format_to(std::back_inserter(out_), "  {} = getelementptr inbounds {}, {}* %{}{}, i64 {}\n", p, vt_,
                   vt_, a, w_ > 1 ? "v" : "", at);
    return p;
  }
  std::string load(const char* a, std::int64_t at) {
    const std::string p = ptr(a, at), v = fresh();
    fmt::format_to(std::back_inserter(out_), "  {} = load {}, {}* {}, align {}\n", v, vt_, vt_, p, align_);
    return v;
  }
  void store(const char* a, std::int64_t at, const std::string& v) {
    const std::string p = ptr(a, at);
    fmt::format_to(std::back_inserter(out_), "  store {} {}, {}* {}, align {}\n", vt_, v, vt_, p, align_);
  }
  std::string op(const char* what, const std::string& a, const std::string& b) {
    const std::string v = fresh();
    fmt::format_to(std::back_inserter(out_), "  {} = {} {} {}, {}\n", v, what, vt_, a, b);
    return v;
  }
  std::string neg(const std::string& a) {
    const std::string v = fresh();
    fmt::format_to(std::back_inserter(out_), "  {} = fneg {} {}\n", v, vt_, a);
    return v;
  }
  std::string fma(const std::string& a, const std::string& b, const std::string& c) {
    const std::string v = fresh();
    fmt::format_to(std::back_inserter(out_), "  {0} = call {1} @{2}({1} {3}, {1} {4}, {1} {5})\n", v, vt_,
                   fma_, a, b, c);
    return v;
  }
  std::string reciprocal(const std::string& a) { return op("fdiv", one_, a); }
  // A node's coefficients (one a lane) in the lanes of the node's chunk c of right-hand sides:
  // element e of chunk c is lane (c * W + e) / R.
  std::string spread(const std::string& a, std::int64_t c) {
    if (r_ == 1 || w_ == 1) return a;
    const std::string v = fresh();
    fmt::format_to(std::back_inserter(out_), "  {} = shufflevector {} {}, {} undef, <{} x i32> <", v, vt_, a,
                   vt_, w_);
    for (std::int64_t e = 0; e < w_; ++e)
      fmt::format_to(std::back_inserter(out_), "{}i32 {}", e ? ", " : "", (c * w_ + e) / r_);
    out_ += ">\n";
    return v;
  }
  std::int64_t rhs() const { return r_; }

 private:
  std::string& out_;
  std::int32_t w_;
  std::int64_t r_;
  std::string t_, vt_, one_, fma_;
  int align_ = 8;
  std::int64_t id_ = 0, blocks_ = 0;
};

// Forward part: nodes [lo, hi) of `parent`; `started[p]` says that p's D and B are in the workspace
// and x (a child outside the chain p - 1 -> p of this part updated them), across parts.
void emit_forward(std::string& out, const HinesCpuPlan& p, const std::vector<std::int32_t>& parent,
                  std::int32_t width, const Function& f, std::vector<std::uint8_t>& started) {
  Writer w(out, p, width);
  w.head(f.name);
  const std::int64_t r = w.rhs();
  std::string pend_d;  // node i's D and B from its child i - 1 of this part, if any
  std::vector<std::string> pend_b;
  for (std::int64_t i = f.lo; i < f.hi; ++i) {
    if ((i - f.lo) % kCpuHinesBlockNodes == 0) w.block();
    std::string dv;
    std::vector<std::string> bv(static_cast<std::size_t>(r));
    if (!pend_d.empty()) {
      dv = pend_d;
      bv = pend_b;
    } else {
      const bool s = started[static_cast<std::size_t>(i)];
      dv = w.load(s ? "w" : "d", i);
      for (std::int64_t c = 0; c < r; ++c) bv[static_cast<std::size_t>(c)] = w.load(s ? "x" : "b", i * r + c);
    }
    pend_d.clear();
    const std::string inv = w.reciprocal(dv);
    w.store("w", i, inv);
    for (std::int64_t c = 0; c < r; ++c) w.store("x", i * r + c, bv[static_cast<std::size_t>(c)]);
    const std::int32_t q = parent[static_cast<std::size_t>(i)];
    if (q < 0) continue;
    const std::string l = w.load("l", i), u = w.load("u", i);
    const std::string nlu = w.neg(w.op("fmul", l, u));
    const std::string nf = w.neg(w.op("fmul", l, inv));
    const bool s = started[static_cast<std::size_t>(q)];
    const std::string dp = w.fma(nlu, inv, w.load(s ? "w" : "d", q));
    std::vector<std::string> bp(static_cast<std::size_t>(r));
    for (std::int64_t c = 0; c < r; ++c)
      bp[static_cast<std::size_t>(c)] =
          w.fma(w.spread(nf, c), bv[static_cast<std::size_t>(c)], w.load(s ? "x" : "b", q * r + c));
    if (q == i + 1 && q < f.hi) {
      pend_d = dp;
      pend_b = bp;
    } else {
      w.store("w", q, dp);
      for (std::int64_t c = 0; c < r; ++c) w.store("x", q * r + c, bp[static_cast<std::size_t>(c)]);
      started[static_cast<std::size_t>(q)] = 1;
    }
  }
  out += "  ret void\n}\n\n";
}

// Backward part: nodes hi - 1 down to lo; a parent's x from the node before it in this part, else
// from x.
void emit_backward(std::string& out, const HinesCpuPlan& p, const std::vector<std::int32_t>& parent,
                   std::int32_t width, const Function& f) {
  Writer w(out, p, width);
  w.head(f.name);
  const std::int64_t r = w.rhs();
  std::vector<std::string> prev;  // x of node i + 1, computed in this part
  for (std::int64_t i = f.hi; i-- > f.lo;) {
    if ((f.hi - 1 - i) % kCpuHinesBlockNodes == 0) w.block();
    const std::string inv = w.load("w", i);
    const std::int32_t q = parent[static_cast<std::size_t>(i)];
    std::vector<std::string> xv(static_cast<std::size_t>(r));
    const std::string nu = q < 0 ? std::string() : w.neg(w.load("u", i));
    for (std::int64_t c = 0; c < r; ++c) {
      const std::string bv = w.load("x", i * r + c);
      std::string num = bv;
      if (q >= 0) {
        const std::string xp =
            q == i + 1 && !prev.empty() ? prev[static_cast<std::size_t>(c)] : w.load("x", q * r + c);
        num = w.fma(w.spread(nu, c), xp, bv);
      }
      xv[static_cast<std::size_t>(c)] = w.op("fmul", num, w.spread(inv, c));
      w.store("x", i * r + c, xv[static_cast<std::size_t>(c)]);
    }
    prev = std::move(xv);
  }
  out += "  ret void\n}\n\n";
}

std::string kernel_name(const std::string& prefix, const Kernel& k) {
  return fmt::format("{}_shape{}_w{}", prefix, k.shape, k.width);
}

}  // namespace

std::vector<std::string> emit_hines_llvm_modules(const HinesCpuPlan& plan, const std::string& prefix,
                                                 std::int64_t modules) {
  if (const auto errors = check_hines_cpu_plan(plan); !errors.empty())
    throw UsageError("emit_hines_llvm: the plan does not hold: " + errors.front());
  if (prefix.empty() || std::isdigit(static_cast<unsigned char>(prefix.front())) ||
      !std::all_of(prefix.begin(), prefix.end(),
                   [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; }))
    throw UsageError(fmt::format("emit_hines_llvm: prefix '{}' is not an identifier", prefix));
  const std::string t = plan.dtype == DType::f64 ? "double" : "float";

  // The kernels (shape, width) in the order of their first group, and each group's kernel.
  std::vector<Kernel> kernels;
  std::vector<std::int32_t> group_kernel;
  for (const HinesCpuGroup& g : plan.groups) {
    std::size_t k = 0;
    while (k < kernels.size() && (kernels[k].shape != g.shape || kernels[k].width != g.width)) ++k;
    if (k == kernels.size()) kernels.push_back({g.shape, g.width});
    group_kernel.push_back(static_cast<std::int32_t>(k));
  }
  // The functions in order: a kernel's forward parts, backward parts (last nodes first), itself.
  std::vector<Function> functions;
  for (std::size_t k = 0; k < kernels.size(); ++k) {
    const std::string name = kernel_name(prefix, kernels[k]);
    const auto n = static_cast<std::int64_t>(plan.shapes[static_cast<std::size_t>(kernels[k].shape)].size());
    const std::int64_t parts = (n + kCpuHinesPartNodes - 1) / kCpuHinesPartNodes;
    Function kf{Function::kernel, static_cast<std::int32_t>(k), 0, n, name, {}};
    // Part q of the nodes, forward ("f") or backward ("b"), called by the kernel in the order added.
    const auto add_part = [&](auto kind, std::int64_t q, char tag) {
      functions.push_back({kind,
                           static_cast<std::int32_t>(k),
                           q * n / parts,
                           (q + 1) * n / parts,
                           fmt::format("{}_{}{}", name, tag, q),
                           {}});
      kf.calls.push_back(functions.back().name);
    };
    for (std::int64_t q = 0; q < parts; ++q) add_part(Function::forward, q, 'f');
    for (std::int64_t q = parts; q-- > 0;) add_part(Function::backward, q, 'b');
    functions.push_back(std::move(kf));
  }
  // Consecutive functions a module, by their nodes.
  std::int64_t total = 0;
  for (const Function& f : functions) total += f.hi - f.lo;
  std::int64_t part_functions = 0;
  for (const Function& f : functions) part_functions += f.kind != Function::kernel;
  const std::int64_t parts = std::clamp<std::int64_t>(modules, 1, std::max<std::int64_t>(part_functions, 1));
  std::vector<std::vector<std::size_t>> members(static_cast<std::size_t>(parts));
  {
    std::int64_t before = 0;
    for (std::size_t i = 0; i < functions.size(); ++i) {
      const std::int64_t weight =
          functions[i].kind == Function::kernel ? 0 : functions[i].hi - functions[i].lo;
      const std::int64_t m = std::min(parts - 1, before * parts / std::max<std::int64_t>(total, 1));
      members[static_cast<std::size_t>(m)].push_back(i);
      before += weight;
    }
  }
  const auto call_args = fmt::format("{0}* %d, {0}* %u, {0}* %l, {0}* %b, {0}* %x, {0}* %w", t);

  std::vector<std::string> out;
  std::vector<std::uint8_t> started;
  std::int32_t started_kernel = -1;
  for (std::int64_t m = 0; m < parts; ++m) {
    const std::vector<std::size_t>& mine = members[static_cast<std::size_t>(m)];
    const bool last = m + 1 == parts;
    if (mine.empty() && !last) continue;
    std::string text = fmt::format(
        "; sparsecc CPU Hines: {} rows, {} cells, {} shapes, {} groups, {}, R = {}, {} ({} lanes); module {} "
        "of {}\n\n",
        plan.rows(), plan.cell_offsets.size() - 1, plan.shapes.size(), plan.groups.size(),
        dtype_name(plan.dtype), plan.rhs, plan.target.isa, plan.lanes, m + 1, parts);
    // The fma intrinsics of the widths this module uses (all of them: a declaration costs nothing).
    std::set<std::int32_t> widths;
    for (const Kernel& k : kernels) widths.insert(k.width);
    for (const std::int32_t wd : widths) {
      const std::string vt = wd == 1 ? t : fmt::format("<{} x {}>", wd, t);
      const std::string name =
          wd == 1 ? fmt::format("llvm.fma.{}", plan.dtype == DType::f64 ? "f64" : "f32")
                  : fmt::format("llvm.fma.v{}{}", wd, plan.dtype == DType::f64 ? "f64" : "f32");
      fmt::format_to(std::back_inserter(text), "declare {0} @{1}({0}, {0}, {0})\n", vt, name);
    }
    text += "\n";
    std::set<std::string> defined, called;
    for (const std::size_t i : mine) {
      const Function& f = functions[i];
      defined.insert(f.name);
      const Kernel& k = kernels[static_cast<std::size_t>(f.k)];
      const std::vector<std::int32_t>& parent = plan.shapes[static_cast<std::size_t>(k.shape)];
      if (f.kind == Function::forward) {
        if (started_kernel != f.k) {
          started.assign(parent.size(), 0);
          started_kernel = f.k;
        }
        emit_forward(text, plan, parent, k.width, f, started);
      } else if (f.kind == Function::backward) {
        emit_backward(text, plan, parent, k.width, f);
      } else {
        fmt::format_to(
            std::back_inserter(text),
            "define hidden void @{0}({1}* %d, {1}* %u, {1}* %l, {1}* %b, {1}* %x, {1}* %w) #0 {{\nentry:\n",
            f.name, t);
        for (const std::string& c : f.calls) {
          fmt::format_to(std::back_inserter(text), "  call void @{}({})\n", c, call_args);
          called.insert(c);
        }
        text += "  ret void\n}\n\n";
      }
    }
    if (last) {
      // The entry: the group's first row and kernel from two tables, then a switch over the kernels.
      const std::size_t groups = plan.groups.size();
      fmt::format_to(std::back_inserter(text), "@group_row = internal unnamed_addr constant [{} x i64] [",
                     groups);
      for (std::size_t g = 0; g < groups; ++g)
        fmt::format_to(std::back_inserter(text), "{}i64 {}", g ? (g % 16 ? ", " : ",\n  ") : "",
                       plan.groups[g].first_row);
      fmt::format_to(std::back_inserter(text),
                     "], align 64\n@group_kernel = internal unnamed_addr constant [{} x i32] [", groups);
      for (std::size_t g = 0; g < groups; ++g)
        fmt::format_to(std::back_inserter(text), "{}i32 {}", g ? (g % 16 ? ", " : ",\n  ") : "",
                       group_kernel[g]);
      text += "], align 64\n\n";
      fmt::format_to(
          std::back_inserter(text),
          "define void @{0}_solve(i64 %item, {1}* %d, {1}* %u, {1}* %l, {1}* %b, {1}* %x, {1}* %w) #0 {{\n"
          "entry:\n"
          "  %ok = icmp ult i64 %item, {2}\n"
          "  br i1 %ok, label %go, label %done\n"
          "go:\n"
          "  %rp = getelementptr inbounds [{2} x i64], [{2} x i64]* @group_row, i64 0, i64 %item\n"
          "  %row = load i64, i64* %rp, align 8\n"
          "  %kp = getelementptr inbounds [{2} x i32], [{2} x i32]* @group_kernel, i64 0, i64 %item\n"
          "  %k = load i32, i32* %kp, align 4\n"
          "  %brow = mul i64 %row, {3}\n"
          "  %d0 = getelementptr inbounds {1}, {1}* %d, i64 %row\n"
          "  %u0 = getelementptr inbounds {1}, {1}* %u, i64 %row\n"
          "  %l0 = getelementptr inbounds {1}, {1}* %l, i64 %row\n"
          "  %w0 = getelementptr inbounds {1}, {1}* %w, i64 %row\n"
          "  %b0 = getelementptr inbounds {1}, {1}* %b, i64 %brow\n"
          "  %x0 = getelementptr inbounds {1}, {1}* %x, i64 %brow\n"
          "  switch i32 %k, label %done [\n",
          prefix, t, groups, plan.rhs);
      for (std::size_t k = 0; k < kernels.size(); ++k)
        fmt::format_to(std::back_inserter(text), "    i32 {0}, label %k{0}\n", k);
      text += "  ]\n";
      for (std::size_t k = 0; k < kernels.size(); ++k) {
        const std::string name = kernel_name(prefix, kernels[k]);
        called.insert(name);
        fmt::format_to(std::back_inserter(text),
                       "k{0}:\n  call void @{1}({2}* %d0, {2}* %u0, {2}* %l0, {2}* %b0, {2}* %x0, {2}* %w0)\n"
                       "  br label %done\n",
                       k, name, t);
      }
      text += "done:\n  ret void\n}\n\n";
    }
    for (const std::string& c : called)
      if (!defined.count(c))
        fmt::format_to(std::back_inserter(text),
                       "declare hidden void @{0}({1}*, {1}*, {1}*, {1}*, {1}*, {1}*)\n", c, t);
    text += "\nattributes #0 = { nounwind }\n";
    out.push_back(std::move(text));
  }
  return out;
}

std::string emit_hines_llvm_ir(const HinesCpuPlan& plan, const std::string& prefix) {
  return std::move(emit_hines_llvm_modules(plan, prefix, 1).front());
}

}  // namespace sparsecc
