#!/usr/bin/env bash
# The prepared device check for a session lent a GPU (the `device` tool's
# `run`; 15 minutes of device time in all, so everything is built here).
#
#   tools/gpu_check.sh prepare   here: build the CUDA kernel and model-runner
#                                tests for Hopper (sm_90) and Ampere (sm_80) and
#                                copy them, with the Debian libraries the device
#                                image lacks (OpenBLAS, ZeroMQ, ...), into .gpu/
#   tools/gpu_check.sh run       there: run them, tools/bench/gpu_bench, and `sightline serve
#                                --device cuda` under `sightline bench serve --compare-metrics`;
#                                logs to $OUT; every step runs even if one before it failed
#
# Then: run(command="tools/gpu_check.sh run", carry=[".gpu"], timeout_s=560): each step
# has its own timeout (90 + 150 + 180 + 90 s at most, far less when all is well).
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
    cmake --build build-gpu --target kernels_tests engine_core_tests gpu_bench sightline \
      -j"$(nproc)"
    rm -rf .gpu && mkdir -p .gpu
    cp build-gpu/tools/bench/gpu_bench build-gpu/tools/sightline .gpu/
    for bin in build-gpu/tests/kernels_tests build-gpu/tests/engine_core_tests \
      build-gpu/tools/sightline; do
      cp "$bin" .gpu/
      # The libraries outside glibc and the CUDA toolkit (the image has those).
      ldd "$bin" | awk '$3 ~ /^\// {print $3}' |
        grep -Ev '/(libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|/usr/local/cuda' |
        while read -r lib; do cp -Ln "$lib" .gpu/ 2>/dev/null || true; done
    done
    du -sh .gpu
    ;;
  run)
    set +e
    out="${OUT:-/tmp}"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    export LD_LIBRARY_PATH="$here/.gpu:${LD_LIBRARY_PATH:-}"
    ldd .gpu/kernels_tests .gpu/sightline | grep "not found"
    timeout 90 .gpu/kernels_tests --gtest_color=no > "$out/kernels_tests.log" 2>&1
    echo "kernels_tests: exit $?"; grep -E "^\[  (PASSED|FAILED) " "$out/kernels_tests.log"
    # The model-level GPU tests (the engine-process tests need the CLI at its build path).
    timeout 150 .gpu/engine_core_tests --gtest_color=no --gtest_filter='CudaModelRunner.*' \
      > "$out/cuda_runner_tests.log" 2>&1
    echo "cuda_runner_tests: exit $?"; grep -E "^\[  (PASSED|FAILED) " "$out/cuda_runner_tests.log"
    # Decode and prefill throughput of a ~1B dummy model against the bounds.
    timeout 180 .gpu/gpu_bench > "$out/gpu_bench.md" 2> "$out/gpu_bench.err"
    echo "gpu_bench: exit $?"; cat "$out/gpu_bench.md"
    # End to end: an instance on the GPU, 200 sampled requests, the server's
    # counts compared with the client's (exit 1 on any difference).
    port=18123
    .gpu/sightline serve --device cuda --port "$port" --api-server-count 2 \
      > "$out/serve.log" 2>&1 &
    serve=$!
    for _ in $(seq 1 240); do grep -q "serving on" "$out/serve.log" && break; sleep 0.5; done
    timeout 90 .gpu/sightline bench serve --base-url "http://127.0.0.1:$port" --num-prompts 200 \
      --max-concurrency 32 --random-input-len 256 --random-output-len 128 --ignore-eos \
      --compare-metrics --no-progress > "$out/bench_serve.log" 2>&1
    echo "bench serve --compare-metrics: exit $?"; tail -40 "$out/bench_serve.log"
    kill -TERM "$serve"; wait "$serve"
    echo "serve: exit $?"; grep -E "device|KV blocks|ERROR" "$out/serve.log" | head -5
    ;;
  *)
    echo "usage: tools/gpu_check.sh prepare|run" >&2
    exit 2
    ;;
esac
