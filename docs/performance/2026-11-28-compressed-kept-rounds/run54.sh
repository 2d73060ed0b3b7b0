#!/bin/bash
# Run 54: B as one vector for run-time N = 1 too: the family's GPU tests (DLMC data carried) and N = 1.
set -u
export SPARSECC_TEMPLATE_DIR=$PWD/templates SPARSECC_DATA_DIR=$PWD/.data
B=$PWD/.device/bin
mkdir -p /tmp/o
timeout 170 $B/sparsecc_gpu_tests --gtest_filter='SpmmCompressedGpu.*' > /tmp/o/gpu54.txt 2>&1
echo "gpu tests exit $?"; grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED|OK \]" /tmp/o/gpu54.txt | tail -8
timeout 60 $B/sparsecc_llm_bench --shapes 4096x4096,4096x14336,8192x28672,28672x8192 --cold --no-peers --sparsity 90 --n 1 \
  --dtype f16 --variant rt:n-mode=runtime --json /tmp/o/b54.json > /tmp/o/b54.txt 2>&1
echo "bench exit $?"; sed -n '/^summary/,$p' /tmp/o/b54.txt | tail -n +3
tar czf $OUT/r54.tgz -C /tmp o
