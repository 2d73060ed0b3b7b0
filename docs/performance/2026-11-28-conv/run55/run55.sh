#!/bin/bash
# Run 55: where the fp32 convolution and SpMM kernels spend their time at batch 1 (SparseRT 90 %).
set -u
B=$PWD/.device/bin
export SPARSECC_DATA_DIR=$PWD/.data
mkdir -p /tmp/p
C="--sources sparsert --sparsity 0.9 --batch 1 --dtypes f32 --layouts nchw"
timeout 150 $B/sparsecc_conv_bench $C --json /tmp/p/c55.json > /tmp/p/c55.txt 2>&1
echo "bench exit $?"; grep -A6 "^cold L2" /tmp/p/c55.txt
timeout 150 ncu --clock-control none --section SpeedOfLight --section LaunchStats --section Occupancy \
  --section WarpStateStats --section InstructionStats --section SchedulerStats --section MemoryWorkloadAnalysis \
  -k regex:sparsecc_spmm -c 6 $B/sparsecc_conv_bench $C --no-baselines --repetitions 1 --no-cold > /tmp/p/ncu55.txt 2>&1
echo "ncu exit $?"
grep -E "sparsecc_spmm|Duration|Registers Per|Achieved Occ|Grid Size|Block Size|Stall|Issue Slots Busy|Executed Ipc A|L2 Hit|DRAM Through|Mem Busy" /tmp/p/ncu55.txt | head -120
timeout 150 ncu --clock-control none --set full -k regex:sparsecc_spmm -c 2 -o /tmp/p/p55 \
  $B/sparsecc_conv_bench $C --layers bg1 --no-baselines --repetitions 1 --no-cold > /tmp/p/ncu55f.log 2>&1
echo "ncu full exit $?"
ncu -i /tmp/p/p55.ncu-rep --page source --csv --print-source sass > /tmp/p/src55.csv 2> /tmp/p/src55.err
ncu -i /tmp/p/p55.ncu-rep --page details > /tmp/p/det55.txt 2>&1
rm -f /tmp/p/p55.ncu-rep; gzip /tmp/p/src55.csv
ls -la /tmp/p; tar czf $OUT/p55.tgz -C /tmp p
