#!/bin/bash
# Run 58: the vector layout (fixed N = 1): the family's GPU tests (DLMC data carried), then N = 1 at
# 90 % on every LLM shape against the scatter kernel (the previous rule) and other block sizes; bf16.
set -u
export SPARSECC_TEMPLATE_DIR=$PWD/templates SPARSECC_DATA_DIR=$PWD/.data
B=$PWD/.device/bin
mkdir -p /tmp/o
timeout 200 $B/sparsecc_gpu_tests --gtest_filter='SpmmCompressedGpu.*' > /tmp/o/gpu58.txt 2>&1
echo "gpu tests exit $?"; grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED|OK \]|vector" /tmp/o/gpu58.txt | tail -30
timeout 150 $B/sparsecc_llm_bench --shapes all --cold --no-peers --sparsity 90 --n 1 --dtype f16 \
  --variant sc:layout=scatter --variant w8:layout=vector,warps=8 --variant w4:layout=vector,warps=4 \
  --json /tmp/o/b58.json > /tmp/o/b58.txt 2>&1
echo "bench exit $?"; sed -n '/^summary/,$p' /tmp/o/b58.txt | tail -n +3
timeout 90 $B/sparsecc_llm_bench --shapes 4096x4096,4096x14336,8192x28672,28672x8192 --cold --no-peers \
  --sparsity 90 --n 1 --dtype bf16 --json /tmp/o/b58bf.json > /tmp/o/b58bf.txt 2>&1
echo "bench bf16 exit $?"; sed -n '/^summary/,$p' /tmp/o/b58bf.txt | tail -n +3
tar czf $OUT/r58.tgz -C /tmp o
