#!/usr/bin/env python3
"""Old and new builds' benchmarks, side by side, on the same machine at once.

    tools/bench/side_by_side.py OLD_BUILD_DIR NEW_BUILD_DIR [ROUNDS]

Runs the API server's cost per streamed token (api_bench), the registry's
ns per operation (registry_bench) and CPU decode throughput (cpu_decode_bench)
from both trees' tools/bench/, alternating which goes first in each round (the
machine's speed drifts), and prints each side's median and the median of the
per-round new/old ratios. A change that should not move performance is within
noise when that ratio's spread straddles 1.
"""
import json
import statistics
import subprocess
import sys

BENCHES = [
    # (binary, filter, the figure, scale to print it, extra flags)
    ("api_bench", "BM_StreamedToken/streams:256/api:(0|1)/per_request_metrics:0/logprobs:-1$",
     "us_per_token", 1e6, ["--benchmark_min_time=1"]),
    ("registry_bench", "BM_CounterInc$|BM_HistogramObserve30$", "real_time", 1, []),
    ("cpu_decode_bench", "BM_Decode134M/batch:16/threads:2/format:0/", "tokens_per_s", 1, []),
]


def run(build, binary, filt, key, scale, extra):
    out = subprocess.run([f"{build}/tools/bench/{binary}", f"--benchmark_filter={filt}",
                          "--benchmark_format=json", *extra],
                         check=True, capture_output=True, text=True).stdout
    figures = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        figures[b["name"].removesuffix("_median")] = b[key] * scale
    return figures


def main():
    old, new = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 9
    for binary, filt, key, scale, extra in BENCHES:
        seen = {}
        for i in range(rounds):
            order = [("old", old), ("new", new)] if i % 2 == 0 else [("new", new), ("old", old)]
            got = {side: run(build, binary, filt, key, scale, extra) for side, build in order}
            for name in got["old"]:
                s = seen.setdefault(name, {"old": [], "new": [], "ratio": []})
                s["old"].append(got["old"][name])
                s["new"].append(got["new"][name])
                s["ratio"].append(got["new"][name] / got["old"][name])
        for name, s in seen.items():
            r = sorted(s["ratio"])
            print(f"{name} ({key}): old {statistics.median(s['old']):.4g}, "
                  f"new {statistics.median(s['new']):.4g}, new/old median {statistics.median(r):.3f} "
                  f"[{r[0]:.3f} .. {r[-1]:.3f}], {rounds} rounds")


if __name__ == "__main__":
    main()
