#!/usr/bin/env bash
# The CPU backend from the command line (a sparsecc built with LLVM): compile / hines / compile-model
# --target build CPU executors checked in process; GPU options are refused with --target, not
# ignored; --dtype f16 / bf16 build executors of 16-bit B and C (fp32 accumulation); embed writes
# OUT.a beside the header and source, and refuses GPU and CPU bundles mixed; a program built from
# them (the C++ compiler given) runs and prints the products (fp32 and bf16); tune --target records
# CPU executors that compile --target --db takes.
#   cpu_target_test.sh PATH/TO/sparsecc RUNTIME_INCLUDE_DIR PATH/TO/libsparsecc_runtime_cpu.a CXX
set -uo pipefail
bin=$1
runtime_include=$2
runtime_lib=$3
cxx=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# shellcheck source=expect.sh
source "$(dirname "$0")/expect.sh"

cat >"$tmp/small.mtx" <<'M'
%%MatrixMarket matrix coordinate real general
3 4 4
1 1 1.5
2 3 -2
3 1 4
3 4 0.25
M
cat >"$tmp/cell.swc" <<'S'
1 1 0 0 0 5 -1
2 3 10 0 0 1 1
3 3 20 0 0 1 2
4 3 30 5 0 0.8 3
5 3 30 -5 0 0.8 3
S

expect 0 "checked on this CPU: max relative error" \
  -- compile "$tmp/small.mtx" --n 5 --target x86-64-avx2 -o "$tmp/small.sccb"
expect 0 '"check":\{"ok":true,"rel_error"' -- compile "$tmp/small.mtx" --n 3 --relu --target native --json -o "$tmp/relu.sccb"
expect 2 "--Xptxas: a GPU option"     -- compile "$tmp/small.mtx" --n 5 --target native --Xptxas -O1 -o "$tmp/x.sccb"
expect 2 "--emit: a GPU option"       -- compile "$tmp/small.mtx" --n 5 --target native --emit cuda -o "$tmp/x.sccb"
expect 2 "compiled for a fixed N"     -- compile "$tmp/small.mtx" --n 5 --target native --runtime-n -o "$tmp/x.sccb"
expect 0 "N = 5, bf16 \(fp32 accumulation\): CPU executor for " \
  -- compile "$tmp/small.mtx" --n 5 --target native --dtype bf16 -o "$tmp/half.sccb"
expect 0 "N = 9, f16 \(fp32 accumulation\): CPU executor for x86-64-avx2" \
  -- compile "$tmp/small.mtx" --n 9 --relu --target x86-64-avx2 --dtype f16 -o "$tmp/f16.sccb"
expect 2 "--target: .*x86-64-sse"     -- compile "$tmp/small.mtx" --n 5 --target x86-64-sse -o "$tmp/x.sccb"
expect 2 "--k: a GPU option"          -- hines "$tmp/cell.swc" --target native --k 3 -o "$tmp/x.sccb"
expect 2 "give -o"                    -- hines "$tmp/cell.swc" --target native
expect 0 "20 cells, R = 1, f64: CPU executor for" -- hines "$tmp/cell.swc" --cells 20 --target native -o "$tmp/cell.sccb"
# The tuner's CPU space: records keyed by this CPU's model, and compile --db takes the winner.
expect 0 "small.mtx \(N = 5, x86-64-avx[0-9]+ on 1 thread, .*candidates in .*best t[0-9]+/p[0-9]+/.* us, default" \
  -- tune "$tmp/small.mtx" --n 5 --target native --threads 1 --budget 5 --db "$tmp/tuning.json"
grep -q '"op": "spmm_cpu"' "$tmp/tuning.json" 2>/dev/null ||
  { echo "FAIL: tune --target wrote no spmm_cpu record"; failures=$((failures + 1)); }
expect 0 "tuned plan t[0-9]+/p[0-9]+/[a-z]+ from .*tuning.json \\(.*1 thread" \
  -- compile "$tmp/small.mtx" --n 5 --target native --db "$tmp/tuning.json" -o "$tmp/tuned.sccb"
expect 0 "no record in .*tuning.json.*the automatic plan" \
  -- compile "$tmp/small.mtx" --n 6 --target native --db "$tmp/tuning.json" -o "$tmp/untuned.sccb"
expect 2 "--db: the CPU tuner's records are of fp32 executors" \
  -- compile "$tmp/small.mtx" --n 5 --target native --dtype bf16 --db "$tmp/tuning.json" -o "$tmp/x.sccb"
expect 2 "--arch: a GPU option"       -- tune "$tmp/small.mtx" --n 5 --target native --arch sm_80 --db "$tmp/x.json"
expect 2 "--cold-l2: a GPU option"    -- tune "$tmp/small.mtx" --n 5 --target native --cold-l2 --db "$tmp/x.json"
expect 2 "--threads: .*give --target" -- tune "$tmp/small.mtx" --n 5 --threads 1 --db "$tmp/x.json"
[[ ! -e "$tmp/x.json" ]] || { echo "FAIL: a refused tune wrote its database"; failures=$((failures + 1)); }

[[ ! -e "$tmp/x.sccb" ]] || { echo "FAIL: a refused command wrote its output"; failures=$((failures + 1)); }

expect 0 "wrote .*/net.a .*CPU executors' code" -- embed "$tmp/small.sccb" "$tmp/relu.sccb" "$tmp/cell.sccb" "$tmp/half.sccb" --name net -o "$tmp/net.hpp"
for f in net.hpp net.cpp net.a; do
  [[ -s "$tmp/$f" ]] || { echo "FAIL: embed did not write $f"; failures=$((failures + 1)); }
done

# A program from them: C = A B on the CPU, printed; A is the 3 x 4 matrix above, B all ones (in
# fp32, and in bf16 through the half layer).
cat >"$tmp/main.cpp" <<'C'
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>
#include "net.hpp"
int main() {
  net::Kernels k;
  std::vector<float> b(4 * 5, 1.0f), c(3 * 5, -7.0f);
  k.small().run(b.data(), c.data());
  std::printf("%g %g %g", c[0], c[5], c[10]);
  std::vector<std::uint16_t> b16(4 * 5, 0x3f80), c16(3 * 5, 0xffff);  // bf16 1.0; NaN
  k.half().run(b16.data(), c16.data());
  for (const int i : {0, 5, 10}) {
    const std::uint32_t bits = std::uint32_t{c16[i]} << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    std::printf(" %g", v);
  }
  std::printf("\n");
  return k.cell().rows() == 100 && k.half().dtype() == "bf16" ? 0 : 3;
}
C
if "$cxx" -std=c++20 -O1 -I"$tmp" -I"$runtime_include" "$tmp/main.cpp" "$tmp/net.cpp" "$tmp/net.a" "$runtime_lib" \
  -fopenmp -o "$tmp/app" 2>"$tmp/cxx.log"; then
  out=$("$tmp/app")
  if [[ $? -eq 0 && "$out" == "1.5 -2 4.25 1.5 -2 4.25" ]]; then
    echo "ok:   a program linking net.a prints $out"
  else
    echo "FAIL: the program printed '$out' (want '1.5 -2 4.25 1.5 -2 4.25')"
    failures=$((failures + 1))
  fi
else
  echo "FAIL: the program does not build:"
  sed 's/^/    /' "$tmp/cxx.log" | head -20
  failures=$((failures + 1))
fi

# The AOT bench program (tools/bench/cpu_aot_bench_main.cpp) over the same layers, where OpenBLAS's
# headers are installed: it builds, every output is written, and its digests hold on a second run.
blas_include=$(dirname "$(ls /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h /usr/include/openblas/cblas.h 2>/dev/null | head -n 1)" 2>/dev/null)
if [[ -n $blas_include && $blas_include != . ]]; then
  mkdir -p "$tmp/aot"
  "$bin" embed "$tmp/small.sccb" "$tmp/relu.sccb" --name aot_layers -o "$tmp/aot/aot_layers.hpp" >/dev/null
  if "$cxx" -std=c++20 -O1 -I"$tmp/aot" -I"$runtime_include" -I"$(dirname "$0")/../../tools" -I"$blas_include" \
    "$(dirname "$0")/../../tools/bench/cpu_aot_bench_main.cpp" "$tmp/aot/aot_layers.cpp" "$tmp/aot/aot_layers.a" \
    "$runtime_lib" -lopenblas -fopenmp -o "$tmp/aot/bench" 2>"$tmp/cxx.log" &&
    "$tmp/aot/bench" --reps 1 --threads 1 --digests "$tmp/aot/d.txt" >/dev/null &&
    "$tmp/aot/bench" --reps 1 --threads 1 --expect "$tmp/aot/d.txt" | grep -q "sparsecc_cpu_aot_bench: ok"; then
    echo "ok:   sparsecc_cpu_aot_bench builds, runs and reproduces its digests"
  else
    echo "FAIL: sparsecc_cpu_aot_bench:"
    sed 's/^/    /' "$tmp/cxx.log" | head -20
    failures=$((failures + 1))
  fi
else
  echo "skip: sparsecc_cpu_aot_bench (no OpenBLAS headers)"
fi

echo "$failures failure(s)"
[[ $failures -eq 0 ]]
