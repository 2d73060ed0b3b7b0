#!/bin/bash
# Run 42: register caps (occupancy) x block shapes of the warp-list scatter layout, 90 %, N = 16, 8 shapes.
set -u
export SPARSECC_TEMPLATE_DIR=$PWD/templates
B=$PWD/.device/bin
S=layout=scatter
timeout 400 $B/sparsecc_llm_bench --shapes all --sparsity 90 --n 16 --dtype f16 --cold --no-peers \
  --variant $S,warps=4,strips=1,chunk-k=128,max-registers=64 --variant $S,warps=4,strips=2,chunk-k=64,max-registers=64 \
  --variant $S,warps=4,strips=2,chunk-k=64 --variant $S,warps=4,strips=2,chunk-k=128,max-registers=64 \
  --variant $S,warps=8,strips=1,chunk-k=64,max-registers=64 --variant $S,warps=4,strips=4,chunk-k=64,max-registers=80 \
  --variant $S,warps=4,strips=4,chunk-k=64 \
  --json $OUT/b42.json > $OUT/b42.txt 2>&1
echo "bench exit $?"
grep -E "^(==|sparsecc|cublas_fp16)" $OUT/b42.txt | awk '{print $1, $2, $4}'
sed -n '/^summary/,$p' $OUT/b42.txt
