#!/usr/bin/env bash
# The consumer-project test: install this build of sparsecc into a temporary prefix, configure the
# out-of-tree project tests/consumer against it with find_package(sparsecc), build it (its kernels are
# generated at build time by sparsecc_add_kernels; a rebuild regenerates them only when an input
# changed), and run it. Without a GPU the check verifies
# every executor through the plan interpreter.
#   run.sh BUILD_DIR MAKE_MODEL_PROGRAM SWC_FILE
#   run.sh --prefix PREFIX MAKE_MODEL_PROGRAM SWC_FILE   (an installed sparsecc, e.g. a portable
#                                                       install carried to a GPU machine)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/sparsecc-consumer.XXXXXX")
trap 'rm -rf "$work"' EXIT
if [[ $1 == --prefix ]]; then
  prefix=$(realpath "$2")
  shift 2
else
  prefix=$work/prefix
  cmake --install "$1" --prefix "$prefix" >"$work/install.log"
  echo "installed sparsecc into $prefix ($(wc -l <"$work/install.log") files)"
  shift
fi
make_model=$1 swc=$2
"$make_model" "$work/model.npz"
cp "$swc" "$work/example_cell.swc"
swc=$work/example_cell.swc
generator=(-G Ninja)
command -v ninja >/dev/null || generator=()
cmake -S "$here" -B "$work/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$prefix" -DCONSUMER_MODEL="$work/model.npz" -DCONSUMER_SWC="$swc" >"$work/configure.log" \
  || { cat "$work/configure.log"; exit 1; }
# Where the package and the dependencies it looks for were found (a portable install carries them).
grep -E '^(sparsecc|nlohmann_json|fmt|libzip)_DIR:|^ZLIB_(INCLUDE_DIR|LIBRARY_RELEASE):' "$work/build/CMakeCache.txt" |
  sed 's/^/  found /'
cmake --build "$work/build" -j "${JOBS:-2}" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
grep -E "sparsecc|compiled|wrote|skipped" "$work/build.log" | head -20 || true
# LAYER_N: fc1 compiled for N = 32, fc2 (no N given) for N at run time.
manifest=$work/build/sparsecc/consumer_kernels/model/manifest.json
modes=$(grep -E '"(name|n|n_mode)":' "$manifest" | tr -d ' \n')
[[ $modes == *'"n":32,"n_mode":"fixed","name":"fc1"'* && $modes == *'"n":64,"n_mode":"runtime","name":"fc2"'* ]] ||
  { cat "$manifest"; echo "LAYER_N: want fc1 fixed at 32 and fc2 at run time" >&2; exit 1; }

# The kernels are generated again exactly when an input changes.
cmake --build "$work/build" >"$work/rebuild.log" 2>&1
if grep -q "generating the kernels" "$work/rebuild.log"; then
  echo "a rebuild with nothing changed generated the kernels again" >&2
  exit 1
fi
touch "$swc"
cmake --build "$work/build" >"$work/rebuild.log" 2>&1 || { cat "$work/rebuild.log"; exit 1; }
grep -q "generating the kernels" "$work/rebuild.log" || { echo "a changed morphology did not regenerate the kernels" >&2; exit 1; }
echo "rebuilds: nothing changed -> nothing generated; morphology touched -> kernels generated again"

# The tune target (not part of the build): on a GPU it tunes the model's layers into the database and
# the next build compiles their winners; without one it fails, naming why, and writes nothing.
if [[ -e /dev/nvidia0 ]]; then
  cmake --build "$work/build" --target consumer_tune >"$work/tune.log" 2>&1 || { cat "$work/tune.log"; exit 1; }
  grep -q "geomean over 2 matrices" "$work/tune.log" || { cat "$work/tune.log"; echo "consumer_tune tuned no layers" >&2; exit 1; }
  cmake --build "$work/build" >"$work/rebuild.log" 2>&1 || { cat "$work/rebuild.log"; exit 1; }
  tuned=$(grep -c "tuned plan" "$work/rebuild.log" || true)
  [[ $tuned -eq 2 ]] || { cat "$work/rebuild.log"; echo "the build after tuning compiled $tuned of 2 layers from the database" >&2; exit 1; }
  echo "consumer_tune: 2 layers tuned; the next build compiled both from the database"
else
  if cmake --build "$work/build" --target consumer_tune >"$work/tune.log" 2>&1; then
    echo "consumer_tune succeeded without a GPU" >&2
    exit 1
  fi
  grep -q "none is usable here" "$work/tune.log" || { cat "$work/tune.log"; exit 1; }
  [[ ! -e "$work/build/tuning.json" ]] || { echo "a failed consumer_tune wrote the database" >&2; exit 1; }
  echo "consumer_tune without a GPU: refused, nothing written"
fi

# The deployment program must not need the toolkit's compilers or math libraries.
if ldd "$work/build/consumer_app" | grep -Ei "nvrtc|cublas|cusparse|nvJitLink"; then
  echo "consumer_app links a CUDA toolkit library it must not need" >&2
  exit 1
fi
"$work/build/consumer_app"
"$work/build/consumer_check"
