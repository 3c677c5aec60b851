#!/usr/bin/env python3
"""End-to-end API-server load: N concurrent streamed completions against a real
engine (the built-in tiny model) and one API server on loopback, while /metrics
is scraped in a loop. Reports streamed tokens/s, the API server's whole-process
CPU time per streamed token (from /proc, so HTTP, sockets and the engine's
connections included), and /metrics latency percentiles during the load.

Usage: tools/bench/api_load.py [--cli build/tools/sightline] [--streams 256]
       [--tokens 64] [--rounds 2] [--per-request-metrics] [--stream-interval N]
       [--syscalls] [--allocations] [--n N] [--otlp]
With --syscalls, `perf stat` counts the API server's system calls during each round
(tracepoints; needs perf and root) and prints them per streamed token, the busiest by name.
With --allocations, it counts the API server's calls of libc's malloc (operator new's
too) during each round, through a uprobe it adds if missing (`perf probe`; needs root),
and prints them per streamed token, thread by thread: requests included (a round is one
wave of requests), so --tokens sets how far a request's own allocations spread.
With --otlp, the API server traces every request (--otlp-traces-endpoint) to a stand-in
collector in this script that accepts every export; the spans it received are printed.
Python standard library only besides that; starts and stops every process it uses.
"""
import argparse, asyncio, json, os, signal, socket, statistics, subprocess, sys
import tempfile, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CLK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK  # utime + stime


class Collector(BaseHTTPRequestHandler):
    """Accepts every OTLP export (an empty ExportTraceServiceResponse: all taken)."""
    exports = 0
    bytes = 0

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Collector.exports += 1
        Collector.bytes += len(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


async def http(port, method, path, body=b"", stream_tokens=False):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                 f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    await writer.drain()
    data = await reader.read()  # until the server closes
    writer.close()
    head, _, payload = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(head[:200])
    return payload.count(b'"text"') if stream_tokens else len(payload)


# The scraper is a process of its own, as Prometheus is: timed inside the load
# generator's event loop, a scrape would wait for 256 streams' parsing too.
PROBE = r"""
import select, socket, sys, time
port, interval = int(sys.argv[1]), float(sys.argv[2])
request = b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
while sys.stdin.readline().strip() == "go":  # a round starts
    out = []
    while not select.select([sys.stdin], [], [], 0)[0]:  # until "stop"
        t = time.perf_counter()
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(request)
            data = b""
            while chunk := s.recv(1 << 16):
                data += chunk
        assert data.startswith(b"HTTP/1.1 200"), data[:100]
        out.append(time.perf_counter() - t)
        time.sleep(interval)
    sys.stdin.readline()
    print(" ".join(f"{x:.6f}" for x in out), flush=True)
"""


class Scraper:
    """A process that scrapes /metrics every 50 ms over a new connection, as a
    Prometheus server does, while a round runs."""

    def __init__(self, port):
        self.proc = subprocess.Popen([sys.executable, "-c", PROBE, str(port), "0.05"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def start(self):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def stop(self):
        self.proc.stdin.write("stop\n")
        self.proc.stdin.flush()
        return [float(x) for x in self.proc.stdout.readline().split()]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(10)


async def round_(port, streams, tokens, n):
    body = json.dumps({"prompt": "Hello, Sightline", "max_tokens": tokens, "ignore_eos": True,
                       "temperature": 0, "stream": True, "n": n}).encode()
    chunks = await asyncio.gather(*[http(port, "POST", "/v1/completions", body, True)
                                    for _ in range(streams)])
    return sum(chunks)


# The API server's likely calls; their sum is checked against all calls (raw_syscalls).
SYSCALLS = ["sendto", "sendmsg", "writev", "write", "read", "recvfrom", "recvmsg", "epoll_wait",
            "epoll_ctl", "futex", "poll", "getsockopt", "setsockopt", "accept4", "close",
            "shutdown", "ioctl", "getpid", "sched_yield", "mmap", "munmap", "brk", "madvise",
            "io_uring_enter", "timerfd_settime", "getsockname", "fcntl", "clock_gettime"]


def start_perf_stat(pid, options):
    """`perf stat -x, OPTIONS -p PID` into a file of its own, attached before the round."""
    out = tempfile.NamedTemporaryFile(suffix=".perf", delete=False).name
    proc = subprocess.Popen(["perf", "stat", "-x", ",", "-o", out] + options + ["-p", str(pid)])
    time.sleep(0.5)  # perf attaches before the round starts
    return proc, out


def stop_perf_stat(counter):
    """Stops a start_perf_stat and returns its CSV lines' fields."""
    proc, out = counter
    proc.send_signal(signal.SIGINT)
    proc.wait(10)
    with open(out) as f:
        rows = [line.strip().split(",") for line in f]
    os.remove(out)
    return rows


def start_syscall_count(pid):
    events = ",".join(["raw_syscalls:sys_enter"] + [f"syscalls:sys_enter_{n}" for n in SYSCALLS])
    return start_perf_stat(pid, ["-e", events])


def stop_syscall_count(counter, tokens):
    counts = {}
    for fields in stop_perf_stat(counter):
        if len(fields) > 2 and fields[0].isdigit():
            counts[fields[2].split(":")[1].replace("sys_enter_", "")] = int(fields[0])
    total = counts.pop("sys_enter", 0)
    busiest = sorted(counts.items(), key=lambda kv: -kv[1])[:10]
    other = total - sum(counts.values())
    return f"syscalls/token {total / tokens:.3f} (" + ", ".join(
        f"{name} {n / tokens:.3f}" for name, n in busiest if n) + f", unlisted {other / tokens:.3f})"


def libc_of(pid):
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            if "/libc.so" in line:
                return line.split()[-1]
    raise RuntimeError("no libc in the API server's maps")


def start_alloc_count(pid):
    if "probe_libc:malloc " not in subprocess.run(["perf", "probe", "-l"], capture_output=True,
                                                  text=True).stdout:
        subprocess.run(["perf", "probe", "-q", "-x", libc_of(pid), "malloc"], check=True)
    return start_perf_stat(pid, ["--per-thread", "-e", "probe_libc:malloc"])


def stop_alloc_count(counter, tokens):
    threads = {}
    for fields in stop_perf_stat(counter):
        if len(fields) > 3 and fields[1].isdigit():
            name = fields[0].rsplit("-", 1)[0]
            threads[name] = threads.get(name, 0) + int(fields[1])
    busiest = sorted(threads.items(), key=lambda kv: -kv[1])
    return f"allocations/token {sum(threads.values()) / tokens:.3f} (" + ", ".join(
        f"{name} {n / tokens:.3f}" for name, n in busiest if n) + ")"


def stop_processes(procs, name):
    """SIGTERM in the reverse order of starting (a kill after 10 s), then the
    files of the engine's IPC sockets ipc:///tmp/NAME.{in,out}."""
    for proc in reversed(procs):
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
    for suffix in (".in", ".out"):
        if os.path.exists(f"/tmp/{name}{suffix}"):
            os.remove(f"/tmp/{name}{suffix}")


async def main(a, port, api_pid):
    results = []
    scraper = Scraper(port)
    for _ in range(a.rounds):
        counter = start_syscall_count(api_pid) if a.syscalls else None
        allocs = start_alloc_count(api_pid) if a.allocations else None
        scraper.start()
        cpu0, t0 = cpu_seconds(api_pid), time.perf_counter()
        chunks = await round_(port, a.streams, a.tokens, a.n)
        wall, cpu = time.perf_counter() - t0, cpu_seconds(api_pid) - cpu0
        lat = scraper.stop()
        tokens = a.streams * a.tokens * a.n
        if counter:
            print(stop_syscall_count(counter, tokens))
        if allocs:
            print(stop_alloc_count(allocs, tokens))
        lat.sort()
        results.append((tokens / wall, cpu * 1e6 / tokens, lat[len(lat) // 2] * 1e3,
                        lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3, len(lat), chunks))
    scraper.close()
    for tps, us, p50, p99, n, chunks in results:
        print(f"streams={a.streams} tokens/stream={a.tokens}: {tps:,.0f} tokens/s, "
              f"API-server CPU {us:.2f} us/token, /metrics p50 {p50:.2f} ms p99 {p99:.2f} ms "
              f"({n} scrapes), {chunks} text chunks")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--cli", default="build/tools/sightline")
    p.add_argument("--streams", type=int, default=256)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--per-request-metrics", action="store_true")
    p.add_argument("--api-threads", type=int, default=1, help="the API server's HTTP threads")
    p.add_argument("--stream-interval", type=int, default=1, help="the API server's --stream-interval")
    p.add_argument("--syscalls", action="store_true", help="count the API server's syscalls (perf)")
    p.add_argument("--allocations", action="store_true",
                   help="count the API server's heap allocations (perf uprobe on malloc)")
    p.add_argument("--n", type=int, default=1, help="choices per request (each engine step "
                   "then gives a stream n chunks)")
    p.add_argument("--otlp", action="store_true", help="trace every request to a collector here")
    a = p.parse_args()
    name = f"apiload{os.getpid()}"
    base = f"ipc:///tmp/{name}"
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    procs = []
    try:
        procs.append(subprocess.Popen([a.cli, "engine", "--input", base + ".in", "--output", base + ".out",
                                       "--registry", name, "--threads", "1", "--max-num-seqs", "256"]))
        extra = ["--enable-per-request-metrics"] if a.per_request_metrics else []
        extra += ["--stream-interval", str(a.stream_interval)]
        collector = None
        if a.otlp:
            collector = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
            threading.Thread(target=collector.serve_forever, daemon=True).start()
            # Batches leave within the round, so their CPU is counted in it.
            os.environ["OTEL_BSP_SCHEDULE_DELAY"] = "100"
            extra += ["--otlp-traces-endpoint",
                      f"http://127.0.0.1:{collector.server_address[1]}/v1/traces"]
        procs.append(subprocess.Popen([a.cli, "api-server", "--engine-input", base + ".in",
                                       "--engine-output", base + ".out", "--registry", name,
                                       "--port", str(port), "--threads", str(a.api_threads)] + extra))
        for _ in range(100):
            try:
                if asyncio.run(http(port, "GET", "/health")) >= 0:
                    break
            except Exception:
                time.sleep(0.1)
        asyncio.run(main(a, port, procs[1].pid))
        if collector:
            print(f"collector: {Collector.exports} exports, {Collector.bytes} bytes so far")
    finally:
        stop_processes(procs, name)
