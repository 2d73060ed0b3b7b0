#include "test_support.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <stdexcept>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/random.hpp"
#include "sparsecc/io/load.hpp"
#include "sparsecc/matrix/prune.hpp"
#include "sparsecc/plan/spmm_interpreter.hpp"
#include "sparsecc/reference/spmm.hpp"

namespace sparsecc::test {

std::optional<std::filesystem::path> data_dir() {
  if (const char* env = std::getenv("SPARSECC_DATA_DIR"); env && *env) {
    std::filesystem::path p(env);
    if (std::filesystem::is_directory(p)) return p;
    return std::nullopt;
  }
  std::filesystem::path p(SPARSECC_TEST_DATA_DIR);
  if (std::filesystem::is_directory(p)) return p;
  return std::nullopt;
}

std::filesystem::path source_dir() { return std::filesystem::path(SPARSECC_SOURCE_DIR); }

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  std::random_device rd;
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto p = std::filesystem::temp_directory_path() /
             ("sparsecc-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
              std::to_string(rd() % 1000000));
    if (std::filesystem::create_directory(p)) {
      path_ = p;
      return;
    }
  }
  throw std::runtime_error("cannot create a temporary directory");
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + path);
}

void write_bytes(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

double rel_l2_error(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return INFINITY;
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  if (den == 0) return num == 0 ? 0.0 : INFINITY;
  return std::sqrt(num / den);
}

SpmmProblem problem_for(const CsrMatrix& a, std::int64_t n, bool bias, bool relu, SpmmNMode mode) {
  return {a.rows, a.cols, n, mode, bias, relu, DType::f32};
}

double interp_error(const SpmmPlan& p, const CsrMatrix& a, std::int64_t n, std::uint64_t seed) {
  const DenseMatrix b = random_dense(a.cols, n, seed);
  std::vector<double> bias(static_cast<std::size_t>(a.rows));
  for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = 0.25 * static_cast<double>(i % 7) - 0.75;
  const auto* bias_ptr = p.problem.bias ? &bias : nullptr;
  const DenseMatrix got = interpret_spmm(p, spmm_kernel_values(p, a), b, bias_ptr);
  return rel_l2_error(got.data, spmm(a, b, bias_ptr, p.problem.relu).data);
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(a[i] - b[i]);
    if (std::isnan(d)) return INFINITY;
    m = std::max(m, d);
  }
  return m;
}

void expect_input_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no InputError; expected one mentioning " << (parts.empty() ? "" : parts.front());
  } catch (const InputError& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << "\n  lacks: " << p;
  }
}

CsrMatrix random_csr(std::int64_t m, std::int64_t k, double density, std::uint64_t seed,
                     std::int64_t empty_every, std::int64_t empty_at) {
  SplitMix64 rng(seed);
  DenseMatrix d(m, k);
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t c = 0; c < k; ++c)
      if (!(empty_every > 0 && r % empty_every == empty_at) &&
          static_cast<double>(rng.next() >> 11) * 0x1p-53 < density)
        d(r, c) = rng.uniform_pm1();
  return csr_from_dense(d, DType::f32);
}

Tensor make_tensor(const std::string& name, std::vector<std::int64_t> shape, std::vector<double> data,
                   DType dtype) {
  Tensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = std::move(data);
  return t;
}

namespace {
// A 2-D view of tensor `t` as rows x cols (its elements in C order), checking the element count.
DenseMatrix as_matrix(Tensor t, std::int64_t rows, std::int64_t cols) {
  if (t.numel() != rows * cols)
    throw std::runtime_error(t.name + ": " + std::to_string(t.numel()) + " elements, expected " +
                             std::to_string(rows) + " x " + std::to_string(cols));
  DenseMatrix m(rows, cols);
  m.data = std::move(t.data);
  return m;
}

// Solves g x = h for a symmetric positive definite n x n g (row-major) by Cholesky; h becomes x.
void solve_spd(std::vector<double> g, std::vector<double>& h, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j) {
    for (std::size_t k = 0; k < j; ++k) g[j * n + j] -= g[j * n + k] * g[j * n + k];
    if (!(g[j * n + j] > 0)) throw std::runtime_error("solve_spd: not positive definite");
    g[j * n + j] = std::sqrt(g[j * n + j]);
    for (std::size_t i = j + 1; i < n; ++i) {
      for (std::size_t k = 0; k < j; ++k) g[i * n + j] -= g[i * n + k] * g[j * n + k];
      g[i * n + j] /= g[j * n + j];
    }
  }
  for (std::size_t i = 0; i < n; ++i) {  // L y = h
    for (std::size_t k = 0; k < i; ++k) h[i] -= g[i * n + k] * h[k];
    h[i] /= g[i * n + i];
  }
  for (std::size_t i = n; i-- > 0;) {  // L^T x = y
    for (std::size_t k = i + 1; k < n; ++k) h[i] -= g[k * n + i] * h[k];
    h[i] /= g[i * n + i];
  }
}

constexpr std::int64_t kImageSide = 112;

// Pixel p of an image channel (row of `x`) shifted by (dy, dx), 0 outside the image.
double tap(const DenseMatrix& x, std::int64_t c, std::int64_t p, int dy, int dx) {
  const std::int64_t h = p / kImageSide + dy, w = p % kImageSide + dx;
  return h < 0 || h >= kImageSide || w < 0 || w >= kImageSide ? 0.0 : x(c, h * kImageSide + w);
}
}  // namespace

PublishedLayer load_mobilenet_layer0(const std::filesystem::path& npz) {
  const std::string f = npz.string();
  PublishedLayer l;
  l.a = load_matrix(f + ":contraction_1x1_0");
  l.bias = load_tensor(f + ":contraction_1x1_0_bias").data;
  l.image = as_matrix(load_tensor(f + ":input_image"), l.a.cols, kImageSide * kImageSide);
  l.result = as_matrix(load_tensor(f + ":result"), l.a.rows, l.image.cols);
  // The channels A uses (its non-empty columns); the others keep the image, which no product reads.
  std::vector<std::int64_t> slot(static_cast<std::size_t>(l.a.cols), -1), used;
  for (const std::int32_t c : l.a.col_idx) slot[static_cast<std::size_t>(c)] = 0;
  for (std::int64_t c = 0; c < l.a.cols; ++c)
    if (slot[static_cast<std::size_t>(c)] == 0) {
      slot[static_cast<std::size_t>(c)] = static_cast<std::int64_t>(used.size());
      used.push_back(c);
    }
  const std::size_t k = used.size(), n = 9 * k;
  const auto pixels = static_cast<std::size_t>(l.image.cols);
  // taps[(u * 9 + j) * pixels + p]: tap j (dy = j / 3 - 1, dx = j % 3 - 1) of used channel u at pixel p.
  std::vector<double> taps(n * pixels);
  for (std::size_t u = 0; u < k; ++u)
    for (int j = 0; j < 9; ++j)
      for (std::size_t p = 0; p < pixels; ++p)
        taps[(u * 9 + static_cast<std::size_t>(j)) * pixels + p] =
            tap(l.image, used[u], static_cast<std::int64_t>(p), j / 3 - 1, j % 3 - 1);
  // A^T A and A^T result over the used channels.
  auto s = [&](std::int64_t i) {
    return static_cast<std::size_t>(slot[static_cast<std::size_t>(l.a.col_idx[i])]);
  };
  std::vector<double> ata(k * k, 0.0), atr(k * pixels, 0.0);
  for (std::int64_t r = 0; r < l.a.rows; ++r)
    for (std::int64_t i = l.a.row_ptr[r]; i < l.a.row_ptr[r + 1]; ++i) {
      for (std::int64_t j = l.a.row_ptr[r]; j < l.a.row_ptr[r + 1]; ++j)
        ata[s(i) * k + s(j)] += l.a.values[i] * l.a.values[j];
      for (std::size_t p = 0; p < pixels; ++p)
        atr[s(i) * pixels + p] += l.a.values[i] * l.result(r, static_cast<std::int64_t>(p));
    }
  // The filters t minimizing sum_(r,p) (sum_c A(r,c) sum_j t(c,j) tap_j(c,p) - result(r,p))^2, all
  // channels at once: normal equations G t = h with G((u,i),(v,j)) = (A^T A)(u,v) sum_p tap_i(u,p)
  // tap_j(v,p) and h((u,i)) = sum_p tap_i(u,p) (A^T result)(u,p).
  std::vector<double> g(n * n, 0.0), t(n, 0.0);
  for (std::size_t a = 0; a < n; ++a) {
    const double* ta = &taps[a * pixels];
    for (std::size_t p = 0; p < pixels; ++p) t[a] += ta[p] * atr[(a / 9) * pixels + p];
    for (std::size_t b = 0; b < n; ++b) {
      const double w = ata[(a / 9) * k + b / 9];
      if (w == 0) continue;
      const double* tb = &taps[b * pixels];
      double dot = 0;
      for (std::size_t p = 0; p < pixels; ++p) dot += ta[p] * tb[p];
      g[a * n + b] = w * dot;
    }
  }
  solve_spd(std::move(g), t, n);
  l.input = l.image;
  for (std::size_t u = 0; u < k; ++u)
    for (std::size_t p = 0; p < pixels; ++p) {
      double v = 0;
      for (std::size_t j = 0; j < 9; ++j) v += t[u * 9 + j] * taps[(u * 9 + j) * pixels + p];
      l.input(used[u], static_cast<std::int64_t>(p)) = v;
    }
  return l;
}

double max_rel_error(const DenseMatrix& c, const DenseMatrix& ref) {
  if (c.rows != ref.rows || c.cols != ref.cols) return INFINITY;
  double mag = 0;
  for (const double v : ref.data) mag = std::max(mag, std::fabs(v));
  const double err = max_abs_diff(c.data, ref.data);
  return mag > 0 ? err / mag : err;
}

}  // namespace sparsecc::test
