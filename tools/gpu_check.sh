#!/usr/bin/env bash
# The prepared device check for a session lent a GPU (the `device` tool's
# `run`; 15 minutes of device time in all, so everything is built here).
#
#   tools/gpu_check.sh prepare   here: build the CUDA kernel and model-runner
#                                tests for Hopper (sm_90) and Ampere (sm_80) and
#                                copy them, with the Debian libraries the device
#                                image lacks (OpenBLAS, ZeroMQ, ...), into .gpu/
#   tools/gpu_check.sh run       there: run them and tools/bench/gpu_bench; logs to $OUT
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
    cmake --build build-gpu --target kernels_tests engine_core_tests gpu_bench -j"$(nproc)"
    rm -rf .gpu && mkdir -p .gpu
    cp build-gpu/tools/bench/gpu_bench .gpu/
    for bin in kernels_tests engine_core_tests; do
      cp "build-gpu/tests/$bin" .gpu/
      # The libraries outside glibc and the CUDA toolkit (the image has those).
      ldd "build-gpu/tests/$bin" | awk '$3 ~ /^\// {print $3}' |
        grep -Ev '/(libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|/usr/local/cuda' |
        while read -r lib; do cp -Ln "$lib" .gpu/ 2>/dev/null || true; done
    done
    du -sh .gpu
    ;;
  run)
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
    export LD_LIBRARY_PATH="$here/.gpu:${LD_LIBRARY_PATH:-}"
    ldd .gpu/kernels_tests | grep "not found" || true
    set -o pipefail
    .gpu/kernels_tests --gtest_color=no 2>&1 | tee "${OUT:-/tmp}/kernels_tests.log"
    # The model-level GPU tests (the engine-process tests need the CLI: not here).
    .gpu/engine_core_tests --gtest_color=no --gtest_filter='CudaModelRunner.*' 2>&1 |
      tee "${OUT:-/tmp}/cuda_runner_tests.log"
    # Decode and prefill throughput of a ~1B dummy model against the bounds.
    .gpu/gpu_bench 2>&1 | tee "${OUT:-/tmp}/gpu_bench.md"
    ;;
  *)
    echo "usage: tools/gpu_check.sh prepare|run" >&2
    exit 2
    ;;
esac
