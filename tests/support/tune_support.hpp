// Helpers of the tuner's unit tests (header-only: the test support library stays CPU-only, the
// tuner is a CUDA-toolchain stage).
#pragma once

#include "sparsecc/tune/space.hpp"

namespace sparsecc::test {

// A space of a few PTX baked plans (rows per block 4 or 8, 1 or 2 groups), small enough to search
// exhaustively.
inline tune::SpmmSpaceDims small_tune_dims() {
  tune::SpmmSpaceDims dims;
  dims.rows_per_block = {4, 8};
  dims.groups = {1, 2};
  dims.row_split = {SpmmRowSplit::equal};
  dims.value_mode = {SpmmValueMode::baked};
  dims.emitter = {KernelLanguage::ptx};
  return dims;
}

}  // namespace sparsecc::test
