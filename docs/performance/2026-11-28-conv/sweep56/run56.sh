#!/bin/bash
# Run 56: wide column tiles of one group (the same code for more warps of a block) against the
# automatic plan, convolution and SpMM, batch 1, fp32, SparseRT 90 % and DLMC rn50 0.9.
set -u
B=$PWD/.device/bin
export SPARSECC_DATA_DIR=$PWD/.data
mkdir -p /tmp/s56
C="--sources sparsert,dlmc --sparsity 0.9 --batch 1 --dtypes f32 --layouts nchw --no-baselines"
i=0
while read -r V; do
  i=$((i+1))
  timeout 75 $B/sparsecc_conv_bench $C $V --json /tmp/s56/v$i.json > /tmp/s56/v$i.txt 2>&1
  echo "== v$i [$V] exit $?"
  grep -A3 "^geomean speedup of sparsecc conv, cold" /tmp/s56/v$i.txt | tail -2
done <<'VARIANTS'

--groups 1 --n-tile 256 --rows-per-block 2
--groups 1 --n-tile 256 --rows-per-block 4
--groups 1 --n-tile 256 --rows-per-block 8
--groups 1 --n-tile 512 --rows-per-block 2
--groups 1 --n-tile 512 --rows-per-block 4
--groups 1 --n-tile 1024 --rows-per-block 4
--groups 1 --n-tile 512 --rows-per-block 4 --plan-for both
--groups 1 --n-tile 256 --rows-per-block 4 --plan-for both
VARIANTS
tar czf $OUT/s56.tgz -C /tmp s56
