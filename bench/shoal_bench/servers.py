"""The servers under test: a Shoal node (`shoal server`) or 3-node cluster (`shoal cluster up`), a
Cassandra node (scripts/cassandra/start.sh in a private CASS_HOME) or cluster (bench/cassandra-cluster.sh).
Each start() records what it started before waiting, so stop() always cleans up.

Each server can also `flush()` and report its background work (`compaction_status()`: pending tasks and
running compactions, summed over nodes; Shoal through `shoal tool compactionstats --json`, Cassandra
through `nodetool compactionstats`), which `settle.settle` polls after a write phase. A Cassandra node or
cluster runs one of the configurations of `cassconf` (template or latest).

`RUNNING` is the one registry of servers started and not yet stopped: `serve` adds and removes
them, and `stop_all` (the exit and signal path in cli) stops whatever is left."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

from . import cassconf
from .proc import alive, proc_cpu_s
from .security import CASSANDRA_SCRIPTS
from .settle import pending_from_nodetool, pending_from_shoal
from .util import (BENCH_HOME, CASS_INSTALL, CASS_REF, HERE, SHOAL_BIN, Fail, free_port, log, port_open,
                   read_text, sh, wait_port)


def server_cpu_s(server):
    """utime+stime of all the server's processes, in seconds."""
    return sum(c or 0 for c in map(proc_cpu_s, server.pids))


def shoal_tool(host, admin_port, *args, timeout=600):
    return sh([SHOAL_BIN, "tool", "-h", host, "-p", str(admin_port)] + list(args), timeout=timeout)


def sum_status(statuses):
    """(pending, running) summed over nodes."""
    statuses = list(statuses)
    return sum(p for p, _ in statuses), sum(r for _, r in statuses)


def nodetool(jmx_port, conf_dir, *args, timeout=120):
    """nodetool against 127.0.0.1:jmx_port (the install's jars, as bench/cassandra-cluster.sh runs it)."""
    opts = [ln.strip() for ln in read_text(os.path.join(CASS_REF, "jvm17.options")).splitlines()
            if ln.startswith("--add") or ln.startswith("-Djdk")]
    cmd = (["java"] + opts + ["-Xmx256m", f"-Dlogback.configurationFile={conf_dir}/logback.xml",
                              f"-Dcassandra.logdir={BENCH_HOME}/nodetool-logs",
                              "-cp", f"{conf_dir}:{CASS_INSTALL}/lib/*", "org.apache.cassandra.tools.NodeTool",
                              "-h", "127.0.0.1", "-p", str(jmx_port)] + list(args))
    return sh(cmd, timeout=timeout)

SHOAL_YAML = """# bench/compare: Shoal with Cassandra's settings where they matter (start.sh's template)
cluster_name: bench
num_tokens: 16
{commitlog}
storage_port: {storage_port}
"""
PERIODIC = "commitlog_sync: periodic\ncommitlog_sync_period: 10000ms"  # the default, as Cassandra's


def cassandra_installed():
    version = read_text(os.path.join(CASS_INSTALL, "VERSION")).strip() or "5.0.9"
    return os.path.isfile(os.path.join(CASS_INSTALL, "lib", f"cassandra-all-{version}.jar")), version


class ShoalNode:
    system, label = "shoal", "Shoal"

    def __init__(self, out, commitlog=PERIODIC, keep_rocksdb_log=False, security=None):
        self.dir = None  # a fresh directory per start: concurrent invocations never share one
        self.out, self.proc, self.port = out, None, free_port()
        self.nodes, self.pids = ["127.0.0.1"], []
        self.commitlog = commitlog  # the YAML lines of the commit log's sync mode
        self.keep_rocksdb_log = keep_rocksdb_log  # copy RocksDB's LOG files into `out` before the data goes
        self.security = security  # --auth/--tls (security.Security), or None

    @property
    def data_root(self):
        return os.path.join(self.dir, "data") if self.dir else None

    def start(self):
        os.makedirs(BENCH_HOME, exist_ok=True)  # a fresh machine has no cache yet
        self.dir = tempfile.mkdtemp(prefix="shoal.", dir=BENCH_HOME)
        cfg = os.path.join(self.dir, "shoal.yaml")
        with open(cfg, "w") as f:
            f.write(SHOAL_YAML.format(storage_port=free_port(), commitlog=self.commitlog))
            if self.security:
                f.write(self.security.shoal_yaml())
        self.admin_port = free_port()
        self.cmd = [SHOAL_BIN, "server", "--config", cfg, "--data-dir", os.path.join(self.dir, "data"),
                    "--native-port", str(self.port), "--admin-port", str(self.admin_port)]
        logf = open(os.path.join(self.out, "shoal-server.log"), "a")
        self.proc = subprocess.Popen(self.cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        logf.close()
        wait_port("127.0.0.1", self.port, 60, self.proc, "shoal server")
        self.pids = [self.proc.pid]
        if self.security:
            waited = self.security.wait_login("127.0.0.1", self.port, 60, alive=lambda: self.proc.poll() is None)
            log(f"shoal server: {self.security.label} login works (after {waited:.1f}s)")
        log(f"shoal server up: pid {self.proc.pid}, 127.0.0.1:{self.port}, data {self.dir}")

    def flush(self):
        shoal_tool("127.0.0.1", self.admin_port, "flush")

    def compaction_status(self):
        return pending_from_shoal(shoal_tool("127.0.0.1", self.admin_port, "compactionstats", "--json", timeout=60))

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
            log(f"shoal server stopped (pid {self.proc.pid})")
        if self.dir and (self.proc is None or self.proc.poll() is not None):
            if self.keep_rocksdb_log:
                kept = keep_rocksdb_logs(self.data_root, os.path.join(self.out, "shoal-rocksdb-log"))
                log(f"kept RocksDB's LOG files: {', '.join(kept) or 'none found'}")
            shutil.rmtree(self.dir, ignore_errors=True)


def keep_rocksdb_logs(data_root, into):
    """Copies RocksDB's LOG and LOG.old.* files found under `data_root` into `into` (their paths
    relative to `data_root`), for reading a long run's flushes and compactions afterwards."""
    kept = []
    for root, _, files in os.walk(data_root or "/nonexistent"):
        for name in files:
            if name == "LOG" or name.startswith("LOG.old"):
                rel = os.path.relpath(os.path.join(root, name), data_root)
                dest = os.path.join(into, rel)
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                try:
                    shutil.copyfile(os.path.join(root, name), dest)
                    kept.append(rel)
                except OSError as e:
                    log(f"could not keep {rel}: {e}")
    return kept


class CassandraNode:
    """One node through the shared start.sh/stop.sh, in a private CASS_HOME (its data, logs and
    pid file are ours; the jars are the install's): WIPE=1 never touches anyone else's data."""
    system, label = "cassandra", "Cassandra"

    def __init__(self, out, wipe_after=False, security=None, config="template", heap=None):
        self.home = os.path.join(BENCH_HOME, "cassandra")
        self.config = config  # cassconf.CONFIGS: the template's settings or cassandra_latest.yaml's
        if config != "template":
            self.system, self.label = f"cassandra-{config}", f"Cassandra ({config})"
        self.heap = cassconf.heap_of(config, heap)
        # start.sh's ports (CQL, storage, JMX), from the same environment variables it reads.
        self.ports = [int(os.environ.get(k, d)) for k, d in (("CASS_PORT", 9042), ("CASS_STORAGE_PORT", 7000),
                                                               ("CASS_JMX_PORT", 7199))]
        self.out, self.started, self.port = out, False, self.ports[0]
        self.nodes, self.pids = ["127.0.0.1"], []
        self.env = dict(os.environ, CASS_HOME=self.home, WIPE="1", CASSANDRA_HEAP=self.heap)
        self.data_root = os.path.join(self.home, "data")
        self.wipe_after = wipe_after  # delete the data once stopped (the long steadiness run's GBs)
        self.security = security  # --auth/--tls (security.Security), or None
        self.ref = CASS_REF  # the scripts start.sh and stop.sh (with --auth/--tls: a copy beside a changed template)

    def start(self):
        os.makedirs(self.home, exist_ok=True)
        lib = os.path.join(self.home, "lib")
        if not os.path.islink(lib):
            if os.path.exists(lib):
                raise Fail(f"{lib} exists and is not a link to the install's jars")
            os.symlink(os.path.join(CASS_INSTALL, "lib"), lib)
        pidfile = os.path.join(self.home, "cassandra.pid")
        if os.path.exists(pidfile) and alive(read_text(pidfile).strip() or 0):
            raise Fail(f"a Cassandra from an earlier bench/compare still runs (pid {read_text(pidfile).strip()}); "
                       f"stop it with CASS_HOME={self.home} {CASS_REF}/stop.sh")
        for port in self.ports:
            if port_open("127.0.0.1", port):
                raise Fail(f"127.0.0.1:{port} is in use by another process: Cassandra needs "
                           f"{', '.join(map(str, self.ports))} (is another Cassandra, e.g. {CASS_REF}/start.sh's, "
                           "running? CASS_PORT, CASS_STORAGE_PORT and CASS_JMX_PORT choose others)")
        if self.security:
            self.ref = self.security.cassandra_ref(CASS_REF, os.path.join(self.out, f"cassandra-ref-{self.security.name}"))
        elif self.config != "template":
            self.ref = cassconf.cassandra_ref(self.config, CASS_REF, os.path.join(self.out, f"cassandra-ref-{self.config}"),
                                              CASSANDRA_SCRIPTS)
        self.started = True
        out = sh([os.path.join(self.ref, "start.sh")], timeout=300, env=self.env)
        self.pids = [int(read_text(pidfile).strip())]
        if self.security:
            # Its default superuser comes ~10 s after the port opens (superuser_setup_delay_ms).
            pid = self.pids[0]
            waited = self.security.wait_login("127.0.0.1", self.port, 180, alive=lambda: alive(pid))
            log(f"cassandra: {self.security.label} login works {waited:.1f}s after the port opened "
                f"(config {self.home}/conf/cassandra.yaml from {self.ref})")
        log(f"cassandra up ({self.config} config, heap {self.heap}): {out.strip().splitlines()[-1]}, data {self.home}/data")

    def flush(self):
        nodetool(self.ports[2], os.path.join(self.home, "conf"), "flush", timeout=600)

    def compaction_status(self):
        return pending_from_nodetool(nodetool(self.ports[2], os.path.join(self.home, "conf"), "compactionstats"))

    def stop(self):
        if self.started:
            self.started = False
            out = sh([os.path.join(self.ref, "stop.sh")], timeout=120, env=self.env, check=False)
            log(f"cassandra: {out.strip()}")
            pid = read_text(os.path.join(self.home, "cassandra.pid")).strip()
            if self.wipe_after and not (pid and alive(pid)):
                shutil.rmtree(self.data_root, ignore_errors=True)


class ShoalCluster:
    system, label = "shoal", "Shoal"

    def __init__(self, out, n=3, extra_yaml=""):
        self.dir, self.extra_yaml = None, extra_yaml
        self.out, self.n, self.started, self.port = out, n, False, free_port()
        self.nodes, self.pids = [f"127.0.0.{i}" for i in range(1, n + 1)], []

    def start(self):
        os.makedirs(BENCH_HOME, exist_ok=True)  # a fresh machine has no cache yet
        self.dir = tempfile.mkdtemp(prefix="shoal-cluster.", dir=BENCH_HOME)
        cfg = os.path.join(self.dir, "shoal.yaml")
        with open(cfg, "w") as f:
            f.write(SHOAL_YAML.format(storage_port=free_port(), commitlog=PERIODIC)
                    .replace("cluster_name: bench", "cluster_name: bench3") + self.extra_yaml)
        self.started = True
        self.admin_port = free_port()
        out = sh([SHOAL_BIN, "cluster", "up", "-n", str(self.n), "--dir", self.dir, "--num-tokens", "16",
                  "--cluster-name", "bench3", "--native-port", str(self.port), "--admin-port", str(self.admin_port),
                  "--timeout", "180", "--", "--config", cfg], timeout=600)
        st = json.loads(sh([SHOAL_BIN, "cluster", "status", "--json", "--dir", self.dir], timeout=60))
        self.pids = [n["pid"] for n in st["nodes"]]
        log(f"shoal cluster up: pids {self.pids}, CQL port {self.port}\n{out.strip()}")

    def flush(self):
        for node in self.nodes:
            shoal_tool(node, self.admin_port, "flush")

    def compaction_status(self):
        return sum_status(pending_from_shoal(shoal_tool(node, self.admin_port, "compactionstats", "--json", timeout=60))
                          for node in self.nodes)

    def stop(self):
        if self.started:
            self.started = False
            out = sh([SHOAL_BIN, "cluster", "down", "--dir", self.dir], timeout=120, check=False).strip()
            log(out)
            if out.startswith("stopped"):
                shutil.rmtree(self.dir, ignore_errors=True)


class CassandraCluster:
    system, label = "cassandra", "Cassandra"

    def __init__(self, out, n=3, config="template", heap=None):
        self.out, self.n, self.started, self.port = out, n, False, 9042
        self.script = os.path.join(HERE, "cassandra-cluster.sh")
        self.config = config
        if config != "template":
            self.system, self.label = f"cassandra-{config}", f"Cassandra ({config})"
        # Three JVMs share the machine: the script's own 1 GB heap each unless --cassandra-heap.
        self.env = dict(os.environ, CLUSTER_DIR=os.path.join(BENCH_HOME, "cassandra-cluster"),
                        CASS_REF=cassconf.cassandra_ref(config, CASS_REF, os.path.join(out, f"cassandra-ref-{config}"),
                                                        CASSANDRA_SCRIPTS) if config != "template" else CASS_REF,
                        CASS_HOME=CASS_INSTALL)
        if heap:
            self.env["CASSANDRA_HEAP"] = heap
        self.nodes, self.pids = [f"127.0.0.{i}" for i in range(1, n + 1)], []

    def start(self):
        self.started = True
        out = sh([self.script, "up", str(self.n)], timeout=1200, env=self.env)
        self.pids = [int(p) for p in sh([self.script, "pids"], timeout=30, env=self.env).strip().split(",") if p]
        if len(self.pids) != self.n:
            raise Fail(f"cassandra cluster: {len(self.pids)} of {self.n} nodes running")
        log(f"cassandra cluster up ({self.config} config): pids {self.pids}\n{out.strip()}")

    def flush(self):
        for i in range(1, self.n + 1):
            sh([self.script, "nodetool", str(i), "flush"], timeout=600, env=self.env)

    def compaction_status(self):
        return sum_status(pending_from_nodetool(sh([self.script, "nodetool", str(i), "compactionstats"], timeout=180,
                                                   env=self.env)) for i in range(1, self.n + 1))

    def stop(self):
        if self.started:
            self.started = False
            log("cassandra cluster: " + sh([self.script, "down"], timeout=300, env=self.env, check=False).strip())


RUNNING = []  # servers started and not yet stopped (the exit handler stops them); only this module touches it


def stop_all():
    while RUNNING:
        server = RUNNING.pop()
        try:
            server.stop()
        except Exception as e:  # keep stopping the others
            print(f"warning: stopping {server.label}: {e}", file=sys.stderr)


def serve(server, work):
    """Starts a server, runs work(server) against it and always stops it (the exit handler too)."""
    RUNNING.append(server)
    try:
        server.start()
        return work(server)
    finally:
        RUNNING.remove(server)
        server.stop()
