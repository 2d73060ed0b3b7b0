// sparsecc_conv_bench: sparsecc's sparse convolution executors (SpmmProblem::conv, run_conv: the
// implicit im2col read from the images themselves) against the ways a sparse 3x3 layer is run otherwise,
// on the real ResNet-50 3x3 layers:
//   - SparseRT's filters and activations (<data>/sparsert/resnet50_3x3_sparse{90,95}.npz, filter_bg{1,2,3}
//     with input_bg{1,2,3}; 3x3, stride 1, pad 1), and
//   - the DLMC rn50 3x3 layers (<data>/dlmc/rn50/magnitude_pruning/{0.9,0.95}/bottleneck_2_*.smtx.gz, K a
//     multiple of 9; values uniform in [-1, 1) from SplitMix64 seed 1 as the other benches; output H x W
//     from dlmc/rn50_batchsizes.txt, the input that of the block's bottleneck_1 layer: 4x the pixels is
//     stride 2, else stride 1; pad 1; images uniform in [-1, 1)).
// For every layer, batch (--batch) and dtype (--dtypes; f16 where the executors accept it):
//   conv_<layout>  sparsecc's convolution executor (compile_spmm of conv_problem, run_conv) in each of
//                  --layouts;
//   spmm_im2col    sparsecc's SpMM executor of the same A on an explicit im2col matrix B (K x batch*P, the
//                  images side by side, made once on the host and uploaded), the SpMM alone;
//   gemm           cuBLAS (cublasGemmEx, default algorithm; fp32 strict, or fp16 in and out with fp32
//                  accumulation) of the dense W (O x K, the zeros kept) with the same B, the GEMM alone;
//   im2col_gemm    a small im2col kernel (NCHW images -> B) and the same GEMM, both in every timed launch;
//   floor          one launch that reads the images once and writes an output of Y's size, computing
//                  nothing (unchecked): no executor of the layer can be faster in this harness, so the
//                  SpMM's time over it bounds any executor's speedup over the SpMM (column spmm/f);
//   cudnn_<p>_<l>  cudnnConvolutionForward (when built with cuDNN) on the dense W in NCHW and NHWC: the
//                  fastest algorithm cudnnFindConvolutionForwardAlgorithm reports that passes the check,
//                  its workspace allocated; p = fp32 (CUDNN_FMA_MATH: strict fp32, since cuDNN's default
//                  math lets TF32 run on this hardware), tf32 (CUDNN_DEFAULT_MATH, with --tf32) or fp16
//                  (CUDNN_TENSOR_OP_MATH, fp32 accumulation).
// Correctness first: every output (poisoned with NaN before the run) is compared with the fp64
// reference conv2d of the same (rounded) inputs: max |err| / max |ref| within 1e-4 for fp32 (5e-3 for
// TF32, 1e-2 for fp16); one above is marked FAIL and never timed, and the exit status is then 1.
// Timing (bench/timing.hpp): CUDA graphs of many launches, the median of replays, with a warm L2 and a
// cold one (each launch rotates among enough copies of its operands, the sparsecc executors loaded once
// per copy, that twice the L2 passes between two uses of one copy); the table shows cold L2, then warm.
// Ratios (the other's time over sparsecc conv's): cuDNN's best of its layouts, SpMM on the precomputed
// im2col, the GEMM alone, im2col + GEMM; geomeans per (layers, batch, dtype, layout).
// The shared SpMM plan flags (--rows-per-block, --n-tile, --groups, ...) shape the convolution executors
// (with --plan-for both, the SpMM's too) instead of the automatic plan; --no-baselines leaves out cuBLAS
// and cuDNN.
// f16 cases run only where a convolution executor takes f16 (else a line says so), unless
// --f16-without-conv. --json FILE writes every figure; progress goes to stderr. --compile-only stops
// after compiling (no GPU).
// Exit: 0 ok, 1 a check or a build failed, 2 bad usage, bad input or no GPU.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "bench/baselines.hpp"
#include "bench/half_layouts.hpp"
#include "bench/suites.hpp"
#include "bench/timing.hpp"
#include "bench/vendor_handles.hpp"
#include "bench_main.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "sparsecc/common/output.hpp"
#include "sparsecc/common/random.hpp"
#include "sparsecc/compile/nvrtc.hpp"
#include "sparsecc/io/load.hpp"
#include "sparsecc/pipeline/pipeline.hpp"
#include "sparsecc/plan/spmm_plan.hpp"
#include "sparsecc/reference/conv.hpp"
#include "sparsecc/runtime/bundle.hpp"
#include "sparsecc/runtime/conv_geometry.hpp"
#include "sparsecc/runtime/device.hpp"
#include "sparsecc/runtime/driver.hpp"
#include "sparsecc/runtime/executor.hpp"
#include "sparsecc/target/target.hpp"
#include "spmm_flags.hpp"

#if SPARSECC_BENCH_CUDNN
#include <cudnn.h>
#endif

namespace {

using namespace sparsecc;
using namespace sparsecc::bench;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Max |err| / max |ref| bounds.
constexpr double kTolConvF32 = 1e-4;
constexpr double kTolConvTf32 = 5e-3;
constexpr double kTolConvF16 = 1e-2;
constexpr std::uint64_t kDlmcValueSeed = 1;  // as bench/suites.cpp

struct Args {
  std::string data;
  std::string json;
  std::string batch = "1,16";
  std::string layouts = "nchw";
  std::string dtypes = "f32,f16";
  std::string sparsity = "0.9,0.95";
  std::string sources = "sparsert,dlmc";
  std::string layers;  // comma-separated substrings of layer names; empty: all
  int limit = 0;
  int jobs = 0;
  std::string arch;  // empty: the device's (sm_90 with --compile-only)
  bool compile_only = false;
  bool no_cold = false;
  bool tf32 = false;
  bool allow_long_compile = false;
  bool f16_without_conv = false;
  bool no_baselines = false;  // only the SpMM on im2col and the floor beside the convolution executors
  double max_compile_s = 120;
  std::uint64_t seed = 7;
  TimingOptions timing;
  // The shared SpMM plan flags, given for the convolution executors (and with --plan-for both, the SpMM
  // on im2col too): a plan other than the automatic one, to measure it beside the baselines.
  flags::SpmmPlanFlags plan;
  bool plan_given = false;
  std::string plan_for = "conv";
};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ---- The layers ----

struct Layer {
  std::string name;           // "sparsert90/bg1", "dlmc0.9/group1_1_1"
  std::string source;         // "sparsert" | "dlmc"
  std::string sparsity;       // "0.9" | "0.95"
  std::string values;         // where the weights and images come from, in words
  CsrMatrix a;                // O x I*9, float32 values
  CsrMatrix a16;              // the same rounded to fp16 (when f16 is asked for)
  rt::ConvGeometry g;         // NCHW; the layouts are set per executor
  std::vector<double> image;  // one real image (I x H x W), or empty: random images
};

std::string sparsity_percent(const std::string& level) { return level == "0.9" ? "90" : "95"; }

rt::ConvGeometry conv3x3(std::int64_t channels, std::int64_t h, std::int64_t w, std::int64_t stride) {
  rt::ConvGeometry g;
  g.layout = rt::ConvLayout::nchw;
  g.in_channels = channels, g.height = h, g.width = w;
  g.kernel_h = g.kernel_w = 3;
  g.stride_h = g.stride_w = stride;
  g.pad_top = g.pad_left = g.pad_bottom = g.pad_right = 1;
  return g;
}

void sparsert_layers(const fs::path& data, const std::string& level, std::vector<Layer>& out) {
  const fs::path npz = data / "sparsert" / fmt::format("resnet50_3x3_sparse{}.npz", sparsity_percent(level));
  if (!fs::is_regular_file(npz)) {
    fmt::print("skipped: {} not found\n", npz.string());
    return;
  }
  for (int bg = 1; bg <= 3; ++bg) {
    Layer l;
    l.name = fmt::format("sparsert{}/bg{}", sparsity_percent(level), bg);
    l.source = "sparsert";
    l.sparsity = level;
    l.a = load_matrix(fmt::format("{}:filter_bg{}", npz.string(), bg));
    Tensor act = load_tensor(fmt::format("{}:input_bg{}", npz.string(), bg));
    if (act.shape.size() != 3 || act.shape[0] * 9 != l.a.cols)
      throw_in_file(npz.string(), fmt::format("input_bg{} is not C x H x W with C * 9 = {} (filter_bg{})", bg,
                                              l.a.cols, bg));
    l.g = conv3x3(act.shape[0], act.shape[1], act.shape[2], 1);
    l.image = std::move(act.data);
    l.values = fmt::format(
        "SparseRT ResNet-50 filter_bg{0} and activation input_bg{0} (image 0; image b > 0 is it times "
        "per-element factors in [0.5, 1.5))",
        bg);
    out.push_back(std::move(l));
  }
}

// "bottleneck_2_block_group1_1_1" -> "group1_1_1"; "..._group_projection_block_group2" -> "proj_group2".
std::string dlmc_short_name(const std::string& stem) {
  std::string s = stem.substr(std::string("bottleneck_2_block_").size());
  const std::string proj = "group_projection_block_";
  if (s.rfind(proj, 0) == 0) s = "proj_" + s.substr(proj.size());
  return s;
}

void dlmc_layers(const fs::path& data, const std::string& level, std::vector<Layer>& out) {
  const fs::path folder = data / "dlmc" / "rn50" / "magnitude_pruning" / level;
  const fs::path sizes_file = data / "dlmc" / "rn50_batchsizes.txt";
  if (!fs::is_directory(folder) || !fs::is_regular_file(sizes_file)) {
    fmt::print("skipped: DLMC rn50 {} ({} or {} not found)\n", level, folder.string(), sizes_file.string());
    return;
  }
  const std::map<std::string, std::int64_t> sizes = read_batch_sizes(sizes_file);
  std::vector<std::pair<std::string, fs::path>> files;
  for (const auto& entry : fs::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    for (const std::string suffix : {".smtx.gz", ".smtx"})
      if (name.size() > suffix.size() && name.ends_with(suffix)) {
        files.emplace_back(name.substr(0, name.size() - suffix.size()), entry.path());
        break;
      }
  }
  std::sort(files.begin(), files.end());
  const std::string prefix = "bottleneck_2_";  // the 3x3 convolutions of the bottleneck blocks
  for (const auto& [stem, path] : files) {
    if (stem.rfind(prefix, 0) != 0) continue;
    const auto out_it = sizes.find(stem);
    if (out_it == sizes.end()) {
      fmt::print("skipped: {}: no output size in {}\n", stem, sizes_file.string());
      continue;
    }
    LoadOptions options;
    options.seed = kDlmcValueSeed;
    CsrMatrix a = load_matrix(path.string(), options);
    if (a.cols % 9 != 0) continue;  // not 3x3
    const std::int64_t pixels = out_it->second;
    const auto oh = static_cast<std::int64_t>(std::llround(std::sqrt(static_cast<double>(pixels))));
    if (oh * oh != pixels) {
      fmt::print("skipped: {}: {} output pixels is no square\n", stem, pixels);
      continue;
    }
    // The block's input is the output of its bottleneck_1 (1x1, stride 1): 4x the pixels means stride 2.
    const auto in_it = sizes.find("bottleneck_1_" + stem.substr(prefix.size()));
    const std::int64_t stride = in_it != sizes.end() && in_it->second == 4 * pixels ? 2 : 1;
    Layer l;
    l.name = fmt::format("dlmc{}/{}", level, dlmc_short_name(stem));
    l.source = "dlmc";
    l.sparsity = level;
    l.a = std::move(a);
    l.g = conv3x3(l.a.cols / 9, oh * stride, oh * stride, stride);
    l.values = fmt::format(
        "DLMC rn50 magnitude-pruning {} pattern of {}; values uniform in [-1, 1) (SplitMix64 seed {}); "
        "images "
        "uniform in [-1, 1)",
        level, stem, kDlmcValueSeed);
    out.push_back(std::move(l));
  }
}

// ---- Host tensors ----

// Values of one dtype on the host: float32, or fp16 bits.
struct HostData {
  bool half = false;
  std::vector<float> f;
  std::vector<std::uint16_t> h;
  const void* data() const { return half ? static_cast<const void*>(h.data()) : f.data(); }
  std::size_t bytes() const { return half ? h.size() * 2 : f.size() * 4; }
};

HostData to_host(const std::vector<double>& v, bool half) {
  HostData d;
  d.half = half;
  if (half) {
    d.h.resize(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) d.h[i] = double_to_half_bits(v[i], HalfPrecision::f16);
  } else {
    d.f.assign(v.begin(), v.end());
  }
  return d;
}

std::shared_ptr<DeviceBuffer> upload_shared(const HostData& d) {
  auto b = std::make_shared<DeviceBuffer>(std::max<std::size_t>(d.bytes(), 16));
  b->upload(d.data(), d.bytes());
  return b;
}

std::vector<double> read_back(const DeviceBuffer& b, std::size_t count, bool half) {
  std::vector<double> out(count);
  if (half) {
    std::vector<std::uint16_t> h(count);
    b.download(h.data(), count * 2);
    for (std::size_t i = 0; i < count; ++i) out[i] = half_bits_to_double(h[i], HalfPrecision::f16);
  } else {
    std::vector<float> f(count);
    b.download(f.data(), count * 4);
    for (std::size_t i = 0; i < count; ++i) out[i] = f[i];
  }
  return out;
}

// (batch, C, S) <-> (batch, S, C) with S = H * W: NCHW to NHWC (`to_nhwc`), or NHWC to NCHW.
std::vector<double> swap_channels(const std::vector<double>& x, std::int64_t batch, std::int64_t c,
                                  std::int64_t s, bool to_nhwc) {
  std::vector<double> out(x.size());
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t ch = 0; ch < c; ++ch)
      for (std::int64_t i = 0; i < s; ++i) {
        const auto nchw = static_cast<std::size_t>((b * c + ch) * s + i);
        const auto nhwc = static_cast<std::size_t>((b * s + i) * c + ch);
        if (to_nhwc)
          out[nhwc] = x[nchw];
        else
          out[nchw] = x[nhwc];
      }
  return out;
}

std::vector<double> nchw_to_nhwc(const std::vector<double>& x, std::int64_t batch, std::int64_t c,
                                 std::int64_t s) {
  return swap_channels(x, batch, c, s, true);
}

std::vector<double> nhwc_to_nchw(const std::vector<double>& y, std::int64_t batch, std::int64_t c,
                                 std::int64_t s) {
  return swap_channels(y, batch, c, s, false);
}

// C (O x batch*P row-major, column b * P + p) -> Y (batch x O x P).
std::vector<double> product_to_nchw(const std::vector<double>& c, std::int64_t o, std::int64_t batch,
                                    std::int64_t p) {
  std::vector<double> out(c.size());
  for (std::int64_t r = 0; r < o; ++r)
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t i = 0; i < p; ++i)
        out[static_cast<std::size_t>((b * o + r) * p + i)] =
            c[static_cast<std::size_t>(r * batch * p + b * p + i)];
  return out;
}

// max |got - ref| / max |ref| (inf when got holds a non-finite value).
double max_rel_error(const std::vector<double>& got, const std::vector<double>& ref) {
  if (got.size() != ref.size()) return INFINITY;
  double max_ref = 0, max_err = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    max_ref = std::max(max_ref, std::fabs(ref[i]));
    max_err = std::max(max_err, std::fabs(got[i] - ref[i]));
  }
  return max_ref > 0 ? max_err / max_ref : max_err;
}

// ---- Builds (CPU, in parallel) ----

struct Build {
  std::optional<rt::Bundle> bundle;
  bool unsupported = false;  // the planner refused the problem (UsageError): reported, not a failure
  std::string error;
  double seconds = 0;
  nlohmann::json info = nlohmann::json::object();
};

struct BuildTask {
  std::size_t layer = 0;
  bool conv = true;  // else the SpMM on the im2col matrix
  bool half = false;
  rt::ConvLayout layout = rt::ConvLayout::nchw;  // conv
  std::int64_t batch = 1;                        // SpMM: N = batch * P
  std::string key() const {
    return conv ? fmt::format("{}|conv|{}|{}", layer, half ? "f16" : "f32", rt::to_string(layout))
                : fmt::format("{}|spmm|{}|{}", layer, half ? "f16" : "f32", batch);
  }
};

Build build_one(const Layer& l, const BuildTask& t, const Args& args, const GpuTarget& target) {
  Build b;
  const auto t0 = Clock::now();
  try {
    pipeline::SpmmRequest request;
    const DType dtype = t.half ? DType::f16 : DType::f32;
    if (t.conv) {
      rt::ConvGeometry g = l.g;
      g.layout = t.layout;
      request.problem = conv_problem(g, l.a.rows, false, false, dtype);
    } else {
      request.problem.m = l.a.rows;
      request.problem.k = l.a.cols;
      request.problem.n = t.batch * l.g.pixels();
      request.problem.dtype = dtype;
    }
    request.long_cuda =
        args.allow_long_compile ? pipeline::LongCompile::allow : pipeline::LongCompile::refuse;
    request.max_cuda_seconds = args.max_compile_s;
    request.compile_threads = 1;  // the builds run in parallel already
    if (args.plan_given && (t.conv || args.plan_for == "both"))
      request.options = flags::spmm_options(args.plan, t.half ? "f16" : "f32");
    request.name = fmt::format("{}_{}", l.name, t.conv ? "conv" : "spmm");
    pipeline::SpmmArtifact art = compile_spmm(t.half ? l.a16 : l.a, request, target);
    b.info = {{"family", art.report.family_note},          {"emit_note", art.report.emit_note},
              {"plan", art.bundle->metadata.plan_summary}, {"registers", art.usage.registers},
              {"cubin_bytes", art.bundle->cubin.size()},   {"compile_s", art.compiled.seconds}};
    b.bundle = std::move(art.bundle);
  } catch (const UsageError& e) {
    b.unsupported = true;
    b.error = e.what();
  } catch (const std::exception& e) {
    b.error = e.what();
  }
  b.seconds = seconds_since(t0);
  b.info["gen_s"] = b.seconds;
  return b;
}

std::map<std::string, Build> build_all(const std::vector<Layer>& layers, const std::vector<BuildTask>& tasks,
                                       const Args& args, const GpuTarget& target) {
  const unsigned jobs =
      args.jobs > 0 ? static_cast<unsigned>(args.jobs) : std::max(1u, std::thread::hardware_concurrency());
  std::vector<Build> built(tasks.size());
  std::atomic<std::size_t> next{0}, done{0};
  std::mutex print;
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < std::min<std::size_t>(jobs, tasks.size()); ++w)
    pool.emplace_back([&] {
      for (std::size_t i = next++; i < tasks.size(); i = next++) {
        built[i] = build_one(layers[tasks[i].layer], tasks[i], args, target);
        const std::size_t d = ++done;
        std::lock_guard<std::mutex> lock(print);
        fmt::print(stderr, "compiled {}/{}: {} {}{}\n", d, tasks.size(), layers[tasks[i].layer].name,
                   tasks[i].key(), built[i].bundle ? "" : " (" + built[i].error.substr(0, 120) + ")");
      }
    });
  for (std::thread& t : pool) t.join();
  std::map<std::string, Build> out;
  for (std::size_t i = 0; i < tasks.size(); ++i) out.emplace(tasks[i].key(), std::move(built[i]));
  return out;
}

// ---- The GPU side ----

constexpr const char* kIm2colSource = R"(
struct Im2colParams {
  long long total, np, pixels, taps;
  long long s_img, s_ch, s_row, s_col;
  int out_w, kernel_w, stride_h, stride_w, pad_top, pad_left, height, width;
};
template <class T>
__device__ void im2col(const T* __restrict__ x, T* __restrict__ b, const Im2colParams& p) {
  for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < p.total;
       idx += (long long)gridDim.x * blockDim.x) {
    const long long k = idx / p.np, col = idx - k * p.np;
    const long long img = col / p.pixels, pix = col - img * p.pixels;
    const int oy = (int)(pix / p.out_w), ox = (int)(pix - (long long)oy * p.out_w);
    const long long ch = k / p.taps;
    const int tap = (int)(k - ch * p.taps);
    const int dy = tap / p.kernel_w, dx = tap - dy * p.kernel_w;
    const int iy = oy * p.stride_h - p.pad_top + dy, ix = ox * p.stride_w - p.pad_left + dx;
    T v = T(0);
    if (iy >= 0 && iy < p.height && ix >= 0 && ix < p.width)
      v = x[img * p.s_img + ch * p.s_ch + (long long)iy * p.s_row + (long long)ix * p.s_col];
    b[idx] = v;
  }
}
// The floor: X read once and Y written once, coalesced, in one launch: what every executor of the layer
// moves at least (its bytes and its launch), timed like the executors but computing nothing.
template <class T>
__device__ void floor_copy(const T* __restrict__ x, T* __restrict__ y, long long nx, long long ny) {
  const long long total = nx > ny ? nx : ny;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const T v = i < nx ? x[i] : T(0);
    if (i < ny) y[i] = v;
  }
}
extern "C" __global__ void sparsecc_floor_f32(const float* x, float* y, long long nx, long long ny) {
  floor_copy(x, y, nx, ny);
}
extern "C" __global__ void sparsecc_floor_f16(const unsigned short* x, unsigned short* y, long long nx,
                                              long long ny) {
  floor_copy(x, y, nx, ny);
}
extern "C" __global__ void sparsecc_im2col_f32(const float* x, float* b, Im2colParams p) { im2col(x, b, p); }
extern "C" __global__ void sparsecc_im2col_f16(const unsigned short* x, unsigned short* b, Im2colParams p) {
  im2col(x, b, p);
}
)";

// The kernel's parameter block (the same layout as Im2colParams above).
struct Im2colParams {
  std::int64_t total, np, pixels, taps;
  std::int64_t s_img, s_ch, s_row, s_col;
  std::int32_t out_w, kernel_w, stride_h, stride_w, pad_top, pad_left, height, width;
};

#if SPARSECC_BENCH_CUDNN
class CudnnError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void check_cudnn(cudnnStatus_t status, const char* call, const char* file, int line) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  const std::string error = fmt::format("{} ({})", cudnnGetErrorString(status), static_cast<int>(status));
  if (static_cast<int>(status) / 1000 * 1000 == static_cast<int>(CUDNN_STATUS_NOT_SUPPORTED))
    throw NotSupported(fmt::format("{}: {}", call, error));
  throw_cuda_error(call, error, file, line);
}
#define SPARSECC_CUDNN_CHECK(call) check_cudnn((call), #call, __FILE__, __LINE__)

struct CudnnHandle {
  cudnnHandle_t h = nullptr;
  CudnnHandle() { SPARSECC_CUDNN_CHECK(cudnnCreate(&h)); }
  ~CudnnHandle() { cudnnDestroy(h); }
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;
};

// The descriptors and workspace of one cudnnConvolutionForward configuration.
struct CudnnConv {
  Owned<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor> x, y;
  Owned<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor> w;
  Owned<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor> conv;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  std::shared_ptr<DeviceBuffer> workspace;
};
#endif

struct Gpu {
  DeviceInfo device;
  rt::Context* ctx = nullptr;
  CublasHandle cublas;
  DeviceBuffer cublas_workspace{std::size_t{32} << 20};
  Library im2col_library;
  cudaKernel_t im2col_f32 = nullptr, im2col_f16 = nullptr, floor_f32 = nullptr, floor_f16 = nullptr;
#if SPARSECC_BENCH_CUDNN
  CudnnHandle cudnn;
#endif
};

void load_im2col(Gpu& gpu) {
  CudaCompileOptions options;
  options.arch = fmt::format("sm_{}{}", gpu.device.cc_major, gpu.device.cc_minor);
  const CudaCompileResult compiled = compile_cuda(kIm2colSource, "conv_bench_im2col.cu", options);
  SPARSECC_CUDA_CHECK(cudaLibraryLoadData(&gpu.im2col_library.d, compiled.cubin.data(), nullptr, nullptr, 0,
                                          nullptr, nullptr, 0));
  SPARSECC_CUDA_CHECK(cudaLibraryGetKernel(&gpu.im2col_f32, gpu.im2col_library.d, "sparsecc_im2col_f32"));
  SPARSECC_CUDA_CHECK(cudaLibraryGetKernel(&gpu.im2col_f16, gpu.im2col_library.d, "sparsecc_im2col_f16"));
  SPARSECC_CUDA_CHECK(cudaLibraryGetKernel(&gpu.floor_f32, gpu.im2col_library.d, "sparsecc_floor_f32"));
  SPARSECC_CUDA_CHECK(cudaLibraryGetKernel(&gpu.floor_f16, gpu.im2col_library.d, "sparsecc_floor_f16"));
}

// One executor's result.
struct ExecResult {
  std::string name;
  bool ok = false;       // checked and timed
  bool skipped = false;  // not supported (not a failure)
  std::string note;
  double error = NAN;  // max |err| / max |ref|
  double tolerance = 0;
  std::optional<TimingStats> warm, cold;
  nlohmann::json extra = nlohmann::json::object();

  const TimingStats* timing(bool cold_l2) const {
    const auto& t = cold_l2 ? cold : warm;
    return ok && t ? &*t : nullptr;
  }
  nlohmann::json json() const {
    nlohmann::json j = {
        {"ok", ok}, {"skipped", skipped}, {"note", note}, {"tolerance", tolerance}, {"extra", extra}};
    j["max_rel_error"] = std::isfinite(error) ? nlohmann::json(error) : nlohmann::json(nullptr);
    if (warm) j["warm"] = timing_json(*warm);
    if (cold) j["cold"] = timing_json(*cold);
    return j;
  }
};

// One operand set of an executor: its launch, the NaN poisoning of its output(s), and the output read
// back as fp64 NCHW (batch x O x OH x OW).
struct OpSet {
  std::function<void(cudaStream_t)> enqueue;
  std::function<void()> poison;
  std::function<std::vector<double>()> output;
};

std::function<void()> poisoner(std::vector<std::shared_ptr<DeviceBuffer>> buffers) {
  return [buffers] {
    for (const auto& b : buffers) SPARSECC_CUDA_CHECK(cudaMemset(b->get(), 0xff, b->bytes()));  // NaN
  };
}

TimingStats time_with_fallback(const std::function<void(cudaStream_t)>& enqueue, const TimingOptions& timing,
                               std::string& note) {
  try {
    return time_steady(enqueue, timing);
  } catch (const std::exception& e) {
    cudaGetLastError();
    note += fmt::format("{}graph capture failed ({}): timed with direct launches", note.empty() ? "" : "; ",
                        e.what());
    return time_direct(enqueue, timing);
  }
}

struct Measure {
  const Gpu& gpu;
  const Args& args;
};

// Checks candidate 0, 1, ... (make(candidate) builds a set) until one passes, then times it warm and
// cold (more sets of the same candidate, rotated). `set_bytes`: what one launch touches.
ExecResult measure(const Measure& m, const std::string& name, double tolerance,
                   const std::vector<double>& ref, std::size_t set_bytes, int candidates,
                   const std::function<OpSet(int)>& make,
                   const std::function<std::string(int)>& describe = {}) {
  fmt::print(stderr, "  {}\n", name);
  ExecResult r;
  r.name = name;
  r.tolerance = tolerance;
  try {
    std::vector<OpSet> sets;
    int chosen = -1;
    for (int c = 0; c < candidates && chosen < 0; ++c) {
      OpSet s = make(c);
      s.poison();
      {
        Stream stream;
        s.enqueue(stream.s);
        SPARSECC_CUDA_CHECK(cudaStreamSynchronize(stream.s));
      }
      const double err = max_rel_error(s.output(), ref);
      const std::string what = describe ? describe(c) : std::string();
      if (err <= tolerance) {
        chosen = c;
        r.error = err;
        if (!what.empty()) r.extra["chosen"] = what;
        sets.push_back(std::move(s));
      } else {
        r.error = err;
        r.extra["failed_candidates"].push_back({{"candidate", what}, {"max_rel_error", err}});
        r.note += fmt::format("{}FAIL check{}: error {:.3g} above {:.0e}", r.note.empty() ? "" : "; ",
                              what.empty() ? "" : " (" + what + ")", err, tolerance);
      }
    }
    if (chosen < 0) return r;
    if (!r.note.empty()) r.note += "; timed the fastest that passed";
    r.warm = time_with_fallback(sets[0].enqueue, m.args.timing, r.note);
    if (!m.args.no_cold) {
      const int n_sets = rotation_sets(set_bytes, static_cast<std::size_t>(m.gpu.device.l2_bytes), true);
      while (static_cast<int>(sets.size()) < n_sets) sets.push_back(make(chosen));
      TimingOptions cold = m.args.timing;
      cold.cold_l2 = true;
      cold.buffer_sets = n_sets;
      int next = 0;
      r.cold = time_with_fallback(
          [&](cudaStream_t s) {
            sets[static_cast<std::size_t>(next)].enqueue(s);
            next = (next + 1) % n_sets;
          },
          cold, r.note);
      r.extra["cold_sets"] = n_sets;
    }
    r.ok = true;
  } catch (const NotSupported& e) {
    r.skipped = true;
    r.note += fmt::format("{}not supported: {}", r.note.empty() ? "" : "; ", e.what());
    cudaGetLastError();
  } catch (const std::exception& e) {
    r.note += fmt::format("{}{}", r.note.empty() ? "" : "; ", e.what());
    cudaGetLastError();
  }
  return r;
}

// The inputs of one case (layer, batch, dtype).
struct CaseData {
  const Layer* layer = nullptr;
  std::int64_t batch = 1;
  bool half = false;
  std::int64_t o = 0, k = 0, p = 0;  // output channels, K, pixels of an image
  std::vector<double> x_nchw;        // batch x I x H x W (rounded to the dtype)
  std::vector<double> ref;           // batch x O x OH x OW, fp64
  std::vector<double> w_dense;       // O x K (rounded to the dtype)
  HostData b_im2col;                 // K x batch*P
  std::size_t e = 4;                 // bytes a value
};

CaseData make_case(const Layer& l, std::int64_t batch, bool half, std::uint64_t seed) {
  CaseData c;
  c.layer = &l;
  c.batch = batch;
  c.half = half;
  c.e = half ? 2 : 4;
  const CsrMatrix& a = half ? l.a16 : l.a;
  c.o = a.rows, c.k = a.cols, c.p = l.g.pixels();
  const std::int64_t image_elems = l.g.input_elements(1);
  c.x_nchw.resize(static_cast<std::size_t>(image_elems * batch));
  SplitMix64 rng(seed);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t i = 0; i < image_elems; ++i) {
      double v = 0;
      if (l.image.empty())
        v = rng.uniform_pm1();
      else if (b == 0)
        v = l.image[static_cast<std::size_t>(i)];
      else
        v = static_cast<float>(l.image[static_cast<std::size_t>(i)] * (1.0 + 0.5 * rng.uniform_pm1()));
      c.x_nchw[static_cast<std::size_t>(b * image_elems + i)] =
          half ? round_to_half(v, HalfPrecision::f16) : v;
    }
  c.ref = conv2d(a, c.x_nchw, l.g, batch);
  c.w_dense = dense_from_csr(a).data;
  std::vector<double> b(static_cast<std::size_t>(c.k * batch * c.p));
  for (std::int64_t img = 0; img < batch; ++img) {
    const DenseMatrix cols = im2col(l.g, c.x_nchw, img);
    for (std::int64_t r = 0; r < c.k; ++r)
      for (std::int64_t i = 0; i < c.p; ++i)
        b[static_cast<std::size_t>(r * batch * c.p + img * c.p + i)] = cols(r, i);
  }
  c.b_im2col = to_host(b, half);
  return c;
}

CUdeviceptr dptr(const std::shared_ptr<DeviceBuffer>& b) { return reinterpret_cast<CUdeviceptr>(b->get()); }

ExecResult run_conv_executor(const Measure& m, const CaseData& c, const Build* build, rt::ConvLayout layout) {
  const std::string name = fmt::format("conv_{}", rt::to_string(layout));
  const double tol = c.half ? kTolConvF16 : kTolConvF32;
  if (!build || !build->bundle) {
    ExecResult r;
    r.name = name;
    r.tolerance = tol;
    r.skipped = build && build->unsupported;
    r.note = build ? (r.skipped ? "refused by the pipeline: " : "not built: ") + build->error : "not built";
    return r;
  }
  const Layer& l = *c.layer;
  rt::ConvGeometry g = l.g;
  g.layout = layout;
  const bool nhwc = layout == rt::ConvLayout::nhwc;
  const std::int64_t image_s = l.g.height * l.g.width;
  const HostData x =
      to_host(nhwc ? nchw_to_nhwc(c.x_nchw, c.batch, l.g.in_channels, image_s) : c.x_nchw, c.half);
  const auto xs = g.input_shape(c.batch), ys = g.output_shape(c.batch, c.o);
  const auto y_count = static_cast<std::size_t>(g.output_elements(c.batch, c.o));
  const rt::Bundle& bundle = *build->bundle;
  const std::size_t set_bytes = rt::spmm_resident_bytes(bundle) + x.bytes() + y_count * c.e;
  ExecResult r = measure(m, name, tol, c.ref, set_bytes, 1, [&](int) {
    auto exec = std::make_shared<rt::SpmmExecutor>(rt::SpmmExecutor::load(bundle, l.name, *m.gpu.ctx));
    auto dx = upload_shared(x);
    auto dy = std::make_shared<DeviceBuffer>(y_count * c.e);
    OpSet s;
    s.enqueue = [exec, dx, dy, xs, ys](cudaStream_t st) {
      exec->run_conv(dptr(dx), xs, dptr(dy), ys, reinterpret_cast<CUstream>(st));
    };
    s.poison = poisoner({dy});
    const bool half = c.half;
    const std::int64_t batch = c.batch, o = c.o, p = c.p;
    s.output = [dy, y_count, half, nhwc, batch, o, p] {
      std::vector<double> y = read_back(*dy, y_count, half);
      return nhwc ? nhwc_to_nchw(y, batch, o, p) : y;
    };
    return s;
  });
  r.extra["build"] = build->info;
  return r;
}

ExecResult run_spmm_executor(const Measure& m, const CaseData& c, const Build* build) {
  const std::string name = "spmm_im2col";
  const double tol = c.half ? kTolConvF16 : kTolConvF32;
  if (!build || !build->bundle) {
    ExecResult r;
    r.name = name;
    r.tolerance = tol;
    r.skipped = build && build->unsupported;
    r.note = build ? (r.skipped ? "refused by the pipeline: " : "not built: ") + build->error : "not built";
    return r;
  }
  const rt::Bundle& bundle = *build->bundle;
  const std::int64_t n = c.batch * c.p;
  const auto c_count = static_cast<std::size_t>(c.o * n);
  const std::size_t set_bytes = rt::spmm_resident_bytes(bundle) + c.b_im2col.bytes() + c_count * c.e;
  ExecResult r = measure(m, name, tol, c.ref, set_bytes, 1, [&](int) {
    auto exec = std::make_shared<rt::SpmmExecutor>(rt::SpmmExecutor::load(bundle, c.layer->name, *m.gpu.ctx));
    auto db = upload_shared(c.b_im2col);
    auto dc = std::make_shared<DeviceBuffer>(c_count * c.e);
    OpSet s;
    s.enqueue = [exec, db, dc, n](cudaStream_t st) {
      exec->run(dptr(db), dptr(dc), static_cast<int>(n), reinterpret_cast<CUstream>(st));
    };
    s.poison = poisoner({dc});
    const bool half = c.half;
    const std::int64_t batch = c.batch, o = c.o, p = c.p;
    s.output = [dc, c_count, half, batch, o, p] {
      return product_to_nchw(read_back(*dc, c_count, half), o, batch, p);
    };
    return s;
  });
  r.extra["build"] = build->info;
  return r;
}

// C (O x N) = W (O x K) * B (K x N), row-major, by cublasGemmEx's default algorithm (column-major
// C^T = B^T W^T). fp32: strict fp32; fp16: fp16 in and out, fp32 accumulation.
void enqueue_gemm(const Gpu& gpu, bool half, std::int64_t o, std::int64_t k, std::int64_t n, const void* w,
                  const void* b, void* c, cudaStream_t stream) {
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType_t t = half ? CUDA_R_16F : CUDA_R_32F;
  SPARSECC_CUBLAS_CHECK(cublasSetStream(gpu.cublas.h, stream));
  SPARSECC_CUBLAS_CHECK(cublasGemmEx(gpu.cublas.h, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n),
                                     static_cast<int>(o), static_cast<int>(k), &alpha, b, t,
                                     static_cast<int>(n), w, t, static_cast<int>(k), &beta, c, t,
                                     static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void enqueue_im2col(const Gpu& gpu, bool half, const Im2colParams& params, const void* x, void* b,
                    cudaStream_t stream) {
  constexpr unsigned kThreads = 256;
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>(
      (params.total + kThreads - 1) / kThreads, static_cast<std::int64_t>(gpu.device.sms) * 64));
  Im2colParams p = params;
  const void* xp = x;
  void* bp = b;
  void* launch_args[] = {&xp, &bp, &p};
  SPARSECC_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(half ? gpu.im2col_f16 : gpu.im2col_f32),
                                       dim3(std::max(blocks, 1u)), dim3(kThreads), launch_args, 0, stream));
}

// `with_im2col`: the images uploaded in NCHW, im2col'ed by the bench's kernel before the GEMM in every
// launch; else the GEMM alone on the uploaded im2col matrix.
ExecResult run_gemm(const Measure& m, const CaseData& c, bool with_im2col) {
  const std::string name = with_im2col ? "im2col_gemm" : "gemm";
  const double tol = c.half ? kTolConvF16 : kTolConvF32;
  const Layer& l = *c.layer;
  const std::int64_t n = c.batch * c.p;
  const auto c_count = static_cast<std::size_t>(c.o * n);
  const HostData w = to_host(c.w_dense, c.half);
  const HostData x = with_im2col ? to_host(c.x_nchw, c.half) : HostData{};
  const std::size_t set_bytes =
      w.bytes() + c.b_im2col.bytes() + c_count * c.e + (with_im2col ? x.bytes() + c.b_im2col.bytes() : 0);
  Im2colParams params{};
  if (with_im2col) {
    const rt::ConvGeometry::Strides s = l.g.input_strides();
    params = {c.k * n,
              n,
              c.p,
              l.g.taps(),
              s.image,
              s.channel,
              s.row,
              s.col,
              static_cast<std::int32_t>(l.g.out_width()),
              static_cast<std::int32_t>(l.g.kernel_w),
              static_cast<std::int32_t>(l.g.stride_h),
              static_cast<std::int32_t>(l.g.stride_w),
              static_cast<std::int32_t>(l.g.pad_top),
              static_cast<std::int32_t>(l.g.pad_left),
              static_cast<std::int32_t>(l.g.height),
              static_cast<std::int32_t>(l.g.width)};
  }
  ExecResult r = measure(m, name, tol, c.ref, set_bytes, 1, [&](int) {
    auto dw = upload_shared(w);
    auto dc = std::make_shared<DeviceBuffer>(c_count * c.e);
    std::shared_ptr<DeviceBuffer> db, dx;
    if (with_im2col) {
      dx = upload_shared(x);
      db = std::make_shared<DeviceBuffer>(c.b_im2col.bytes());
    } else {
      db = upload_shared(c.b_im2col);
    }
    OpSet s;
    const Gpu* gpu = &m.gpu;
    const bool half = c.half;
    const std::int64_t o = c.o, k = c.k, batch = c.batch, p = c.p;
    s.enqueue = [gpu, half, o, k, n, dw, db, dc, dx, params](cudaStream_t st) {
      if (dx) enqueue_im2col(*gpu, half, params, dx->get(), db->get(), st);
      enqueue_gemm(*gpu, half, o, k, n, dw->get(), db->get(), dc->get(), st);
    };
    s.poison = with_im2col ? poisoner({dc, db}) : poisoner({dc});
    s.output = [dc, c_count, half, batch, o, p] {
      return product_to_nchw(read_back(*dc, c_count, half), o, batch, p);
    };
    return s;
  });
  r.extra["algorithm"] = "cublasGemmEx CUBLAS_GEMM_DEFAULT";
  if (with_im2col) r.extra["input_layout"] = "nchw";
  return r;
}

// The floor (see sparsecc_floor_f32): NCHW images in, a Y of the output's size out, one launch. It computes
// nothing, so it is not checked (its error is left NaN); its time bounds what any executor of the layer
// can take in this harness, and the SpMM's time over it bounds any executor's speedup over the SpMM.
ExecResult run_floor(const Measure& m, const CaseData& c) {
  const HostData x = to_host(c.x_nchw, c.half);
  const auto nx = static_cast<long long>(c.x_nchw.size());
  const auto ny = static_cast<long long>(c.ref.size());
  const std::size_t set_bytes = x.bytes() + static_cast<std::size_t>(ny) * c.e;
  const Gpu* gpu = &m.gpu;
  const bool half = c.half;
  ExecResult r = measure(m, "floor", std::numeric_limits<double>::infinity(), c.ref, set_bytes, 1, [&](int) {
    auto dx = upload_shared(x);
    auto dy = std::make_shared<DeviceBuffer>(static_cast<std::size_t>(ny) * c.e);
    OpSet s;
    s.enqueue = [gpu, half, dx, dy, nx, ny](cudaStream_t st) {
      constexpr unsigned kThreads = 256;
      const auto blocks = static_cast<unsigned>(std::min<long long>(
          (std::max(nx, ny) + kThreads - 1) / kThreads, static_cast<long long>(gpu->device.sms) * 64));
      const void* xp = dx->get();
      void* yp = dy->get();
      long long a = nx, b = ny;
      void* launch_args[] = {&xp, &yp, &a, &b};
      SPARSECC_CUDA_CHECK(
          cudaLaunchKernel(reinterpret_cast<const void*>(half ? gpu->floor_f16 : gpu->floor_f32),
                           dim3(std::max(blocks, 1u)), dim3(kThreads), launch_args, 0, st));
    };
    s.poison = poisoner({dy});
    s.output = [ref = c.ref] { return ref; };
    return s;
  });
  r.error = std::numeric_limits<double>::quiet_NaN();
  r.extra["unchecked"] = "reads X once and writes Y once; computes nothing";
  return r;
}

#if SPARSECC_BENCH_CUDNN
// precision: "fp32" (CUDNN_FMA_MATH), "tf32" (CUDNN_DEFAULT_MATH) or "fp16" (CUDNN_TENSOR_OP_MATH).
ExecResult run_cudnn(const Measure& m, const CaseData& c, rt::ConvLayout layout,
                     const std::string& precision) {
  const std::string name = fmt::format("cudnn_{}_{}", precision, rt::to_string(layout));
  const double tol = precision == "fp16" ? kTolConvF16 : precision == "tf32" ? kTolConvTf32 : kTolConvF32;
  const Layer& l = *c.layer;
  const rt::ConvGeometry& g = l.g;
  const bool nhwc = layout == rt::ConvLayout::nhwc;
  if (g.pad_top != g.pad_bottom || g.pad_left != g.pad_right) {
    ExecResult r;
    r.name = name;
    r.skipped = true;
    r.note = "asymmetric padding";
    return r;
  }
  const cudnnDataType_t dt = c.half ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
  const cudnnTensorFormat_t fmt_ = nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  const cudnnMathType_t math = precision == "fp16"   ? CUDNN_TENSOR_OP_MATH
                               : precision == "tf32" ? CUDNN_DEFAULT_MATH
                                                     : CUDNN_FMA_MATH;
  const std::int64_t image_s = g.height * g.width;
  const HostData x =
      to_host(nhwc ? nchw_to_nhwc(c.x_nchw, c.batch, g.in_channels, image_s) : c.x_nchw, c.half);
  // The filter: OIHW (W as stored) for NCHW, OHWI (KRSC) for NHWC.
  std::vector<double> wv = c.w_dense;
  if (nhwc) wv = nchw_to_nhwc(c.w_dense, c.o, g.in_channels, g.taps());
  const HostData w = to_host(wv, c.half);
  const auto y_count = static_cast<std::size_t>(c.batch * c.o * c.p);

  const auto make_desc = [&](cudnnMathType_t math_type) {
    auto d = std::make_shared<CudnnConv>();
    SPARSECC_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d->x.d));
    SPARSECC_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d->y.d));
    SPARSECC_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d->w.d));
    SPARSECC_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d->conv.d));
    SPARSECC_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d->x.d, fmt_, dt, static_cast<int>(c.batch),
                                                    static_cast<int>(g.in_channels),
                                                    static_cast<int>(g.height), static_cast<int>(g.width)));
    SPARSECC_CUDNN_CHECK(
        cudnnSetFilter4dDescriptor(d->w.d, dt, fmt_, static_cast<int>(c.o), static_cast<int>(g.in_channels),
                                   static_cast<int>(g.kernel_h), static_cast<int>(g.kernel_w)));
    SPARSECC_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        d->conv.d, static_cast<int>(g.pad_top), static_cast<int>(g.pad_left), static_cast<int>(g.stride_h),
        static_cast<int>(g.stride_w), 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    SPARSECC_CUDNN_CHECK(cudnnSetConvolutionMathType(d->conv.d, math_type));
    int dims[4] = {0, 0, 0, 0};
    SPARSECC_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(d->conv.d, d->x.d, d->w.d, &dims[0], &dims[1],
                                                               &dims[2], &dims[3]));
    if (dims[0] != c.batch || dims[1] != c.o || dims[2] != g.out_height() || dims[3] != g.out_width())
      throw std::runtime_error(fmt::format("cuDNN's output is {}x{}x{}x{}, the geometry's {}x{}x{}x{}",
                                           dims[0], dims[1], dims[2], dims[3], c.batch, c.o, g.out_height(),
                                           g.out_width()));
    SPARSECC_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d->y.d, fmt_, dt, dims[0], dims[1], dims[2], dims[3]));
    return d;
  };
  std::vector<cudnnConvolutionFwdAlgoPerf_t> perf;
  ExecResult found;
  found.name = name;
  found.tolerance = tol;
  try {
    // The handle's stream may be one an earlier measurement destroyed: cudnnFind runs on the default one.
    SPARSECC_CUDNN_CHECK(cudnnSetStream(m.gpu.cudnn.h, nullptr));
    auto d = make_desc(math);
    int returned = 0;
    cudnnConvolutionFwdAlgoPerf_t results[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    SPARSECC_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(m.gpu.cudnn.h, d->x.d, d->w.d, d->conv.d,
                                                              d->y.d, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                              &returned, results));
    for (int i = 0; i < returned && perf.size() < 4; ++i)
      if (results[i].status == CUDNN_STATUS_SUCCESS) perf.push_back(results[i]);
  } catch (const NotSupported& e) {
    found.skipped = true;
    found.note = fmt::format("not supported: {}", e.what());
  } catch (const std::exception& e) {
    found.note = e.what();
  }
  cudaGetLastError();
  if (perf.empty()) {
    if (found.note.empty()) {
      found.skipped = true;
      found.note = "cudnnFindConvolutionForwardAlgorithm found no algorithm";
    }
    return found;
  }
  const std::size_t set_bytes = x.bytes() + w.bytes() + y_count * c.e;
  std::vector<std::shared_ptr<CudnnConv>> descs(perf.size());
  const auto describe = [&](int i) {
    return fmt::format("algo {} math {} ({:.1f} us in cudnnFind, {} B workspace)",
                       static_cast<int>(perf[static_cast<std::size_t>(i)].algo),
                       static_cast<int>(perf[static_cast<std::size_t>(i)].mathType),
                       perf[static_cast<std::size_t>(i)].time * 1000.0,
                       perf[static_cast<std::size_t>(i)].memory);
  };
  ExecResult r = measure(
      m, name, tol, c.ref, set_bytes, static_cast<int>(perf.size()),
      [&](int i) {
        auto& d = descs[static_cast<std::size_t>(i)];
        const cudnnConvolutionFwdAlgoPerf_t& pr = perf[static_cast<std::size_t>(i)];
        if (!d) {
          d = make_desc(pr.mathType);
          d->algo = pr.algo;
          std::size_t bytes = 0;
          SPARSECC_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(m.gpu.cudnn.h, d->x.d, d->w.d,
                                                                       d->conv.d, d->y.d, d->algo, &bytes));
          d->workspace = std::make_shared<DeviceBuffer>(std::max<std::size_t>(bytes, 16));
        }
        auto dx = upload_shared(x);
        auto dw = upload_shared(w);
        auto dy = std::make_shared<DeviceBuffer>(y_count * c.e);
        OpSet s;
        const cudnnHandle_t h = m.gpu.cudnn.h;
        s.enqueue = [h, d, dx, dw, dy](cudaStream_t st) {
          const float alpha = 1.0f, beta = 0.0f;
          SPARSECC_CUDNN_CHECK(cudnnSetStream(h, st));
          SPARSECC_CUDNN_CHECK(cudnnConvolutionForward(h, &alpha, d->x.d, dx->get(), d->w.d, dw->get(),
                                                       d->conv.d, d->algo, d->workspace->get(),
                                                       d->workspace->bytes(), &beta, d->y.d, dy->get()));
        };
        s.poison = poisoner({dy});
        const bool half = c.half;
        const std::int64_t batch = c.batch, o = c.o, p = c.p;
        s.output = [dy, y_count, half, nhwc, batch, o, p] {
          std::vector<double> y = read_back(*dy, y_count, half);
          return nhwc ? nhwc_to_nchw(y, batch, o, p) : y;
        };
        return s;
      },
      describe);
  cudnnSetStream(m.gpu.cudnn.h, nullptr);  // not the timing's streams, destroyed by now
  r.extra["requested_math"] = static_cast<int>(math);
  for (std::size_t i = 0; i < perf.size(); ++i)
    r.extra["find"].push_back({{"algo", static_cast<int>(perf[i].algo)},
                               {"math", static_cast<int>(perf[i].mathType)},
                               {"time_ms", perf[i].time},
                               {"memory", perf[i].memory}});
  return r;
}
#endif

// ---- Reporting ----

// One printed row: a case in one layout of the sparsecc convolution executor.
struct Row {
  std::string layer, geometry, dtype, layout, group;  // group: the geomean key
  std::int64_t batch = 1;
  const ExecResult* conv = nullptr;
  const ExecResult *spmm = nullptr, *gemm = nullptr, *i2c = nullptr, *cudnn_same = nullptr,
                   *cudnn_best = nullptr, *floor = nullptr;
  bool failed = false;
};

// The ratio names and the baseline they take.
constexpr const char* kRatioNames[] = {"cudnn_best", "spmm_im2col", "gemm", "im2col_gemm"};

const ExecResult* ratio_base(const Row& r, int i) {
  switch (i) {
    case 0:
      return r.cudnn_best;
    case 1:
      return r.spmm;
    case 2:
      return r.gemm;
    default:
      return r.i2c;
  }
}

std::string us_cell(const ExecResult* e, bool cold) {
  if (!e) return "-";
  if (const TimingStats* t = e->timing(cold)) return fmt::format("{:.2f}", t->median_us);
  return e->skipped ? "n/s" : "FAIL";
}

std::string ratio_cell(const Row& r, int i, bool cold) {
  const TimingStats* ours = r.conv ? r.conv->timing(cold) : nullptr;
  const ExecResult* base = ratio_base(r, i);
  const TimingStats* theirs = base ? base->timing(cold) : nullptr;
  if (!ours || !theirs) return "-";
  return fmt::format("{:.2f}", theirs->median_us / ours->median_us);
}

// The SpMM's time over the floor's: no executor of the layer can beat the SpMM by more in this harness.
std::string bound_cell(const Row& r, bool cold) {
  const TimingStats* f = r.floor ? r.floor->timing(cold) : nullptr;
  const TimingStats* s = r.spmm ? r.spmm->timing(cold) : nullptr;
  return f && s ? fmt::format("{:.2f}", s->median_us / f->median_us) : "-";
}

std::string header_line() {
  return fmt::format(
      "{:<26} {:<22} {:>3} {:>4} {:>4} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>6} {:>6} {:>6} {:>8} "
      "{:>8} "
      "{:>6}",
      "layer", "geometry", "B", "type", "lay", "conv us", "spmm us", "gemm us", "i2c+g us", "cudnn us",
      "cudnnbest", "xcudnn", "xspmm", "xgemm", "xi2cg", "conv err", "floor us", "spmm/f");
}

std::string row_line(const Row& r, bool cold) {
  std::string err = "-";
  if (r.conv && std::isfinite(r.conv->error)) err = fmt::format("{:.1e}", r.conv->error);
  std::string line = fmt::format(
      "{:<26} {:<22} {:>3} {:>4} {:>4} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>6} {:>6} {:>6} {:>8} "
      "{:>8} "
      "{:>6}",
      r.layer, r.geometry, r.batch, r.dtype, r.layout, us_cell(r.conv, cold), us_cell(r.spmm, cold),
      us_cell(r.gemm, cold), us_cell(r.i2c, cold), us_cell(r.cudnn_same, cold), us_cell(r.cudnn_best, cold),
      ratio_cell(r, 0, cold), ratio_cell(r, 1, cold), ratio_cell(r, 2, cold), ratio_cell(r, 3, cold), err,
      us_cell(r.floor, cold), bound_cell(r, cold));
  if (r.failed) line += "  FAILED";
  return line;
}

// The fastest of `results` that passed (by the cold time when measured, else warm).
const ExecResult* fastest(const std::vector<const ExecResult*>& results, bool cold) {
  const ExecResult* best = nullptr;
  for (const ExecResult* e : results) {
    const TimingStats* t = e ? e->timing(cold) : nullptr;
    if (t && (!best || t->median_us < best->timing(cold)->median_us)) best = e;
  }
  return best;
}

int run(const Args& args) {
  const std::string data = args.data.empty() ? default_data_dir() : args.data;
  const std::vector<std::string> sources = split_list(args.sources), levels = split_list(args.sparsity),
                                 layout_words = split_list(args.layouts), dtypes = split_list(args.dtypes),
                                 batch_words = split_list(args.batch), filters = split_list(args.layers);
  std::vector<rt::ConvLayout> layouts;
  for (const std::string& w : layout_words) {
    try {
      layouts.push_back(rt::parse_conv_layout(w, "--layouts"));
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }
  std::vector<bool> halves;
  for (const std::string& d : dtypes) {
    if (d != "f32" && d != "f16") throw UsageError(fmt::format("--dtypes: '{}' is not f32 or f16", d));
    halves.push_back(d == "f16");
  }
  std::vector<std::int64_t> batches;
  for (const std::string& b : batch_words) {
    std::int64_t v = 0;
    if (!parse_int(b, v) || v < 1 || v > 65535)
      throw UsageError(fmt::format("--batch: '{}' is not in 1..65535", b));
    batches.push_back(v);
  }
  for (const std::string& s : sources)
    if (s != "sparsert" && s != "dlmc")
      throw UsageError(fmt::format("--sources: '{}' is not sparsert or dlmc", s));
  for (const std::string& s : levels)
    if (s != "0.9" && s != "0.95") throw UsageError(fmt::format("--sparsity: '{}' is not 0.9 or 0.95", s));
  if (layouts.empty() || halves.empty() || batches.empty() || sources.empty() || levels.empty())
    throw UsageError("--layouts, --dtypes, --batch, --sources and --sparsity must not be empty");

  // The layers.
  std::vector<Layer> layers;
  for (const std::string& level : levels)
    for (const std::string& source : sources) {
      if (source == "sparsert")
        sparsert_layers(data, level, layers);
      else
        dlmc_layers(data, level, layers);
    }
  if (!filters.empty())
    std::erase_if(layers, [&](const Layer& l) {
      return std::none_of(filters.begin(), filters.end(),
                          [&](const std::string& f) { return l.name.find(f) != std::string::npos; });
    });
  if (args.limit > 0 && layers.size() > static_cast<std::size_t>(args.limit)) layers.resize(args.limit);
  if (layers.empty()) {
    fmt::print("no layers found under {} (nothing to do)\n", data);
    return 0;
  }
  const bool any_half = std::find(halves.begin(), halves.end(), true) != halves.end();
  for (Layer& l : layers)
    if (any_half) l.a16 = round_values(l.a, HalfPrecision::f16);

  // The device (before compiling: without one, fail first), and the target.
  std::unique_ptr<rt::Context> ctx;
  std::unique_ptr<Gpu> gpu;
  if (!args.compile_only) {
    DeviceInfo device = query_device();
    ctx = std::make_unique<rt::Context>(device.ordinal);
    gpu = std::make_unique<Gpu>();
    gpu->device = device;
    gpu->ctx = ctx.get();
    SPARSECC_CUBLAS_CHECK(
        cublasSetWorkspace(gpu->cublas.h, gpu->cublas_workspace.get(), gpu->cublas_workspace.bytes()));
    SPARSECC_CUBLAS_CHECK(cublasSetMathMode(gpu->cublas.h, CUBLAS_DEFAULT_MATH));
  }
  GpuTarget target;
  {
    std::string arch = args.arch;
    if (arch.empty())
      arch = gpu ? fmt::format("sm_{}{}", gpu->device.cc_major, gpu->device.cc_minor) : "sm_90";
    try {
      target = gpu_target(arch);
    } catch (const UsageError&) {
      if (!args.arch.empty()) throw;
      target = gpu_target("sm_90");
    }
  }

  // Compile every executor on every core: the convolution executors first, then the SpMM executors of
  // the cases that run (fp32, and fp16 where a convolution executor accepted it).
  std::vector<BuildTask> tasks;
  for (std::size_t li = 0; li < layers.size(); ++li)
    for (const bool half : halves)
      for (const rt::ConvLayout layout : layouts) tasks.push_back({li, true, half, layout, 1});
  const auto t_build = Clock::now();
  std::map<std::string, Build> builds = build_all(layers, tasks, args, target);
  // (layer, half) -> whether its case runs.
  std::map<std::pair<std::size_t, bool>, bool> runs;
  for (std::size_t li = 0; li < layers.size(); ++li)
    for (const bool half : halves) {
      bool any = !half || args.f16_without_conv;
      for (const rt::ConvLayout layout : layouts) {
        const Build& b = builds.at(BuildTask{li, true, half, layout, 1}.key());
        any = any || b.bundle || !b.unsupported;
      }
      runs[{li, half}] = any;
    }
  std::vector<BuildTask> spmm_tasks;
  for (std::size_t li = 0; li < layers.size(); ++li)
    for (const bool half : halves)
      if (runs.at({li, half}))
        for (const std::int64_t b : batches) spmm_tasks.push_back({li, false, half, rt::ConvLayout::nchw, b});
  builds.merge(build_all(layers, spmm_tasks, args, target));
  tasks.insert(tasks.end(), spmm_tasks.begin(), spmm_tasks.end());
  const double build_s = seconds_since(t_build);
  bool failed = false;
  for (const auto& [key, b] : builds)
    if (!b.bundle && !b.unsupported) failed = true;

  nlohmann::json out = {
      {"program", "sparsecc_conv_bench"},
      {"arch", target.arch},
      {"data", data},
      {"build_seconds", build_s},
      {"tolerances", {{"fp32", kTolConvF32}, {"tf32", kTolConvTf32}, {"fp16", kTolConvF16}}},
      {"layers", nlohmann::json::array()},
      {"cases", nlohmann::json::array()}};
  for (const Layer& l : layers)
    out["layers"].push_back({{"name", l.name},
                             {"source", l.source},
                             {"sparsity", l.sparsity},
                             {"o", l.a.rows},
                             {"k", l.a.cols},
                             {"nnz", l.a.nnz()},
                             {"geometry", rt::to_json(l.g)},
                             {"values", l.values}});

  if (args.compile_only) {
    fmt::print("compile only ({} executors, {:.1f} s wall)\n", tasks.size(), build_s);
    for (const BuildTask& t : tasks) {
      const Build& b = builds.at(t.key());
      const std::string what =
          t.conv ? fmt::format("conv {}", rt::to_string(t.layout)) : fmt::format("spmm B={}", t.batch);
      fmt::print("{:<28} {:<12} {:<4} {:>8.2f} s  {}\n", layers[t.layer].name, what, t.half ? "f16" : "f32",
                 b.seconds, b.bundle ? "ok" : (b.unsupported ? "refused: " : "FAILED: ") + b.error);
      out["builds"][t.key()] = b.info;
      if (!b.bundle) out["builds"][t.key()]["error"] = b.error;
    }
    if (!args.json.empty()) write_file_atomic(args.json, out.dump(1));
    return failed ? 1 : 0;
  }

  load_im2col(*gpu);
  const DeviceInfo& device = gpu->device;
  std::string cudnn_version = "skipped (built without cuDNN)";
#if SPARSECC_BENCH_CUDNN
  {
    const std::size_t v = cudnnGetVersion();
    cudnn_version = fmt::format("{}.{}.{}", v / 10000, v / 100 % 100, v % 100);
  }
#endif
  fmt::print("{}\ncuDNN {}\n", device.describe(), cudnn_version);
  fmt::print(
      "{} layers, batches {}, dtypes {}, layouts {}; graphs of {} launches, median of {} replays; tables: "
      "{}\n",
      layers.size(), args.batch, args.dtypes, args.layouts, args.timing.launches_per_graph,
      args.timing.repetitions, args.no_cold ? "warm L2" : "cold L2 (main), then warm L2");
  out["device"] = device.describe();
  out["device_name"] = device.name;
  out["driver_version"] = device.driver_version;
  out["runtime_version"] = device.runtime_version;
  out["cublas_version"] = device.cublas_version;
  out["cudnn_version"] = cudnn_version;
  out["cold_l2"] = !args.no_cold;
  out["timing"] = {{"launches_per_graph", args.timing.launches_per_graph},
                   {"repetitions", args.timing.repetitions},
                   {"max_seconds", args.timing.max_seconds}};

  const Measure m{*gpu, args};
  const bool main_cold = !args.no_cold;
  fmt::print("\n{} L2\n{}\n", main_cold ? "cold" : "warm", header_line());
  std::fflush(stdout);
  std::vector<std::unique_ptr<std::vector<ExecResult>>> keep;  // the rows point into these
  std::vector<Row> rows;
  const std::size_t total = layers.size() * batches.size() * halves.size();
  std::size_t done = 0;
  for (std::size_t li = 0; li < layers.size(); ++li) {
    const Layer& l = layers[li];
    for (const std::int64_t batch : batches)
      for (const bool half : halves) {
        const auto t0 = Clock::now();
        const std::string dtype = half ? "f16" : "f32";
        if (!runs.at({li, half})) {
          const std::string why = builds.at(BuildTask{li, true, half, layouts.front(), 1}.key()).error;
          fmt::print("{:<26} B={} {}: the convolution executors do not take {} ({}); not run\n", l.name,
                     batch, dtype, dtype, why);
          out["cases"].push_back(
              {{"layer", l.name}, {"batch", batch}, {"dtype", dtype}, {"unsupported", true}, {"note", why}});
          fmt::print(stderr, "[{}/{}] {} B={} {} unsupported\n", ++done, total, l.name, batch, dtype);
          continue;
        }
        nlohmann::json j = {{"layer", l.name},
                            {"source", l.source},
                            {"sparsity", l.sparsity},
                            {"geometry", rt::to_json(l.g)},
                            {"describe", rt::describe(l.g)},
                            {"o", l.a.rows},
                            {"k", l.a.cols},
                            {"nnz", l.a.nnz()},
                            {"batch", batch},
                            {"dtype", dtype}};
        auto results = std::make_unique<std::vector<ExecResult>>();
        results->reserve(16);
        try {
          const CaseData c = make_case(l, batch, half, args.seed + li);
          const auto find = [&](const std::string& key) -> const Build* {
            const auto it = builds.find(key);
            return it == builds.end() ? nullptr : &it->second;
          };
          for (const rt::ConvLayout layout : layouts)
            results->push_back(
                run_conv_executor(m, c, find(BuildTask{li, true, half, layout, 1}.key()), layout));
          results->push_back(
              run_spmm_executor(m, c, find(BuildTask{li, false, half, rt::ConvLayout::nchw, batch}.key())));
          results->push_back(run_floor(m, c));
          if (!args.no_baselines) {
            results->push_back(run_gemm(m, c, false));
            results->push_back(run_gemm(m, c, true));
          }
#if SPARSECC_BENCH_CUDNN
          for (const rt::ConvLayout layout : {rt::ConvLayout::nchw, rt::ConvLayout::nhwc}) {
            if (args.no_baselines) break;
            results->push_back(run_cudnn(m, c, layout, half ? "fp16" : "fp32"));
            if (args.tf32 && !half) results->push_back(run_cudnn(m, c, layout, "tf32"));
          }
#endif
        } catch (const std::exception& e) {
          ExecResult r;
          r.name = "case";
          r.note = e.what();
          results->push_back(r);
          cudaGetLastError();
        }
        const auto get = [&](const std::string& name) -> const ExecResult* {
          for (const ExecResult& r : *results)
            if (r.name == name) return &r;
          return nullptr;
        };
        bool case_failed = false;
        for (const ExecResult& r : *results) {
          j["executors"][r.name] = r.json();
          if (!r.ok && !r.skipped) case_failed = true;
        }
        failed = failed || case_failed;
        const std::string cudnn_p = half ? "fp16" : "fp32";
        const ExecResult* cudnn_nchw = get("cudnn_" + cudnn_p + "_nchw");
        const ExecResult* cudnn_nhwc = get("cudnn_" + cudnn_p + "_nhwc");
        for (const rt::ConvLayout layout : layouts) {
          Row r;
          r.layer = l.name;
          r.geometry =
              fmt::format("{}x{}x{} s{} O{}", l.g.in_channels, l.g.height, l.g.width, l.g.stride_h, l.a.rows);
          r.batch = batch;
          r.dtype = dtype;
          r.layout = rt::to_string(layout);
          r.group = fmt::format("{} {} B={} {} {}", l.source, l.sparsity, batch, dtype, r.layout);
          r.conv = get(fmt::format("conv_{}", r.layout));
          r.spmm = get("spmm_im2col");
          r.gemm = get("gemm");
          r.i2c = get("im2col_gemm");
          r.floor = get("floor");
          r.cudnn_same = layout == rt::ConvLayout::nhwc ? cudnn_nhwc : cudnn_nchw;
          r.cudnn_best = fastest({cudnn_nchw, cudnn_nhwc}, main_cold);
          r.failed = case_failed;
          fmt::print("{}\n", row_line(r, main_cold));
          rows.push_back(r);
        }
        for (const ExecResult& r : *results)
          if (!r.ok && !r.note.empty()) fmt::print("    {}: {}\n", r.name, r.note.substr(0, 300));
        std::fflush(stdout);
        keep.push_back(std::move(results));
        j["failed"] = case_failed;
        j["seconds"] = seconds_since(t0);
        out["cases"].push_back(j);
        if (!args.json.empty()) write_file_atomic(args.json, out.dump(1));
        fmt::print(stderr, "[{}/{}] {} B={} {} ({:.1f} s){}\n", ++done, total, l.name, batch, dtype,
                   seconds_since(t0), case_failed ? " FAILED" : "");
      }
  }
  if (!args.no_cold) {
    fmt::print("\nwarm L2\n{}\n", header_line());
    for (const Row& r : rows) fmt::print("{}\n", row_line(r, false));
  }
  // Geomeans of the other's time over sparsecc conv's, per (layers, batch, dtype, layout).
  for (const bool cold : {true, false}) {
    if (cold && args.no_cold) continue;
    std::map<std::string, std::map<std::string, std::vector<double>>> ratios;
    std::vector<std::string> order;
    for (const Row& r : rows) {
      if (!ratios.count(r.group)) order.push_back(r.group);
      auto& g = ratios[r.group];
      const TimingStats* ours = r.conv ? r.conv->timing(cold) : nullptr;
      for (int i = 0; i < 4; ++i) {
        const ExecResult* base = ratio_base(r, i);
        const TimingStats* theirs = base ? base->timing(cold) : nullptr;
        if (ours && theirs) g[kRatioNames[i]].push_back(theirs->median_us / ours->median_us);
      }
      const TimingStats* f = r.floor ? r.floor->timing(cold) : nullptr;
      const TimingStats* sp = r.spmm ? r.spmm->timing(cold) : nullptr;
      if (f && sp) g["spmm_over_floor"].push_back(sp->median_us / f->median_us);
    }
    const char* mode = cold ? "cold" : "warm";
    fmt::print("\ngeomean speedup of sparsecc conv, {} L2 (their time / ours; layers counted)\n", mode);
    fmt::print("{:<32} {:>14} {:>14} {:>14} {:>14} {:>14}\n", "group", "x cudnn best", "x spmm im2col",
               "x gemm", "x im2col+gemm", "spmm / floor");
    for (const std::string& group : order) {
      std::string line = fmt::format("{:<32}", group);
      for (const char* name :
           {kRatioNames[0], kRatioNames[1], kRatioNames[2], kRatioNames[3], "spmm_over_floor"}) {
        const std::vector<double>& v = ratios[group][name];
        line += v.empty() ? fmt::format(" {:>14}", "-")
                          : fmt::format(" {:>14}", fmt::format("{:.2f} ({})", geomean(v), v.size()));
        if (!v.empty()) out["geomean"][mode][group][name] = {{"geomean", geomean(v)}, {"layers", v.size()}};
      }
      fmt::print("{}\n", line);
    }
  }
  if (failed) fmt::print("\nFAILED: at least one executor failed its check or did not build (see above)\n");
  out["failed"] = failed;
  if (!args.json.empty()) write_file_atomic(args.json, out.dump(1));
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  sparsecc::bench::print_stack_on_crash("sparsecc_conv_bench");
  Args args;
  CLI::App app{
      "sparsecc_conv_bench: sparsecc's sparse convolution executors against SpMM on im2col, cuBLAS "
      "and cuDNN on the ResNet-50 3x3 layers",
      "sparsecc_conv_bench"};
  app.add_option("--data", args.data, "data folder (default: $SPARSECC_DATA_DIR or ../shared/data)");
  app.add_option("--json", args.json, "write every figure as JSON");
  app.add_option("--batch", args.batch, "images per launch, a list")->capture_default_str();
  app.add_option("--layouts", args.layouts, "the sparsecc convolution executors' layouts: nchw, nhwc or both")
      ->capture_default_str();
  app.add_option("--dtypes", args.dtypes, "f32, f16 or both")->capture_default_str();
  app.add_option("--sparsity", args.sparsity, "0.9, 0.95 or both")->capture_default_str();
  app.add_option("--sources", args.sources, "sparsert (real weights and activations), dlmc, or both")
      ->capture_default_str();
  app.add_option("--layers", args.layers, "only layers whose name contains one of these (comma-separated)");
  app.add_option("--limit", args.limit, "only the first K layers");
  app.add_option("--jobs", args.jobs, "parallel compilations (default: all cores)");
  app.add_option("--arch", args.arch,
                 "GPU to compile for (default: the device's; sm_90 with --compile-only)");
  app.add_flag("--compile-only", args.compile_only, "compile every executor and stop (no GPU needed)");
  app.add_flag("--no-cold", args.no_cold, "warm L2 only");
  app.add_flag(
      "--no-baselines", args.no_baselines,
      "time only the SpMM on im2col and the floor beside the convolution executors (no cuBLAS, cuDNN)");
  app.add_flag("--tf32", args.tf32, "also cuDNN fp32 with CUDNN_DEFAULT_MATH (TF32 allowed), tolerance 5e-3");
  app.add_option("--max-compile-s", args.max_compile_s,
                 "refuse a CUDA C++ compile estimated longer than this (the executor is then reported as "
                 "refused, with the estimate)")
      ->capture_default_str();
  app.add_flag(
      "--f16-without-conv", args.f16_without_conv,
      "run the f16 cases even where the convolution executors refuse f16 (the other executors alone)");
  app.add_flag("--allow-long-compile", args.allow_long_compile,
               "compile every executor, however long it takes");
  app.add_option("--seed", args.seed, "images (SplitMix64; plus the layer's index)")->capture_default_str();
  app.add_option("--repetitions", args.timing.repetitions, "graph replays")->capture_default_str();
  app.add_option("--launches", args.timing.launches_per_graph, "launches per graph")->capture_default_str();
  app.add_option("--max-seconds", args.timing.max_seconds,
                 "slow operations get fewer launches to stay near this")
      ->capture_default_str();
  CLI::Option_group* plan = app.add_option_group(
      "Convolution plan", "SpMM plan flags for the convolution executors (default: the automatic plan)");
  flags::add_spmm_plan_flags(plan, args.plan);
  app.add_option("--plan-for", args.plan_for,
                 "conv: the plan flags shape the convolution executors only; both: the SpMM on im2col too")
      ->check(CLI::IsMember({"conv", "both"}))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
    for (const CLI::Option* o : plan->get_options()) args.plan_given = args.plan_given || o->count() > 0;
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    if (!args.json.empty()) check_output_file(args.json, {}, "--json");
    return run(args);
  } catch (const NoDeviceError& e) {
    fmt::print(stderr,
               "sparsecc_conv_bench: error: {} (this program needs an NVIDIA GPU; --compile-only does not)\n",
               e.what());
    return 2;
  } catch (const rt::DriverUnavailable& e) {
    fmt::print(stderr,
               "sparsecc_conv_bench: error: {} (this program needs an NVIDIA GPU; --compile-only does not)\n",
               e.what());
    return 2;
  } catch (const InputError& e) {
    fmt::print(stderr, "sparsecc_conv_bench: error: {}\n", e.what());
    return 2;
  } catch (const UsageError& e) {
    fmt::print(stderr, "sparsecc_conv_bench: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "sparsecc_conv_bench: error: {}\n", e.what());
    return 1;
  }
}
