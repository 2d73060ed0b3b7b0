#include "test_support.hpp"

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <stdexcept>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/random.hpp"
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
  return {a.rows, a.cols, n, mode, bias, relu, "f32"};
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

CsrMatrix random_csr(std::int64_t m, std::int64_t k, double density, std::uint64_t seed, std::int64_t empty_every,
                     std::int64_t empty_at) {
  SplitMix64 rng(seed);
  DenseMatrix d(m, k);
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t c = 0; c < k; ++c)
      if (!(empty_every > 0 && r % empty_every == empty_at) && static_cast<double>(rng.next() >> 11) * 0x1p-53 < density)
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

}  // namespace sparsecc::test
