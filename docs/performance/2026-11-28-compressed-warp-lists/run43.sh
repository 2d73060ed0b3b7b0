#!/bin/bash
# Run 43: the automatic plans after this session's changes (warp lists, the block-shape rule), the bar set.
set -u
export SPARSECC_TEMPLATE_DIR=$PWD/templates
B=$PWD/.device/bin
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 $B/sparsecc_llm_bench --shapes all --sparsity 70,90 --n 16 --dtype f16 --cold \
  --variant records:layout=records --json $OUT/main43.json > $OUT/main43.txt 2>&1
echo "main exit $?"; sed -n '/^summary/,$p' $OUT/main43.txt
timeout 150 $B/sparsecc_llm_bench --shapes all --sparsity 50,80,95 --n 16 --dtype f16 --cold --no-peers \
  --json $OUT/rest43a.json > $OUT/rest43a.txt 2>&1
echo "rest a exit $?"; sed -n '/^summary/,$p' $OUT/rest43a.txt
timeout 120 $B/sparsecc_llm_bench --shapes 4096x4096,4096x14336,8192x28672,28672x8192 --sparsity 90 --n 1,64 --dtype f16 --cold \
  --json $OUT/rest43b.json > $OUT/rest43b.txt 2>&1
echo "rest b exit $?"; sed -n '/^summary/,$p' $OUT/rest43b.txt
timeout 80 $B/sparsecc_llm_bench --shapes 4096x4096,4096x14336,8192x28672,28672x8192 --sparsity 90 --n 16 --dtype bf16,f16 --cold --no-peers \
  --json $OUT/rest43c.json > $OUT/rest43c.txt 2>&1
echo "rest c exit $?"; sed -n '/^summary/,$p' $OUT/rest43c.txt
