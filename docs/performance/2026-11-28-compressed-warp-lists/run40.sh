#!/bin/bash
# Run 40: warp lists (each warp scatters, reads and zeroes its own strips' places; lists dealt to banks).
set -u
export SPARSECC_TEMPLATE_DIR=$PWD/templates
B=$PWD/.device/bin
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 $B/sparsecc_gpu_tests --gtest_filter='SpmmCompressedGpu.*:SpmmGpu.BundleFileRoundTrip' > $OUT/gpu40.txt 2>&1
echo "gpu tests exit $?"; grep -E "^\[  |OK|FAILED|max|error" $OUT/gpu40.txt | tail -30
V1=layout=scatter,warps=4,strips=4,chunk-k=64
V2=layout=scatter,warps=4,strips=2,chunk-k=128
V3=layout=scatter,warps=4,strips=4,chunk-k=128
V4=layout=scatter,warps=2,strips=4,chunk-k=128
timeout 240 $B/sparsecc_llm_bench --shapes all --sparsity 90 --n 16 --dtype f16 --cold \
  --variant $V1 --variant $V2 --variant $V3 --variant $V4 --json $OUT/b40.json > $OUT/b40.txt 2>&1
echo "bench exit $?"
sed -n '/^summary/,$p' $OUT/b40.txt
P="--shapes 8192x28672 --sparsity 90 --n 16 --dtype f16 --cold --repetitions 1 --max-seconds 0.05 --no-peers"
timeout 120 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis_Tables --section LaunchStats --section Occupancy --section WarpStateStats -k regex:sparsecc -c 8 \
  $B/sparsecc_llm_bench $P --variant $V1 > $OUT/ncu40.txt 2>&1
echo "ncu exit $?"
grep -E "sparsecc_spmm|Duration|L1/TEX Cache|DRAM Through|bank conflict|Achieved Occ" $OUT/ncu40.txt | head -60
