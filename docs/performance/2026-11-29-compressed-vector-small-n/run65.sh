#!/bin/bash
# Run 65: the vector layout with column groups (N = 16: two groups of 16 lanes, each reading half of an
# entry's row of B, the whole 32-byte row in one instruction): GPU tests; N = 16 (1 and 2 pieces in
# flight), N = 2, 4, 8 and N = 1 (no regression) at 90 %, against the tensor-core plans.
set -u
export SPARSECC_DATA_DIR=$PWD/.data
B=$PWD/.device/bin
mkdir -p /tmp/o
SPARSECC_TEMPLATE_DIR=$PWD/templates timeout 150 $B/sparsecc_gpu_tests --gtest_filter='SpmmCompressedGpu.*' \
  > /tmp/o/gpu65.txt 2>&1
echo "gpu tests exit $?"; grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED|OK \]" /tmp/o/gpu65.txt | tail -8
grep "vector" /tmp/o/gpu65.txt | awk '{print $4, $(NF-2), $NF}' | sort | tail -3
run() {  # tag template args...
  local tag=$1 t=$2; shift 2
  SPARSECC_TEMPLATE_DIR=$t timeout 100 $B/sparsecc_llm_bench --shapes all --cold --no-peers --dtype f16 "$@" \
    --json /tmp/o/b65_$tag.json > /tmp/o/b65_$tag.txt 2>&1
  echo "bench $tag exit $?"; sed -n '/^summary/,$p' /tmp/o/b65_$tag.txt | tail -n +3
}
run n16 $PWD/templates --sparsity 90 --n 16 --variant v16:layout=vector --variant v8:layout=vector,warps=8
run n16u2 $PWD/.device/tmpl_vu2 --sparsity 90 --n 16 --variant v16:layout=vector
run n1 $PWD/templates --sparsity 90 --n 1
run n248 $PWD/templates --sparsity 90 --n 2,4,8 --variant v16:layout=vector
tar czf $OUT/r65.tgz -C /tmp o
