#!/bin/bash
# The API server's CPU per /metrics scrape as Prometheus makes it (one kept
# connection, OpenMetrics, gzip), on an otherwise idle server.
#
# Usage: tools/bench/scrape_cpu.sh BINARY [SCRAPES]
# Starts `BINARY engine` (the built-in tiny model) and one `BINARY api-server`,
# sends 20 short requests (so the request families have samples), then
# SCRAPES (default 2000) scrapes back to back from one Python client, and
# prints the http-control thread's CPU time per scrape (/proc schedstat).
# Needs curl; stops everything it started.
set -euo pipefail
B=$1
N=${2:-2000}
name=scrapecpu$$
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
E= A=
trap 'kill $A $E 2>/dev/null; wait 2>/dev/null; rm -f /tmp/$name.in /tmp/$name.out' EXIT
$B engine --input ipc:///tmp/$name.in --output ipc:///tmp/$name.out --registry $name \
  --threads 1 2>/dev/null &
E=$!
$B api-server --engine-input ipc:///tmp/$name.in --engine-output ipc:///tmp/$name.out \
  --registry $name --port $port 2>/dev/null &
A=$!
for _ in $(seq 300); do  # ceiling 30 s
  curl -sf http://127.0.0.1:$port/health >/dev/null && break
  sleep 0.1
done
$B bench serve --base-url http://127.0.0.1:$port --num-prompts 20 --random-input-len 16 \
  --random-output-len 16 --max-concurrency 4 >/dev/null 2>&1
T=$(for t in /proc/$A/task/*; do if [[ "$(cat $t/comm)" == http-control ]]; then basename $t; fi; done)
s0=$(awk '{print $1}' /proc/$A/task/$T/schedstat)
python3 - $port $N <<'PY'
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
request = (b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text;"
           b"version=1.0.0\r\nAccept-Encoding: gzip\r\n\r\n")
s = socket.create_connection(("127.0.0.1", port))
def more():
    chunk = s.recv(1 << 16)
    if not chunk:
        raise SystemExit("the server closed the connection")
    return chunk
for _ in range(n):
    s.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        data += more()
    head, _, body = data.partition(b"\r\n\r\n")
    assert b"content-encoding: gzip" in head.lower(), head
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        body += more()
PY
s1=$(awk '{print $1}' /proc/$A/task/$T/schedstat)
echo "http-control CPU per scrape: $(( (s1 - s0) / N / 1000 )) us ($N scrapes)"
