#!/bin/bash
# Run 66: the rule (a fixed N up to 4 takes the vector layout; N = 4 reads B's rows as 8-byte vectors):
# the family's and the bundle's GPU tests; N = 2, 3, 4 at 90 % and N = 4 at 50 / 70 %, the automatic
# plans against the scatter layout's.
set -u
export SPARSECC_DATA_DIR=$PWD/.data SPARSECC_TEMPLATE_DIR=$PWD/templates
B=$PWD/.device/bin
mkdir -p /tmp/o
timeout 150 $B/sparsecc_gpu_tests --gtest_filter='SpmmCompressedGpu.*:GpuBundle.*' > /tmp/o/gpu66.txt 2>&1
echo "gpu tests exit $?"; grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED|OK \]" /tmp/o/gpu66.txt | tail -14
grep "vector" /tmp/o/gpu66.txt | awk '{print $4, $(NF-2), $NF}' | sort | tail -3
run() {  # tag args...
  local tag=$1; shift
  timeout 100 $B/sparsecc_llm_bench --shapes all --cold --no-peers --dtype f16 "$@" \
    --json /tmp/o/b66_$tag.json > /tmp/o/b66_$tag.txt 2>&1
  echo "bench $tag exit $?"; sed -n '/^summary/,$p' /tmp/o/b66_$tag.txt | tail -n +3
}
run n4 --sparsity 90 --n 4 --variant tc:layout=scatter
run n3 --sparsity 90 --n 3 --variant tc:layout=scatter
run n2 --sparsity 90 --n 2
run n4s50 --sparsity 50 --n 4 --variant tc:layout=scatter
run n4s70 --sparsity 70 --n 4 --variant tc:layout=scatter
tar czf $OUT/r66.tgz -C /tmp o
