// Helpers shared by the test suites: locating the optional real-data folder, temporary folders,
// and fp64 comparison.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/matrix/dense.hpp"
#include "sparsecc/plan/spmm_plan.hpp"

namespace sparsecc::test {

// The shared data folder (../shared/data, or $SPARSECC_DATA_DIR), if present.
std::optional<std::filesystem::path> data_dir();

// The folder of the project's own sources (for fixtures checked into tests/).
std::filesystem::path source_dir();

// A fresh empty folder under the system temp dir, removed when the object goes out of scope.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

void write_text(const std::string& path, const std::string& text);
// Occurrences of `what` in `text`, not overlapping.
std::size_t count(const std::string& text, const std::string& what);
void write_bytes(const std::string& path, const std::vector<unsigned char>& bytes);

// ||a - b||_2 / ||b||_2 (0 when both are zero; +inf on size mismatch or NaN).
double rel_l2_error(const std::vector<double>& a, const std::vector<double>& b);
double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b);

// An fp32 SpMM problem of A's shape: N, bias, ReLU and N mode.
SpmmProblem problem_for(const CsrMatrix& a, std::int64_t n, bool bias = false, bool relu = false,
                        SpmmNMode mode = SpmmNMode::fixed);

// Runs the plan through the interpreter (NaN-poisoned output) on a random B (seed) of n columns, with
// a fixed bias when the problem has one, and returns its rel L2 error against the fp64 reference.
double interp_error(const SpmmPlan& p, const CsrMatrix& a, std::int64_t n, std::uint64_t seed);

// Runs `fn` and expects an InputError whose message contains every string of `parts`.
void expect_input_error(const std::function<void()>& fn, const std::vector<std::string>& parts);

// A random m x k float32 matrix in CSR: each entry of a row is nonzero with probability `density`,
// uniform in [-1, 1) (SplitMix64 from `seed`, drawn row by row); with empty_every > 0 the rows r with
// r % empty_every == empty_at are empty (and draw nothing).
CsrMatrix random_csr(std::int64_t m, std::int64_t k, double density, std::uint64_t seed,
                     std::int64_t empty_every = 0, std::int64_t empty_at = 0);

Tensor make_tensor(const std::string& name, std::vector<std::int64_t> shape, std::vector<double> data,
                   DType dtype = DType::f32);

// The published end-to-end case of SparseRT's MobileNet v1 weights (sparsert/mobilenet_v1_sparse90.npz):
// `input_image` (32 x 112 x 112) and `result` (64 x 12544), the output of layer 0 (`contraction_1x1_0`,
// 64 x 32). `result` is not layer 0 applied to `input_image` with any epilogue (bias, ReLU): it is
// layer 0 applied, without bias or ReLU, to MobileNet's depthwise 3x3 convolution of the image (stride
// 1, zero padding 1), whose filters the file does not hold. Rows of A without nonzeros give rows of
// zeros in `result`, and one-nonzero rows a 3x3 filter of one channel. So the loader recovers the
// layer's input: the 9 taps of every channel layer 0 reads, fitted all at once by least squares so
// that layer 0 of the filtered image gives `result` (261 numbers for the 29 channels, fitted to
// 64 x 12544 outputs), and `input` is the image filtered with them (the depthwise layer's output; the
// image itself on the 3 channels no product reads).
struct PublishedLayer {
  CsrMatrix a;
  std::vector<double> bias;  // contraction_1x1_0_bias (unused by `result`)
  DenseMatrix image;         // input_image as 32 x 12544 (one row a channel)
  DenseMatrix input;         // B: the image through the recovered depthwise filters
  DenseMatrix result;        // the published C (64 x 12544)
};
PublishedLayer load_mobilenet_layer0(const std::filesystem::path& npz);

// max |c - ref| / max |ref| over all entries (+inf on a shape mismatch or a NaN in c).
double max_rel_error(const DenseMatrix& c, const DenseMatrix& ref);

// Compressed plans' block shapes the suites run on their 1000 x 1500 matrix, beside the rules' own:
// {warps, strips_per_warp, stages, chunk_k} (a one-warp block, tall blocks, deep rings, a chunk of
// three pieces).
inline constexpr std::array<std::array<std::int32_t, 4>, 4> kCompressedBlockShapes{
    {{1, 1, 2, 64}, {2, 4, 4, 256}, {8, 1, 5, 64}, {3, 2, 4, 192}}};

}  // namespace sparsecc::test

// Skips the current test when the shared data folder (or the given sub-path of it) is absent.
#define SPARSECC_DATA_OR_SKIP(var, sub)                                               \
  auto var##_root = ::sparsecc::test::data_dir();                                     \
  if (!var##_root || !std::filesystem::exists(*var##_root / (sub)))                   \
    GTEST_SKIP() << "real data not present (" << (sub) << "); set SPARSECC_DATA_DIR"; \
  const std::filesystem::path var = *var##_root / (sub)
