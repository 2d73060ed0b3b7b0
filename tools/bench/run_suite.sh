#!/usr/bin/env bash
# Runs sparsecc_bench one problem per process (each process compiles, verifies and times one problem
# against the baselines), prints the table rows and the geomeans over all rows (not with
# --compile-only, whose table has no ratios).
#   tools/bench/run_suite.sh BENCH_BINARY COUNT [sparsecc_bench options...]
set -uo pipefail
bench=$1
count=$2
shift 2
rows=()
for ((i = 0; i < count; ++i)); do
  out=$("$bench" --first "$i" --limit 1 "$@" 2>&1)
  rc=$?
  if ((i == 0)); then
    header=$(grep -E '^(device|suite|problem)' <<<"$out")
    echo "$header"
  fi
  row=$(grep -E '^p[0-9]+_' <<<"$out")
  [[ $rc -ne 0 && -z "$row" ]] && row="problem $i: exit $rc: $(tail -n 1 <<<"$out")"
  echo "$row"
  rows+=("$row")
done
# Geomean of the x fp32, x tf32 and x cusp columns (9-11) over the rows that have them.
grep -q 'x fp32' <<<"${header:-}" || exit 0
printf '%s\n' "${rows[@]}" | awk '$9 ~ /^[0-9.]+$/ {n++; a+=log($9); b+=log($10); c+=log($11)}
  END {if (n) printf "geomean over %d problems: %.2fx cuBLAS fp32, %.2fx cuBLAS TF32, %.2fx best cuSPARSE\n", n, exp(a/n), exp(b/n), exp(c/n)}'
