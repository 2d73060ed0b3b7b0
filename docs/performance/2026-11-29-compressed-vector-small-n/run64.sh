#!/bin/bash
# Run 64: the vector layout at a fixed N of 2..16 (B's rows through the read-only cache): the family's
# GPU tests; N = 16 and N = 8 at 90 % against the tensor-core plan; pieces in flight 1 / 2 / 4 at N = 16;
# 70 % at N = 16.
set -u
export SPARSECC_DATA_DIR=$PWD/.data
B=$PWD/.device/bin
mkdir -p /tmp/o
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SPARSECC_TEMPLATE_DIR=$PWD/templates timeout 150 $B/sparsecc_gpu_tests --gtest_filter='SpmmCompressedGpu.*' \
  > /tmp/o/gpu64.txt 2>&1
echo "gpu tests exit $?"; grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED|OK \]" /tmp/o/gpu64.txt | tail -14
grep "vector" /tmp/o/gpu64.txt | awk '{print $4, $(NF-2), $NF}' | head -40
run() {  # tag template args...
  local tag=$1 t=$2; shift 2
  SPARSECC_TEMPLATE_DIR=$t timeout 100 $B/sparsecc_llm_bench --shapes all --cold --no-peers --dtype f16 "$@" \
    --json /tmp/o/b64_$tag.json > /tmp/o/b64_$tag.txt 2>&1
  echo "bench $tag exit $?"; sed -n '/^summary/,$p' /tmp/o/b64_$tag.txt | tail -n +3
}
run n16 $PWD/templates --sparsity 90 --n 16 --variant v16:layout=vector --variant v8:layout=vector,warps=8
run n16u2 $PWD/.device/tmpl_vu2 --sparsity 90 --n 16 --variant v16:layout=vector
run n8 $PWD/templates --sparsity 90 --n 8 --variant v16:layout=vector
run n16s70 $PWD/templates --sparsity 70 --n 16 --variant v16:layout=vector
tar czf $OUT/r64.tgz -C /tmp o
