#!/bin/sh
# Speculative decoding end to end (issue 39): `sightline serve` with the
# 134M-parameter benchmark model (cpu_decode_bench's Llama, dummy weights,
# written as a Hugging Face directory; served with the Mistral-7B tokenizer
# from the tests' data, 32000 tokens like the model), with and without
# n-gram speculation, alternated round by round by serve_bench.py, on the
# copy workload (prompts that repeat one span) and on random text, at
# concurrency 1, 8 and 64. Prints one table per (workload, concurrency).
#
#   tools/bench/spec_decode_bench.sh [BUILD_DIR] [ROUNDS] [SPEC_JSON]
#
# SPEC_BENCH_TEMPERATURE (default 0: greedy) samples every request at that
# temperature; SPEC_BENCH_LOGIT_SCALE (default 1) multiplies the model's
# logits (cpu_decode_bench --logit-scale: a sharper distribution, which
# sampled requests need to repeat anything); SPEC_BENCH_WORKLOADS and
# SPEC_BENCH_CONCURRENCY (default "copy random" and "1 8 64") narrow the runs.
set -eu
build=${1:-build}
rounds=${2:-3}
spec=${3:-'{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}'}
here=$(cd "$(dirname "$0")" && pwd)
work=${SPEC_BENCH_DIR:-/tmp/sightline-spec-bench}
mkdir -p "$work"
scale=${SPEC_BENCH_LOGIT_SCALE:-1}
model="$work/model"
[ "$scale" = 1 ] || model="$work/model-x$scale"
[ -f "$model/config.json" ] ||
  "$build/tools/bench/cpu_decode_bench" --write-hf-model="$model" --logit-scale="$scale"
[ -f "$work/tokenizer.json" ] ||
  xz -dc "$here/../../tests/tokenizer/testdata/tokenizers/mistral_7b/tokenizer.json.xz" > "$work/tokenizer.json"
# KV room for 64 requests of 128 + 64 tokens (74 KB per token).
base="$model --tokenizer $work/tokenizer.json --chat-template plain --kv-cache-memory 2000000000"
temperature=${SPEC_BENCH_TEMPERATURE:-0}
for workload in ${SPEC_BENCH_WORKLOADS:-copy random}; do
  for c in ${SPEC_BENCH_CONCURRENCY:-1 8 64}; do
    n=$c; [ "$n" -lt 4 ] && n=4
    if [ "$workload" = copy ]; then
      data="--dataset-name copy --copy-span-len 4 --copy-repeats 32 --copy-output-len 64"
    else
      data="--dataset-name random --random-input-len 128 --random-output-len 64"
    fi
    echo "## $workload, concurrency $c, temperature $temperature, logit scale $scale"
    python3 "$here/serve_bench.py" --cli "$build/tools/sightline" --rounds "$rounds" \
      --variants "$base;$base --speculative-config '$spec'" \
      --bench-args "$data --num-prompts $n --max-concurrency $c --ignore-eos --seed 0 --temperature $temperature"
  done
done
