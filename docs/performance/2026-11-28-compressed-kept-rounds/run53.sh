#!/bin/bash
# Run 53: the DLMC transformer cases of the family's GPU tests (data carried); 50, 80 and 95 % (N = 16).
set -u
export SPARSECC_TEMPLATE_DIR=$PWD/templates SPARSECC_DATA_DIR=$PWD/.data
B=$PWD/.device/bin
mkdir -p /tmp/o
timeout 120 $B/sparsecc_gpu_tests --gtest_filter='SpmmCompressedGpu.DlmcTransformerMatrices' > /tmp/o/gpu53.txt 2>&1
echo "gpu dlmc exit $?"; grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED|OK \]" /tmp/o/gpu53.txt | tail -5
timeout 150 $B/sparsecc_llm_bench --shapes all --cold --no-peers --sparsity 50,80 --n 16 --dtype f16 --json /tmp/o/b53a.json > /tmp/o/b53a.txt 2>&1
echo "bench 50,80 exit $?"; sed -n '/^summary/,$p' /tmp/o/b53a.txt | tail -n +3
timeout 100 $B/sparsecc_llm_bench --shapes all --cold --no-peers --sparsity 95 --n 16 --dtype f16 --json /tmp/o/b53b.json > /tmp/o/b53b.txt 2>&1
echo "bench 95 exit $?"; sed -n '/^summary/,$p' /tmp/o/b53b.txt | tail -n +3
tar czf $OUT/r53.tgz -C /tmp o
