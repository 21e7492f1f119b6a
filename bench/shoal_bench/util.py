"""Shared helpers of the benchmark: where things are (the repository, the shoal binary, Cassandra's
install and scripts, the servers' data), how a path is shown in a report, logging, running a command
with a time bound (`sh`), the expected-failure exception (`Fail`), and TCP port helpers."""

import os
import shlex
import shutil
import socket
import subprocess
import time

PKG_DIR = os.path.dirname(os.path.abspath(__file__))  # bench/shoal_bench
HERE = os.path.dirname(PKG_DIR)  # bench/: the entry point's directory, its out/ and the committed results
ROOT = os.path.dirname(HERE)  # the repository root
HOME = os.path.expanduser("~")
CASS_REF = os.environ.get("CASS_REF", os.path.join(ROOT, "scripts", "cassandra"))
CASS_INSTALL = os.environ.get("CASS_HOME", os.path.join(HOME, ".cache/cassandra-ref"))
BENCH_HOME = os.environ.get("BENCH_HOME", os.path.join(HOME, ".cache/shoal/bench"))
TARGET_DIR = os.environ.get("CARGO_TARGET_DIR", os.path.join(HOME, ".cache/shoal/target"))
# $SHOAL_BIN (scripts/env.sh sets it) picks another build, e.g. an older binary for an A/B.
SHOAL_BIN = os.environ.get("SHOAL_BIN") or os.path.join(TARGET_DIR, "release", "shoal")


def shown(path):
    """A path as the reports print it: relative to the repository, or with
    $HOME, never naming this machine's home or checkout."""
    path, root = os.path.abspath(path), os.path.abspath(ROOT)
    if path == root or path.startswith(root + os.sep):
        return os.path.relpath(path, root)
    if path == HOME or path.startswith(HOME + os.sep):
        return "$HOME" + path[len(HOME):]
    return path


def shown_out(path):
    """A raw-output directory as the reports name it: relative to the repository when inside it."""
    return os.path.relpath(path, ROOT) if path.startswith(ROOT) else path


class Fail(Exception):
    """A clear, expected failure: printed without a traceback."""


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sh(cmd, timeout, env=None, check=True, capture=True):
    """Runs a command with a time bound; returns its output (stdout + stderr)."""
    try:
        p = subprocess.run(cmd, env=env, timeout=timeout, text=True,
                           stdout=subprocess.PIPE if capture else None,
                           stderr=subprocess.STDOUT if capture else None)
    except subprocess.TimeoutExpired:
        raise Fail(f"timed out after {timeout}s: {' '.join(map(shlex.quote, cmd))}")
    if check and p.returncode != 0:
        tail = "\n".join((p.stdout or "").splitlines()[-30:])
        raise Fail(f"exit {p.returncode}: {' '.join(map(shlex.quote, cmd))}\n{tail}")
    return p.stdout or ""


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def port_open(host, port):
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def free_port(host="127.0.0.1"):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_port(host, port, seconds, proc=None, what="server"):
    end = time.time() + seconds
    while time.time() < end:
        if proc is not None and proc.poll() is not None:
            raise Fail(f"{what} exited with {proc.returncode} before listening on {host}:{port}")
        if port_open(host, port):
            return
        time.sleep(0.25)
    raise Fail(f"{what}: nothing listens on {host}:{port} after {seconds}s")


def start_shoal(exe, data_dir, log_path, host="127.0.0.1", extra=(), tries=5, seconds=30):
    """`exe server` on `host` with its data in `data_dir` and free native and admin ports, once it
    listens: (process, native port, admin port). A free port may be taken before the server binds it;
    a server that exits before listening is started again on new ports (its data dir emptied), up to
    `tries` times."""
    for _ in range(tries):
        port, admin = free_port(host), free_port(host)
        proc = subprocess.Popen([exe, "server", "--data-dir", data_dir, "--listen-address", host,
                                 "--native-port", str(port), "--admin-port", str(admin), *extra],
                                stdout=open(log_path, "w"), stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_port(host, port, seconds, proc, what=exe)
            return proc, port, admin
        except Fail:
            if proc.poll() is None:
                proc.kill()
                raise
        shutil.rmtree(data_dir, ignore_errors=True)
    raise Fail(f"{exe} never started: {log_path}")


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)
