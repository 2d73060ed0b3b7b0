#!/bin/bash
# Run 50: GPU tests (16-block clusters, kept rounds); 16 splits in three block shapes on the LLM shapes at 90 %.
set -u
export SPARSECC_TEMPLATE_DIR=$PWD/templates
B=$PWD/.device/bin
mkdir -p /tmp/o
timeout 240 $B/sparsecc_gpu_tests --gtest_filter='SpmmCompressedGpu.*:GpuBundle.*:SpmmGpu.BundleFileRoundTrip' > /tmp/o/gpu50.txt 2>&1
echo "gpu tests exit $?"; grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED|tests ran" /tmp/o/gpu50.txt | tail -12
timeout 200 $B/sparsecc_llm_bench --shapes all --sparsity 90 --n 16 --dtype f16 --cold --no-peers \
  --variant s16w44:layout=scatter,warps=4,strips=4,chunk-k=64,splits=16 \
  --variant s16w42:layout=scatter,warps=4,strips=2,chunk-k=64,splits=16 \
  --variant s16w41:layout=scatter,warps=4,strips=1,chunk-k=128,splits=16 --json /tmp/o/b50.json > /tmp/o/b50.txt 2>&1
echo "bench exit $?"; grep -E "^== |^cublas_fp16 |^sparsecc_(auto|s16)" /tmp/o/b50.txt; sed -n '/^summary/,$p' /tmp/o/b50.txt
tar czf $OUT/r50.tgz -C /tmp o
