// A pruned MLP run with embedded sparsecc executors. The build made the model (make_mlp_model), compiled
// its layers (sparsecc compile-model) and embedded the bundles (sparsecc embed) into mlp_kernels.hpp /
// .cpp; this program needs nothing at run time but the CUDA driver.
//
// It runs fc1 -> fc2 -> fc3 (bias and ReLU fused into the executors) on a batch of N = mlp_kernels::fc1::N
// random inputs with every output poisoned with NaN first, launching the layers back to back on one
// stream with programmatic dependent launch (rt::RunOptions::programmatic: a layer whose bundle
// takes part starts while the one before it ends, and waits for it in the kernel), and checks
//   - each layer against the fp64 product of its float32 weights and the layer's actual float32 input
//     (max |C - ref| / max |ref| <= 1e-5, the bound sparsecc verify uses for fp32 executors), and
//   - the whole network against an fp64 forward pass from the same inputs (<= 1e-4: three layers of
//     fp32 rounding, amplified at most by the weights' norms, stay far below it), and
//   - that the same network launched plainly gives the same bits.
// Exit status: 0 checked, 1 a check failed, 77 no GPU (skipped).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <vector>

#include "mlp_kernels.hpp"
#include "mlp_model.hpp"
#include "sparsecc/runtime/device.hpp"
#include "sparsecc/runtime/driver.hpp"

namespace {

constexpr double kLayerTolerance = 1e-5;
constexpr double kNetworkTolerance = 1e-4;
constexpr int kSkipped = 77;

using mlp_example::compare;
using mlp_example::Compared;
using mlp_example::layer_fp64;

}  // namespace

int main() {
  using namespace sparsecc;
  std::string why;
  if (!rt::driver_available(&why)) {
    std::printf("sparse_mlp: skipped: no CUDA driver (%s)\n", why.c_str());
    return kSkipped;
  }
  try {
    if (rt::list_devices().empty()) {
      std::printf("sparse_mlp: skipped: no CUDA device\n");
      return kSkipped;
    }
    rt::Context ctx(0);
    mlp_kernels::Kernels kernels(ctx);
    const std::vector<mlp_example::Layer> model = mlp_example::make_model();
    const rt::SpmmExecutor* exec[3] = {&kernels.fc1(), &kernels.fc2(), &kernels.fc3()};
    const int n = static_cast<int>(mlp_kernels::fc1::N);

    std::printf("sparse_mlp on %s: %zu embedded layers, batch %d\n", ctx.device().name.c_str(),
                mlp_kernels::kLayerCount, n);
    for (const mlp_kernels::LayerInfo& info : mlp_kernels::layers())
      std::printf("  %-4s %5lld x %-5lld %7lld nonzeros  %s N  fingerprint %s\n", info.name,
                  static_cast<long long>(info.m), static_cast<long long>(info.k),
                  static_cast<long long>(info.nnz), info.n_mode, info.fingerprint);

    // Inputs: features x batch, uniform in [-1, 1).
    std::uint64_t seed = 7;
    std::vector<float> x(static_cast<std::size_t>(model[0].in) * n);
    for (float& v : x) v = mlp_example::uniform(seed);
    std::vector<double> x64(x.begin(), x.end());

    std::vector<rt::DeviceBuffer> act;
    act.emplace_back(x.size() * sizeof(float));
    act[0].upload(x.data(), x.size() * sizeof(float));
    for (const auto& l : model) act.emplace_back(static_cast<std::size_t>(l.out) * n * sizeof(float));
    const auto forward = [&](bool programmatic) {
      for (std::size_t i = 1; i < act.size(); ++i) act[i].fill32(0x7fc00000u);  // NaN: unwritten outputs fail
      rt::RunOptions options;
      options.programmatic = programmatic;
      for (int i = 0; i < 3; ++i) exec[i]->run(act[i].get(), act[i + 1].get(), n, nullptr, options);
      ctx.synchronize();
    };
    // The plain pass first, kept for the bit comparison; then the programmatic one, checked below.
    forward(false);
    std::vector<std::vector<float>> plain;
    for (std::size_t i = 1; i < act.size(); ++i) {
      plain.emplace_back(act[i].size() / sizeof(float));
      act[i].download(plain.back().data(), act[i].size());
    }
    forward(true);
    int overlapped = 0;
    for (const rt::SpmmExecutor* e : exec) overlapped += e->metadata().programmatic_launch ? 1 : 0;
    std::printf("  programmatic launches: %d of 3 layers take part\n", overlapped);

    bool ok = true;
    std::vector<float> in = x;
    std::vector<double> network = x64;
    for (int i = 0; i < 3; ++i) {
      const mlp_example::Layer& l = model[i];
      std::vector<float> out(static_cast<std::size_t>(l.out) * n);
      act[i + 1].download(out.data(), out.size() * sizeof(float));
      const Compared layer = compare(out, layer_fp64(l, std::vector<double>(in.begin(), in.end()), n));
      network = layer_fp64(l, network, n);
      const Compared whole = compare(out, network);
      const bool same_bits = std::memcmp(out.data(), plain[i].data(), out.size() * sizeof(float)) == 0;
      const bool layer_ok = layer.unwritten == 0 && layer.rel <= kLayerTolerance && same_bits;
      ok = ok && layer_ok;
      std::printf(
          "  %s (%s image): layer error %.3e (tolerance %.0e), vs fp64 network %.3e, %zu unwritten, %s the "
          "plain launch's bits  %s\n",
          l.name.c_str(), exec[i]->loaded_from().c_str(), layer.rel, kLayerTolerance, whole.rel,
          layer.unwritten, same_bits ? "same as" : "NOT", layer_ok ? "ok" : "FAILED");
      if (i == 2) {
        const bool net_ok = whole.unwritten == 0 && whole.rel <= kNetworkTolerance;
        ok = ok && net_ok;
        std::printf("  network output vs fp64 forward pass: max relative error %.3e (tolerance %.0e)  %s\n",
                    whole.rel, kNetworkTolerance, net_ok ? "ok" : "FAILED");
      }
      in = std::move(out);
    }
    std::printf("sparse_mlp: %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparse_mlp: error: %s\n", e.what());
    return 1;
  }
}
