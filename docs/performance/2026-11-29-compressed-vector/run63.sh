#!/bin/bash
# Run 63: after the review (layout names in one place): the family's GPU tests and N = 1 at 90 %.
set -u
export SPARSECC_TEMPLATE_DIR=$PWD/templates SPARSECC_DATA_DIR=$PWD/.data
B=$PWD/.device/bin
mkdir -p /tmp/o
timeout 120 $B/sparsecc_gpu_tests --gtest_filter='SpmmCompressedGpu.*:GpuBundle.*' > /tmp/o/gpu63.txt 2>&1
echo "gpu tests exit $?"; grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED|OK \]" /tmp/o/gpu63.txt | tail -14
grep "vector" /tmp/o/gpu63.txt | awk '{print $4, $(NF-2), $NF}'
timeout 60 $B/sparsecc_llm_bench --shapes all --cold --no-peers --sparsity 90 --n 1 --dtype f16 \
  --json /tmp/o/b63.json > /tmp/o/b63.txt 2>&1
echo "bench exit $?"; head -1 /tmp/o/b63.txt; awk '/^== /{s=$2} /^(cublas_fp16|sparsecc_auto) /{print s, $1, $2, $4}' /tmp/o/b63.txt
sed -n '/^summary/,$p' /tmp/o/b63.txt | tail -n +3
tar czf $OUT/r63.tgz -C /tmp o
