#!/usr/bin/env bash
# The prepared device check for a session lent a GPU (the `device` tool's
# `run`; 15 minutes of device time in all, so everything is built here).
#
#   tools/gpu_check.sh prepare   here: build the CUDA kernel tests for Hopper
#                                (sm_90) and Ampere (sm_80) and copy them, with
#                                the Debian libraries the device image lacks
#                                (OpenBLAS, gfortran, gomp, quadmath), into .gpu/
#   tools/gpu_check.sh run       there: run them; the log goes to $OUT
#
# Then: run(command="tools/gpu_check.sh run", carry=[".gpu"], timeout_s=300).
# The device image has its own CUDA 13 runtime and cuBLAS; if the binary does
# not start there (other system libraries), build on the device instead
# (`cmake` and `nvcc` are there, the Debian -dev packages are not).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
case "${1:-}" in
  prepare)
    grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
    grep -qx '/build-gpu/' .git/info/exclude 2>/dev/null || echo '/build-gpu/' >> .git/info/exclude
    cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CUDA_ARCHITECTURES="80;90" >/dev/null
    cmake --build build-gpu --target kernels_tests -j"$(nproc)"
    rm -rf .gpu && mkdir -p .gpu
    cp build-gpu/tests/kernels_tests .gpu/
    for lib in libopenblas.so.0 libgfortran.so.5 libgomp.so.1 libquadmath.so.0; do
      cp -L "$(ldd build-gpu/tests/kernels_tests | awk -v l="$lib" '$1 == l {print $3}')" .gpu/
    done
    du -sh .gpu
    ;;
  run)
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
    export LD_LIBRARY_PATH="$here/.gpu:${LD_LIBRARY_PATH:-}"
    ldd .gpu/kernels_tests | grep "not found" || true
    set -o pipefail
    .gpu/kernels_tests --gtest_color=no 2>&1 | tee "${OUT:-/tmp}/kernels_tests.log"
    ;;
  *)
    echo "usage: tools/gpu_check.sh prepare|run" >&2
    exit 2
    ;;
esac
