#!/bin/bash
# Run 48: per-instruction stall profiles of the KEEP = 4 kernel (4 x 4 on 28672x8192, 4 x 2 on 8192x28672).
set -u
B=$PWD/.device/bin
mkdir -p /tmp/p
for S in 28672x8192 8192x28672; do
  P="--shapes $S --sparsity 90 --n 16 --dtype f16 --cold --repetitions 1 --max-seconds 0.05 --no-peers"
  SPARSECC_TEMPLATE_DIR=$PWD/.device/tmpl_k4 timeout 150 ncu --clock-control none --set full -k regex:sparsecc -c 1 \
    -o /tmp/p/p48_$S $B/sparsecc_llm_bench $P > /tmp/p/ncu48_$S.log 2>&1
  echo "== ncu $S exit $?"
  ncu -i /tmp/p/p48_$S.ncu-rep --page source --csv --print-source sass > /tmp/p/src48_$S.csv 2> /tmp/p/src48_$S.err
  ncu -i /tmp/p/p48_$S.ncu-rep --page raw --csv > /tmp/p/raw48_$S.csv 2>&1
  ncu -i /tmp/p/p48_$S.ncu-rep --page details > /tmp/p/det48_$S.txt 2>&1
  rm -f /tmp/p/p48_$S.ncu-rep
done
ls -la /tmp/p; tar czf $OUT/p48.tgz -C /tmp p
