#!/bin/bash
# Throughput with --data-parallel-size 1 and 2 (one engine thread each), alternating:
# `bench serve` of random prompts (64 tokens in, 128 out, 64 in flight) against `serve`.
# Usage: tools/bench/dp_throughput.sh [CLI] [ROUNDS]
set -euo pipefail
CLI=${1:-build/tools/sightline}
ROUNDS=${2:-2}
run() {  # $1: data-parallel size
  local port log
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  log=$(mktemp)
  "$CLI" serve --host 127.0.0.1 --port "$port" --data-parallel-size "$1" --engine-threads 1 \
    --registry "dptp$$" > "$log" 2>&1 &
  local pid=$!
  for _ in $(seq 600); do curl -sf "http://127.0.0.1:$port/health" > /dev/null && break; sleep 0.1; done
  local out
  out=$(mktemp --suffix .json)
  "$CLI" bench serve --base-url "http://127.0.0.1:$port" --num-prompts 512 --random-input-len 64 \
    --random-output-len 128 --max-concurrency 64 --ignore-eos --seed 1 --no-progress \
    --output-json "$out" > /dev/null
  python3 -c "import json,sys; j=json.load(open('$out')); print(f'dp=$1: {j[\"output_throughput\"]:.0f} output tokens/s, TTFT median {j[\"ttft\"][\"median_ms\"]:.1f} ms, TPOT median {j[\"tpot\"][\"median_ms\"]:.2f} ms')"
  kill -TERM "$pid"; wait "$pid" || true
  rm -f "$out" "$log"
}
for r in $(seq "$ROUNDS"); do
  if (( r % 2 )); then run 1; run 2; else run 2; run 1; fi
done
