#!/usr/bin/env python3
"""A real Prometheus server (the Debian package) scrapes a 3-API-server
`sightline serve` on loopback with deploy/prometheus's rules loaded; after a
short bounded load its HTTP API must answer the dashboard's queries with
sensible, non-empty results and exact counts, every rule must evaluate, and
every panel of deploy/grafana's dashboard must have data (the instance runs
n-gram speculation, so the speculative-decoding panels have drafts to show).
Cleans up every process."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

CLI, SOURCE = sys.argv[1], sys.argv[2]
RULES = os.path.join(SOURCE, "deploy", "prometheus")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def http(url, body=None, timeout=10):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read().decode()


def wait_for(pred, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if pred():
                return
        except Exception:
            pass
        time.sleep(0.2)
    raise AssertionError("timed out waiting for " + what)


def query(prom, expr):
    url = f"http://127.0.0.1:{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    status, body = http(url)
    result = json.loads(body)
    assert result["status"] == "success", body
    return result["data"]["result"]


def main():
    tmp = tempfile.mkdtemp(prefix="sightline-prom-")
    procs = []
    try:
        serve_log = open(os.path.join(tmp, "serve.log"), "w+")
        procs.append(subprocess.Popen(
            [CLI, "serve", "--host", "127.0.0.1", "--port", "0", "--api-server-count", "3",
             "--engine-threads", "1", "--registry", f"promtest{os.getpid()}",
             "--enable-mfu-metrics", "--speculative-config",
             '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1, '
             '"prompt_lookup_max": 4}'],
            stdout=serve_log, stderr=serve_log))
        port = None

        def serving():
            nonlocal port
            with open(serve_log.name) as f:
                m = re.search(r"serving on http://127\.0\.0\.1:(\d+)", f.read())
            port = m and int(m.group(1))
            return port
        wait_for(serving, 60, "sightline serve")

        prom = free_port()
        with open(os.path.join(tmp, "prometheus.yml"), "w") as f:
            f.write(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - {RULES}/recording_rules.yml
  - {RULES}/alert_rules.yml
scrape_configs:
  - job_name: sightline
    static_configs:
      - targets: ["127.0.0.1:{port}"]
""")
        procs.append(subprocess.Popen(
            ["prometheus", "--config.file", os.path.join(tmp, "prometheus.yml"),
             "--storage.tsdb.path", os.path.join(tmp, "data"),
             "--web.listen-address", f"127.0.0.1:{prom}", "--log.level", "warn"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "prom.log"), "w")))
        wait_for(lambda: http(f"http://127.0.0.1:{prom}/-/ready")[0] == 200, 60, "prometheus")
        wait_for(lambda: query(prom, 'up{job="sightline"} == 1'), 30, "the first scrape")

        # Bounded load: 4 clients x 15 requests, prompts sharing a 64-token prefix.
        sent = []

        def client(c):
            for i in range(15):
                body = {"prompt": "x" * 64 + f"client {c} request {i}", "max_tokens": 8,
                        "ignore_eos": True, "temperature": 0}
                status, _ = http(f"http://127.0.0.1:{port}/v1/completions", body)
                sent.append(status)
        threads = [threading.Thread(target=client, args=(c,)) for c in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sent == [200] * 60, sent

        # Counts are exact once a scrape after the load has been taken.
        wait_for(lambda: float(query(prom, 'sum(vllm:request_success_total{finished_reason="length"})')[0]["value"][1]) == 60,
                 20, "exact request count in Prometheus")
        gen = float(query(prom, "sum(vllm:generation_tokens_total)")[0]["value"][1])
        assert gen == 60 * 8, gen

        def one(expr):
            r = query(prom, expr)
            assert len(r) == 1, (expr, r)
            return float(r[0]["value"][1])
        wait_for(lambda: query(prom, "model_name:vllm_time_to_first_token_seconds:p95_5m"), 20,
                 "recording rules")
        hit = one("model_name:vllm_prefix_cache_hit_ratio:rate5m")
        assert 0 < hit <= 1, hit  # the shared prefix is hit
        ttft = one("model_name:vllm_time_to_first_token_seconds:p95_5m")
        assert 0 < ttft < 60, ttft
        itl = one("model_name:vllm_inter_token_latency_seconds:p50_5m")
        assert 0 < itl < 10, itl
        share = one('model_name_finished_reason:vllm_request_success:ratio_rate5m{finished_reason="length"}')
        assert share == 1, share
        assert one("model_name:vllm_generation_tokens:rate5m") > 0
        flops = one("model_name:vllm_estimated_flops_per_gpu:rate5m")
        assert flops > 0, flops  # --enable-mfu-metrics
        assert one("model_name:vllm_estimated_memory_bytes_per_gpu:rate5m") > 0
        assert query(prom, 'ALERTS{alertname=~"SightlineMetricsAbsent|SightlineScrapeFailing"}') == []
        # Every rule evaluates (a rule over absent series records nothing, not an error).
        rules = json.loads(http(f"http://127.0.0.1:{prom}/api/v1/rules")[1])["data"]["groups"]
        bad = [(r["name"], r.get("lastError")) for g in rules for r in g["rules"] if r["health"] == "err"]
        assert not bad, bad
        # The prompts repeat "x": n-gram drafts were proposed and counted.
        drafts = one("sum(vllm:spec_decode_num_drafts_total)")
        assert drafts > 0, drafts
        accepted = one("sum(vllm:spec_decode_num_accepted_tokens_total)")
        per_pos = one("sum(vllm:spec_decode_num_accepted_tokens_per_pos_total)")
        assert per_pos == accepted, (per_pos, accepted)

        # Every dashboard panel's query returns data from this instance.
        with open(os.path.join(SOURCE, "deploy", "grafana", "sightline.json")) as f:
            dashboard = json.load(f)
        # Text variables (the peaks) take their defaults.
        defaults = {v["name"]: v["query"] for v in dashboard["templating"]["list"]
                    if v["type"] in ("textbox", "constant")}
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                expr = (target["expr"].replace("$__rate_interval", "1m")
                        .replace('"$job"', '".*"').replace('"$model_name"', '".*"'))
                for name, value in defaults.items():
                    expr = expr.replace("$" + name, value)
                # Series born during the load (per-status HTTP counters) need
                # a second sample before rate() has a value.
                wait_for(lambda: query(prom, expr), 10, f"data for panel '{panel['title']}': {expr}")
        print(f"ok: 60 requests counted exactly; prefix hit ratio {hit:.2f}, TTFT p95 {ttft * 1e3:.1f} ms, "
              f"ITL p50 {itl * 1e3:.2f} ms, estimated {flops / 1e9:.3f} GFLOP/s per GPU, "
              f"{drafts:.0f} drafts, {accepted:.0f} draft tokens accepted")
    finally:
        for p in reversed(procs):
            p.send_signal(signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
