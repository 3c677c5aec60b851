#!/usr/bin/env python3
"""deploy/ stays consistent: every Kubernetes manifest parses and names its
kind, the PrometheusRule carries exactly deploy/prometheus's rules, and every
`sightline` command line in the supervisord, systemd and Kubernetes files is
accepted by the real CLI (checked with its flags, without starting anything),
and the llm-d example (k8s/llm-d) agrees with itself: the KV-events config of
the pods, the InferencePool, the endpoint picker's config and the Helm values
name the same ports, labels, model and block size."""
import configparser
import glob
import json
import os
import re
import shlex
import subprocess
import shutil
import sys
import tempfile
import urllib.parse

import yaml

CLI, SOURCE = sys.argv[1], sys.argv[2]
DEPLOY = os.path.join(SOURCE, "deploy")


def check_cli(args, where):
    # The example model path of the Kubernetes manifest does not exist here.
    args = [a for a in args if not a.startswith("/models/")]
    r = subprocess.run([CLI] + args + ["--dry-run"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, f"{where}: sightline {' '.join(args)}: {r.stderr.strip()}"


def expand_env(args, container):
    """Kubernetes' $(NAME) expansion of a container's args from its env: a
    literal value, or the pod IP (an example address) for status.podIP."""
    env = {}
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = str(e["value"])
        elif e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "status.podIP":
            env[e["name"]] = "10.1.2.3"
    return [re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                   lambda m: env.get(m.group(1), m.group(0)), a) for a in args]


LLMD = os.path.join(DEPLOY, "k8s", "llm-d")
LLMD_VALUES = os.path.join(LLMD, "epp-values.yaml")  # Helm values, not a manifest

commands = []
docs = {}  # path -> parsed documents
for path in sorted(glob.glob(os.path.join(DEPLOY, "k8s", "*.yaml"))
                   + glob.glob(os.path.join(LLMD, "*.yaml"))):
    if path == LLMD_VALUES:
        continue
    with open(path) as f:
        docs[path] = [d for d in yaml.safe_load_all(f) if d is not None]
    for doc in docs[path]:
        assert doc.get("apiVersion") and doc.get("kind"), path
        if doc["kind"] == "Deployment":
            for c in doc["spec"]["template"]["spec"]["containers"]:
                commands.append((expand_env(c["args"], c), path))
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

# --- The llm-d example: every piece names the same ports, labels and model. ---
def one(path, kind):
    found = [d for d in docs[path] if d["kind"] == kind]
    assert len(found) == 1, f"{path}: expected one {kind}, found {len(found)}"
    return found[0]


def flag(args, name):
    """The value of --name=V or --name V, the last one given; None if absent."""
    value = None
    for i, a in enumerate(args):
        if a.startswith(name + "="):
            value = a[len(name) + 1:]
        elif a == name:
            assert i + 1 < len(args), f"{name} without a value"
            value = args[i + 1]
    return value


def port_of(endpoint, where):
    m = re.fullmatch(r"tcp://[^:/]+:(\d+)", endpoint or "")
    assert m, f"{where}: {endpoint!r} is not tcp://host:port"
    return int(m.group(1))


def selects(selector, labels, where):
    assert selector, f"{where}: empty selector"
    for k, v in selector.items():
        assert labels.get(k) == v, f"{where}: selects {k}={v!r}, the pods have {labels.get(k)!r}"


p_deploy = os.path.join(LLMD, "sightline.yaml")
p_pool = os.path.join(LLMD, "inferencepool.yaml")
p_epp = os.path.join(LLMD, "epp-config.yaml")

deploy = one(p_deploy, "Deployment")
pod_labels = deploy["spec"]["template"]["metadata"]["labels"]
selects(deploy["spec"]["selector"]["matchLabels"], pod_labels, p_deploy)
(container,) = [c for c in deploy["spec"]["template"]["spec"]["containers"]
                if c["args"] and c["args"][0] == "serve"]
ports = {p["name"]: p["containerPort"] for p in container["ports"]}
http_port = ports["http"]
args = container["args"]
assert int(flag(args, "--port")) == http_port, f"{p_deploy}: --port is not the http port"

# The pod's own IP comes from the downward API; the model name is the one served.
env = {e["name"]: e for e in container["env"]}
assert env.get("POD_IP", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") \
    == "status.podIP", f"{p_deploy}: POD_IP is not the downward API's status.podIP"
expanded = expand_env(args, container)
model = flag(expanded, "--served-model-name")
assert model and "$(" not in model, f"{p_deploy}: --served-model-name unset or not expanded"
assert flag(args, "--no-enable-prefix-caching") is None and "--no-enable-prefix-caching" not in args
block_size = int(flag(expanded, "--block-size") or 16)

raw_events = flag(args, "--kv-events-config")
assert raw_events, f"{p_deploy}: no --kv-events-config"
events = json.loads(raw_events)
assert events.get("enable_kv_cache_events") is True, f"{p_deploy}: enable_kv_cache_events is not true"
assert events.get("publisher", "zmq") == "zmq", p_deploy
assert events["endpoint"].startswith("tcp://*:"), f"{p_deploy}: the EPP dials the pod: bind with *"
events_port = port_of(events["endpoint"], p_deploy)
assert events_port in ports.values(), f"{p_deploy}: events port {events_port} is not a container port"
replay_port = port_of(events["replay_endpoint"], p_deploy) if events.get("replay_endpoint") else None
assert replay_port is None or replay_port in ports.values(), \
    f"{p_deploy}: replay port {replay_port} is not a container port"
m = re.fullmatch(r"kv@\$\(POD_IP\)@(.+)", events.get("topic", ""))
assert m, f"{p_deploy}: topic {events.get('topic')!r} is not kv@$(POD_IP)@<model>"
topic_model = expand_env([m.group(1)], container)[0]
assert topic_model == model, f"{p_deploy}: the topic's model {topic_model!r} is not {model!r}"

# The InferencePool routes to these pods on their HTTP port.
pool = one(p_pool, "InferencePool")
assert pool["apiVersion"] == "inference.networking.k8s.io/v1", p_pool
selects(pool["spec"]["selector"]["matchLabels"], pod_labels, p_pool)
pool_ports = [t["number"] for t in pool["spec"]["targetPorts"]]
assert pool_ports == [http_port], f"{p_pool}: targetPorts {pool_ports}, the pods serve on {http_port}"

# The endpoint picker's config.
cm = one(p_epp, "ConfigMap")
(cfg_name, cfg_text), = cm["data"].items()
cfg = yaml.safe_load(cfg_text)
assert cfg["kind"] == "EndpointPickerConfig", p_epp
plugins = {}
for pl in cfg["plugins"]:
    name = pl.get("name", pl["type"])
    assert name not in plugins, f"{p_epp}: plugin {name} twice"
    plugins[name] = pl
refs = [r["pluginRef"] for prof in cfg["schedulingProfiles"] for r in prof["plugins"]]
for src in cfg.get("dataLayer", {}).get("sources", []):
    refs += [src["pluginRef"]] + [e["pluginRef"] for e in src.get("extractors", [])]
for r in refs:
    assert r in plugins, f"{p_epp}: pluginRef {r} names no plugin"
by_type = {}
for name, pl in plugins.items():
    by_type.setdefault(pl["type"], []).append(name)
for t in ("precise-prefix-cache-producer", "prefix-cache-scorer", "queue-scorer",
          "kv-cache-utilization-scorer", "max-score-picker", "token-producer"):
    assert t in by_type, f"{p_epp}: no {t} plugin"
(producer_name,) = by_type["precise-prefix-cache-producer"]
producer = plugins[producer_name].get("parameters", {})
profile_refs = {r["pluginRef"] for prof in cfg["schedulingProfiles"] for r in prof["plugins"]}
scorers = [n for n in by_type["prefix-cache-scorer"]
           if plugins[n].get("parameters", {}).get("prefixMatchInfoProducerName") == producer_name]
assert scorers and set(scorers) & profile_refs, \
    f"{p_epp}: no scheduled prefix-cache-scorer reads {producer_name} (precise scoring)"
for t in ("queue-scorer", "kv-cache-utilization-scorer", "max-score-picker"):
    assert set(by_type[t]) & profile_refs, f"{p_epp}: {t} is in no scheduling profile"
assert any(producer_name in [e["pluginRef"] for e in s.get("extractors", [])]
           and plugins[s["pluginRef"]]["type"] == "endpoint-notification-source"
           for s in cfg["dataLayer"]["sources"]), \
    f"{p_epp}: {producer_name} gets no endpoint notifications (no per-pod subscribers)"
kv = producer["kvEventsConfig"]
assert kv.get("discoverPods") is True and not kv.get("zmqEndpoint"), \
    f"{p_epp}: the EPP must dial each pod (discoverPods, no zmqEndpoint)"
assert events["topic"].startswith(kv.get("topicFilter", "kv@")), f"{p_epp}: topicFilter misses the topic"
disc = kv["podDiscoveryConfig"]
assert disc["socketPort"] == events_port, \
    f"{p_epp}: socketPort {disc['socketPort']}, the pods publish on {events_port}"
assert disc.get("replaySocketPort") == replay_port, \
    f"{p_epp}: replaySocketPort {disc.get('replaySocketPort')}, the pods replay on {replay_port}"
tp = producer.get("tokenProcessorConfig", {})
assert tp.get("blockSizeTokens", tp.get("blockSize")) == block_size, \
    f"{p_epp}: blockSizeTokens is not --block-size {block_size}"
(tok_name,) = by_type["token-producer"]
tok = plugins[tok_name]["parameters"]
assert tok["modelName"] == model, f"{p_epp}: token-producer modelName {tok['modelName']!r} is not {model!r}"
# Its render endpoint is a Service (of deploy/k8s) on the pods' HTTP port.
url = urllib.parse.urlsplit(tok["vllm"]["url"])
svc_name = url.hostname.split(".")[0]
services = [d for ds in docs.values() for d in ds
            if d["kind"] == "Service" and d["metadata"]["name"] == svc_name]
assert len(services) == 1, f"{p_epp}: no Service {svc_name} in deploy/k8s for {url.geturl()}"
svc = services[0]
selects(svc["spec"]["selector"], pod_labels, f"Service {svc_name}")
svc_ports = [p for p in svc["spec"]["ports"] if p["port"] == (url.port or 80)]
assert len(svc_ports) == 1, f"{p_epp}: Service {svc_name} has no port {url.port or 80} ({url.geturl()})"
svc_port = svc_ports[0]
assert svc_port.get("targetPort", svc_port["port"]) in ("http", http_port), \
    f"Service {svc_name}: port {svc_port['port']} does not reach the pods' HTTP port"

# The Helm values carry the same pool and, verbatim, the same config.
with open(LLMD_VALUES) as f:
    values = yaml.safe_load(f)["router"]
assert values["modelServers"]["matchLabels"] == pool["spec"]["selector"]["matchLabels"], LLMD_VALUES
assert [t["number"] for t in values["modelServers"]["targetPorts"]] == pool_ports, LLMD_VALUES
assert values["epp"]["pluginsCustomConfig"][values["epp"]["pluginsConfigFile"]] == cfg_text, \
    f"{LLMD_VALUES}: the EPP config differs from {p_epp}"
print(f"ok: llm-d example consistent (model {model}, events :{events_port}, replay :{replay_port})")

assert len(commands) >= 6, commands
for args, where in commands:
    check_cli(args, where)
print(f"ok: {len(commands)} command lines accepted")
