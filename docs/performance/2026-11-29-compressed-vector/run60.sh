#!/bin/bash
# Run 60 (final): the family's GPU tests and the real-layer tests that now skip on a partial data
# folder; N = 1 at 90 % on every LLM shape (fp16) with 4 pieces in flight a lane (the plan's), 2 and 8;
# the two largest layers at 80 and 95 %.
set -u
export SPARSECC_DATA_DIR=$PWD/.data
B=$PWD/.device/bin
mkdir -p /tmp/o
SPARSECC_TEMPLATE_DIR=$PWD/templates timeout 150 $B/sparsecc_gpu_tests \
  --gtest_filter='SpmmCompressedGpu.*:SpmmGpu.ClusteredRowsOnRealLayers:SpmmGpu.StagedStepsOnRealLayers:SpmmGpu.TallBlockRowsAtBatch16:GpuBundle.*' \
  > /tmp/o/gpu60.txt 2>&1
echo "gpu tests exit $?"; grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED|OK \]|incomplete" /tmp/o/gpu60.txt | tail -20
for U in 4 2 8; do
  T=$PWD/templates; [ $U != 4 ] && T=$PWD/.device/tmpl_u$U
  SPARSECC_TEMPLATE_DIR=$T timeout 70 $B/sparsecc_llm_bench --shapes all --cold --no-peers --sparsity 90 --n 1 \
    --dtype f16 --json /tmp/o/b60_u$U.json > /tmp/o/b60_u$U.txt 2>&1
  echo "bench unroll $U exit $?"; sed -n '/^summary/,$p' /tmp/o/b60_u$U.txt | tail -n +3
done
SPARSECC_TEMPLATE_DIR=$PWD/templates timeout 70 $B/sparsecc_llm_bench --shapes 8192x28672,28672x8192 --cold --no-peers \
  --sparsity 80,95 --n 1 --dtype f16 --json /tmp/o/b60_big.json > /tmp/o/b60_big.txt 2>&1
echo "bench big exit $?"; sed -n '/^summary/,$p' /tmp/o/b60_big.txt | tail -n +3
tar czf $OUT/r60.tgz -C /tmp o
