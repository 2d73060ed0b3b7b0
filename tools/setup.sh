#!/usr/bin/env bash
# Installs the Debian packages sparsecc needs to build and test, when they are missing.
# As root it runs apt-get; otherwise it prints the exact command and stops (exit 1).
# The CUDA toolkit (nvcc, NVRTC, cuBLAS, cuSPARSE) is expected on the machine already.
#   tools/setup.sh              build + test dependencies (LLVM 14 for the CPU backend among them)
#   tools/setup.sh --cpu-bench  also OpenBLAS and LIBXSMM, the baselines of sparsecc_cpu_bench
set -euo pipefail

packages=(cmake ninja-build g++ pkg-config
          libgtest-dev nlohmann-json3-dev libcli11-dev libfmt-dev zlib1g-dev libzip-dev
          libonnx-dev libprotobuf-dev   # ONNX models (optional at build time)
          zipcmp zipmerge ziptool   # libzip's CMake package refers to these tools
          clang libclang-rt-14-dev  # libFuzzer targets
          llvm-14-dev)              # the CPU backend (LLVM 14: Debian 12's default, on every machine here)
[[ "${1:-}" == "--cpu-bench" ]] && packages+=(libopenblas-dev libxsmm-dev)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all build dependencies are installed"
else
  cmd="apt-get install -y --no-install-recommends ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: missing Debian packages: ${missing[*]}" >&2
    echo "setup: run as root:  apt-get update && $cmd" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  $cmd
fi

if ! command -v nvcc >/dev/null && [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "setup: the CUDA toolkit (nvcc, NVRTC) is not installed; sparsecc needs CUDA 12 or newer" >&2
  exit 1
fi
