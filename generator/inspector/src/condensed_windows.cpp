#include "sparsecc/inspector/condensed_windows.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/math.hpp"

namespace sparsecc {

namespace {

constexpr std::int64_t kMaxWindowRows = 256;

// A's own order: 0..m-1.
std::vector<std::int64_t> identity_order(std::int64_t m) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(m));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  return order;
}

void check_permutation(const std::vector<std::int64_t>& order, std::int64_t m, const char* where) {
  if (static_cast<std::int64_t>(order.size()) != m)
    throw UsageError(fmt::format("{}: the order has {} positions, A has {} rows", where, order.size(), m));
  std::vector<char> seen(static_cast<std::size_t>(m), 0);
  for (std::size_t p = 0; p < order.size(); ++p) {
    const std::int64_t r = order[p];
    if (r < 0 || r >= m)
      throw UsageError(fmt::format("{}: position {} holds row {}, outside 0..{}", where, p, r, m - 1));
    if (seen[static_cast<std::size_t>(r)])
      throw UsageError(fmt::format("{}: position {} repeats row {}", where, p, r));
    seen[static_cast<std::size_t>(r)] = 1;
  }
}

bool wider_than_fallback(std::int64_t union_columns, std::int64_t cols, double fraction) {
  return static_cast<double>(union_columns) > fraction * static_cast<double>(cols);
}

// What the comparison of two orders weighs: the tensor-core work, then the CUDA-core nonzeros.
bool keeps_less(const CondensedWindows& x, const CondensedWindows& y) {
  return x.kept_work + x.cuda_core_nnz < y.kept_work + y.cuda_core_nnz;
}

}  // namespace

std::string_view window_reorder_name(WindowReorder r) { return r == WindowReorder::none ? "none" : "greedy"; }

WindowReorder parse_window_reorder(std::string_view name) {
  if (name == "none") return WindowReorder::none;
  if (name == "greedy") return WindowReorder::greedy;
  throw UsageError(fmt::format("window reordering '{}': expected none or greedy", name));
}

void check_window_options(const WindowOptions& o) {
  if (o.window_rows < 1 || o.window_rows > kMaxWindowRows)
    throw UsageError(
        fmt::format("window options: window_rows {} outside 1..{}", o.window_rows, kMaxWindowRows));
  if (o.k_granule < 1) throw UsageError(fmt::format("window options: k_granule {} below 1", o.k_granule));
  if (!(o.fallback_fraction > 0 && o.fallback_fraction <= 1))
    throw UsageError(fmt::format("window options: fallback_fraction {} outside (0, 1]", o.fallback_fraction));
  if (o.candidates < 1) throw UsageError(fmt::format("window options: candidates {} below 1", o.candidates));
  if (o.scan_rows < 1) throw UsageError(fmt::format("window options: scan_rows {} below 1", o.scan_rows));
}

double CondensedWindows::kept_share() const {
  return dense_work > 0 ? static_cast<double>(kept_work) / static_cast<double>(dense_work) : 0.0;
}

double CondensedWindows::useful_fraction() const {
  return kept_work > 0 ? static_cast<double>(tensor_nnz) / static_cast<double>(kept_work) : 0.0;
}

std::vector<std::int64_t> greedy_window_order(const CsrMatrix& a, const WindowOptions& o) {
  check_window_options(o);
  const std::int64_t m = a.rows, k = a.cols;
  if (m > std::numeric_limits<std::int32_t>::max())
    throw UsageError(fmt::format("greedy_window_order: {} rows, at most 2^31 - 1", m));
  const auto sz = [](std::int64_t x) { return static_cast<std::size_t>(x); };

  // The column -> rows index. Placed rows are dropped from a column's list when a scan meets them
  // (swapped with the list's last live entry), so each entry is dropped once.
  std::vector<std::int64_t> col_ptr(sz(k + 1), 0);
  for (const std::int32_t c : a.col_idx) ++col_ptr[sz(c + 1)];
  for (std::int64_t c = 0; c < k; ++c) col_ptr[sz(c + 1)] += col_ptr[sz(c)];
  std::vector<std::int32_t> col_rows(a.col_idx.size());
  std::vector<std::int64_t> live(sz(k), 0);
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t i = a.row_ptr[sz(r)]; i < a.row_ptr[sz(r + 1)]; ++i) {
      const std::int32_t c = a.col_idx[sz(i)];
      col_rows[sz(col_ptr[sz(c)] + live[sz(c)]++)] = static_cast<std::int32_t>(r);
    }

  // Rows with nonzeros, heaviest first (lower index first on ties).
  std::vector<std::int64_t> pool;
  for (std::int64_t r = 0; r < m; ++r)
    if (a.row_nnz(r) > 0) pool.push_back(r);
  std::stable_sort(pool.begin(), pool.end(),
                   [&](std::int64_t x, std::int64_t y) { return a.row_nnz(x) > a.row_nnz(y); });
  const auto heavier = [&](std::int64_t x, std::int64_t y) {  // x before y among equals
    return a.row_nnz(x) != a.row_nnz(y) ? a.row_nnz(x) > a.row_nnz(y) : x < y;
  };

  std::vector<char> placed(sz(m), 0);
  std::vector<std::int64_t> stamp(sz(k), -1);  // the last window holding each column
  std::vector<std::int32_t> hits(sz(m), 0);
  std::vector<std::int64_t> touched, candidates;
  std::vector<std::int32_t> seed_cols;
  std::vector<std::int64_t> order;
  order.reserve(sz(m));
  std::size_t head = 0, left = pool.size();
  std::int64_t window = 0;
  const auto place = [&](std::int64_t r) {
    placed[sz(r)] = 1;
    order.push_back(r);
    --left;
    for (std::int64_t i = a.row_ptr[sz(r)]; i < a.row_ptr[sz(r + 1)]; ++i)
      stamp[sz(a.col_idx[sz(i)])] = window;
  };
  const auto next_heaviest = [&]() {
    while (placed[sz(pool[head])]) ++head;
    return pool[head];
  };

  while (left > 0) {
    const std::int64_t seed = next_heaviest();
    place(seed);
    // Candidates: the unplaced rows met over the seed's columns, rarest column first.
    seed_cols.assign(a.col_idx.begin() + a.row_ptr[sz(seed)], a.col_idx.begin() + a.row_ptr[sz(seed + 1)]);
    std::stable_sort(seed_cols.begin(), seed_cols.end(), [&](std::int32_t x, std::int32_t y) {
      return col_ptr[sz(x + 1)] - col_ptr[sz(x)] < col_ptr[sz(y + 1)] - col_ptr[sz(y)];
    });
    std::int64_t budget = o.scan_rows;
    for (std::size_t s = 0; s < seed_cols.size() && budget > 0; ++s) {
      const std::int64_t c = seed_cols[s];
      std::int32_t* list = col_rows.data() + col_ptr[sz(c)];
      std::int64_t& n = live[sz(c)];
      for (std::int64_t i = 0; i < n && budget > 0;) {
        const std::int32_t r = list[i];
        if (placed[sz(r)]) {
          list[i] = list[n - 1];
          --n;
          continue;
        }
        if (hits[sz(r)]++ == 0) touched.push_back(r);
        --budget;
        ++i;
      }
    }
    const auto better_candidate = [&](std::int64_t x, std::int64_t y) {
      return hits[sz(x)] != hits[sz(y)] ? hits[sz(x)] > hits[sz(y)] : heavier(x, y);
    };
    const std::size_t keep = std::min(touched.size(), static_cast<std::size_t>(o.candidates));
    std::partial_sort(touched.begin(), touched.begin() + static_cast<std::ptrdiff_t>(keep), touched.end(),
                      better_candidate);
    candidates.assign(touched.begin(), touched.begin() + static_cast<std::ptrdiff_t>(keep));
    for (const std::int64_t r : touched) hits[sz(r)] = 0;
    touched.clear();

    // Fill the window: the candidate adding the fewest columns, else the heaviest unplaced row.
    for (std::int64_t members = 1; members < o.window_rows && left > 0; ++members) {
      std::size_t best = candidates.size();
      std::int64_t best_fresh = std::numeric_limits<std::int64_t>::max();
      for (std::size_t j = 0; j < candidates.size(); ++j) {
        const std::int64_t r = candidates[j];
        std::int64_t fresh = 0;
        for (std::int64_t i = a.row_ptr[sz(r)]; i < a.row_ptr[sz(r + 1)] && fresh <= best_fresh; ++i)
          fresh += stamp[sz(a.col_idx[sz(i)])] != window;
        if (fresh < best_fresh || (fresh == best_fresh && heavier(r, candidates[best]))) {
          best = j;
          best_fresh = fresh;
        }
      }
      if (best < candidates.size()) {
        place(candidates[best]);
        candidates[best] = candidates.back();
        candidates.pop_back();
      } else {
        place(next_heaviest());
      }
    }
    ++window;
  }
  for (std::int64_t r = 0; r < m; ++r)
    if (a.row_nnz(r) == 0) order.push_back(r);
  return order;
}

CondensedWindows condense_windows(const CsrMatrix& a, const std::vector<std::int64_t>& order,
                                  const WindowOptions& o) {
  check_window_options(o);
  const std::int64_t m = a.rows, k = a.cols, h = o.window_rows;
  const auto sz = [](std::int64_t x) { return static_cast<std::size_t>(x); };
  CondensedWindows w;
  w.rows = m;
  w.cols = k;
  w.options = o;
  if (order.empty()) {
    w.order = identity_order(m);
  } else {
    check_permutation(order, m, "condense_windows");
    w.order = order;
  }
  for (std::int64_t p = 0; p < m; ++p)
    if (w.order[sz(p)] != p) {
      w.reordered = true;
      break;
    }
  w.nnz = a.nnz();
  w.dense_work = m * k;
  const std::int64_t count = ceil_div(m, h);
  w.windows.reserve(sz(count));
  w.column_ptr.reserve(sz(count + 1));
  std::vector<std::int64_t> stamp(sz(k), -1);
  for (std::int64_t win = 0; win < count; ++win) {
    CondensedWindow cw;
    cw.first = win * h;
    cw.height = std::min(h, m - cw.first);
    const std::size_t begin = w.columns.size();
    for (std::int64_t p = cw.first; p < cw.first + cw.height; ++p) {
      const std::int64_t r = w.order[sz(p)];
      cw.nnz += a.row_nnz(r);
      for (std::int64_t i = a.row_ptr[sz(r)]; i < a.row_ptr[sz(r + 1)]; ++i) {
        const std::int32_t c = a.col_idx[sz(i)];
        if (stamp[sz(c)] != win) {
          stamp[sz(c)] = win;
          w.columns.push_back(c);
        }
      }
    }
    const auto u = static_cast<std::int64_t>(w.columns.size() - begin);
    // Sorted by a scan of the stamps when the union is a large share of K, else by sorting.
    if (u * 16 > k) {
      std::size_t out = begin;
      for (std::int64_t c = 0; c < k; ++c)
        if (stamp[sz(c)] == win) w.columns[out++] = static_cast<std::int32_t>(c);
    } else {
      std::sort(w.columns.begin() + static_cast<std::ptrdiff_t>(begin), w.columns.end());
    }
    cw.width = ceil_div(u, o.k_granule) * o.k_granule;
    cw.cuda_core = wider_than_fallback(u, k, o.fallback_fraction);
    if (cw.cuda_core) {
      ++w.cuda_core_windows;
      w.cuda_core_nnz += cw.nnz;
    } else {
      w.tensor_nnz += cw.nnz;
      w.union_columns += u;
      w.kept_work += h * cw.width;
    }
    w.windows.push_back(cw);
    w.column_ptr.push_back(static_cast<std::int64_t>(w.columns.size()));
  }
  return w;
}

CondensedWindows plan_condensed_windows(const CsrMatrix& a, const WindowOptions& o) {
  check_window_options(o);
  CondensedWindows own = condense_windows(a, {}, o);
  if (o.reorder == WindowReorder::none) return own;
  CondensedWindows greedy = condense_windows(a, greedy_window_order(a, o), o);
  return keeps_less(greedy, own) ? std::move(greedy) : std::move(own);
}

void check_condensed_windows(const CsrMatrix& a, const CondensedWindows& w) {
  const auto sz = [](std::int64_t x) { return static_cast<std::size_t>(x); };
  const char* where = "condensed windows";
  if (w.rows != a.rows || w.cols != a.cols)
    throw UsageError(fmt::format("{}: planned for {}x{}, A is {}x{}", where, w.rows, w.cols, a.rows, a.cols));
  check_window_options(w.options);
  check_permutation(w.order, a.rows, where);
  const std::int64_t h = w.options.window_rows, g = w.options.k_granule;
  if (w.column_ptr.size() != w.windows.size() + 1 || w.column_ptr.front() != 0 ||
      w.column_ptr.back() != static_cast<std::int64_t>(w.columns.size()))
    throw UsageError(fmt::format("{}: column_ptr has {} entries for {} windows and {} columns", where,
                                 w.column_ptr.size(), w.windows.size(), w.columns.size()));
  std::vector<std::int64_t> mark(sz(a.cols), -1);
  std::int64_t next = 0, tensor_nnz = 0, cuda_nnz = 0, cuda_windows = 0, unions = 0, kept = 0;
  for (std::size_t win = 0; win < w.windows.size(); ++win) {
    const CondensedWindow& cw = w.windows[win];
    if (cw.first != next)
      throw UsageError(
          fmt::format("{}: window {} starts at position {}, expected {}", where, win, cw.first, next));
    if (cw.height < 1 || cw.height > h || (cw.height < h && cw.first + cw.height != a.rows))
      throw UsageError(fmt::format("{}: window {} has height {} (window_rows {}, {} rows left)", where, win,
                                   cw.height, h, a.rows - cw.first));
    next += cw.height;
    std::int64_t nnz = 0;
    for (std::int64_t p = cw.first; p < cw.first + cw.height; ++p) {
      const std::int64_t r = w.order[sz(p)];
      nnz += a.row_nnz(r);
      for (std::int64_t i = a.row_ptr[sz(r)]; i < a.row_ptr[sz(r + 1)]; ++i)
        mark[sz(a.col_idx[sz(i)])] = static_cast<std::int64_t>(win);
    }
    const std::int64_t b = w.column_ptr[win], e = w.column_ptr[win + 1];
    if (e < b) throw UsageError(fmt::format("{}: window {} has a negative column count", where, win));
    std::int64_t u = 0;
    for (std::int64_t i = b; i < e; ++i) {
      const std::int32_t c = w.columns[sz(i)];
      if (c < 0 || c >= a.cols)
        throw UsageError(
            fmt::format("{}: window {} holds column {}, outside 0..{}", where, win, c, a.cols - 1));
      if (i > b && c <= w.columns[sz(i - 1)])
        throw UsageError(
            fmt::format("{}: window {}'s columns are not strictly ascending at {}", where, win, c));
      if (mark[sz(c)] != static_cast<std::int64_t>(win))
        throw UsageError(
            fmt::format("{}: window {} holds column {}, which none of its rows uses", where, win, c));
      ++u;
    }
    // Every column a row uses is in the union: the union holds u distinct used columns, so compare counts.
    std::int64_t used = 0;
    for (std::int64_t p = cw.first; p < cw.first + cw.height; ++p) {
      const std::int64_t r = w.order[sz(p)];
      for (std::int64_t i = a.row_ptr[sz(r)]; i < a.row_ptr[sz(r + 1)]; ++i) {
        std::int64_t& m = mark[sz(a.col_idx[sz(i)])];
        if (m == static_cast<std::int64_t>(win)) {
          m = -2 - static_cast<std::int64_t>(win);  // counted once
          ++used;
        }
      }
    }
    if (used != u)
      throw UsageError(fmt::format("{}: window {} holds {} columns, its rows use {}", where, win, u, used));
    if (cw.nnz != nnz)
      throw UsageError(
          fmt::format("{}: window {} counts {} nonzeros, its rows hold {}", where, win, cw.nnz, nnz));
    if (cw.width != ceil_div(u, g) * g)
      throw UsageError(fmt::format("{}: window {} has width {}, its {} columns padded to {} give {}", where,
                                   win, cw.width, u, g, ceil_div(u, g) * g));
    if (cw.cuda_core != wider_than_fallback(u, a.cols, w.options.fallback_fraction))
      throw UsageError(fmt::format("{}: window {} ({} columns of {}) is{} marked for the CUDA-core path",
                                   where, win, u, a.cols, cw.cuda_core ? "" : " not"));
    if (cw.cuda_core) {
      ++cuda_windows;
      cuda_nnz += nnz;
    } else {
      tensor_nnz += nnz;
      unions += u;
      kept += h * cw.width;
    }
  }
  if (next != a.rows)
    throw UsageError(fmt::format("{}: the windows cover {} positions, A has {} rows", where, next, a.rows));
  if (w.nnz != a.nnz() || w.tensor_nnz != tensor_nnz || w.cuda_core_nnz != cuda_nnz ||
      w.cuda_core_windows != cuda_windows || w.union_columns != unions || w.kept_work != kept ||
      w.dense_work != a.rows * a.cols)
    throw UsageError(fmt::format(
        "{}: totals (nnz {}, tensor {}, CUDA-core {} in {} windows, unions {}, kept {}, dense {}) do not add "
        "up "
        "(nnz {}, tensor {}, CUDA-core {} in {} windows, unions {}, kept {}, dense {})",
        where, w.nnz, w.tensor_nnz, w.cuda_core_nnz, w.cuda_core_windows, w.union_columns, w.kept_work,
        w.dense_work, a.nnz(), tensor_nnz, cuda_nnz, cuda_windows, unions, kept, a.rows * a.cols));
  bool moved = false;
  for (std::int64_t p = 0; p < a.rows && !moved; ++p) moved = w.order[sz(p)] != p;
  if (moved != w.reordered)
    throw UsageError(fmt::format("{}: reordered is {}, the order is {}the identity", where, w.reordered,
                                 moved ? "not " : ""));
}

nlohmann::json to_json(const CondensedWindows& w) {
  std::vector<std::int64_t> widths;
  for (const CondensedWindow& cw : w.windows)
    if (!cw.cuda_core) widths.push_back(cw.width);
  std::sort(widths.begin(), widths.end());
  nlohmann::json width = nullptr;
  if (!widths.empty()) {
    const double sum = static_cast<double>(std::accumulate(widths.begin(), widths.end(), std::int64_t{0}));
    width = {{"min", widths.front()},
             {"median", widths[widths.size() / 2]},
             {"max", widths.back()},
             {"mean", sum / static_cast<double>(widths.size())}};
  }
  return {{"rows", w.rows},
          {"cols", w.cols},
          {"nnz", w.nnz},
          {"options",
           {{"window_rows", w.options.window_rows},
            {"reorder", window_reorder_name(w.options.reorder)},
            {"k_granule", w.options.k_granule},
            {"fallback_fraction", w.options.fallback_fraction},
            {"candidates", w.options.candidates},
            {"scan_rows", w.options.scan_rows}}},
          {"reordered", w.reordered},
          {"windows", static_cast<std::int64_t>(w.windows.size())},
          {"cuda_core_windows", w.cuda_core_windows},
          {"tensor_nnz", w.tensor_nnz},
          {"cuda_core_nnz", w.cuda_core_nnz},
          {"union_columns", w.union_columns},
          {"kept_work", w.kept_work},
          {"dense_work", w.dense_work},
          {"kept_share", w.kept_share()},
          {"useful_fraction", w.useful_fraction()},
          {"tensor_window_width", width}};
}

}  // namespace sparsecc
