#!/usr/bin/env bash
# Runs the GPU-facing checks on a GPU machine with the binaries of a (portable) build:
# the GPU test suite, compute-sanitizer memcheck over it, the CPU suite and the CLI checks.
#   tools/gpu_check.sh [BUILD_DIR]      default: build-portable
# Real data is taken from $SPARSECC_DATA_DIR, else ./.data when present. Logs go to $LOG_DIR
# (default: a temporary folder). Exit status: non-zero when any part failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-portable}
logs=${LOG_DIR:-$(mktemp -d)}
mkdir -p "$logs"
export SPARSECC_TEMPLATE_DIR="$root/templates"
[[ -z "${SPARSECC_DATA_DIR:-}" && -d "$root/.data" ]] && export SPARSECC_DATA_DIR="$root/.data"
status=0

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "nvidia-smi: not available"
run() {  # run NAME COMMAND...: log to $logs/NAME.log, print the gtest summary lines
  local name=$1
  shift
  "$@" >"$logs/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc"
  grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[ (device|cubin|ptx|spmm)|ERROR SUMMARY|checks passed|check\(s\) failed' \
    "$logs/$name.log" | head -n 60
  [[ $rc -eq 0 ]] || status=1
}
run gpu_tests "$build/tests/sparsecc_gpu_tests"
if command -v compute-sanitizer >/dev/null; then
  # The error-path tests (DriverErrorsAreNamed, LoadErrorsAreClear) make failing driver calls on
  # purpose: API errors are not reported, memory errors in kernels are.
  run memcheck compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 \
    "$build/tests/sparsecc_gpu_tests" --gtest_filter="${MEMCHECK_FILTER:-*}"
fi
run unit_tests "$build/tests/sparsecc_tests"
run cli "$root/tests/cli/cli_test.sh" "$build/tools/sparsecc/sparsecc" "$root/tests/cli"
echo "logs: $logs"
exit $status
