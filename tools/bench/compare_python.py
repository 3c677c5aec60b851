#!/usr/bin/python3
"""Scrape cost: Sightline's shared-memory registry vs Python prometheus_client
multiprocess mode, on the same content (the full METRICS.md catalogue written
by N live processes). Prints both medians and the ratio.

    /usr/bin/python3 tools/bench/compare_python.py [--bench PATH] [--processes 8]

Needs Debian's python3-prometheus-client (tools/setup.sh installs it). Debian
12 ships 0.16, which predates the mostrecent gauge modes; those families use
the equivalent livemax/max modes on the Python side (same files, same cost).
"""
import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

MODE_FALLBACK = {"mostrecent": "max", "livemostrecent": "livemax"}


def write_workload(catalogue, seed, ready, release):
    from prometheus_client import Counter, Gauge, Histogram, Summary
    observations = catalogue["observations"]
    for f in catalogue["families"]:
        kw = dict(labelnames=f["label_names"], registry=None)
        if f["type"] == "counter":
            m = Counter(f["name"], f["help"], **kw)
        elif f["type"] == "gauge":
            mode = MODE_FALLBACK.get(f["mode"], f["mode"])
            m = Gauge(f["name"], f["help"], multiprocess_mode=mode, **kw)
        elif f["type"] == "histogram":
            m = Histogram(f["name"], f["help"], buckets=f["buckets"] + [float("inf")], **kw)
        else:
            m = Summary(f["name"], f["help"], **kw)
        for labels in f["series"]:
            child = m.labels(**labels) if labels else m
            if f["type"] == "counter":
                child.inc(seed + 1)
            elif f["type"] == "gauge":
                child.set(seed)
            else:
                for v in observations:
                    child.observe(v)
    ready.release()
    release.acquire()


def python_scrape_median_us(catalogue, processes, iterations):
    tmp = tempfile.mkdtemp(prefix="prom-multiproc-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tmp
    from prometheus_client import CollectorRegistry, generate_latest, multiprocess
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Semaphore(0), ctx.Semaphore(0)
    workers = [ctx.Process(target=write_workload, args=(catalogue, i, ready, release))
               for i in range(processes)]
    try:
        for w in workers:
            w.start()
        for _ in workers:
            ready.acquire()
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        times, page = [], b""
        for _ in range(iterations):
            t0 = time.perf_counter()
            page = generate_latest(registry)
            times.append((time.perf_counter() - t0) * 1e6)
        return statistics.median(times), len(page)
    finally:
        for _ in workers:
            release.release()
        for w in workers:
            w.join(timeout=10)
            if w.is_alive():
                w.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default=os.path.join(here, "..", "..", "build", "tools", "bench",
                                                    "registry_bench"))
    ap.add_argument("--processes", type=int, default=8)
    ap.add_argument("--iterations", type=int, default=50)
    args = ap.parse_args()
    if not os.access(args.bench, os.X_OK):
        sys.exit(f"compare_python: {args.bench} not found; build first (tools/setup.sh)")
    catalogue = json.loads(subprocess.check_output([args.bench, "--catalogue-json"]))
    cpp = json.loads(subprocess.check_output([args.bench, f"--scrape-report={args.processes}"]))
    py_us, py_bytes = python_scrape_median_us(catalogue, args.processes, args.iterations)
    print(f"families: {len(catalogue['families'])}, live processes: {args.processes}")
    print(f"sightline shm registry : median {cpp['median_us']:10.1f} us  "
          f"({cpp['page_bytes']} bytes, {cpp['iterations']} scrapes)")
    print(f"prometheus_client 0.16 : median {py_us:10.1f} us  ({py_bytes} bytes, "
          f"{args.iterations} scrapes)")
    print(f"ratio (python / sightline): {py_us / cpp['median_us']:.0f}x")


if __name__ == "__main__":
    main()
