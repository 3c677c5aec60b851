#!/usr/bin/env python3
"""deploy/ stays consistent: every Kubernetes manifest parses and names its
kind, the PrometheusRule carries exactly deploy/prometheus's rules, and every
`sightline` command line in the supervisord, systemd and Kubernetes files is
accepted by the real CLI (checked with its flags, without starting anything)."""
import configparser
import glob
import os
import re
import shlex
import subprocess
import shutil
import sys
import tempfile

import yaml

CLI, SOURCE = sys.argv[1], sys.argv[2]
DEPLOY = os.path.join(SOURCE, "deploy")


def check_cli(args, where):
    # The example model path of the Kubernetes manifest does not exist here.
    args = [a for a in args if not a.startswith("/models/")]
    r = subprocess.run([CLI] + args + ["--dry-run"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, f"{where}: sightline {' '.join(args)}: {r.stderr.strip()}"


commands = []
for path in sorted(glob.glob(os.path.join(DEPLOY, "k8s", "*.yaml"))):
    with open(path) as f:
        for doc in yaml.safe_load_all(f):
            assert doc.get("apiVersion") and doc.get("kind"), path
            if doc["kind"] == "Deployment":
                for c in doc["spec"]["template"]["spec"]["containers"]:
                    commands.append((c["args"], path))
                    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                        assert c[probe]["httpGet"]["path"] == "/health", (path, probe)
r = subprocess.run([sys.executable, os.path.join(DEPLOY, "k8s", "make_prometheusrule.py"), "--check"])
assert r.returncode == 0, "deploy/k8s/prometheusrule.yaml differs from deploy/prometheus"

for path in sorted(glob.glob(os.path.join(DEPLOY, "supervisord", "*.conf"))):
    conf = configparser.ConfigParser(interpolation=None)
    conf.read(path)
    for section in conf.sections():
        if section.startswith("program:"):
            line = conf[section]["command"].replace("%(process_num)d", "0")
            commands.append((shlex.split(line)[1:], f"{path} [{section}]"))
for path in sorted(glob.glob(os.path.join(DEPLOY, "systemd", "*.service"))):
    with open(path) as f:
        text = f.read().replace("\\\n", " ")
    for m in re.finditer(r"^ExecStart=(.*)$", text, re.M):
        commands.append((shlex.split(m.group(1).replace("%i", "0"))[1:], path))

# systemd's own check of the units (unknown keys, bad values), where the
# tool exists: it warns on stderr and exits 0, so any output is a failure.
if shutil.which("systemd-analyze"):
    with tempfile.TemporaryDirectory() as tmp:
        units = []
        for path in sorted(glob.glob(os.path.join(DEPLOY, "systemd", "*"))):
            name = os.path.basename(path).replace("@.service", "@0.service")
            with open(path) as f:
                text = f.read().replace("/usr/local/bin/sightline", os.path.abspath(CLI))
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
            units.append(os.path.join(tmp, name))
        r = subprocess.run(["systemd-analyze", "verify", "--man=no"] + units,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr
else:
    print("systemd-analyze not installed: systemd units not verified")

assert len(commands) >= 6, commands
for args, where in commands:
    check_cli(args, where)
print(f"ok: {len(commands)} command lines accepted")
