#!/bin/bash
# Run 62: N = 1 at 90 % on every LLM shape with a warm L2 (fp16), beside the run-time-N plan (the
# tensor-core scatter kernel, which takes any n).
set -u
export SPARSECC_TEMPLATE_DIR=$PWD/templates
B=$PWD/.device/bin
mkdir -p /tmp/o
timeout 100 $B/sparsecc_llm_bench --shapes all --warm --no-peers --sparsity 90 --n 1 --dtype f16 \
  --variant rt:n-mode=runtime --json /tmp/o/b62_warm.json > /tmp/o/b62_warm.txt 2>&1
echo "bench warm exit $?"; sed -n '/^summary/,$p' /tmp/o/b62_warm.txt | tail -n +3
tar czf $OUT/r62.tgz -C /tmp o
