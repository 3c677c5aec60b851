#!/usr/bin/env bash
# Sightline's CPU linear layers against OpenBLAS, BLIS and oneDNN on one
# decode step's matrices (cpu_linear_libraries.cc says what is measured),
# and the machine's peak multiply-add rate (cpu_peak_flops.cc). Needs a built
# tree and Debian's libblis-dev, which the product does not depend on
# (apt-get install libblis-dev). ROWS=1,4,16,64 (the default) picks batches.
#   tools/bench/cpu_linear_libraries.sh [BUILD_DIR] [THREADS...]
set -euo pipefail
build=${1:-build}
shift || true
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
src=$(dirname "$0")
g++ -O2 -std=c++20 -fopenmp -I"$src/../../kernels/include" -I"$src/../../kernels/cpu" \
  -I/usr/include/x86_64-linux-gnu/blis-openmp "$src/cpu_linear_libraries.cc" \
  "$build/kernels/libsightline_kernels.a" -ldnnl -lblis -ldl -o "$work/cpu_linear_libraries"
g++ -O2 -std=c++20 -fopenmp "$src/cpu_peak_flops.cc" -o "$work/cpu_peak_flops"
[ $# -gt 0 ] || set -- 1 2
for threads in "$@"; do
  OMP_NUM_THREADS=$threads "$work/cpu_peak_flops"
  OMP_NUM_THREADS=$threads "$work/cpu_linear_libraries" "$threads"
done
