// The LLM-layer suite: shapes, fast pruned matrices, and the sampled fp64 reference.
#include "bench/llm_suite.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <thread>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/random.hpp"

namespace sparsecc::bench {

std::string LlmShape::name() const { return fmt::format("{}x{}", m, k); }

const std::vector<LlmShape>& llm_shapes() {
  static const std::vector<LlmShape> shapes = {{4096, 4096},  {4096, 11008}, {11008, 4096}, {4096, 14336},
                                               {14336, 4096}, {8192, 8192},  {8192, 28672}, {28672, 8192}};
  return shapes;
}

LlmShape parse_llm_shape(std::string_view text) {
  const auto x = text.find('x');
  LlmShape s;
  const auto number = [](std::string_view t, std::int64_t& v) {
    const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
    return r.ec == std::errc() && r.ptr == t.data() + t.size() && v >= 1;
  };
  if (x == std::string_view::npos || !number(text.substr(0, x), s.m) || !number(text.substr(x + 1), s.k))
    throw UsageError(fmt::format("shape '{}' is not MxK (e.g. 4096x11008)", text));
  return s;
}

std::string_view llm_pattern_name(LlmPattern p) { return p == LlmPattern::random ? "random" : "magnitude"; }

LlmPattern parse_llm_pattern(std::string_view name) {
  if (name == "random") return LlmPattern::random;
  if (name == "magnitude") return LlmPattern::magnitude;
  throw UsageError(fmt::format("pattern '{}' is not random or magnitude", name));
}

double inverse_normal_cdf(double p) {
  // Acklam's rational approximation.
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  const double lo = 0.02425, hi = 1 - lo;
  if (!(p > 0 && p < 1)) return p <= 0 ? -INFINITY : INFINITY;
  if (p < lo) {
    const double q = std::sqrt(-2 * std::log(p));
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  if (p > hi) {
    const double q = std::sqrt(-2 * std::log1p(-p));
    return -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  const double q = p - 0.5, r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

namespace {

// Uniform in [0, 1) on a grid of 2^-53.
inline double unit(std::uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

// The generator of one row: independent of the thread that makes it.
inline SplitMix64 row_rng(std::uint64_t seed, std::int64_t row) {
  SplitMix64 mix(seed ^ (0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(row + 1)));
  return SplitMix64(mix.next());
}

inline double to_float(double v) { return static_cast<double>(static_cast<float>(v)); }

// Runs body(begin, end) over [0, rows) in `threads` contiguous ranges.
template <class Body>
void parallel_rows(std::int64_t rows, unsigned threads, const Body& body) {
  const auto t = static_cast<std::int64_t>(std::max(1u, std::min<unsigned>(threads, 256)));
  if (t == 1 || rows < 64) {
    body(std::int64_t{0}, rows);
    return;
  }
  std::vector<std::thread> pool;
  for (std::int64_t i = 0; i < t; ++i) {
    const std::int64_t b = rows * i / t, e = rows * (i + 1) / t;
    pool.emplace_back([&body, b, e] { body(b, e); });
  }
  for (auto& th : pool) th.join();
}

// Random pattern, one row: selection sampling (Knuth's algorithm S) keeps exactly `keep` of the k
// columns, each subset equally likely, in ascending order; one draw per column, one more per kept value.
void random_row(SplitMix64& rng, std::int64_t k, std::int64_t keep, std::int32_t* col, double* val) {
  std::int64_t needed = keep;
  for (std::int64_t j = 0; j < k && needed > 0; ++j) {
    const std::int64_t left = k - j;
    if (static_cast<double>(left) * unit(rng.next()) < static_cast<double>(needed)) {
      *col++ = static_cast<std::int32_t>(j);
      double v = inverse_normal_cdf(std::max(unit(rng.next()), 0x1.0p-53));
      if (std::fabs(v) < 0x1.0p-8) v = v < 0 ? -0x1.0p-8 : 0x1.0p-8;
      *val++ = to_float(v);
      --needed;
    }
  }
}

// Magnitude pattern, one row: each weight is N(0, 1) drawn by inversion from u uniform in [0, 1):
// |w| = Q(u) with Q(u) = Phi^-1(1 - u / 2) decreasing, so |w| > t (t = Q(1 - s)) exactly when
// u < 1 - s, and only kept weights pay for the quantile. The low bit of the draw gives the sign.
// With col == nullptr only counts.
std::int64_t magnitude_row(SplitMix64& rng, std::int64_t k, double keep_p, std::int32_t* col, double* val) {
  std::int64_t n = 0;
  for (std::int64_t j = 0; j < k; ++j) {
    const std::uint64_t bits = rng.next();
    const double u = unit(bits);
    if (u < keep_p) {
      if (col) {
        col[n] = static_cast<std::int32_t>(j);
        const double mag = -inverse_normal_cdf(std::max(u, 0x1.0p-53) / 2);
        val[n] = to_float((bits & 1) ? -mag : mag);
      }
      ++n;
    }
  }
  return n;
}

}  // namespace

CsrMatrix make_llm_matrix(std::int64_t m, std::int64_t k, double sparsity, LlmPattern pattern,
                          std::uint64_t seed, unsigned threads) {
  if (m < 1 || k < 1 || k > INT32_MAX || !(sparsity >= 0 && sparsity < 1))
    throw UsageError(fmt::format(
        "an LLM matrix needs 1 <= M, 1 <= K < 2^31 and 0 <= sparsity < 1 (M {}, K {}, sparsity {})", m, k,
        sparsity));
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  CsrMatrix a;
  a.rows = m;
  a.cols = k;
  a.source_dtype = DType::f32;
  a.row_ptr.assign(static_cast<std::size_t>(m + 1), 0);
  if (pattern == LlmPattern::random) {
    const auto keep = static_cast<std::int64_t>(std::llround((1 - sparsity) * static_cast<double>(k)));
    for (std::int64_t r = 0; r <= m; ++r) a.row_ptr[static_cast<std::size_t>(r)] = r * keep;
    a.col_idx.resize(static_cast<std::size_t>(m * keep));
    a.values.resize(a.col_idx.size());
    parallel_rows(m, threads, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t r = b; r < e; ++r) {
        SplitMix64 rng = row_rng(seed, r);
        const auto at = static_cast<std::size_t>(r * keep);
        random_row(rng, k, keep, a.col_idx.data() + at, a.values.data() + at);
      }
    });
    return a;
  }
  // Magnitude: count each row, then fill it from the same generator state.
  const double keep_p = 1 - sparsity;
  parallel_rows(m, threads, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      SplitMix64 rng = row_rng(seed, r);
      a.row_ptr[static_cast<std::size_t>(r + 1)] = magnitude_row(rng, k, keep_p, nullptr, nullptr);
    }
  });
  for (std::int64_t r = 0; r < m; ++r)
    a.row_ptr[static_cast<std::size_t>(r + 1)] += a.row_ptr[static_cast<std::size_t>(r)];
  a.col_idx.resize(static_cast<std::size_t>(a.row_ptr.back()));
  a.values.resize(a.col_idx.size());
  parallel_rows(m, threads, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      SplitMix64 rng = row_rng(seed, r);
      const auto at = static_cast<std::size_t>(a.row_ptr[static_cast<std::size_t>(r)]);
      magnitude_row(rng, k, keep_p, a.col_idx.data() + at, a.values.data() + at);
    }
  });
  return a;
}

std::vector<std::int64_t> sample_rows(std::int64_t m, std::int64_t count) {
  std::vector<std::int64_t> rows;
  if (count <= 0 || count >= m) {
    rows.resize(static_cast<std::size_t>(std::max<std::int64_t>(m, 0)));
    for (std::int64_t r = 0; r < m; ++r) rows[static_cast<std::size_t>(r)] = r;
    return rows;
  }
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t b = m * i / count, e = m * (i + 1) / count;
    std::int64_t r = b + (i * 7919) % (e - b);
    if (i == count - 1) r = m - 1;
    rows.push_back(r);
  }
  return rows;
}

std::vector<double> reference_rows(const CsrMatrix& a, const std::vector<double>& b, std::int64_t n,
                                   const std::vector<std::int64_t>& rows) {
  if (static_cast<std::int64_t>(b.size()) != a.cols * n)
    throw UsageError(
        fmt::format("reference_rows: B has {} values, not K x N = {} x {}", b.size(), a.cols, n));
  std::vector<double> c(rows.size() * static_cast<std::size_t>(n), 0.0);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::int64_t r = rows[i];
    if (r < 0 || r >= a.rows)
      throw UsageError(fmt::format("reference_rows: row {} outside 0..{}", r, a.rows - 1));
    double* out = c.data() + i * static_cast<std::size_t>(n);
    for (std::int64_t p = a.row_ptr[static_cast<std::size_t>(r)];
         p < a.row_ptr[static_cast<std::size_t>(r + 1)]; ++p) {
      const double v = a.values[static_cast<std::size_t>(p)];
      const double* brow = b.data() + static_cast<std::size_t>(a.col_idx[static_cast<std::size_t>(p)]) * n;
      for (std::int64_t j = 0; j < n; ++j) out[j] += v * brow[j];
    }
  }
  return c;
}

std::vector<double> pick_rows(const std::vector<double>& full, std::int64_t cols,
                              const std::vector<std::int64_t>& rows) {
  std::vector<double> out;
  out.reserve(rows.size() * static_cast<std::size_t>(cols));
  for (std::int64_t r : rows)
    for (std::int64_t j = 0; j < cols; ++j) out.push_back(full[static_cast<std::size_t>(r * cols + j)]);
  const bool finite = std::all_of(full.begin(), full.end(), [](double v) { return std::isfinite(v); });
  if (!finite && !out.empty()) out[0] = NAN;
  return out;
}

}  // namespace sparsecc::bench
