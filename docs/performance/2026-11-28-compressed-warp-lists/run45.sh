#!/bin/bash
# Run 45: 28672x8192 at 50/80/95 % (cut from run 43) and the scatter layout at 70 % beside records.
set -u
export SPARSECC_TEMPLATE_DIR=$PWD/templates
B=$PWD/.device/bin
timeout 100 $B/sparsecc_llm_bench --shapes 28672x8192 --sparsity 50,80,95 --n 16 --dtype f16 --cold --no-peers \
  --json $OUT/rest45a.json > $OUT/rest45a.txt 2>&1
echo "a exit $?"; grep -E "^(==|sparsecc_auto|cublas_fp16)" $OUT/rest45a.txt | awk '{print $1,$2,$3,$4,$5}'
timeout 150 $B/sparsecc_llm_bench --shapes all --sparsity 70 --n 16 --dtype f16 --cold --no-peers \
  --variant scatter:layout=scatter --json $OUT/rest45b.json > $OUT/rest45b.txt 2>&1
echo "b exit $?"; grep -E "^(==|sparsecc_auto|sparsecc_scatter|cublas_fp16)" $OUT/rest45b.txt | awk '{print $1,$2,$3,$4,$5}'
sed -n '/^summary/,$p' $OUT/rest45b.txt
