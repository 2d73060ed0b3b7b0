#!/bin/bash
# Run 44: GPU tests on the final code (the compressed family, bundles, the SpMM and half suites, conv).
set -u
export SPARSECC_TEMPLATE_DIR=$PWD/templates SPARSECC_DATA_DIR=$PWD/.data
B=$PWD/.device/bin
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 420 $B/sparsecc_gpu_tests --gtest_filter='SpmmCompressedGpu.*:GpuBundle.*:SpmmGpu.BundleFileRoundTrip:SpmmHalfGpu.*' > $OUT/gpu44.txt 2>&1
echo "gpu tests exit $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[       OK|^\[  FAILED" $OUT/gpu44.txt
grep -E "tall-|w4s4|w4s2|dlmc" $OUT/gpu44.txt | head -20
