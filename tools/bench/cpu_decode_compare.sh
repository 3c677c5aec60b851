#!/usr/bin/env bash
# Side by side: Sightline's CPU decode (batch 1, every weight format) against
# the plain C reference (reference_llama.c), on the same 134M-parameter
# weights, 1 and 2 threads, runs interleaved, medians of RUNS. Checks that the
# float32 greedy tokens are identical. Needs ~1.2 GB in $TMPDIR.
#   tools/bench/cpu_decode_compare.sh [BUILD_DIR] [TOKENS] [RUNS]
set -euo pipefail
build=${1:-build}
tokens=${2:-256}
runs=${3:-3}
bench="$build/tools/bench/cpu_decode_bench"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -Ofast -march=native -fopenmp "$(dirname "$0")/reference_llama.c" -lm -o "$work/reference_llama"
"$bench" --write-model="$work/model.bin"

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
rate() { tail -1 "$1" | cut -d' ' -f1; }
for threads in 1 2; do
  : >"$work/ref.$threads"
  for f in 0 1 2 3; do : >"$work/sl.$threads.$f"; done
  for ((i = 0; i < runs; i++)); do
    OMP_NUM_THREADS=$threads "$work/reference_llama" "$work/model.bin" "$tokens" >"$work/out.ref"
    rate "$work/out.ref" >>"$work/ref.$threads"
    for f in 0 1 2 3; do
      "$bench" --greedy="$tokens" --threads="$threads" --format="$f" >"$work/out.$f"
      rate "$work/out.$f" >>"$work/sl.$threads.$f"
    done
    if ! cmp -s <(head -1 "$work/out.ref") <(head -1 "$work/out.0"); then
      echo "float32 greedy tokens differ from the reference's" >&2
      exit 1
    fi
  done
  ref=$(median <"$work/ref.$threads")
  printf 'threads %d: reference %.1f tok/s' "$threads" "$ref"
  for f in 0 1 2 3; do
    name=$(tail -1 "$work/out.$f" | sed 's/.*, \(.*\))/\1/')
    sl=$(median <"$work/sl.$threads.$f")
    printf ' | %s %.1f (%.2fx ref)' "$name" "$sl" "$(awk -v a="$sl" -v b="$ref" 'BEGIN {print a / b}')"
  done
  echo
  for f in 1 2 3; do
    first=$(paste -d' ' <(head -1 "$work/out.0" | tr ' ' '\n') <(head -1 "$work/out.$f" | tr ' ' '\n') \
      | awk '$1 != $2 {print NR; exit}')
    echo "  $(tail -1 "$work/out.$f" | sed 's/.*, \(.*\))/\1/'): free-running greedy tokens equal to float32's up to token ${first:-none}"
  done
done
echo "greedy tokens: float32 identical to the reference's ($tokens tokens)"
