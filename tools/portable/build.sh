#!/usr/bin/env bash
# Portable build for GPU machines that have no package registry: third-party libraries linked
# statically (libzip built here from Debian's source package with zlib only, fmt header-only,
# zlib and GoogleTest from their static archives), static libstdc++/libgcc and CUDA runtime; only
# the NVIDIA driver (opened at run time) and the CUDA toolkit's shared libraries (NVRTC, nvJitLink; cuBLAS and
# cuSPARSE for the bench programs) are needed where the binaries run.
#   tools/portable/build.sh [BUILD_DIR]     default: build-portable
# Produces BUILD_DIR/tests/sparsecc_tests, BUILD_DIR/tests/sparsecc_gpu_tests,
# BUILD_DIR/tools/sparsecc/sparsecc, BUILD_DIR/tools/bench/sparsecc_baselines,
# BUILD_DIR/tools/bench/sparsecc_bench, BUILD_DIR/tools/bench/sparsecc_llm_bench and the examples BUILD_DIR/kernels_generated/{sparse_mlp,neuron_sim}. Carry them to the GPU machine and run them there.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(realpath -m "${1:-$root/build-portable}")
deps=$build/deps
jobs=${JOBS:-$(nproc)}
"$root/tools/setup.sh"

if [[ ! -f "$deps/prefix/lib/libzip.a" ]]; then
  mkdir -p "$deps/apt/lists" "$deps/src"
  echo "deb-src http://deb.debian.org/debian bookworm main" >"$deps/apt/sources.list"
  apt_opts=(-o Dir::Etc::SourceList="$deps/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
            -o Dir::State::Lists="$deps/apt/lists" -o Debug::NoDropPrivs=1 -o APT::Sandbox::User=root)
  apt-get "${apt_opts[@]}" update -qq
  (cd "$deps/src" && apt-get "${apt_opts[@]}" source --download-only -qq libzip)
  tar -C "$deps/src" -xf "$deps"/src/libzip_*.orig.tar.*
  src=$(find "$deps/src" -maxdepth 1 -type d -name 'libzip-*' | head -n 1)
  cmake -S "$src" -B "$deps/libzip-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_INSTALL_PREFIX="$deps/prefix" \
    -DCMAKE_INSTALL_LIBDIR=lib -DENABLE_BZIP2=OFF -DENABLE_LZMA=OFF -DENABLE_ZSTD=OFF -DENABLE_GNUTLS=OFF \
    -DENABLE_OPENSSL=OFF -DENABLE_MBEDTLS=OFF -DENABLE_COMMONCRYPTO=OFF -DENABLE_WINDOWS_CRYPTO=OFF \
    -DBUILD_TOOLS=OFF -DBUILD_REGRESS=OFF -DBUILD_EXAMPLES=OFF -DBUILD_DOC=OFF >/dev/null
  cmake --build "$deps/libzip-build" -j "$jobs" >/dev/null
  cmake --install "$deps/libzip-build" >/dev/null
fi

export PATH="$PATH:/usr/local/cuda/bin"
# SPARSECC_PEERS_SPINFER=/path/to/spinfer builds SpInfer and Flash-LLM into sparsecc_llm_bench.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARSECC_PORTABLE=ON \
  -DCMAKE_PREFIX_PATH="$deps/prefix" -DSPARSECC_PEERS_SPINFER="${SPARSECC_PEERS_SPINFER:-}"
cmake --build "$build" -j "$jobs" --target sparsecc sparsecc_tests sparsecc_gpu_tests sparsecc_baselines \
  sparsecc_spmm_bench sparsecc_llm_bench sparse_mlp neuron_sim
echo "portable binaries:"
for b in tools/sparsecc/sparsecc tests/sparsecc_tests tests/sparsecc_gpu_tests tools/bench/sparsecc_baselines \
         tools/bench/sparsecc_bench tools/bench/sparsecc_llm_bench kernels_generated/sparse_mlp kernels_generated/neuron_sim; do
  echo "  $build/$b"
  ldd "$build/$b" | sed 's/^/      /'
done
