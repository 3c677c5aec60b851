#!/usr/bin/env python3
"""Data-parallel prefix affinity, A/B: `sightline serve --data-parallel-size 2` with and
without --no-prefix-affinity, alternating, on a shared-prefix workload (several system
prompts, many users: `bench serve --dataset-name shared-prefix`, Poisson arrivals). Reports
per run the instance's prefix-cache hit rate (hits / queries over all engines, from
/metrics before and after), TTFT median and p99 (the client's), and how the requests spread
over the engines.

Usage: tools/bench/dp_affinity_ab.py [--cli build/tools/sightline] [--rounds 2]
       [--prompts 480] [--prefixes 48] [--prefix-len 512] [--rate 30] [--blocks 1024]
The defaults make the prefixes' working set (48 x 512 tokens) larger than one engine's KV
cache (1024 blocks of 16 tokens) but not than both: the case where where a prefix is sent
decides whether it is still cached. The prompts come interleaved (--shared-prefix-interleave):
each request uses one of the prefixes at random.
Python standard library only; starts and stops every process it uses.
"""
import argparse, json, os, re, signal, socket, statistics, subprocess, sys, tempfile, time, urllib.request


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def scrape(port):
    page = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    out = {}
    for line in page.splitlines():
        m = re.match(r'^(vllm:(prefix_cache_hits_total|prefix_cache_queries_total|request_success_total))\{(.*)\} (\S+)$', line)
        if m:
            engine = re.search(r'engine="(\d+)"', m.group(3)).group(1)
            key = (m.group(1), engine)
            out[key] = out.get(key, 0) + float(m.group(4))
    return out


def run(a, affinity, seed):
    port = free_port()
    args = [a.cli, "serve", "--host", "127.0.0.1", "--port", str(port), "--data-parallel-size", "2",
            "--engine-threads", "1", "--registry", f"dpab{os.getpid()}",
            "--num-gpu-blocks-override", str(a.blocks)]
    if not affinity:
        args.append("--no-prefix-affinity")
    log = tempfile.TemporaryFile()
    serve = subprocess.Popen(args, stdout=log, stderr=log)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except Exception:
                time.sleep(0.1)
        before = scrape(port)
        out = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
        subprocess.run([a.cli, "bench", "serve", "--base-url", f"http://127.0.0.1:{port}",
                        "--dataset-name", "shared-prefix", "--shared-prefix-interleave",
                        "--num-prompts", str(a.prompts),
                        "--shared-prefix-count", str(a.prompts // a.prefixes), "--shared-prefix-len",
                        str(a.prefix_len), "--shared-prefix-output-len", "16",
                        "--request-rate", str(a.rate), "--seed", str(seed), "--no-progress",
                        "--output-json", out], check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            result = json.load(f)
        os.remove(out)
        after = scrape(port)
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(60)
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    hits = sum(v for (n, _), v in delta.items() if n == "vllm:prefix_cache_hits_total")
    queries = sum(v for (n, _), v in delta.items() if n == "vllm:prefix_cache_queries_total")
    spread = [int(delta.get(("vllm:request_success_total", e), 0)) for e in ("0", "1")]
    return hits / queries if queries else 0, result["ttft"]["median_ms"], result["ttft"]["p99_ms"], spread


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cli", default="build/tools/sightline")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--prompts", type=int, default=480)
    p.add_argument("--prefixes", type=int, default=48)
    p.add_argument("--prefix-len", type=int, default=512)
    p.add_argument("--rate", type=float, default=30)
    p.add_argument("--blocks", type=int, default=1024, help="each engine's KV-cache blocks")
    a = p.parse_args()
    rows = {True: [], False: []}
    for r in range(a.rounds):
        for affinity in ((True, False) if r % 2 == 0 else (False, True)):
            rows[affinity].append(run(a, affinity, seed=r + 1))
            hit, med, p99, spread = rows[affinity][-1]
            print(f"round {r} affinity={'on ' if affinity else 'off'}: prefix hit rate {hit:.3f}, "
                  f"TTFT median {med:.1f} ms p99 {p99:.1f} ms, requests per engine {spread}",
                  flush=True)
    for affinity in (True, False):
        hit = statistics.median(x[0] for x in rows[affinity])
        med = statistics.median(x[1] for x in rows[affinity])
        p99 = statistics.median(x[2] for x in rows[affinity])
        print(f"median affinity={'on ' if affinity else 'off'}: hit rate {hit:.3f}, "
              f"TTFT median {med:.1f} ms, p99 {p99:.1f} ms")


if __name__ == "__main__":
    main()
