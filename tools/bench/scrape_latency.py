#!/usr/bin/env python3
"""/metrics latency while 256 streams run: what a Prometheus server sees.

For each binary given (alternating, --rounds times), starts `sightline engine`
(the built-in tiny model, one thread) and one `sightline api-server`, loads it
with `sightline bench serve` (256 concurrent streamed completions of 256
tokens, from the C++ load generator), and once the load runs scrapes /metrics
every 50 ms from a process of its own. Reports the percentiles of the time to
connect, to the first byte of the answer (after the request is sent) and to
the last.

--scraper prometheus (the default) scrapes as Prometheus 2.x and 3.x do: one
kept-alive connection for every scrape (a new one only if the server closes
it), asking for OpenMetrics with Prometheus's Accept header and for gzip.
Its connect column is the one connection's, repeated. --scraper new-connection
opens a connection per scrape and asks for the plain text format, unzipped
(what this script measured before; Prometheus 1.x scraped so).

--floor build/tools/bench/scrape_floor adds, each round, the same load with the
scrapes answered instead by a server with nothing to do (the page as the API
server gave it, prepared): the part of a scrape that is the machine's.

Usage: tools/bench/scrape_latency.py [--rounds 3] [--scrapes 300]
       [--scraper prometheus|new-connection] [--floor SCRAPE_FLOOR]
       BINARY [BINARY ...]
Python standard library only; starts and stops every process it uses.
"""
import argparse, os, socket, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from api_load import stop_processes  # noqa: E402

PROBE = r"""
import gzip, socket, sys, time
port, n, mode, short_slice = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
if short_slice:  # sched_setattr: SCHED_OTHER with a 0.1 ms slice (EEVDF), as http-control asks
    import ctypes, struct
    attr = struct.pack("IIQiIQQQ", 48, 0, 0, 0, 0, 100_000, 0, 0)
    if ctypes.CDLL(None, use_errno=True).syscall(314, 0, attr, 0) != 0:
        raise OSError(ctypes.get_errno(), "sched_setattr")
if mode == "new-connection":
    request = b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
else:  # Prometheus 2.x's scrape request (scrape/scrape.go): OpenMetrics first, gzip
    request = (b"GET /metrics HTTP/1.1\r\nHost: x\r\nUser-Agent: Prometheus/2.45.0\r\n"
               b"Accept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
               b"version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n"
               b"Accept-Encoding: gzip\r\nX-Prometheus-Scrape-Timeout-Seconds: 10\r\n\r\n")


def read_response(s, data):
    # One response with a Content-Length (what /metrics answers); returns it
    # and what followed it.
    while b"\r\n\r\n" not in data:
        chunk = s.recv(1 << 16)
        if not chunk:
            raise RuntimeError("closed mid-header")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(rest) < length:
        chunk = s.recv(1 << 16)
        if not chunk:
            raise RuntimeError("closed mid-body")
        rest += chunk
    return head, rest[:length], rest[length:]


s, connect = None, 0.0
for _ in range(n):
    t0 = time.perf_counter()
    if s is None:
        s = socket.create_connection(("127.0.0.1", port))
        connect = time.perf_counter() - t0
    t1 = time.perf_counter()
    s.sendall(request)
    data = s.recv(1 << 16)
    t2 = time.perf_counter()
    if mode == "new-connection":
        while chunk := s.recv(1 << 16):
            data += chunk
        t3 = time.perf_counter()
        s.close()
        s = None
        assert data.startswith(b"HTTP/1.1 200"), data[:100]
    else:
        head, body, left = read_response(s, data)
        t3 = time.perf_counter()
        assert head.startswith(b"HTTP/1.1 200") and not left, head[:100]
        assert b"content-encoding: gzip" in head.lower(), head
        assert gzip.decompress(body).endswith(b"# EOF\n")
        if b"connection: close" in head.lower():
            s.close()
            s = None
    # total: from the start of the scrape (its connect, when it made one)
    print(f"{connect:.6f} {t2 - t1:.6f} {t3 - t0:.6f}", flush=True)
    time.sleep(0.05)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(port, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port)) as s:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                if s.recv(64).startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("the API server did not become healthy")


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))] * 1e3


def fetch_gzip_page(port):
    # The page as Prometheus gets it (OpenMetrics, gzip'd), raw.
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                  b"Accept: application/openmetrics-text;version=1.0.0\r\n"
                  b"Accept-Encoding: gzip\r\n\r\n")
        data = b""
        while chunk := s.recv(1 << 16):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"content-encoding: gzip" in head.lower(), head
    return body


def run(binary, scrapes, scraper, short_slice, floor=None):
    name = f"scrape{os.getpid()}"
    base = f"ipc:///tmp/{name}"
    port = free_port()
    procs = []
    try:
        procs.append(subprocess.Popen(
            [binary, "engine", "--input", base + ".in", "--output", base + ".out", "--registry", name,
             "--threads", "1", "--max-num-seqs", "256"], stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen(
            [binary, "api-server", "--engine-input", base + ".in", "--engine-output", base + ".out",
             "--registry", name, "--port", str(port)], stderr=subprocess.DEVNULL))
        wait_healthy(port)
        # More prompts than the scrapes need: the load outlasts them.
        procs.append(subprocess.Popen(
            [binary, "bench", "serve", "--base-url", f"http://127.0.0.1:{port}", "--num-prompts",
             "8192", "--random-input-len", "16", "--random-output-len", "256", "--max-concurrency",
             "256", "--ignore-eos"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(3)  # 256 streams under way
        target = port
        if floor:  # the same page, answered by a server with nothing to do
            page = f"/tmp/{name}.gz"
            with open(page, "wb") as f:
                f.write(fetch_gzip_page(port))
            # Port 0: it binds a free one and says which (no race for it).
            procs.append(subprocess.Popen([floor, "0", page], stdout=subprocess.PIPE, text=True))
            line = procs[-1].stdout.readline()
            if not line.startswith("listening on "):
                raise RuntimeError(f"scrape_floor did not start: {line!r}")
            target = int(line.split()[-1])
        out = subprocess.run([sys.executable, "-c", PROBE, str(target), str(scrapes), scraper,
                             "1" if short_slice else "0"],
                             capture_output=True, text=True, check=True).stdout
        rows = [tuple(map(float, line.split())) for line in out.splitlines()]
        if procs[2].poll() is not None:
            raise RuntimeError("the load ended before the scrapes did")
        return rows
    finally:
        stop_processes(procs, name)
        if floor and os.path.exists(f"/tmp/{name}.gz"):
            os.remove(f"/tmp/{name}.gz")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("binaries", nargs="+")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--scrapes", type=int, default=300)
    p.add_argument("--scraper", choices=("prometheus", "new-connection"), default="prometheus")
    p.add_argument("--scraper-slice", action="store_true",
                   help="the scraping process asks for a 0.1 ms time slice (x86-64 Linux)")
    p.add_argument("--floor", metavar="SCRAPE_FLOOR",
                   help="also, each round, scrape build/tools/bench/scrape_floor (the page, "
                        "prepared, from a server with nothing to do) under the first binary's load")
    a = p.parse_args()
    if a.floor and a.scraper != "prometheus":
        p.error("--floor serves gzip'd OpenMetrics: --scraper prometheus only")
    runs = [(b, None) for b in a.binaries] + ([(a.binaries[0], a.floor)] if a.floor else [])
    for r in range(a.rounds):
        for binary, floor in runs:
            rows = run(binary, a.scrapes, a.scraper, a.scraper_slice, floor)
            cols = []
            for i, what in enumerate(("connect", "first byte", "total")):
                v = [row[i] for row in rows]
                cols.append(f"{what} p50 {percentile(v, .5):.2f} p90 {percentile(v, .9):.2f} "
                            f"p99 {percentile(v, .99):.2f}")
            label = f"floor ({binary}'s load)" if floor else binary
            print(f"round {r + 1} {label}: " + " | ".join(cols) + f" ms ({len(rows)} scrapes)",
                  flush=True)


if __name__ == "__main__":
    main()
