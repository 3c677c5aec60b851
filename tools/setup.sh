#!/usr/bin/env bash
# One-stop setup for a fresh Debian 12 machine (run as root):
# installs every Debian package Sightline needs, then configures and builds.
#
#   tools/setup.sh            install packages + build (Release)
#   tools/setup.sh --deps     install packages only
#
# Build directory: $SIGHTLINE_BUILD_DIR (default: build/). Re-running is cheap:
# apt skips installed packages and the build is incremental.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${SIGHTLINE_BUILD_DIR:-$here/build}"

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libzmq3-dev cppzmq-dev
  libflatbuffers-dev flatbuffers-compiler
  libboost-dev
  prometheus-cpp-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev libfmt-dev libspdlog-dev nlohmann-json3-dev
  libopenblas-dev libsentencepiece-dev
  clang-format
  prometheus               # promtool, used by the exposition tests
  python3 python3-prometheus-client   # reference for tools/bench/
)

install_deps() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # --no-install-recommends keeps the prometheus server's optional web assets out.
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

build() {
  local werror="${SIGHTLINE_WERROR:-OFF}"
  cmake -S "$here" -B "$build_dir" -G Ninja \
    -DCMAKE_BUILD_TYPE="${SIGHTLINE_BUILD_TYPE:-Release}" \
    -DSIGHTLINE_WERROR="$werror" >/dev/null
  cmake --build "$build_dir" -j"$(nproc)"
}

install_deps
[[ "${1:-}" == "--deps" ]] && exit 0
build
