#!/bin/bash
# Run 69: pieces in flight a lane at N = 4 (90 %, fp16): the rule's 2 against 1 and 4.
set -u
B=$PWD/.device/bin
mkdir -p /tmp/o
for U in 2 1 4; do
  T=$PWD/templates; [ $U != 2 ] && T=$PWD/.device/tmpl_vu$U
  SPARSECC_TEMPLATE_DIR=$T timeout 60 $B/sparsecc_llm_bench --shapes all --cold --no-peers --sparsity 90 --n 4 \
    --dtype f16 --json /tmp/o/b69_u$U.json > /tmp/o/b69_u$U.txt 2>&1
  echo "bench unroll $U exit $?"; sed -n '/^summary/,$p' /tmp/o/b69_u$U.txt | tail -n +3
done
tar czf $OUT/r69.tgz -C /tmp o
