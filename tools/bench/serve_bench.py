#!/usr/bin/env python3
"""End-to-end serving benchmarks with `sightline bench serve` against
`sightline serve` on loopback, variants interleaved round by round so that
the noise of a shared machine falls on all of them alike, and in the
reverse order every other round (the first server of a round has been
measured 2-9 % faster: a machine that has just been idle). Prints the
median of each variant and its ratio to the first.

  tools/bench/serve_bench.py --variants="--api-server-count 1;--api-server-count 2;--api-server-count 4"
  tools/bench/serve_bench.py --variants="default;--enable-per-request-metrics"
  tools/bench/serve_bench.py --clis="before=/tmp/old/sightline;after=build/tools/sightline"

With --clis, each variant is a binary (same flags, --variants' first set);
the load generator is always the first binary's, so only the server changes.

With --intervals the bench runs with --compare-metrics against a server with
--enable-per-request-metrics, and the table is the interval sums instead:
the server's prefill, queue, decode and ITL sums against the client's TTFT
and first-to-last-token sums, and the mean per-request
`time_to_first_token_ms` of a few non-streamed requests sent afterwards:

  tools/bench/serve_bench.py --intervals --rounds 3 \
    --clis="before=/tmp/old/sightline;after=build/tools/sightline" \
    --bench-args "--num-prompts 12 --max-concurrency 1 --random-input-len 1200 --random-output-len 32 --ignore-eos"
"""
import argparse
import json
import os
import random
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request


def serve(cli, extra, log):
    flags = [] if extra == "default" else shlex.split(extra)
    p = subprocess.Popen([cli, "serve", "--host", "127.0.0.1", "--port", "0", "--engine-threads", "1"]
                         + flags, stdout=log, stderr=log)
    for _ in range(300):
        with open(log.name) as f:
            m = re.search(r"serving on http://127\.0\.0\.1:(\d+)", f.read())
        if m:
            return p, int(m.group(1))
        if p.poll() is not None:
            break
        time.sleep(0.1)
    p.kill()
    sys.exit(f"serve {extra!r} did not start; see {log.name}")


def mean_request_ttft_ms(port, n=4, prompt_chars=1200):
    """Mean `metrics.time_to_first_token_ms` of n non-streamed requests."""
    rng = random.Random(7)
    values = []
    for _ in range(n):
        prompt = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(prompt_chars))
        body = json.dumps({"prompt": prompt, "max_tokens": 8, "ignore_eos": True}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            values.append(json.load(r)["metrics"]["time_to_first_token_ms"])
    return statistics.mean(values)


def interval_row(j):
    """The interval sums of one run, by name (seconds)."""
    rows = {r["what"]: r for r in j["compare_metrics"]["intervals"]}
    pick = lambda what, side: rows[what][side]
    queue_prefill, ttft = pick("queue + prefill <= client TTFT", "server_s"), pick(
        "queue + prefill <= client TTFT", "client_s")
    prefill = pick("prefill >= 0.3 x (client TTFT - queue)", "server_s")
    return {"prefill": prefill, "client TTFT": ttft, "queue": queue_prefill - prefill,
            "decode": pick("ITL sum = decode time", "client_s"),
            "ITL": pick("ITL sum = decode time", "server_s"),
            "client first-last": pick("ITL sum ~ client first to last token", "client_s"),
            "failing": sum(1 for r in rows.values() if r["judged"] and not r["pass"])}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default="build/tools/sightline")
    ap.add_argument("--variants", default="default",
                    help="';'-separated extra `serve` flags, one set per variant ('default': none)")
    ap.add_argument("--clis", default="",
                    help="';'-separated NAME=PATH binaries to compare instead of flag sets")
    ap.add_argument("--intervals", action="store_true",
                    help="report --compare-metrics interval sums (see the docstring)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bench-args", default="--num-prompts 256 --random-input-len 32 "
                    "--random-output-len 128 --max-concurrency 256 --ignore-eos")
    a = ap.parse_args()
    a.variants = [v.strip() for v in a.variants.split(";")]
    # Each variant: (label, server binary, serve flags).
    if a.clis:
        runs = [(name, path, a.variants[0]) for name, path in
                (c.strip().split("=", 1) for c in a.clis.split(";"))]
        bench_cli = runs[0][1]
    else:
        runs = [(v, a.cli, v) for v in a.variants]
        bench_cli = a.cli
    a.variants = [label for label, _, _ in runs]
    if a.intervals:
        runs = [(v, cli, (flags if flags != "default" else "") + " --enable-per-request-metrics")
                for v, cli, flags in runs]
        a.bench_args += " --compare-metrics"
    keys = ["output_throughput", "request_throughput"]
    lat = ["ttft", "itl", "e2el"]
    results = {v: [] for v in a.variants}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            for v, cli, flags in (runs if r % 2 == 0 else runs[::-1]):
                log = open(os.path.join(tmp, "serve.log"), "w+")
                p, port = serve(cli, flags, log)
                out = os.path.join(tmp, "bench.json")
                try:
                    # With --intervals a failing relation exits 1: that is a result.
                    subprocess.run([bench_cli, "bench", "serve", "--base-url", f"http://127.0.0.1:{port}",
                                    "--no-progress", "--output-json", out] + shlex.split(a.bench_args),
                                   check=not a.intervals, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL if a.intervals else None)
                    with open(out) as f:
                        j = json.load(f)
                    assert j["failed"] == 0, j["failures"]
                    if a.intervals:
                        j["intervals"] = interval_row(j)
                        j["intervals"]["request ttft_ms"] = mean_request_ttft_ms(port)
                    results[v].append(j)
                    print(f"round {r + 1} [{v or 'default'}]: {j['output_throughput']:,.0f} tok/s, "
                          f"TTFT p50 {j['ttft']['median_ms']:.1f} ms, ITL p50 {j['itl']['median_ms']:.2f} ms",
                          file=sys.stderr)
                finally:
                    p.send_signal(signal.SIGTERM)
                    p.wait(60)
    if a.intervals:
        names = ["prefill", "client TTFT", "queue", "decode", "ITL", "client first-last"]
        print("| variant | " + " | ".join(f"{n} sum s" for n in names) +
              " | prefill / (TTFT - queue) | mean time_to_first_token_ms | relations failing |")
        print("|---" * (len(names) + 4) + "|")
        for v in a.variants:
            med = lambda k: statistics.median(j["intervals"][k] for j in results[v])
            share = statistics.median(j["intervals"]["prefill"] /
                                      (j["intervals"]["client TTFT"] - j["intervals"]["queue"])
                                      for j in results[v])
            print(f"| {v or 'default'} | " + " | ".join(f"{med(n):.4f}" for n in names) +
                  f" | {share:.3f} | {med('request ttft_ms'):.2f} | {med('failing'):.0f} |")
        return
    base = None
    # Acceptance: the server's vllm:spec_decode_* counters over the run, when it speculates.
    spec = any("spec_decode" in j for v in a.variants for j in results[v])
    print(f"| variant | output tok/s | req/s | TTFT p50 / p99 ms | TPOT p50 ms | ITL p50 / p99 ms | "
          f"e2e p50 ms |{' draft acceptance |' if spec else ''} tok/s ratio |")
    print("|---" * (8 + spec) + "|")
    for v in a.variants:
        med = lambda f: statistics.median(f(j) for j in results[v])
        tps = med(lambda j: j["output_throughput"])
        base = base or tps
        accept = ""
        if spec:
            rates = [j["spec_decode"]["acceptance_rate"] for j in results[v] if "spec_decode" in j]
            rates = [x for x in rates if x is not None]
            accept = f" {statistics.median(rates) * 100:.1f} % |" if rates else " – |"
        print(f"| {v or 'default'} | {tps:,.0f} | {med(lambda j: j['request_throughput']):.1f} | "
              f"{med(lambda j: j['ttft']['median_ms']):.1f} / {med(lambda j: j['ttft']['p99_ms']):.1f} | "
              f"{med(lambda j: j['tpot']['median_ms']):.2f} | "
              f"{med(lambda j: j['itl']['median_ms']):.2f} / {med(lambda j: j['itl']['p99_ms']):.2f} | "
              f"{med(lambda j: j['e2el']['median_ms']):.0f} |{accept} {tps / base:.2f} |")


if __name__ == "__main__":
    main()
