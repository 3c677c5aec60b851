#!/usr/bin/env bash
# The one entry point for a fresh Debian 12 machine (run as root). Installs
# every Debian package Sightline needs, configures and builds, then:
#
#   tools/setup.sh serve [FLAGS]   run `sightline serve` (the built-in tiny
#                          model on 0.0.0.0:8000 unless FLAGS say otherwise)
#   tools/setup.sh test    run the whole test suite (what CI runs), then the
#                          sanitizer step: a second tree in $SIGHTLINE_ASAN_BUILD_DIR
#                          (default build-asan/), clang with ASan+UBSan, running
#                          the suites labelled `sanitize` and the HTTP fuzzer
#                          (SIGHTLINE_SANITIZE=0 skips it)
#   tools/setup.sh build   install and build only
#
# Re-running is cheap: installed packages are skipped and the build in
# $SIGHTLINE_BUILD_DIR (default build/) is incremental. Every mode configures
# that tree the same way, so `serve` after `test` (or the reverse) reuses it.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${SIGHTLINE_BUILD_DIR:-$here/build}"
mode="${1:-build}"

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libzmq3-dev cppzmq-dev                      # IPC
  libmsgpack-cxx-dev python3-msgpack          # KV events' encoding; Python's reader for its test
  libflatbuffers-dev flatbuffers-compiler     # wire format
  libboost-dev                                # Interprocess, Asio, Beast
  liburing-dev                                # io_uring: an engine step's writes in one call
  prometheus-cpp-dev                          # Prometheus data model
  zlib1g-dev                                  # OTLP gzip; the tests' gzip decoder
  libisal-dev                                 # gzip'd /metrics answers (ISA-L's igzip)
  libgtest-dev libgmock-dev libbenchmark-dev  # tests, benchmarks
  libcli11-dev nlohmann-json3-dev
  libprotobuf-dev protobuf-compiler           # OTLP traces (tracing/proto)
  libdnnl-dev ocl-icd-opencl-dev             # oneDNN (its CMake config wants OpenCL's dev files)
  libopenblas-dev libsentencepiece-dev libxxhash-dev
  libonig-dev libutf8proc-dev                 # tokenizer.json: HF's regex engine, Unicode normalization
  clang-format xz-utils                       # xz: the compressed test data (tests/CMakeLists.txt)
  clang libclang-rt-14-dev llvm              # the sanitizer step: ASan, UBSan, libFuzzer, symbolizer
  prometheus                                  # promtool, for the exposition tests
  python3 python3-prometheus-client           # the reference in tools/bench/
  python3-yaml                                # deploy/ checks
)

install_deps() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # Without recommends: the prometheus package would pull in its web console.
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# One configuration for every mode: a cache variable that differs between
# modes (-Werror, say) changes every compile command, so switching modes would
# rebuild the whole tree. Warnings are errors in all of them, as CI needs; on
# this Debian 12 toolchain the tree builds without one (another compiler may
# warn where GCC 12 does not: SIGHTLINE_WERROR=OFF turns it off).
build() {
  cmake -S "$here" -B "$build_dir" -G Ninja \
    -DCMAKE_BUILD_TYPE="${SIGHTLINE_BUILD_TYPE:-Release}" \
    -DSIGHTLINE_WERROR="${SIGHTLINE_WERROR:-ON}" >/dev/null
  cmake --build "$build_dir" -j"$(nproc)"
  # For clangd and other tools that look for it at the top.
  ln -sfn "$build_dir/compile_commands.json" "$here/compile_commands.json"
}

# The sanitizer step. -Werror stays with the GCC tree (clang warns about other
# things); -O1 and line tables keep the build and the tests quick enough.
sanitize_test() {
  local dir="${SIGHTLINE_ASAN_BUILD_DIR:-$here/build-asan}"
  CC=clang CXX=clang++ cmake -S "$here" -B "$dir" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
    -DSIGHTLINE_SANITIZE=ON -DSIGHTLINE_WERROR=OFF -DSIGHTLINE_CUDA=OFF \
    -DSIGHTLINE_BUILD_BENCHMARKS=OFF >/dev/null
  cmake --build "$dir" -j"$(nproc)" --target sightline shm_registry_tests ipc_schema_tests \
    api_server_tests jinja_tests tracing_tests http_fuzzer sightline_envelope_fuzzer
  cd "$dir"
  # Left to the GCC tree: a test that runs 32 x 1,900 tokens to the end through
  # an ASan-built engine (minutes here, seconds there) and checks only timing.
  # No retry: a test that fails one try in two is a defect a retry would hide
  # (tests/README.md, "Under load").
  UBSAN_OPTIONS=print_stacktrace=1 ctest -j"$(nproc)" -L sanitize --output-on-failure --timeout 600 \
    -E '^EngineClientTest\.ASlowHandlerDoesNotDelayHeartbeats$'
}

run_tests() { (cd "$build_dir" && ctest -j"$(nproc)" --output-on-failure --timeout 600); }

phase() {
  local start=$SECONDS
  "$@"
  echo "setup: $1 took $((SECONDS - start)) s"
}

case "$mode" in
  build)
    install_deps
    build
    ;;
  serve)
    install_deps
    build
    shift
    exec "$build_dir/tools/sightline" serve "$@"
    ;;
  test)
    # Each phase says how long it took, so a slow CI run shows where.
    phase install_deps
    phase build
    phase run_tests
    # An if, not ||: set -e must hold inside the function.
    if [[ "${SIGHTLINE_SANITIZE:-1}" != 0 ]]; then phase sanitize_test; fi
    ;;
  *)
    echo "usage: tools/setup.sh [build|serve|test]" >&2
    exit 2
    ;;
esac
