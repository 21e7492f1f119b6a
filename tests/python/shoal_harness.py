"""The harness of the Python conformance suite: real `shoal server` processes on
loopback (ShoalNode), and helpers shared by the tests. The fixtures are in conftest.py.

Every process started here is stopped by its PID in teardown (SIGTERM, then
SIGKILL after 10 s), and every wait is bounded.

Environment:
- SHOAL_BIN: the server binary (default $CARGO_TARGET_DIR/release/shoal, the target
  dir defaulting to $HOME/.cache/shoal/target as in scripts/env.sh).
- SHOAL_TEST_EXTERNAL=HOST:PORT: run the tests that need only a shared node
  against a server that is already running (for instance a real Cassandra, for
  differential runs). Tests that start, kill or restart their own node are
  skipped in that mode.
"""

import ctypes
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

DEFAULT_BIN = os.path.join(
    os.environ.get("CARGO_TARGET_DIR") or os.path.expanduser("~/.cache/shoal/target"), "release", "shoal"
)
SHOAL_BIN = os.environ.get("SHOAL_BIN") or DEFAULT_BIN
EXTERNAL = os.environ.get("SHOAL_TEST_EXTERNAL")
HOST = "127.0.0.1"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
CLUSTER_NAME = "shoal_pytest"

VENV_BIN = Path(sys.executable).parent


# ---------------------------------------------------------------- helpers


# The ports servers here listen on: below the kernel's ephemeral range (32768 and up here), where
# every outbound connection takes its local port, from whichever loopback address it leaves: a
# port that was free on 127.0.0.1 could be a connection's end on 127.0.0.2 by the time a cluster's
# node 2 listens there (CI saw "cannot listen for CQL on 127.0.0.2:33679: Address already in use").
# Each pytest-xdist worker (gw0, gw1, ...) draws from a block of its own, in turn.
PORT_BASE, PORT_SPAN, PORT_BLOCKS = 10000, 4000, 5
_ports = itertools.count()


def _port_block():
    m = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    return PORT_BASE + (int(m.group(1)) % PORT_BLOCKS if m else 0) * PORT_SPAN


def free_port(host=HOST):
    """A port no socket holds on any address now (a bind to the wildcard address, without
    SO_REUSEADDR, fails on any listener, connection or TIME_WAIT on the port), the next of this
    worker's block below the ephemeral range. `host` is where it will be used (every address is
    checked)."""
    del host
    base = _port_block()
    for _ in range(PORT_SPAN):
        port = base + next(_ports) % PORT_SPAN
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port in {base}..{base + PORT_SPAN - 1}")


def wait_until(predicate, timeout, interval=0.1, what="condition"):
    """Polls `predicate` until it returns a truthy value or `timeout` seconds pass.
    Returns the value; raises AssertionError on timeout."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last value: {last!r})")
        time.sleep(interval)


try:  # resolved once here, so the child after fork() only makes one C call
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # pragma: no cover - not Linux
    _PRCTL = None
_PR_SET_PDEATHSIG = 1


def _set_pdeathsig():
    """Runs in the child before exec: if pytest dies, the server gets SIGTERM,
    so a crashed or killed test run never leaves a server behind."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM)


ALL_NODES = []


class ShoalNode:
    """One `shoal server` process with its own data dir, log file and ports.

    The native port and data dir stay the same across restart(), so a restart is
    "the same node on its old disk"."""

    def __init__(self, workdir, host=HOST, config=None, cluster_name=CLUSTER_NAME, num_tokens=None, bin_path=None, extra_args=()):
        self.workdir = Path(workdir)
        self.extra_args = [str(a) for a in extra_args]
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.host = host
        self.port = free_port(host)
        self.data_dir = self.workdir / "data"
        self.data_dir.mkdir(exist_ok=True)
        self.log_path = self.workdir / "shoal.log"
        self.config_path = self.workdir / "shoal.yaml"
        self.cluster_name = cluster_name
        self.num_tokens = num_tokens
        self.bin_path = bin_path or SHOAL_BIN
        self.proc = None
        self.starts = 0
        # Each node gets its own storage (internode) port so that several
        # single-node servers can run side by side on 127.0.0.1.
        cfg = {"storage_port": free_port(host), "admin_port": free_port(host), "prometheus_port": free_port(host)}
        # The ports this harness chose (not the caller's): a first start may choose them again.
        self.chosen_ports = [k for k in cfg if k not in (config or {})]
        cfg.update(config or {})
        self.config = cfg
        self.write_config()
        ALL_NODES.append(self)

    def write_config(self):
        self.config_path.write_text("".join(f"{k}: {_yaml_scalar(v)}\n" for k, v in self.config.items()))

    def port_was_taken(self):
        """Whether this start failed because a port was in use: a port free when chosen (bound to
        port 0, then let go) can be taken by another process before the server binds it."""
        return "Address already in use" in self.log_tail().rsplit("===== pytest: start #", 1)[-1]

    # -- process control

    @property
    def pid(self):
        return self.proc.pid if self.proc is not None else None

    def command(self):
        cmd = [
            self.bin_path,
            "server",
            "--data-dir", str(self.data_dir),
            "--listen-address", self.host,
            "--native-port", str(self.port),
            "--cluster-name", self.cluster_name,
            "--config", str(self.config_path),
        ]
        if self.num_tokens is not None:
            cmd += ["--num-tokens", str(self.num_tokens)]
        return cmd + self.extra_args

    def is_running(self):
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout=START_TIMEOUT_S):
        assert not self.is_running(), f"node pid {self.pid} is already running"
        if not os.path.isfile(self.bin_path) or not os.access(self.bin_path, os.X_OK):
            pytest.fail(f"shoal binary not found or not executable: {self.bin_path} (set SHOAL_BIN or build it)")
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== pytest: start #{self.starts}: {' '.join(self.command())}\n".encode())
            log.flush()
            env = dict(os.environ)
            env.setdefault("RUST_BACKTRACE", "1")
            self.proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd=str(self.workdir),
                env=env,
                preexec_fn=_set_pdeathsig,
            )
        try:
            self.wait_ready(timeout)
        except Exception as e:
            self.stop()
            if self.starts == 1 and self.port_was_taken():
                # Nothing has used this node's ports yet: choose them again, once.
                self.port = free_port(self.host)
                self.config.update({k: free_port(self.host) for k in self.chosen_ports})
                self.write_config()
                return self.start(timeout)
            log_text = self.log_tail()
            msg = (f"shoal server pid {self.pid} on {self.host}:{self.port} failed to start: {e}\n"
                   f"----- server log {self.log_path} -----\n{log_text}")
            print(msg, file=sys.stderr)
            pytest.fail(msg, pytrace=False)
        return self

    def wait_ready(self, timeout=START_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while True:
            rc = self.proc.poll()
            if rc is not None:
                raise RuntimeError(f"shoal server exited with code {rc} during start-up")
            try:
                with socket.create_connection((self.host, self.port), timeout=1.0):
                    return
            except OSError:
                pass
            if time.monotonic() >= deadline:
                raise TimeoutError(f"port {self.host}:{self.port} not accepting connections after {timeout}s")
            time.sleep(0.1)

    def stop(self, timeout=STOP_TIMEOUT_S):
        """SIGTERM, then SIGKILL after `timeout` s. Returns (returncode, clean)
        where clean means it exited on SIGTERM without needing SIGKILL."""
        if self.proc is None:
            return None, True
        if self.proc.poll() is not None:
            return self.proc.returncode, True
        clean = True
        try:
            os.kill(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            clean = False
            try:
                os.kill(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=timeout)
        self._note(f"stopped (SIGTERM{'' if clean else ' then SIGKILL'}), rc={self.proc.returncode}")
        return self.proc.returncode, clean

    def kill9(self):
        """SIGKILL now (a crash): nothing gets flushed."""
        if self.is_running():
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=STOP_TIMEOUT_S)
            self._note("killed with SIGKILL")
        return self.proc.returncode if self.proc else None

    def restart(self, timeout=START_TIMEOUT_S):
        self.stop()
        return self.start(timeout)

    def tool(self, *args, timeout=120):
        """`shoal tool -h HOST -p ADMIN_PORT ARGS` against this node; its stdout."""
        cmd = [self.bin_path, "tool", "-h", self.host, "-p", str(self.config["admin_port"]), *map(str, args)]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        assert out.returncode == 0, f"{' '.join(cmd)}: exit {out.returncode}\n{out.stderr}"
        return out.stdout

    # -- logs

    def _note(self, text):
        try:
            with open(self.log_path, "ab") as log:
                log.write(f"===== pytest: {text}\n".encode())
        except OSError:
            pass

    def log_tail(self, max_chars=12000):
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as e:
            return f"<no log: {e}>"
        return text[-max_chars:]

    def __repr__(self):
        return f"ShoalNode({self.host}:{self.port}, pid={self.pid}, data_dir={self.data_dir})"


class ExternalNode:
    """A server we did not start (SHOAL_TEST_EXTERNAL=HOST:PORT)."""

    def __init__(self, spec):
        host, _, port = spec.rpartition(":")
        self.host = host or HOST
        self.port = int(port)
        self.data_dir = None
        self.pid = None
        self.log_path = None

    def _skip(self, *_a, **_k):
        pytest.skip("process control is not available against an external server")

    start = restart = kill9 = stop = _skip

    def log_tail(self, max_chars=0):
        return "<external server: no log>"


def _yaml_scalar(v):
    if isinstance(v, (dict, list)):
        return json.dumps(v)  # a YAML flow collection
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


# ---------------------------------------------------------------- driver helpers


def connect_cluster(node, **kwargs):
    """A driver Cluster with default settings against `node`."""
    from cassandra.cluster import Cluster

    return Cluster([node.host], port=node.port, **kwargs)


def create_keyspace(session, name, rf=1):
    session.execute(
        f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': {rf}}}"
    )
    return name


_ks_counter = itertools.count(1)


def unique_keyspace_name(hint="ks"):
    base = re.sub(r"[^a-z0-9_]", "_", hint.lower())
    base = re.sub(r"_+", "_", base).strip("_") or "ks"
    suffix = f"_{next(_ks_counter)}_{uuid.uuid4().hex[:6]}"
    # Keyspace names are limited to 48 characters.
    return ("k_" + base)[: 48 - len(suffix)] + suffix


def all_pages(session, query, fetch_size, max_pages):
    """Every row of `query` (text), fetched one page of `fetch_size` at a time;
    fails if paging has not ended after `max_pages` pages."""
    from cassandra.query import SimpleStatement

    rs = session.execute(SimpleStatement(query, fetch_size=fetch_size))
    rows, pages = list(rs.current_rows), 1
    while rs.has_more_pages:
        assert pages <= max_pages, f"{query!r} at fetch_size={fetch_size}: over {max_pages} pages (paging never ends?)"
        rs.fetch_next_page()
        rows.extend(rs.current_rows)
        pages += 1
    return rows
