// The consumer's deployment program: it links only its generated kernels and sparsecc::runtime. It
// lists the embedded layers (each bundle parsed and validated: magic, version, checksum, metadata)
// and, on a GPU, loads every executor and runs the two layers as a chain and one Hines step.
#include <cstdio>
#include <exception>
#include <vector>

#include "consumer_kernels.hpp"
#include "sparsecc/runtime/device.hpp"
#include "sparsecc/runtime/driver.hpp"

int main() {
  namespace k = consumer::kernels;
  try {
    for (std::size_t i = 0; i < k::kLayerCount; ++i) {
      const k::LayerInfo& info = k::layers()[i];
      const sparsecc::rt::Bundle b = sparsecc::rt::parse_bundle(k::bundle_bytes(i), info.name);
      std::printf("layer %s: %s %lldx%lld, %lld nonzeros, %s, cubin %zu bytes for %s, fingerprint %s\n",
                  info.name, info.op, static_cast<long long>(info.m), static_cast<long long>(info.k),
                  static_cast<long long>(info.nnz), info.dtype, b.cubin.size(), b.metadata.arch.c_str(),
                  info.fingerprint);
    }
    std::string why;
    if (!sparsecc::rt::driver_available(&why) || sparsecc::rt::list_devices().empty()) {
      std::printf("consumer_app: no GPU (%s): executors not loaded\n",
                  why.empty() ? "no device" : why.c_str());
      return 0;
    }
    sparsecc::rt::Context ctx(0);
    k::Kernels kernels(ctx);
    const auto& fc1 = kernels.fc1();
    const auto& fc2 = kernels.fc2();
    const auto& cell = kernels.example_cell();
    const int n = static_cast<int>(k::fc1::N);
    std::vector<float> x(static_cast<std::size_t>(k::fc1::K) * n, 0.5f);
    sparsecc::rt::DeviceBuffer in(x.size() * sizeof(float)), h(k::fc1::M * n * sizeof(float)),
        out(k::fc2::M * n * sizeof(float));
    in.upload(x.data(), x.size() * sizeof(float));
    fc1.run(in.get(), h.get(), n);
    fc2.run(h.get(), out.get(), n);
    ctx.synchronize();
    std::printf("consumer_app: ran fc1 (%s) -> fc2 (%s) on %s; Hines executor %s loaded (%s), %lld rows\n",
                fc1.loaded_from().c_str(), fc2.loaded_from().c_str(), ctx.device().name.c_str(),
                k::example_cell::kName, cell.loaded_from().c_str(), static_cast<long long>(cell.rows()));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer_app: error: %s\n", e.what());
    return 1;
  }
}
