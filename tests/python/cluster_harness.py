"""Multi-node clusters for the Python tests: `ShoalCluster` drives the
`shoal cluster` launcher (the same binary as shoal_harness.py, SHOAL_BIN) and
`shoal tool` against its nodes.

Node i (1-based) runs on 127.0.0.i with the cluster's native and admin ports;
the launcher keeps the cluster's state in `<workdir>/nodes.json` and each
node's output in `<workdir>/node{i}/node.log`. Teardown (`down()`, or leaving
the `with` block) stops every node and removes the directory; every wait is
bounded by the launcher's own timeouts.

    with ShoalCluster(tmp_path / "c", nodes=3, dcs=1) as c:
        cluster = Cluster(c.contact_points, port=c.native_port)
        c.stop(2)                      # SIGKILL
        c.start(2)                     # same data dir, waits until NORMAL
        c.tool("status")               # parsed JSON of the admin API
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from shoal_harness import CLUSTER_NAME, SHOAL_BIN, free_port

# Generous: `up` starts the nodes one at a time and waits for convergence.
UP_TIMEOUT_S = 300
COMMAND_TIMEOUT_S = 180


class ShoalClusterError(AssertionError):
    """A launcher or tool command failed; the message carries its output."""


class ShoalCluster:
    """A local cluster started with `shoal cluster up`.

    - `contact_points`: the node addresses ("127.0.0.1", ...), from the last
      line `up` prints.
    - `native_port`, `admin_port`: the same on every node (each node has its
      own address). Free ports are picked unless given, so a cluster never
      collides with a server already on 127.0.0.1's default ports.
    - `stop(i, graceful=False)`, `start(i, address=None)`, `tool(*args)`,
      `status()`, `down()`.
    """

    def __init__(self, workdir, nodes=3, dcs=1, racks=1, num_tokens=None, cluster_name=CLUSTER_NAME,
                 native_port=None, admin_port=None, config=None, extra_args=(), bin_path=None, start=True,
                 launcher_args=()):
        self.workdir = Path(workdir)
        self.nodes = nodes
        self.dcs = dcs
        self.racks = racks
        self.num_tokens = num_tokens
        self.cluster_name = cluster_name
        self.native_port = native_port or free_port()
        self.admin_port = admin_port or free_port()
        self.bin_path = bin_path or SHOAL_BIN
        self.extra_args = list(extra_args)
        # `shoal cluster up` options (e.g. --auth, --tls).
        self.launcher_args = [str(a) for a in launcher_args]
        self.contact_points = []
        self.up_output = ""
        # Every node reads this YAML; its own internode port by default, so a
        # cluster never collides with one on the default port 7000.
        config = {"storage_port": free_port(), **(config or {})}
        self.storage_port = config["storage_port"]
        if config:
            self.workdir.parent.mkdir(parents=True, exist_ok=True)
            cfg_path = self.workdir.parent / f"{self.workdir.name}.yaml"
            cfg_path.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in config.items()))
            self.extra_args += ["--config", str(cfg_path)]
        if start:
            self.up()

    # -- running the binary

    def _run(self, args, timeout=COMMAND_TIMEOUT_S, check=True):
        if not os.path.isfile(self.bin_path) or not os.access(self.bin_path, os.X_OK):
            pytest.fail(f"shoal binary not found or not executable: {self.bin_path} (set SHOAL_BIN or build it)")
        cmd = [self.bin_path] + [str(a) for a in args]
        try:
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise ShoalClusterError(f"`{' '.join(cmd)}` did not finish within {timeout}s\n{e.stdout or ''}{e.stderr or ''}")
        if check and proc.returncode != 0:
            raise ShoalClusterError(
                f"`{' '.join(cmd)}` exited with {proc.returncode}\n"
                f"----- stdout -----\n{proc.stdout}\n----- stderr -----\n{proc.stderr}"
            )
        return proc

    def _cluster(self, *args, timeout=COMMAND_TIMEOUT_S, check=True):
        # --dir first: anything after `--` belongs to the servers.
        return self._run(["cluster", "--dir", self.workdir, *args], timeout=timeout, check=check)

    # -- lifecycle

    def up(self):
        args = ["up", "-n", self.nodes, "--dcs", self.dcs, "--racks", self.racks,
                "--cluster-name", self.cluster_name,
                "--native-port", self.native_port, "--admin-port", self.admin_port]
        if self.num_tokens is not None:
            args += ["--num-tokens", self.num_tokens]
        args += self.launcher_args
        if self.extra_args:
            args += ["--", *self.extra_args]
        try:
            proc = self._cluster(*args, timeout=UP_TIMEOUT_S)
        except ShoalClusterError as e:
            # Leave nothing running behind a failed start; keep the logs in the message.
            logs = self.logs()
            self.down(clear=False)
            raise ShoalClusterError(f"{e}\n{logs}") from None
        self.up_output = proc.stdout
        lines = [l for l in proc.stdout.splitlines() if l.strip()]
        self.contact_points = lines[-1].split(",") if lines else []
        return self

    def stop(self, i, graceful=False):
        """Stops node i: SIGKILL (a crash) or, with graceful, SIGTERM and a clean exit."""
        args = ["stop", i] + (["--graceful"] if graceful else [])
        return self._cluster(*args).stdout

    def start(self, i, address=None, timeout=120):
        """Restarts node i on its data dir (optionally under a new address); waits until NORMAL."""
        args = ["start", i, "--timeout", timeout]
        if address is not None:
            args += ["--address", address]
        out = self._cluster(*args, timeout=timeout + 30).stdout
        if address is not None:
            self.contact_points = [n["address"] for n in self.state()["nodes"]]
        return out

    def add(self, timeout=300):
        """`shoal cluster add`: a new node on the next address bootstraps into the cluster; waits
        until it is NORMAL. Returns its index."""
        self._cluster("add", "--timeout", timeout, timeout=timeout + 30)
        self.contact_points = [n["address"] for n in self.state()["nodes"]]
        return len(self.state()["nodes"])

    def decommission(self, i, check=True):
        """`shoal cluster decommission i`: node i hands its ranges over, leaves the ring, stops."""
        return self._cluster("decommission", i, timeout=600, check=check)

    def remove(self, i, check=True):
        """`shoal cluster remove i`: removenode of stopped node i, run on the first running node."""
        return self._cluster("remove", i, timeout=600, check=check)

    def replace(self, i, timeout=300):
        """`shoal cluster replace i`: a fresh node at node i's address takes its place."""
        return self._cluster("replace", i, "--timeout", timeout, timeout=timeout + 30)

    def down(self, clear=True):
        """Stops every node (SIGTERM, SIGKILL after 30 s); with clear, removes the directory."""
        if not (self.workdir / "nodes.json").exists():
            if clear and self.workdir.exists():
                shutil.rmtree(self.workdir, ignore_errors=True)
            return
        args = ["down"] + (["--clear"] if clear else [])
        self._cluster(*args, timeout=120)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        # SHOAL_TEST_KEEP=1 keeps a failed test's cluster directory (the nodes' logs and data) to look at.
        keep = exc[0] is not None and os.environ.get("SHOAL_TEST_KEEP") == "1"
        try:
            self.down(clear=not keep)
        except ShoalClusterError as e:
            print(f"ShoalCluster teardown failed: {e}", file=sys.stderr)
        return False

    # -- inspection

    def address(self, i):
        return self.state()["nodes"][i - 1]["address"]

    def state(self):
        """nodes.json as written by the launcher."""
        return json.loads((self.workdir / "nodes.json").read_text())

    def status(self):
        """`shoal cluster status --json`: per node index, address, pid, running, state."""
        return json.loads(self._cluster("status", "--json").stdout)

    def stress_command(self, addresses, args, schema=()):
        """`shoal stress ARGS` against `addresses` on this cluster's native port: ARGS' command and
        words first, then `truncate=never` (a run never empties what earlier steps wrote), then ARGS'
        dash options and `schema` (shared -schema/-col options)."""
        i = next((n for n, a in enumerate(args) if a.startswith("-")), len(args))
        return [self.bin_path, "stress", *args[:i], "truncate=never", *args[i:], *schema,
                "-node", ",".join(addresses), "-port", f"native={self.native_port}"]

    def tool(self, *args, node=1, check=True):
        """`shoal tool -h <node i's address> -p <admin port> ARGS --json`, parsed.
        With check=False a failure returns {"error": ..., "exit_code": ...}."""
        host = self.address(node)
        proc = self._run(["tool", "-h", host, "-p", self.admin_port, *args, "--json"], check=check)
        if proc.returncode != 0:
            return {"error": proc.stderr.strip(), "exit_code": proc.returncode}
        # One document per request (flush/compact of several tables make several).
        decoder, text, docs = json.JSONDecoder(), proc.stdout.strip(), []
        while text:
            doc, end = decoder.raw_decode(text)
            docs.append(doc)
            text = text[end:].lstrip()
        return docs[0] if len(docs) == 1 else docs

    def log_path(self, i):
        return self.workdir / f"node{i}" / "node.log"

    def logs(self, max_chars=4000):
        """The tail of every node's log, for failure messages."""
        parts = []
        for i in range(1, self.nodes + 1):
            try:
                text = self.log_path(i).read_text(errors="replace")[-max_chars:]
            except OSError as e:
                text = f"<no log: {e}>"
            parts.append(f"----- node{i} log -----\n{text}")
        return "\n".join(parts)

    def __repr__(self):
        return f"ShoalCluster({self.workdir}, nodes={self.nodes}, contact_points={self.contact_points})"
