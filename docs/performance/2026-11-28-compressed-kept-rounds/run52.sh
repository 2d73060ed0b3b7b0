#!/bin/bash
# Run 52: the final kernel and rules: 50, 80, 95 % (N = 16, all shapes), N = 1 and 64 at 90 % and bf16
# beside fp16 at 90 % (four shapes, as in run 43); no peers.
set -u
export SPARSECC_TEMPLATE_DIR=$PWD/templates
B=$PWD/.device/bin
mkdir -p /tmp/o
F=4096x4096,4096x14336,8192x28672,28672x8192
run() { local tag=$1; shift; timeout 140 $B/sparsecc_llm_bench --cold --no-peers "$@" --json /tmp/o/b52_$tag.json > /tmp/o/b52_$tag.txt 2>&1
  echo "bench $tag exit $?"; sed -n '/^summary/,$p' /tmp/o/b52_$tag.txt | tail -n +3; }
run rest --shapes all --sparsity 50,80,95 --n 16 --dtype f16
run n1n64 --shapes $F --sparsity 90 --n 1,64 --dtype f16 --variant rt:n-mode=runtime
run bf16 --shapes $F --sparsity 90 --n 16 --dtype bf16,f16
tar czf $OUT/r52.tgz -C /tmp o
