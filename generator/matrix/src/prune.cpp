#include "sparsecc/matrix/prune.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "sparsecc/common/math.hpp"
#include "sparsecc/common/random.hpp"

namespace sparsecc {

namespace {

constexpr std::int64_t kMaxPatternDim = std::int64_t{1} << 24;  // the matrix dimension limit

[[noreturn]] void bad_pattern(const std::string& text, const std::string& why) {
  throw UsageError(fmt::format(
      "bad pruning pattern '{}': {} (expected unstructured, block:BHxBW, N:M or rmb:BLHxBLW[@BHxBW])", text,
      why));
}

// A dimension: decimal digits only (no sign, no spaces), 1 .. kMaxPatternDim.
std::int64_t pattern_dim(const std::string& text, std::string_view field, const char* what) {
  std::int64_t v = 0;
  const bool digits = !field.empty() && std::all_of(field.begin(), field.end(),
                                                    [](unsigned char c) { return std::isdigit(c); });
  if (!digits || !parse_int(field, v) || v < 1 || v > kMaxPatternDim)
    bad_pattern(text, fmt::format("{} '{}' is not an integer in 1..{}", what, field, kMaxPatternDim));
  return v;
}

// "HxW" into its two dimensions.
std::pair<std::int64_t, std::int64_t> pattern_shape(const std::string& text, std::string_view field,
                                                    const char* what) {
  const auto x = field.find('x');
  if (x == std::string_view::npos || field.find('x', x + 1) != std::string_view::npos)
    bad_pattern(text, fmt::format("{} '{}' is not HEIGHTxWIDTH", what, field));
  return {pattern_dim(text, field.substr(0, x), what), pattern_dim(text, field.substr(x + 1), what)};
}

// Patterns built by hand rather than parsed get the parser's checks too.
void check_pattern(const PrunePattern& p) {
  const auto dim_ok = [](std::int64_t v) { return v >= 1 && v <= kMaxPatternDim; };
  bool ok = true;
  if (p.kind == PruneKind::block || p.kind == PruneKind::rmb) ok = dim_ok(p.tile_rows) && dim_ok(p.tile_cols);
  if (p.kind == PruneKind::rmb && (p.rmb_rows != 0 || p.rmb_cols != 0))
    ok = ok && dim_ok(p.rmb_rows) && dim_ok(p.rmb_cols) && p.rmb_rows % p.tile_rows == 0 &&
         p.rmb_cols % p.tile_cols == 0;
  if (p.kind == PruneKind::n_m) ok = dim_ok(p.n) && dim_ok(p.m) && p.n <= p.m;
  if (!ok) throw UsageError(fmt::format("prune: invalid pattern {}", to_string(p)));
}

void check_sparsity(double sparsity) {
  if (!(sparsity >= 0.0 && sparsity <= 1.0))
    throw UsageError(fmt::format("prune: sparsity must be in [0, 1], got {}", sparsity));
}

// The first `keep` of `order` after sorting by strength, largest first, ties to the lower index (the
// first maximum of the thesis's argmax); `order` holds indices into `strength`.
void strongest_first(std::vector<std::int64_t>& order, const std::vector<double>& strength,
                     std::size_t keep) {
  auto stronger = [&](std::int64_t a, std::int64_t b) {
    const double sa = strength[static_cast<std::size_t>(a)], sb = strength[static_cast<std::size_t>(b)];
    return sa != sb ? sa > sb : a < b;
  };
  keep = std::min(keep, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(), stronger);
  order.resize(keep);
}

void copy_tile(const DenseMatrix& from, DenseMatrix& to, std::int64_t r0, std::int64_t c0, std::int64_t h,
               std::int64_t w) {
  const std::int64_t r1 = std::min(from.rows, r0 + h), c1 = std::min(from.cols, c0 + w);
  for (std::int64_t r = r0; r < r1; ++r)
    for (std::int64_t c = c0; c < c1; ++c) to(r, c) = from(r, c);
}

// The greedy extraction of thesis Alg. 19/20 with one blocklet type: in every row block of `th` rows
// and every column segment of `seg` columns (a multiple of `tw`), K passes each take the th x tw tile
// of largest residual strength (sum of |a|, first maximum) and move it from the residual to the
// result. Tiles of one row block do not overlap, so taking a tile zeroes its own strength and leaves
// the others alone: the K passes select the K strongest tiles of the segment in order (ties to the
// lower column). A pass whose maximum is already 0 may pick a taken tile again but adds only zeros,
// as the next untaken tile (all zeros too) would. Selecting directly costs O(tiles log K) instead of
// the O(K * tiles) of literal passes, which matters for (1,1) blocklets across a whole row. The RMB
// block height plays no part: its row blocks are extracted independently. Tiles and segments that
// stick out of the matrix count the missing entries as zeros.
DenseMatrix keep_strongest_tiles(const DenseMatrix& a, std::int64_t th, std::int64_t tw, std::int64_t seg,
                                 std::int64_t k) {
  DenseMatrix out(a.rows, a.cols, 0.0);
  const std::int64_t tiles = ceil_div(a.cols, tw), per_segment = seg / tw;
  std::vector<double> strength(static_cast<std::size_t>(tiles));
  std::vector<std::int64_t> order;
  for (std::int64_t r0 = 0; r0 < a.rows; r0 += th) {
    std::fill(strength.begin(), strength.end(), 0.0);
    for (std::int64_t r = r0; r < std::min(a.rows, r0 + th); ++r)
      for (std::int64_t c = 0; c < a.cols; ++c)
        strength[static_cast<std::size_t>(c / tw)] += std::fabs(a(r, c));
    for (std::int64_t t0 = 0; t0 < tiles; t0 += per_segment) {
      order.resize(static_cast<std::size_t>(std::min(tiles, t0 + per_segment) - t0));
      std::iota(order.begin(), order.end(), t0);
      strongest_first(order, strength, static_cast<std::size_t>(k));
      for (const std::int64_t t : order) copy_tile(a, out, r0, t * tw, th, tw);
    }
  }
  return out;
}

// Whole aligned bh x bw blocks, the round((1 - sparsity) * blocks) strongest kept.
DenseMatrix keep_strongest_blocks(const DenseMatrix& a, std::int64_t bh, std::int64_t bw, double sparsity) {
  const std::int64_t nrb = ceil_div(a.rows, bh), ncb = ceil_div(a.cols, bw);
  std::vector<double> strength(static_cast<std::size_t>(nrb * ncb), 0.0);
  for (std::int64_t r = 0; r < a.rows; ++r)
    for (std::int64_t c = 0; c < a.cols; ++c)
      strength[static_cast<std::size_t>(r / bh * ncb + c / bw)] += std::fabs(a(r, c));
  std::vector<std::int64_t> order(strength.size());
  std::iota(order.begin(), order.end(), std::int64_t{0});
  strongest_first(
      order, strength,
      static_cast<std::size_t>(std::llround((1.0 - sparsity) * static_cast<double>(strength.size()))));
  DenseMatrix out(a.rows, a.cols, 0.0);
  for (const std::int64_t b : order) copy_tile(a, out, b / ncb * bh, b % ncb * bw, bh, bw);
  return out;
}

}  // namespace

CsrMatrix magnitude_prune(const DenseMatrix& dense, double sparsity, DType source_dtype) {
  if (!(sparsity >= 0.0 && sparsity <= 1.0))
    throw UsageError(fmt::format("magnitude_prune: sparsity must be in [0, 1], got {}", sparsity));
  const std::size_t total = dense.data.size();
  const auto keep = static_cast<std::size_t>(std::llround((1.0 - sparsity) * static_cast<double>(total)));
  std::vector<std::size_t> order(total);
  std::iota(order.begin(), order.end(), std::size_t{0});
  auto larger = [&](std::size_t a, std::size_t b) {
    const double ma = std::fabs(dense.data[a]), mb = std::fabs(dense.data[b]);
    return ma != mb ? ma > mb : a < b;
  };
  if (keep < total)
    std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(), larger);
  DenseMatrix kept(dense.rows, dense.cols, 0.0);
  for (std::size_t i = 0; i < keep; ++i) kept.data[order[i]] = dense.data[order[i]];
  return csr_from_dense(kept, source_dtype);
}

PrunePattern parse_prune_pattern(const std::string& text) {
  PrunePattern p;
  if (text == "unstructured") return p;
  const std::string_view t(text);
  if (t.starts_with("block:")) {
    p.kind = PruneKind::block;
    std::tie(p.tile_rows, p.tile_cols) = pattern_shape(text, t.substr(6), "block");
    return p;
  }
  if (t.starts_with("rmb:")) {
    p.kind = PruneKind::rmb;
    std::string_view rest = t.substr(4);
    const auto at = rest.find('@');
    std::tie(p.tile_rows, p.tile_cols) = pattern_shape(text, rest.substr(0, at), "blocklet");
    if (at != std::string_view::npos) {
      std::tie(p.rmb_rows, p.rmb_cols) = pattern_shape(text, rest.substr(at + 1), "RMB block");
      if (p.rmb_rows % p.tile_rows != 0 || p.rmb_cols % p.tile_cols != 0)
        bad_pattern(text, fmt::format("the blocklet {}x{} does not tile the RMB block {}x{}", p.tile_rows,
                                      p.tile_cols, p.rmb_rows, p.rmb_cols));
    }
    return p;
  }
  const auto colon = t.find(':');
  if (colon != std::string_view::npos && !t.empty() && std::isdigit(static_cast<unsigned char>(t.front()))) {
    p.kind = PruneKind::n_m;
    p.n = pattern_dim(text, t.substr(0, colon), "N");
    p.m = pattern_dim(text, t.substr(colon + 1), "M");
    if (p.n > p.m) bad_pattern(text, fmt::format("N = {} exceeds M = {}", p.n, p.m));
    return p;
  }
  bad_pattern(text, "unknown kind");
}

std::string to_string(const PrunePattern& p) {
  switch (p.kind) {
    case PruneKind::unstructured:
      return "unstructured";
    case PruneKind::block:
      return fmt::format("block:{}x{}", p.tile_rows, p.tile_cols);
    case PruneKind::n_m:
      return fmt::format("{}:{}", p.n, p.m);
    case PruneKind::rmb:
      if (p.rmb_rows == 0) return fmt::format("rmb:{}x{}", p.tile_rows, p.tile_cols);
      return fmt::format("rmb:{}x{}@{}x{}", p.tile_rows, p.tile_cols, p.rmb_rows, p.rmb_cols);
  }
  return "?";
}

std::optional<double> implied_sparsity(const PrunePattern& p) {
  if (p.kind == PruneKind::n_m) return 1.0 - static_cast<double>(p.n) / static_cast<double>(p.m);
  return std::nullopt;
}

std::int64_t rmb_blocklets_per_block(const PrunePattern& p, std::int64_t cols, double sparsity) {
  check_pattern(p);
  check_sparsity(sparsity);
  const std::int64_t bw = p.rmb_cols > 0 ? p.rmb_cols : ceil_div(cols, p.tile_cols) * p.tile_cols;
  const std::int64_t per_block = bw / p.tile_cols;
  return std::max<std::int64_t>(1, std::llround((1.0 - sparsity) * static_cast<double>(per_block)));
}

DenseMatrix prune_dense(const DenseMatrix& dense, const PrunePattern& pattern, double sparsity) {
  check_pattern(pattern);
  check_sparsity(sparsity);
  if (dense.data.size() != static_cast<std::size_t>(dense.rows * dense.cols))
    throw UsageError("prune: matrix data size differs from rows * cols");
  switch (pattern.kind) {
    case PruneKind::unstructured:
      return dense_from_csr(magnitude_prune(dense, sparsity, DType::f64));
    case PruneKind::block:
      return keep_strongest_blocks(dense, pattern.tile_rows, pattern.tile_cols, sparsity);
    case PruneKind::n_m: {
      const double fixed = *implied_sparsity(pattern);
      // A tolerance, so that 0.5 for 2:4 and 0.875 for 1:8 pass and a typo does not.
      if (std::fabs(sparsity - fixed) > 1e-6)
        throw UsageError(fmt::format("prune: pattern {} fixes the sparsity at {:.6g}, got {}",
                                     to_string(pattern), fixed, sparsity));
      // N:M is RMB with (1,1) blocklets in 1 x M blocks (blocklets-rmb.md section 2): the N greedy
      // passes keep the N largest magnitudes of each group.
      return keep_strongest_tiles(dense, 1, 1, pattern.m, pattern.n);
    }
    case PruneKind::rmb: {
      const std::int64_t tw = pattern.tile_cols;
      const std::int64_t seg =
          pattern.rmb_cols > 0 ? pattern.rmb_cols : std::max<std::int64_t>(ceil_div(dense.cols, tw) * tw, tw);
      return keep_strongest_tiles(dense, pattern.tile_rows, tw, seg,
                                  rmb_blocklets_per_block(pattern, dense.cols, sparsity));
    }
  }
  throw UsageError("prune: unknown pattern kind");
}

PruneStats prune_stats(const DenseMatrix& original, const DenseMatrix& pruned) {
  if (original.rows != pruned.rows || original.cols != pruned.cols ||
      original.data.size() != pruned.data.size())
    throw UsageError(fmt::format("prune_stats: shapes differ ({}x{} and {}x{})", original.rows, original.cols,
                                 pruned.rows, pruned.cols));
  PruneStats s;
  s.rows = original.rows;
  s.cols = original.cols;
  // Long double sums: the fractions of a large layer should not depend on rounding noise.
  long double abs_all = 0, abs_kept = 0, sq_all = 0, sq_kept = 0;
  for (std::size_t i = 0; i < original.data.size(); ++i) {
    const long double a = original.data[i], k = pruned.data[i];
    s.original_nnz += a != 0;
    s.kept_nnz += k != 0;
    abs_all += std::fabs(a);
    abs_kept += std::fabs(k);
    sq_all += a * a;
    sq_kept += k * k;
  }
  const auto numel = static_cast<double>(original.data.size());
  s.sparsity = numel > 0 ? 1.0 - static_cast<double>(s.kept_nnz) / numel : 0.0;
  if (abs_all > 0) s.magnitude_fraction = static_cast<double>(abs_kept / abs_all);
  if (sq_all > 0) s.squared_fraction = static_cast<double>(sq_kept / sq_all);
  return s;
}

DenseMatrix random_dense(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  DenseMatrix d(rows, cols);
  SplitMix64 rng(seed);
  for (auto& v : d.data) v = rng.uniform_pm1();
  return d;
}

DenseMatrix refill_kept_tiles(const DenseMatrix& pruned, const PrunePattern& pattern, std::uint64_t seed) {
  if (pattern.kind != PruneKind::block && pattern.kind != PruneKind::rmb)
    throw UsageError(fmt::format("refill_kept_tiles: pattern {} has no tiles", to_string(pattern)));
  std::vector<double> pool;
  for (double v : pruned.data)
    if (v != 0.0) pool.push_back(v);
  DenseMatrix out = pruned;
  if (pool.empty()) return out;
  SplitMix64 rng(seed);
  const std::int64_t th = pattern.tile_rows, tw = pattern.tile_cols;
  for (std::int64_t r0 = 0; r0 < out.rows; r0 += th)
    for (std::int64_t c0 = 0; c0 < out.cols; c0 += tw) {
      const std::int64_t r1 = std::min(out.rows, r0 + th), c1 = std::min(out.cols, c0 + tw);
      bool kept = false;
      for (std::int64_t r = r0; r < r1 && !kept; ++r)
        for (std::int64_t c = c0; c < c1 && !kept; ++c) kept = pruned(r, c) != 0.0;
      if (!kept) continue;
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = c0; c < c1; ++c)
          if (out(r, c) == 0.0) out(r, c) = pool[static_cast<std::size_t>(rng.next() % pool.size())];
    }
  return out;
}

}  // namespace sparsecc
