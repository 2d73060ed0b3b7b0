#!/usr/bin/env bash
# Builds and runs the libFuzzer targets.
#   fuzz.sh build            configure and build standalone/ with clang into $FUZZ_TREE
#   fuzz.sh run READER SECS  run fuzz_READER for SECS seconds on a copy of corpus/READER
# Exit 77 (CTest "skipped") when clang++ is not available or SECS is 0.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tree=${FUZZ_TREE:?}
cxx=${FUZZ_CXX:-}
case "${1:-}" in
  build)
    if [[ -z "$cxx" || "$cxx" == *NOTFOUND* ]] || ! command -v "$cxx" >/dev/null; then
      echo "clang++ not found: fuzz targets not built"; exit 77
    fi
    gen=()
    command -v ninja >/dev/null && gen=(-G Ninja)
    cmake -S "$here/standalone" -B "$tree" "${gen[@]}" -DCMAKE_CXX_COMPILER="$cxx" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPARSECC_SOURCE="${FUZZ_SOURCE:?}" >/dev/null
    cmake --build "$tree" -j "$(nproc)"
    ;;
  run)
    reader=${2:?reader}; secs=${3:-20}
    bin="$tree/fuzz_$reader"
    [[ "$secs" == 0 ]] && { echo "fuzzing disabled (SPARSECC_FUZZ_SECONDS=0)"; exit 77; }
    [[ -x "$bin" ]] || { echo "$bin not built (no clang++, or no libonnx for fuzz_onnx)"; exit 77; }
    work="$tree/corpus/$reader"
    mkdir -p "$work" "$tree/artifacts/$reader"
    log="$tree/fuzz_$reader.log"
    # New inputs go to the working corpus; the seeds in the source tree are never modified.
    set +e
    "$bin" -max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb=4096 \
      -max_len=65536 -artifact_prefix="$tree/artifacts/$reader/" "$work" "$here/corpus/$reader" >"$log" 2>&1
    rc=$?
    set -e
    execs=$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}')
    echo "fuzz_$reader: ${execs:-?} executions in ${secs}s, exit $rc (log: $log)"
    if [[ $rc -ne 0 ]]; then tail -n 60 "$log"; exit 1; fi
    ;;
  *) echo "usage: fuzz.sh build | run READER SECONDS" >&2; exit 2 ;;
esac
