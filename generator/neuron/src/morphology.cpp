#include "sparsecc/neuron/morphology.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "sparsecc/common/error.hpp"

namespace sparsecc {
namespace {

bool is_neurite_type(std::int32_t t) { return t == 2 || t == 3 || t == 4; }

// Reports a parent cycle among the samples not reached from any root.
[[noreturn]] void report_cycle(const NeuronModel& m, const std::vector<char>& reached) {
  std::int32_t start = -1;
  for (std::int32_t s = 0; s < m.size(); ++s)
    if (!reached[s] && (start < 0 || m.samples[s].line < m.samples[start].line)) start = s;
  // Every unreached sample leads to a cycle through parent links; walk until a sample repeats.
  std::vector<char> seen(m.samples.size(), 0);
  std::int32_t v = start;
  while (!seen[v]) {
    seen[v] = 1;
    v = m.parent[v];
  }
  std::string chain = fmt::format("{}", m.samples[v].id);
  std::int32_t w = m.parent[v];
  for (int shown = 0; w != v && shown < 6; ++shown, w = m.parent[w])
    chain += fmt::format(" -> {}", m.samples[w].id);
  chain += w == v ? fmt::format(" -> {}", m.samples[v].id) : " -> ...";
  throw_at_line(m.name, m.samples[v].line,
                fmt::format("samples {} form a parent cycle (not connected to any root)", chain));
}

void check_soma(const NeuronModel& m) {
  for (std::int32_t s = 0; s < m.size(); ++s) {
    const SwcSample& a = m.samples[s];
    if (a.type != kSwcSoma) continue;
    const std::int32_t p = m.parent[s];
    int soma_neighbours = 0;
    if (p >= 0) {
      const SwcSample& b = m.samples[p];
      if (is_neurite_type(b.type))
        throw_at_line(m.name, a.line,
                      fmt::format("soma sample {} has parent {} of type {} ({}): a soma must not hang off a "
                                  "neurite",
                                  a.id, b.id, b.type, swc_type_name(b.type)));
      soma_neighbours += b.type == kSwcSoma;
    }
    for (std::int32_t k = m.child_offsets[s]; k < m.child_offsets[s + 1]; ++k)
      soma_neighbours += m.samples[m.children[k]].type == kSwcSoma;
    if (soma_neighbours > 2)
      throw_at_line(m.name, a.line,
                    fmt::format("soma branches at sample {} ({} soma neighbours): a soma must be a single "
                                "point, a 3-point soma or an unbranched contour",
                                a.id, soma_neighbours));
  }
}

}  // namespace

NeuronModel build_neuron_model(const SwcFile& file) {
  NeuronModel m;
  m.name = file.name;
  m.samples = file.samples;
  if (m.samples.empty()) throw_in_file(m.name, "no samples");
  if (m.samples.size() >= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    throw_in_file(m.name, fmt::format("{} samples is more than supported", m.samples.size()));
  const std::int32_t n = m.size();

  std::unordered_map<std::int64_t, std::int32_t> index;
  index.reserve(m.samples.size());
  for (std::int32_t s = 0; s < n; ++s) {
    const auto [it, fresh] = index.emplace(m.samples[s].id, s);
    if (!fresh)
      throw_at_line(m.name, m.samples[s].line,
                    fmt::format("duplicate sample id {} (first defined at line {})", m.samples[s].id,
                                m.samples[it->second].line));
  }

  m.parent.assign(n, -1);
  m.child_offsets.assign(n + 1, 0);
  for (std::int32_t s = 0; s < n; ++s) {
    const SwcSample& a = m.samples[s];
    if (a.parent == -1) {
      m.roots.push_back(s);
      continue;
    }
    if (a.parent == a.id) throw_at_line(m.name, a.line, fmt::format("sample {} is its own parent", a.id));
    const auto it = index.find(a.parent);
    if (it == index.end())
      throw_at_line(m.name, a.line, fmt::format("parent {} of sample {} does not exist", a.parent, a.id));
    m.parent[s] = it->second;
    ++m.child_offsets[it->second + 1];
  }
  for (std::int32_t s = 0; s < n; ++s) m.child_offsets[s + 1] += m.child_offsets[s];
  m.children.resize(m.child_offsets[n]);
  {
    std::vector<std::int32_t> fill(m.child_offsets.begin(), m.child_offsets.end() - 1);
    for (std::int32_t s = 0; s < n; ++s)
      if (m.parent[s] >= 0) m.children[fill[m.parent[s]]++] = s;
  }
  const auto by_id = [&](std::int32_t a, std::int32_t b) { return m.samples[a].id < m.samples[b].id; };
  for (std::int32_t s = 0; s < n; ++s)
    std::sort(m.children.begin() + m.child_offsets[s], m.children.begin() + m.child_offsets[s + 1], by_id);
  std::sort(m.roots.begin(), m.roots.end(), by_id);

  // Label cells by an iterative traversal from each root; samples left over sit on cycles.
  m.cell.assign(n, -1);
  std::vector<char> reached(n, 0);
  std::vector<std::int32_t> stack;
  std::int32_t count = 0;
  for (std::int32_t c = 0; c < m.num_cells(); ++c) {
    stack.push_back(m.roots[c]);
    while (!stack.empty()) {
      const std::int32_t v = stack.back();
      stack.pop_back();
      reached[v] = 1;
      m.cell[v] = c;
      ++count;
      for (std::int32_t k = m.child_offsets[v]; k < m.child_offsets[v + 1]; ++k)
        stack.push_back(m.children[k]);
    }
  }
  if (count != n) report_cycle(m, reached);
  check_soma(m);
  return m;
}

NeuronModel load_neuron(const std::string& path) { return build_neuron_model(read_swc(path)); }

}  // namespace sparsecc
