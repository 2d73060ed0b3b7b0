#!/bin/bash
# Run 47: A/B of the scatter kernel (segment ends a chunk ahead; KEEP list rounds kept in registers)
# and a per-instruction stall profile of the 4 x 4 kernel, old and new.
set -u
B=$PWD/.device/bin
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
ncu --version | tail -1
for T in old k0 k4 k8; do
  SPARSECC_TEMPLATE_DIR=$PWD/.device/tmpl_$T timeout 110 $B/sparsecc_llm_bench --shapes all --sparsity 90 --n 16 \
    --dtype f16 --cold --no-peers --json $OUT/b47_$T.json > $OUT/b47_$T.txt 2>&1
  echo "== $T exit $?"; grep -E "^sparsecc_auto|^cublas" $OUT/b47_$T.txt | head -20; grep -E "sparsecc_auto" $OUT/b47_$T.txt | tail -1
done
for T in old k8; do
  SPARSECC_TEMPLATE_DIR=$PWD/.device/tmpl_$T timeout 110 $B/sparsecc_llm_bench --shapes all --sparsity 70 --n 16 \
    --dtype f16 --cold --no-peers --json $OUT/b47_70_$T.json > $OUT/b47_70_$T.txt 2>&1
  echo "== 70 $T exit $?"; grep -E "sparsecc_auto" $OUT/b47_70_$T.txt | tail -1
done
P="--shapes 28672x8192 --sparsity 90 --n 16 --dtype f16 --cold --repetitions 1 --max-seconds 0.05 --no-peers"
for T in old k4; do
  SPARSECC_TEMPLATE_DIR=$PWD/.device/tmpl_$T timeout 150 ncu --clock-control none --set full -k regex:sparsecc -c 1 \
    -o $OUT/p47_$T $B/sparsecc_llm_bench $P > $OUT/ncu47_$T.log 2>&1
  echo "== ncu $T exit $?"
  ncu -i $OUT/p47_$T.ncu-rep --page source --csv --print-source sass > $OUT/src47_$T.csv 2> $OUT/src47_$T.err || \
    ncu -i $OUT/p47_$T.ncu-rep --page source --csv > $OUT/src47_$T.csv 2>> $OUT/src47_$T.err
  ncu -i $OUT/p47_$T.ncu-rep --page raw --csv > $OUT/raw47_$T.csv 2>&1
  ncu -i $OUT/p47_$T.ncu-rep --page details > $OUT/det47_$T.txt 2>&1
  wc -c $OUT/src47_$T.csv $OUT/raw47_$T.csv; head -c 600 $OUT/src47_$T.err
done
