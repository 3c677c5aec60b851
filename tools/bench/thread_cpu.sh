#!/bin/bash
# API-server CPU per streamed token, thread by thread, under a steady load.
#
# Usage: tools/bench/thread_cpu.sh BINARY [STREAMS] [TOKENS]
# Starts `BINARY engine` (the built-in tiny model, one thread) and one
# `BINARY api-server`, loads it with `BINARY bench serve` (STREAMS, default 64,
# concurrent streamed completions of TOKENS tokens, default 512), and after 4 s reads each
# API-server thread's CPU time (/proc, utime + stime) and context switches for
# 6 s, and the tokens generated meanwhile (vllm:generation_tokens_total from
# /metrics). Prints per thread: context switches and CPU µs per token.
# The load comes from `$CLIENT bench serve $BENCH_FLAGS` (CLIENT defaults to BINARY), so
# two servers can be compared under one client (BENCH_FLAGS=--no-keep-alive: a new
# connection per request). SYSCALLS=1 also counts the API server's system calls in the
# window (perf stat; root). Needs curl and bc; stops everything it started.
set -euo pipefail
B=$1
S=${2:-64}
T=${3:-512}
name=threadcpu$$
port=$((19000 + RANDOM % 500))
$B engine --input ipc:///tmp/$name.in --output ipc:///tmp/$name.out --registry $name \
  --threads 1 --max-num-seqs 256 2>/dev/null &
E=$!
sleep 1
$B api-server --engine-input ipc:///tmp/$name.in --engine-output ipc:///tmp/$name.out \
  --registry $name --port $port 2>/dev/null &
A=$!
trap 'kill $L $A $E 2>/dev/null; wait 2>/dev/null; rm -f /tmp/$name.in /tmp/$name.out' EXIT
L=$A
sleep 2
snap() {
  for t in /proc/$A/task/*; do
    echo "$(cat $t/comm) $(grep -E '^(non)?voluntary_ctxt' $t/status | awk '{s+=$2} END {print s}') $(awk '{print $14+$15}' $t/stat)"
  done
}
generated() {
  curl -s http://127.0.0.1:$port/metrics | awk '/^vllm:generation_tokens_total/ {s+=$2} END {print s}'
}
${CLIENT:-$B} bench serve ${BENCH_FLAGS:-} --base-url http://127.0.0.1:$port --num-prompts $((S * 8192 / T)) \
  --random-input-len 16 --random-output-len $T --max-concurrency $S --ignore-eos \
  >/dev/null 2>&1 &
L=$!
sleep 4
G0=$(generated)
before=$(snap)
if [[ -n "${SYSCALLS:-}" ]]; then  # the same 6 s, counted by perf (needs root)
  perf stat -e raw_syscalls:sys_enter -p $A -o /tmp/$name.perf -- sleep 6 >/dev/null 2>&1
else
  sleep 6
fi
after=$(snap)
G1=$(generated)
tokens=$(echo "$G1 - $G0" | bc)
echo "tokens: $tokens"
# clock ticks of 10 ms: µs per token = ticks * 10000 / tokens
paste <(echo "$before") <(echo "$after") | awk -v tok=$tokens '$6 > $3 {
  printf "%-16s ctx/token %.3f  cpu us/token %.2f\n", $1, ($5 - $2) / tok, ($6 - $3) * 10000 / tok
  sum += ($6 - $3) * 10000 / tok } END { printf "%-16s cpu us/token %.2f\n", "all", sum }'
if [[ -n "${SYSCALLS:-}" ]]; then
  awk -v tok=$tokens '/raw_syscalls/ { gsub(",", "", $1); printf "syscalls/token %.3f\n", $1 / tok }' \
    /tmp/$name.perf
  rm -f /tmp/$name.perf
fi
