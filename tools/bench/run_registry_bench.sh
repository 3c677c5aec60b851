#!/usr/bin/env bash
# Reproduces the numbers in tools/bench/PERFORMANCE.md: medians of repeated runs,
# scrape configurations interleaved so machine noise hits them alike.
#   tools/bench/run_registry_bench.sh [build-dir]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${1:-$here/../../build}"
bench="$build/tools/bench/registry_bench"
[[ -x "$bench" ]] || { echo "run_registry_bench: build first (tools/setup.sh)" >&2; exit 1; }

echo "== recording (median of 9 repetitions, ns per operation)"
"$bench" --benchmark_filter='BM_(Counter|Gauge|Histogram)' --benchmark_repetitions=9 \
  --benchmark_report_aggregates_only=true 2>/dev/null | awk '/_median/ {print "  " $1, $2, $3}'

echo "== scrape, full catalogue (median of 5 interleaved runs, us per scrape)"
declare -A runs
configs=("live:8/dead:0/" "live:8/dead:1/" "live:8/dead:1000/" "live:64/dead:0/")
for round in 1 2 3 4 5; do
  for c in "${configs[@]}"; do
    t=$("$bench" --benchmark_filter="BM_Scrape/$c" 2>/dev/null | awk '/BM_Scrape/ {print $2}')
    runs[$c]+="$t "
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for c in "${configs[@]}"; do
  echo "  BM_Scrape/$c ${runs[$c]}-> median $(echo "${runs[$c]}" | median)"
done
same=$(echo "${runs[live:8/dead:1/]}" | median)
dead=$(echo "${runs[live:8/dead:1000/]}" | median)
echo "  1000 dead processes vs 1 (identical page): $(awk -v a="$dead" -v b="$same" 'BEGIN {printf "%.2f", a / b}')x"

echo "== versus Python prometheus_client multiprocess mode"
/usr/bin/python3 "$here/compare_python.py" --bench "$bench" | sed 's/^/  /'
