"""The deploy files (deploy/): the Kubernetes manifests pass kubernetes-validate
(the API's schemas, offline, strict), agree with each other and with the
server's flags and defaults; the ConfigMap's shoal.yaml is the image's and a
real `shoal server` accepts it, started by the image's entry point; the
Dockerfile (which cannot be built here: no Docker daemon) is linted for the
binary path, ports, volume and entry point."""

import json
import os
import random
import re
import signal
import socket
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml

from shoal_harness import SHOAL_BIN, VENV_BIN, free_port, wait_until

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
VALIDATOR = VENV_BIN / "kubernetes-validate"


def manifests():
    """{(kind, name): document} over every file in deploy/k8s."""
    docs = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                docs[(doc["kind"], doc["metadata"]["name"])] = doc
    return docs


def validate(paths):
    if not VALIDATOR.exists():
        pytest.fail(f"{VALIDATOR} missing: scripts/setup.sh installs kubernetes-validate into the venv")
    return subprocess.run([str(VALIDATOR), "--strict", *map(str, paths)], capture_output=True, text=True,
                          timeout=120)


def config_yaml():
    return yaml.safe_load((DEPLOY / "shoal.yaml").read_text())


def server_help():
    return subprocess.run([SHOAL_BIN, "server", "--help"], capture_output=True, text=True, timeout=30).stdout


# ---------------------------------------------------------------- Kubernetes


def test_every_manifest_passes_kubernetes_validate():
    paths = sorted(K8S.glob("*.yaml"))
    assert {p.name for p in paths} >= {"configmap.yaml", "services.yaml", "statefulset.yaml", "pdb.yaml"}
    proc = validate(paths)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    resources = len(manifests())
    assert proc.stdout.count(" passed ") == resources, proc.stdout


def test_kubernetes_validate_catches_a_broken_manifest(tmp_path):
    # The validator can fail: a wrong type and an unknown field in a copy of the StatefulSet.
    text = (K8S / "statefulset.yaml").read_text()
    for broken in [text.replace("replicas: 3", "replicas: three"),
                   text.replace("serviceName: shoal", "serviceName: shoal\n  replica: 3")]:
        assert broken != text
        path = tmp_path / "broken.yaml"
        path.write_text(broken)
        proc = validate([path])
        assert proc.returncode != 0, proc.stdout


def test_manifests_agree_with_each_other_and_the_config():
    docs = manifests()
    sts = docs[("StatefulSet", "shoal")]
    spec = sts["spec"]
    pod = spec["template"]["spec"]
    labels = spec["template"]["metadata"]["labels"]
    assert spec["replicas"] == 3
    assert spec["selector"]["matchLabels"].items() <= labels.items()

    headless = docs[("Service", spec["serviceName"])]
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    client = docs[("Service", "shoal-client")]
    for svc in (headless, client):
        assert svc["spec"]["selector"].items() <= labels.items()

    pdb = docs[("PodDisruptionBudget", "shoal")]
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()

    # The ConfigMap holds the image's shoal.yaml, mounted where the entry point reads it.
    cm = docs[("ConfigMap", "shoal-config")]
    assert cm["data"]["shoal.yaml"] == (DEPLOY / "shoal.yaml").read_text()
    config = yaml.safe_load(cm["data"]["shoal.yaml"])
    [container] = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["SHOAL_LISTEN_ADDRESS"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    [config_volume] = [v for v in pod["volumes"] if v["name"] == "config"]
    assert config_volume["configMap"]["name"] == "shoal-config"
    assert env["SHOAL_CONFIG"]["value"] == f"{mounts['config']}/shoal.yaml"

    # Data on the claim template's volume.
    [claim] = spec["volumeClaimTemplates"]
    [data_dir] = config["data_file_directories"]
    assert Path(data_dir).is_relative_to(mounts[claim["metadata"]["name"]])

    # Ports: the container's named ports are the config's, the probes use them.
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["native"] == config["native_transport_port"]
    assert ports["internode"] == config["storage_port"]
    assert ports["admin"] == config["admin_port"]
    assert ports["metrics"] == config["prometheus_port"]
    annotations = spec["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(config["prometheus_port"])
    assert container["readinessProbe"]["tcpSocket"]["port"] == "native"
    assert container["livenessProbe"]["httpGet"]["port"] == "admin"
    assert container["livenessProbe"]["httpGet"]["path"] == "/v1/info"
    for svc in (headless, client):
        for p in svc["spec"]["ports"]:
            assert p["targetPort"] in ports and p["port"] == ports[p["targetPort"]], p

    # Seeds: the first pods' names under the headless Service.
    seeds = config["seed_provider"][0]["parameters"][0]["seeds"].split(",")
    assert seeds == [f"{sts['metadata']['name']}-{i}.{spec['serviceName']}" for i in range(len(seeds))]
    assert 1 <= len(seeds) < spec["replicas"]
    # Nothing in the config names an address: the pod IP comes from the entry point.
    assert "listen_address" not in config and "rpc_address" not in config


# ---------------------------------------------------------------- Dockerfile


def dockerfile_instructions():
    """(INSTRUCTION, arguments) with continuations joined and comments dropped."""
    out, pending = [], ""
    for line in (DEPLOY / "Dockerfile").read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, "Dockerfile ends inside a continued line"
    return out


def test_dockerfile_is_consistent_with_the_server():
    known = {"FROM", "RUN", "COPY", "WORKDIR", "USER", "VOLUME", "EXPOSE", "ENTRYPOINT", "CMD", "ENV", "ARG", "LABEL"}
    ins = dockerfile_instructions()
    assert all(word in known for word, _ in ins), [w for w, _ in ins if w not in known]
    stages = [rest for word, rest in ins if word == "FROM"]
    assert len(stages) == 2
    assert re.fullmatch(r"rust:[0-9.]+-(\w+) AS build", stages[0]), stages[0]
    debian = re.fullmatch(r"rust:[0-9.]+-(\w+) AS build", stages[0]).group(1)
    assert stages[1] == f"debian:{debian}-slim", "run on the build's Debian release, slim"
    runtime = ins[[i for i, (w, _) in enumerate(ins) if w == "FROM"][1]:]

    # The binary cargo builds lands where the entry point runs it.
    build_runs = " ".join(rest for word, rest in ins[:len(ins) - len(runtime)] if word == "RUN")
    assert "cargo build --release --locked -p shoal" in build_runs
    assert "target/release/shoal /usr/local/bin/shoal" in build_runs
    copies = [rest.split() for word, rest in runtime if word == "COPY"]
    assert ["--from=build", "/usr/local/bin/shoal", "/usr/local/bin/shoal"] in copies
    for src, dst in [(c[0], c[1]) for c in copies if not c[0].startswith("--")]:
        assert (ROOT / src).is_file(), src
    entrypoint = json.loads(dict(runtime)["ENTRYPOINT"])
    assert entrypoint == ["/usr/local/bin/docker-entrypoint.sh"]
    assert ["deploy/docker-entrypoint.sh", entrypoint[0]] in copies
    assert ["deploy/shoal.yaml", "/etc/shoal/shoal.yaml"] in copies
    script = (DEPLOY / "docker-entrypoint.sh").read_text()
    assert os.access(DEPLOY / "docker-entrypoint.sh", os.X_OK)
    assert '"${SHOAL_BIN:-/usr/local/bin/shoal}" server' in script
    assert "/etc/shoal/shoal.yaml" in script

    # Every flag the entry point and the manifests pass exists.
    help_text = server_help()
    for flag in set(re.findall(r"(--[a-z-]+)", script)):
        assert flag in help_text, flag

    # Ports: the config's, the metrics port; the volume: the data directory's.
    config = config_yaml()
    exposed = {int(p) for word, rest in runtime if word == "EXPOSE" for p in rest.split()}
    assert exposed == {config["native_transport_port"], config["storage_port"], config["admin_port"],
                       config["prometheus_port"]}
    [volume] = [rest for word, rest in runtime if word == "VOLUME"]
    [data_dir] = config["data_file_directories"]
    assert Path(data_dir).is_relative_to(volume)
    assert dict(runtime)["USER"] == "shoal"
    # The pod runs as the image's user.
    uid = re.search(r"useradd [^&]*--uid (\d+)", " ".join(rest for w, rest in runtime if w == "RUN")).group(1)
    pod = manifests()[("StatefulSet", "shoal")]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == int(uid) == pod["securityContext"]["fsGroup"]
    # hadolint's rules that apply here: apt without recommends and its lists removed in the same layer.
    for word, rest in ins:
        if word == "RUN" and "apt-get install" in rest:
            assert "--no-install-recommends" in rest and "rm -rf /var/lib/apt/lists/*" in rest, rest
    # The build context leaves the build outputs out.
    ignored = (DEPLOY / "Dockerfile.dockerignore").read_text().split()
    assert "target" in ignored and ".git" in ignored


# ---------------------------------------------------------------- the server reads the config


def test_the_server_accepts_the_configmap_config(tmp_path):
    """The ConfigMap's shoal.yaml, started as the pod would start it (the image's entry point,
    SHOAL_LISTEN_ADDRESS for the pod IP) with a loopback address and free ports for this
    machine; the seeds' names do not resolve here and are left out, so the node starts alone."""
    cm = manifests()[("ConfigMap", "shoal-config")]
    (tmp_path / "shoal.yaml").write_text(cm["data"]["shoal.yaml"])
    config = yaml.safe_load(cm["data"]["shoal.yaml"])
    storage_port = config["storage_port"]
    # storage_port comes from the file (no flag): an address of 127/8 where it is free.
    for _ in range(50):
        address = f"127.0.{random.randint(100, 250)}.{random.randint(2, 250)}"
        with socket.socket() as s:
            try:
                s.bind((address, storage_port))
                break
            except OSError:
                continue
    else:
        pytest.fail(f"no loopback address with port {storage_port} free")
    native, admin = free_port(address), free_port(address)
    env = dict(os.environ, SHOAL_BIN=SHOAL_BIN, SHOAL_CONFIG=str(tmp_path / "shoal.yaml"),
               SHOAL_LISTEN_ADDRESS=address)
    log = open(tmp_path / "node.log", "w")
    proc = subprocess.Popen(
        [str(DEPLOY / "docker-entrypoint.sh"), "--data-dir", str(tmp_path / "data"),
         "--native-port", str(native), "--admin-port", str(admin)],
        env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    try:
        def info():
            assert proc.poll() is None, f"the server exited with {proc.returncode}:\n{(tmp_path / 'node.log').read_text()}"
            try:
                with urllib.request.urlopen(f"http://{address}:{admin}/v1/info", timeout=2) as r:
                    return json.load(r)
            except OSError:
                return None

        got = wait_until(info, 60, interval=0.3, what="the admin API")
        assert got["cluster_name"] == config["cluster_name"]
        assert got["address"] == address
        assert got["data_center"] == config["dc"] and got["rack"] == config["rack"]
        assert len(got["tokens"]) == config["num_tokens"]
        wait_until(lambda: info()["status"] == "NORMAL", 60, interval=0.3, what="NORMAL")
        with socket.create_connection((address, native), timeout=5):
            pass
        with urllib.request.urlopen(f"http://{address}:{admin}/v1/describecluster", timeout=5) as r:
            assert json.load(r)["snitch"].endswith(config["endpoint_snitch"])
        text = (tmp_path / "node.log").read_text()
        assert "shoal-0.shoal" in text, "the seeds' names were not looked up"
        # Prometheus on the config's port (the pod's metrics port), the metrics the Grafana dashboard
        # reads, once a client wrote and read a table.
        from cassandra.cluster import Cluster
        cluster = Cluster([address], port=native, protocol_version=4)
        try:
            session = cluster.connect()
            session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
            session.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v int)")
            for k in range(10):
                session.execute("INSERT INTO ks.t (k, v) VALUES (%s, %s)", (k, k))
            assert len(list(session.execute("SELECT * FROM ks.t"))) == 10
            assert session.execute("SELECT v FROM ks.t WHERE k = 3").one().v == 3
        finally:
            cluster.shutdown()
        with urllib.request.urlopen(f"http://{address}:{config['prometheus_port']}/metrics", timeout=5) as r:
            served = set(re.findall(r"^# TYPE (\S+) ", r.read().decode(), re.M))
        on_dashboard = {m for m in METRICS if m in "\n".join(grafana_queries(grafana_dashboard()))}
        assert on_dashboard - NOT_YET_SERVED <= served, on_dashboard - NOT_YET_SERVED - served
        # When one of these lands, it moves out of NOT_YET_SERVED.
        assert not NOT_YET_SERVED & served, NOT_YET_SERVED & served
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
    assert proc.returncode == 0, (tmp_path / "node.log").read_text()


# ---------------------------------------------------------------- Grafana

# The metrics each node serves on http://<node>:9180/metrics: name -> (type, labels).
METRICS = {
    "shoal_client_request_latency_seconds": ("histogram", {"op", "cl"}),
    "shoal_client_request_timeouts_total": ("counter", {"op", "cl"}),
    "shoal_client_request_unavailables_total": ("counter", {"op", "cl"}),
    "shoal_client_request_failures_total": ("counter", {"op", "cl"}),
    "shoal_table_read_latency_seconds": ("histogram", {"keyspace", "table"}),
    "shoal_table_write_latency_seconds": ("histogram", {"keyspace", "table"}),
    "shoal_table_live_sstables": ("gauge", {"keyspace", "table"}),
    "shoal_table_live_disk_space_used_bytes": ("gauge", {"keyspace", "table"}),
    "shoal_table_pending_compactions": ("gauge", {"keyspace", "table"}),
    "shoal_pending_compactions": ("gauge", set()),
    "shoal_thread_pool_active_tasks": ("gauge", {"pool"}),
    "shoal_thread_pool_pending_tasks": ("gauge", {"pool"}),
    "shoal_dropped_messages_total": ("counter", {"verb"}),
    "shoal_hints_pending": ("gauge", set()),
    "shoal_hints_stored_total": ("counter", set()),
    "shoal_hints_replayed_total": ("counter", set()),
    "shoal_connected_native_clients": ("gauge", set()),
    "shoal_commitlog_total_size_bytes": ("gauge", set()),
    "shoal_memory_rss_bytes": ("gauge", set()),
}
# In the metric list the dashboard was written against, but not served by the nodes yet (the
# server test checks both ways: a metric that lands must leave this set).
NOT_YET_SERVED = set()
# Labels Prometheus adds to every scraped series.
TARGET_LABELS = {"instance", "job"}
PROMQL_WORDS = {
    "sum", "avg", "min", "max", "count", "topk", "bottomk", "by", "without", "rate", "irate", "increase",
    "histogram_quantile", "label_values", "delta", "deriv", "abs", "clamp_min", "clamp_max", "and", "or",
    "unless", "on", "ignoring", "group_left", "group_right", "offset",
}


def series_labels(name):
    """The labels of a series name the dashboard may use (a histogram's _bucket, _count, _sum)."""
    if name in METRICS and METRICS[name][0] != "histogram":
        return METRICS[name][1]
    for suffix, extra in (("_bucket", {"le"}), ("_count", set()), ("_sum", set())):
        base = name[: -len(suffix)]
        if name.endswith(suffix) and METRICS.get(base, ("", None))[0] == "histogram":
            return METRICS[base][1] | extra
    return None


def promql_problems(expr):
    """What in `expr` names something the nodes do not serve (empty when all is known)."""
    problems = []
    used = set()
    for name, matchers in re.findall(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*\{([^}]*)\}", expr):
        labels = series_labels(name)
        if labels is None:
            continue  # reported below as an unknown word
        for label in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", matchers):
            if label not in labels | TARGET_LABELS:
                problems.append(f"{name} has no label {label}")
    rest = re.sub(r'"(?:[^"\\]|\\.)*"', " ", expr)
    rest = re.sub(r"\{[^}]*\}", " ", rest)
    rest = re.sub(r"\[[^\]]*\]", " ", rest)
    for word in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", rest):
        if series_labels(word) is not None:
            used.add(word)
    allowed_grouping = set().union(*[series_labels(w) for w in used] or [set()]) | TARGET_LABELS
    for labels in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", rest):
        for label in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", labels):
            if label not in allowed_grouping:
                problems.append(f"grouping by {label}, which no metric of the expression has")
    rest = re.sub(r"\b(?:by|without)\s*\([^)]*\)", " ", rest)
    rest = re.sub(r"label_values\(\s*[A-Za-z_:][A-Za-z0-9_:]*\s*,\s*([A-Za-z_]+)\s*\)",
                  lambda m: " " if m.group(1) in TARGET_LABELS else " unknown_label ", rest)
    for word in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", rest):
        if word not in PROMQL_WORDS and series_labels(word) is None:
            problems.append(f"unknown metric or function {word}")
    if not used and "label_values" not in expr:
        problems.append("names no metric")
    return problems


def grafana_queries(dashboard):
    exprs = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            exprs.append(target["expr"])
        for inner in panel.get("panels", []):
            exprs.extend(t["expr"] for t in inner.get("targets", []))
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            exprs.append(var["query"]["query"] if isinstance(var["query"], dict) else var["query"])
    return exprs


def test_the_promql_checker_can_fail():
    assert promql_problems('sum(rate(shoal_client_request_latency_seconds_count{op="write"}[1m]))') == []
    assert promql_problems('shoal_memory_rss_bytes') == []
    for bad in ['node_memory_MemTotal_bytes', 'rate(shoal_client_request_latency_seconds[1m])',
                'shoal_hints_pending{verb="x"}', 'sum by (keyspace) (shoal_pending_compactions)',
                'shoal_table_live_sstables_count', 'label_values(shoal_memory_rss_bytes, pod)']:
        assert promql_problems(bad), bad


def grafana_dashboard():
    return json.loads((DEPLOY / "grafana" / "shoal.json").read_text())


def test_grafana_dashboard_uses_only_the_nodes_metrics():
    dashboard = grafana_dashboard()
    exprs = grafana_queries(dashboard)
    assert len(exprs) >= 20
    for expr in exprs:
        assert promql_problems(expr) == [], expr
    text = "\n".join(exprs)
    # The panels the dashboard is for.
    assert "rate(shoal_client_request_latency_seconds_count" in text
    assert "histogram_quantile(0.99, sum by (le, op) (rate(shoal_client_request_latency_seconds_bucket" in text
    for metric in ["shoal_client_request_timeouts_total", "shoal_client_request_unavailables_total",
                   "shoal_pending_compactions", "shoal_hints_pending", "shoal_table_live_disk_space_used_bytes",
                   "shoal_memory_rss_bytes"]:
        assert metric in text, metric
    # Every metric of the list is on some panel.
    assert {m for m in METRICS if m in text} == set(METRICS)
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for p in dashboard["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24, p["title"]
