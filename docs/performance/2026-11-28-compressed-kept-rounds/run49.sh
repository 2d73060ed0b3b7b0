#!/bin/bash
# Run 49: GPU tests of the family with kept rounds, the vector split epilogue and operands a step ahead;
# bench at 90 % (peers; 8 x 2 and kept-rounds-1 variants), operands-ahead off, 70 % with peers.
set -u
export SPARSECC_TEMPLATE_DIR=$PWD/templates
B=$PWD/.device/bin
mkdir -p /tmp/o
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 $B/sparsecc_gpu_tests --gtest_filter='SpmmCompressedGpu.*:GpuBundle.*:SpmmGpu.BundleFileRoundTrip' > /tmp/o/gpu49.txt 2>&1
echo "gpu tests exit $?"; grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED|tests ran" /tmp/o/gpu49.txt | tail -12
timeout 150 $B/sparsecc_llm_bench --shapes all --sparsity 90 --n 16 --dtype f16 --cold \
  --variant w8s2:layout=scatter,warps=8,strips=2,chunk-k=64 --variant kr1:kept-rounds=1 --json /tmp/o/b49.json > /tmp/o/b49.txt 2>&1
echo "bench 90 exit $?"; sed -n '/^summary/,$p' /tmp/o/b49.txt
SPARSECC_TEMPLATE_DIR=$PWD/.device/tmpl_a0 timeout 90 $B/sparsecc_llm_bench --shapes all --sparsity 90 --n 16 --dtype f16 --cold \
  --no-peers --json /tmp/o/b49a0.json > /tmp/o/b49a0.txt 2>&1
echo "bench ahead0 exit $?"; sed -n '/^summary/,$p' /tmp/o/b49a0.txt
timeout 120 $B/sparsecc_llm_bench --shapes all --sparsity 70 --n 16 --dtype f16 --cold --json /tmp/o/b49s70.json > /tmp/o/b49s70.txt 2>&1
echo "bench 70 exit $?"; sed -n '/^summary/,$p' /tmp/o/b49s70.txt
tar czf $OUT/r49.tgz -C /tmp o
