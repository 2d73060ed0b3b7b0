#!/usr/bin/env bash
# Builds sparsecc_cpu_aot_bench (cpu_aot_bench_main.cpp): every matrix of a folder compiled ahead of
# time for a CPU target (`sparsecc compile --target`, each checked against fp64 on this machine when
# it runs the target's code), embedded as the library aot_layers (`sparsecc embed`), and linked
# statically with OpenBLAS and the CPU runtime, so the program runs on another x86-64 Linux machine
# with no sparsecc, LLVM, OpenBLAS or CUDA installed (a GPU machine's host CPU).
#
#   cpu_aot_bench.sh BUILD_DIR OUT_DIR TARGET MATRIX_DIR (--batchsizes FILE | --n N) [--limit K]
#
# BUILD_DIR: a build with the CPU backend (its tools/sparsecc/sparsecc and runtime library);
# TARGET: x86-64-avx512, x86-64-avx2 or native; MATRIX_DIR: .mtx / .smtx(.gz) files, e.g. a DLMC
# folder; --batchsizes: lines "NAME,N" (DLMC rn50_batchsizes.txt). Writes OUT_DIR/sparsecc_cpu_aot_bench
# and OUT_DIR/digests.txt (the outputs' digests on this machine: run the program elsewhere with
# --expect digests.txt).
set -euo pipefail
[[ $# -ge 6 ]] || { sed -n '2,15p' "$0"; exit 2; }
build=$(cd "$1" && pwd)
out=$2
target=$3
dir=$4
mode=$5
value=$6
limit=0
[[ ${7:-} == --limit ]] && limit=${8:?--limit needs a count}
root=$(cd "$(dirname "$0")/../.." && pwd)
sparsecc="$build/tools/sparsecc/sparsecc"
mkdir -p "$out/bundles"
count=0
for m in "$dir"/*; do
  name=$(basename "$m")
  name=${name%.gz}
  name=${name%.*}
  case $mode in
    --batchsizes) n=$(awk -F, -v k="$name" '$1 == k { print $2 }' "$value") ;;
    --n) n=$value ;;
    *) echo "cpu_aot_bench.sh: $mode: give --batchsizes FILE or --n N" >&2; exit 2 ;;
  esac
  [[ -n $n ]] || { echo "cpu_aot_bench.sh: no N for $name in $value" >&2; exit 2; }
  "$sparsecc" compile "$m" --n "$n" --target "$target" -o "$out/bundles/$name.sccb" 2>&1 | sed -n '1,2p'
  count=$((count + 1))
  [[ $limit -gt 0 && $count -ge $limit ]] && break
done
"$sparsecc" embed "$out"/bundles/*.sccb --name aot_layers -o "$out/aot_layers.hpp" | tail -n 2
blas=$(ls /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.a /usr/lib/x86_64-linux-gnu/libopenblas.a 2>/dev/null | head -n 1)
[[ -n $blas ]] || { echo "cpu_aot_bench.sh: no static OpenBLAS (libopenblas-dev)" >&2; exit 2; }
"${CXX:-c++}" -std=c++20 -O2 -static -fopenmp -I"$out" -I"$root/runtime/include" -I"$root/tools" \
  -I/usr/include/x86_64-linux-gnu/openblas-pthread \
  "$root/tools/bench/cpu_aot_bench_main.cpp" "$out/aot_layers.cpp" "$out/aot_layers.a" \
  "$build/runtime/libsparsecc_runtime_cpu.a" "$blas" -lgfortran -lquadmath -lpthread -lm -o "$out/sparsecc_cpu_aot_bench"
"$out/sparsecc_cpu_aot_bench" --reps 3 --threads 1 --digests "$out/digests.txt" >/dev/null
echo "wrote $out/sparsecc_cpu_aot_bench ($count layers, $(du -h "$out/sparsecc_cpu_aot_bench" | cut -f1)) and $out/digests.txt"
