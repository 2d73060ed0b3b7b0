#!/bin/bash
# Run 51: the final kernel and rules. GPU tests of the family and bundles; bench 90 and 70 % with peers.
set -u
export SPARSECC_TEMPLATE_DIR=$PWD/templates
B=$PWD/.device/bin
mkdir -p /tmp/o
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 240 $B/sparsecc_gpu_tests --gtest_filter='SpmmCompressedGpu.*:GpuBundle.*:SpmmGpu.BundleFileRoundTrip' > /tmp/o/gpu51.txt 2>&1
echo "gpu tests exit $?"; grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED|tests ran" /tmp/o/gpu51.txt | tail -12
for S in 90 70; do
  timeout 140 $B/sparsecc_llm_bench --shapes all --sparsity $S --n 16 --dtype f16 --cold --json /tmp/o/b51_$S.json > /tmp/o/b51_$S.txt 2>&1
  echo "bench $S exit $?"; sed -n '/^summary/,$p' /tmp/o/b51_$S.txt
done
tar czf $OUT/r51.tgz -C /tmp o
