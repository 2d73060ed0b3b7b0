#!/bin/bash
# Run 39: the bank-dealt scatter stream on the 8 LLM shapes at 90 % (automatic + block shapes), then
# Nsight Compute on 8192x28672 at 90 %: the automatic plan, the 4x4 shape and Flash-LLM / SpInfer.
set -u
export SPARSECC_TEMPLATE_DIR=$PWD/templates
B=$PWD/.device/bin
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
V1=layout=scatter,warps=4,strips=4,chunk-k=64
V2=layout=scatter,warps=4,strips=2,chunk-k=128
V3=layout=scatter,warps=8,strips=2,chunk-k=64
timeout 260 $B/sparsecc_llm_bench --shapes all --sparsity 90 --n 16 --dtype f16 --cold \
  --variant $V1 --variant $V2 --variant $V3 --json $OUT/b39.json > $OUT/b39.txt 2>&1
echo "bench exit $?"
tail -40 $OUT/b39.txt
P="--shapes 8192x28672 --sparsity 90 --n 16 --dtype f16 --cold --repetitions 1 --max-seconds 0.05"
timeout 120 ncu --clock-control none --set full -k regex:sparsecc -c 2 -o $OUT/ours39 \
  $B/sparsecc_llm_bench $P --no-peers --variant $V1 > $OUT/ncu_ours.txt 2>&1
echo "ncu ours exit $?"
# (this filter caught SpInfer's kernel only, not Flash-LLM's; its output is not kept)
timeout 150 ncu --clock-control none --set full -k regex:SpMM_Kernel -c 12 -o $OUT/peer39 \
  $B/sparsecc_llm_bench $P --max-split-k 6 > $OUT/ncu_peer.txt 2>&1
echo "ncu peer exit $?"
for r in ours39 peer39; do
  [ -f $OUT/$r.ncu-rep ] && ncu --import $OUT/$r.ncu-rep --page details > $OUT/$r.txt 2>&1
done
grep -E "SpMM_Kernel|sparsecc_|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Shared Memory Config|Block Limit|L1/TEX Hit|Executed Ipc A|Issue Slots Busy" $OUT/ours39.txt $OUT/peer39.txt 2>/dev/null | head -150
