#!/usr/bin/env bash
# The whole suite under load: a fresh clone of the committed HEAD, two CPU
# hogs beside it, and the README's test command (tools/setup.sh test) RUNS
# times in a row (default 3; the first builds both trees from scratch, the
# others reuse them). One line per run: exit code, seconds, each phase's
# seconds, and the tests that failed. tests/README.md ("Under load") keeps
# the results. Logs stay in the printed directory.
#
#   tools/test_under_load.sh [RUNS [DIR]]
#
# DIR: a directory an earlier run printed; its clone is moved to this HEAD
# and its built trees are reused (the first run then rebuilds incrementally).
set -uo pipefail

runs="${1:-3}"
if ! [[ "$runs" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: tools/test_under_load.sh [RUNS [DIR]]" >&2
  exit 2
fi
if ((EUID != 0)); then
  echo "test_under_load: tools/setup.sh test installs packages: run as root" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -n "${2:-}" ]]; then
  work="$2"
  git -C "$work/src" fetch -q "$here" HEAD && git -C "$work/src" checkout -q FETCH_HEAD || exit 1
else
  work="$(mktemp -d /tmp/sightline-load.XXXXXX)"
  git clone -q "$here" "$work/src" || exit 1
fi
echo "under load: $(git -C "$work/src" rev-parse --short HEAD), logs in $work"

hogs=()
for _ in 1 2; do
  yes >/dev/null &
  hogs+=($!)
done
trap 'kill "${hogs[@]}" 2>/dev/null' EXIT

failures=0
for i in $(seq 1 "$runs"); do
  log="$work/run$i.log"
  start=$SECONDS
  (cd "$work/src" && tools/setup.sh test) >"$log" 2>&1
  rc=$?
  ((rc == 0)) || failures=$((failures + 1))
  # The phases that finished (setup.sh stops at the first that fails, so a
  # failed full suite means the sanitizer step did not run) and every entry of
  # ctest's failure summary, whatever its kind.
  phases=$(grep -o 'setup: [a-z_]* took [0-9]* s' "$log" | sed 's/setup: //; s/ took / /' | paste -sd, -)
  failed=$(sed -n '/The following tests FAILED:/,/^$/p' "$log" | grep -E '^[[:space:]]+[0-9]+ - ' |
           sed -E 's/^[[:space:]]*[0-9]+ - //' | paste -sd, -)
  echo "run $i: rc $rc, $((SECONDS - start)) s (${phases}); failed: ${failed:-none}"
done
exit $((failures > 0))
