#!/usr/bin/env bash
# The two quick-start commands:
#   tools/build.sh demo    install what is missing, build, run `sparsecc demo`
#   tools/build.sh test    install what is missing, build, run the whole test suite (CTest)
# BUILD_DIR (default: build) and JOBS (default: all cores) may be set in the environment.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
jobs=${JOBS:-$(nproc)}
what=${1:-demo}

"$root/tools/setup.sh"
export PATH="$PATH:/usr/local/cuda/bin"
gen=()
[[ -f "$build/CMakeCache.txt" ]] || gen=(-G Ninja)
cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j "$jobs"

case "$what" in
  demo) "$build/tools/sparsecc/sparsecc" demo ;;
  test) cd "$build" && ctest --output-on-failure -j "$jobs" ;;
  *) echo "usage: tools/build.sh demo|test" >&2; exit 2 ;;
esac
