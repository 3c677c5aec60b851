#!/usr/bin/python3
"""The oracle side of oracle_test.cc: the same scenario in Python's
prometheus_client multiprocess mode, its aggregated page on stdout.

Two writer "processes" (pids 123 and 456) are simulated the way
prometheus_client's own tests do (MultiProcessValue with a pid function);
then 123 is marked dead. The C++ side replays it with real processes.
"""
import os
import re
import shutil
import sys
import tempfile

tmp = tempfile.mkdtemp(prefix="oracle-")
os.environ["PROMETHEUS_MULTIPROC_DIR"] = tmp
try:
    from prometheus_client import (CollectorRegistry, Counter, Gauge, Histogram, Summary,
                                   generate_latest, multiprocess, values)
    from prometheus_client.utils import floatToGoString
except ImportError:
    sys.exit(77)  # skip: no prometheus_client here

pid = {"value": 123}
values.ValueClass = values.MultiProcessValue(lambda: pid["value"])

HELP = 'Help with a backslash \\ and a\nnewline and "quotes".'
BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0]
MODES = ["all", "liveall", "min", "livemin", "max", "livemax", "sum", "livesum"]

try:
    c = Counter("c", HELP, ["a"], registry=None)
    h = Histogram("h", "Histogram.", ["a"], buckets=BUCKETS, registry=None)
    s = Summary("s", "Summary.", registry=None)
    gauges = {m: Gauge("g_" + m, "Gauge " + m + ".", ["k"], multiprocess_mode=m, registry=None)
              for m in MODES}

    def process_one():  # pid 123
        c.labels(a="x").inc(1)
        c.labels(a='y"\\\né✓').inc(0.5)
        h.labels(a="x").observe(1)
        h.labels(a="x").observe(0.1 + 0.2)
        s.observe(1)
        for g in gauges.values():
            g.labels(k="v").set(1.5)

    def process_two():  # pid 456
        c.labels(a="x").inc(2)
        h.labels(a="x").observe(5)
        h.labels(a="x").observe(1e6)
        h.labels(a="x").observe(3e10)  # a _sum with a two-digit exponent
        s.observe(2.25)
        for g in gauges.values():
            g.labels(k="v").set(-2)

    process_one()
    pid["value"] = 456
    process_two()
    multiprocess.mark_process_dead(123)

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    page = generate_latest(registry).decode("utf-8")
    if floatToGoString(1e10) == "1e+010":
        # Releases before client_python #1190 pad a two-digit exponent with a
        # zero; Go, and client_python since then, write 1e+10.
        page = re.sub(r"e\+0(\d\d)\b", r"e+\1", page)
    sys.stdout.write(page)
finally:
    shutil.rmtree(tmp, ignore_errors=True)
