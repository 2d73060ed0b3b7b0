#!/bin/bash
# Run 59: the vector layout with its final rule (8 warps past one wave of warp slots): every GPU test
# (the runtime's bundle checks changed), then N = 1 on every LLM shape at 50-95 % (fp16) and 90 % (bf16).
set -u
export SPARSECC_TEMPLATE_DIR=$PWD/templates SPARSECC_DATA_DIR=$PWD/.data
B=$PWD/.device/bin
mkdir -p /tmp/o
timeout 330 $B/sparsecc_gpu_tests > /tmp/o/gpu59.txt 2>&1
echo "gpu tests exit $?"; grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED|tests ran" /tmp/o/gpu59.txt | tail -12
timeout 120 $B/sparsecc_llm_bench --shapes all --cold --no-peers --sparsity 50,70,80,90,95 --n 1 --dtype f16 \
  --json /tmp/o/b59.json > /tmp/o/b59.txt 2>&1
echo "bench exit $?"; sed -n '/^summary/,$p' /tmp/o/b59.txt | tail -n +3
timeout 60 $B/sparsecc_llm_bench --shapes all --cold --no-peers --sparsity 90 --n 1 --dtype bf16 \
  --json /tmp/o/b59bf.json > /tmp/o/b59bf.txt 2>&1
echo "bench bf16 exit $?"; sed -n '/^summary/,$p' /tmp/o/b59bf.txt | tail -n +3
tar czf $OUT/r59.tgz -C /tmp o
