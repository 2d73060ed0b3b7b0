#!/bin/bash
# Run 41: ring depth (stages) and block shape of the warp-list scatter layout, 90 %, N = 16.
set -u
export SPARSECC_TEMPLATE_DIR=$PWD/templates
B=$PWD/.device/bin
S=layout=scatter
timeout 400 $B/sparsecc_llm_bench --shapes 4096x14336,8192x8192,8192x28672,28672x8192 --sparsity 90 --n 16 --dtype f16 --cold --no-peers \
  --variant $S,warps=4,strips=1,chunk-k=128,stages=3 --variant $S,warps=4,strips=1,chunk-k=128,stages=4 \
  --variant $S,warps=4,strips=1,chunk-k=128,stages=6 --variant $S,warps=4,strips=4,chunk-k=64,stages=3 \
  --variant $S,warps=4,strips=4,chunk-k=64,stages=4 --variant $S,warps=4,strips=2,chunk-k=64,stages=4 \
  --variant $S,warps=2,strips=4,chunk-k=64,stages=4 --variant $S,warps=4,strips=1,chunk-k=64,stages=6 \
  --json $OUT/b41.json > $OUT/b41.txt 2>&1
echo "bench exit $?"
grep -E "^(==|sparsecc|cublas_fp16)" $OUT/b41.txt | awk '{print $1, $2, $4}'
sed -n '/^summary/,$p' $OUT/b41.txt
