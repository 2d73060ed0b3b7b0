// Writes the example MLP (mlp_model.hpp) as a NumPy .npz archive: fc{1,2,3}.weight (out x in, float32)
// and fc{1,2,3}.bias, the layout PyTorch's state_dict uses. Run by the build before sparsecc
// compile-model.   make_mlp_model OUT.npz
#include <cstdio>
#include <exception>

#include "mlp_model.hpp"
#include "sparsecc/io/npz.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_mlp_model OUT.npz\n");
    return 2;
  }
  try {
    std::vector<sparsecc::Tensor> tensors;
    for (const mlp_example::Layer& l : mlp_example::make_model()) {
      sparsecc::Tensor w;
      w.name = l.name + ".weight";
      w.shape = {l.out, l.in};
      w.dtype = sparsecc::DType::f32;
      w.data.assign(l.weight.begin(), l.weight.end());
      sparsecc::Tensor b;
      b.name = l.name + ".bias";
      b.shape = {l.out};
      b.dtype = sparsecc::DType::f32;
      b.data.assign(l.bias.begin(), l.bias.end());
      tensors.push_back(std::move(w));
      tensors.push_back(std::move(b));
    }
    sparsecc::write_npz(argv[1], tensors, /*compress=*/true);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_mlp_model: %s\n", e.what());
    return 1;
  }
  return 0;
}
