#!/bin/bash
# Run 61: N = 1 on magnitude-pruned Gaussian LLM layers at 90 % and on the DLMC transformer 0.9 ffn
# matrices carried (fp16, cold L2, automatic plans).
set -u
export SPARSECC_TEMPLATE_DIR=$PWD/templates
B=$PWD/.device/bin
mkdir -p /tmp/o
timeout 80 $B/sparsecc_llm_bench --shapes all --pattern magnitude --cold --no-peers --sparsity 90 --n 1 \
  --dtype f16 --json /tmp/o/b61_mag.json > /tmp/o/b61_mag.txt 2>&1
echo "bench magnitude exit $?"; sed -n '/^summary/,$p' /tmp/o/b61_mag.txt | tail -n +3
timeout 80 $B/sparsecc_llm_bench --shapes none --dlmc $PWD/.data/dlmc/transformer/magnitude_pruning/0.9 --cold \
  --no-peers --n 1 --dtype f16 --json /tmp/o/b61_dlmc.json > /tmp/o/b61_dlmc.txt 2>&1
echo "bench dlmc exit $?"; sed -n '/^summary/,$p' /tmp/o/b61_dlmc.txt | tail -n +3
tar czf $OUT/r61.tgz -C /tmp o
