#!/bin/bash
# Run 68: the committed rule and kernel (60869f9): every GPU test, then bf16 at N = 2 and 4, 90 %.
set -u
export SPARSECC_TEMPLATE_DIR=$PWD/templates SPARSECC_DATA_DIR=$PWD/.data
B=$PWD/.device/bin
mkdir -p /tmp/o
timeout 330 $B/sparsecc_gpu_tests > /tmp/o/gpu68.txt 2>&1
echo "gpu tests exit $?"; grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED|tests ran" /tmp/o/gpu68.txt | tail -14
timeout 120 $B/sparsecc_llm_bench --shapes all --cold --no-peers --sparsity 90 --n 2,4 --dtype bf16 \
  --json /tmp/o/b68bf.json > /tmp/o/b68bf.txt 2>&1
echo "bench bf16 exit $?"; sed -n '/^summary/,$p' /tmp/o/b68bf.txt | tail -n +3
tar czf $OUT/r68.tgz -C /tmp o
