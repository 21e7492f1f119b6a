"""The nodes: real `shoal server` processes, one per network namespace.

Each node gets `RUN/n{i}/shoal.yaml` (cassandra.yaml names, crates/node/src/config.rs), its data dir
`RUN/n{i}/disk/data` on a tmpfs of its own (`--disk-mb`; the disk-full nemesis fills that tmpfs with
`RUN/n{i}/disk/chaos-filler`) and its log `RUN/n{i}/node.log` (appended over restarts). Node 1 is the
seed. The harness starts the server through `ip netns exec` (which execs, so the PID is the server's)
and tracks which exits it caused: any other exit is a crash for the checkers. A monitor thread samples
every node's VmRSS once a second.

Clock skew: when libfaketime is installed every node runs with it preloaded, reading its offset from
`RUN/n{i}/faketime` ("+0" unless a skew is on; re-read at most once a second), and only the wall clock
is shifted (FAKETIME_DONT_FAKE_MONOTONIC): timers and timeouts keep real time, as on a machine whose
NTP is off.
"""

import glob
import json
import os
import signal
import subprocess
import threading
import time

ADMIN_PORT = 7199
NATIVE_PORT = 9042
STORAGE_PORT = 7000


def faketime_library():
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))
    return found[0] if found else None


class Node:
    def __init__(self, index, ns, address, home):
        self.index = index
        self.name = f"n{index}"
        self.ns = ns
        self.address = address
        self.home = home
        self.disk = os.path.join(home, "disk")
        self.data_dir = os.path.join(self.disk, "data")
        self.log = os.path.join(home, "node.log")
        self.config = os.path.join(home, "shoal.yaml")
        self.faketime = os.path.join(home, "faketime")
        self.proc = None
        self.expect_exit = False
        self.paused = False
        self.mounted = False
        self.unexpected_exits = []
        self.kills = 0
        self.max_rss_kb = 0


class Cluster:
    def __init__(self, net, run_dir, shoal_bin, nodes=3, disk_mb=512, config=None, skew=True, log=print):
        self.net = net
        self.run_dir = run_dir
        self.bin = shoal_bin
        self.disk_mb = disk_mb
        self.extra_config = dict(config or {})
        self.log = log
        self.faketime_lib = faketime_library() if skew else None
        self.nodes = [Node(i, net.node_ns(i), net.address(i), os.path.join(run_dir, f"n{i}")) for i in
                      range(1, nodes + 1)]
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._monitor = None

    def node(self, i):
        return self.nodes[i - 1]

    # -- set-up

    def write_config(self, node):
        cfg = {
            "cluster_name": "chaos",
            "num_tokens": 16,
            "listen_address": node.address,
            "rpc_address": node.address,
            "native_transport_port": NATIVE_PORT,
            "storage_port": STORAGE_PORT,
            "admin_port": ADMIN_PORT,
            "seed_provider": [{"class_name": "org.apache.cassandra.locator.SimpleSeedProvider",
                               "parameters": [{"seeds": self.nodes[0].address}]}],
            "hinted_handoff_enabled": True,
            # The harness runs repair itself after healing; a scheduled one would race it.
            "auto_repair": False,
        }
        cfg.update(self.extra_config)
        # JSON is YAML: one key per line, values JSON-encoded.
        with open(node.config, "w") as f:
            f.write("".join(f"{k}: {json.dumps(v)}\n" for k, v in cfg.items()))

    def prepare(self):
        for node in self.nodes:
            os.makedirs(node.disk, exist_ok=True)
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.disk_mb}m", f"{self.net.prefix}-{node.name}",
                            node.disk], check=True, capture_output=True)
            node.mounted = True
            os.makedirs(node.data_dir, exist_ok=True)
            with open(node.faketime, "w") as f:
                f.write("+0\n")
            self.write_config(node)

    def env(self, node):
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        # The commit log journals each fsync, so `power_loss` can drop what it had not synced.
        env["SHOAL_SYNC_JOURNAL"] = "1"
        if self.faketime_lib:
            env.update({
                "LD_PRELOAD": self.faketime_lib,
                "FAKETIME_TIMESTAMP_FILE": node.faketime,
                "FAKETIME_CACHE_DURATION": "1",
                "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            })
        return env

    def spawn(self, node):
        with open(node.log, "a") as log:
            log.write(f"===== bench/chaos: starting {node.name} at {time.strftime('%H:%M:%S')}\n")
            log.flush()
            proc = subprocess.Popen(
                ["ip", "netns", "exec", node.ns, self.bin, "server", "--config", node.config, "--data-dir",
                 node.data_dir],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=self.env(node),
                start_new_session=True)
        with self._lock:
            old = node.proc
            # An exit the monitor had not seen yet still counts.
            if old is not None and old.poll() is not None and not node.expect_exit:
                node.unexpected_exits.append(old.returncode)
            node.proc = proc
            node.expect_exit = False
            node.paused = False

    def start_all(self, timeout=120):
        self.prepare()
        self._monitor = threading.Thread(target=self._sample, name="chaos-monitor", daemon=True)
        self._monitor.start()
        for node in self.nodes:
            self.spawn(node)
            self.wait_normal(node, timeout)
        self.wait_all_up(timeout)

    # -- the admin API, through the client namespace

    def tool(self, node, *args, timeout=60):
        """`shoal tool -h NODE -p 7199 ARGS --json` run in the client namespace: (parsed JSON or None, text)."""
        cmd = self.net.exec_prefix(self.net.client_ns) + [self.bin, "tool", "-h", node.address, "-p",
                                                           str(ADMIN_PORT), *args, "--json"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, f"timed out after {timeout}s"
        if proc.returncode != 0:
            return None, (proc.stderr or proc.stdout).strip()
        try:
            return json.loads(proc.stdout), proc.stdout
        except ValueError:
            return None, proc.stdout

    def view(self, node):
        """address -> state ("UN", "DN", ...) as node sees the ring, or None."""
        status, _ = self.tool(node, "status", timeout=10)
        if not isinstance(status, dict):
            return None
        return {n.get("address"): n.get("state") for dc in status.get("datacenters", []) for n in dc.get("nodes", [])}

    def wait_normal(self, node, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if node.proc.poll() is not None:
                raise RuntimeError(f"{node.name} exited ({node.proc.returncode}) while starting; see {node.log}")
            v = self.view(node)
            if v and v.get(node.address) == "UN":
                return
            time.sleep(0.5)
        raise RuntimeError(f"{node.name} is not UN after {timeout}s; see {node.log}")

    def wait_all_up(self, timeout=120):
        """Until every node answers and sees every node UN; returns the seconds it took."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        want = {n.address for n in self.nodes}
        last = None
        while time.monotonic() < deadline:
            views = [self.view(n) for n in self.nodes]
            if all(v and all(v.get(a) == "UN" for a in want) for v in views):
                return time.monotonic() - t0
            last = views
            time.sleep(0.5)
        raise RuntimeError(f"the cluster is not all UN after {timeout}s: {last}")

    # -- faults on processes

    def kill(self, node):
        """kill -9, waited for."""
        with self._lock:
            proc = node.proc
            node.expect_exit = True
        if proc is None or proc.poll() is not None:
            return
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        node.kills += 1
        node.paused = False

    def power_loss(self, node, seed):
        """After `kill`: drops what the node's commit log had not fsynced (`shoal chaos power-loss`);
        returns the unsynced bytes lost."""
        proc = subprocess.run([self.bin, "chaos", "power-loss", node.data_dir, "--seed", str(seed), "--json"],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"shoal chaos power-loss {node.data_dir} failed: {proc.stdout}{proc.stderr}")
        return json.loads(proc.stdout)["bytes_lost"]

    def restart(self, node):
        if node.proc is not None and node.proc.poll() is None:
            return
        self.spawn(node)

    def pause(self, node):
        if node.proc is not None and node.proc.poll() is None:
            os.kill(node.proc.pid, signal.SIGSTOP)
            node.paused = True

    def resume(self, node):
        if node.paused and node.proc is not None and node.proc.poll() is None:
            os.kill(node.proc.pid, signal.SIGCONT)
        node.paused = False

    def set_skew(self, node, seconds):
        """The node's wall clock runs `seconds` off (libfaketime picks it up within a second)."""
        if not self.faketime_lib:
            raise RuntimeError("libfaketime is not installed (scripts/setup.sh installs it)")
        with open(node.faketime + ".tmp", "w") as f:
            f.write(f"{seconds:+d}\n")
        os.replace(node.faketime + ".tmp", node.faketime)

    def fill_disk(self, node, leave_kb=0):
        """Fills the node's tmpfs until ENOSPC (or `leave_kb` short of it); returns the bytes written."""
        path = os.path.join(node.disk, "chaos-filler")
        written = 0
        st = os.statvfs(node.disk)
        target = max(0, st.f_bavail * st.f_frsize - leave_kb * 1024)
        chunk = b"\0" * (1 << 20)
        try:
            with open(path, "ab") as f:
                while written < target:
                    n = min(len(chunk), target - written)
                    f.write(chunk[:n])
                    written += n
                f.flush()
        except OSError:
            pass
        return written

    def free_disk(self, node):
        try:
            os.unlink(os.path.join(node.disk, "chaos-filler"))
        except FileNotFoundError:
            pass

    def heal(self):
        """Undoes every process fault: resumes paused nodes, clears skews and fillers, restarts stopped nodes."""
        for node in self.nodes:
            self.resume(node)
            self.free_disk(node)
            if self.faketime_lib:
                self.set_skew(node, 0)
        for node in self.nodes:
            if node.proc is None or node.proc.poll() is not None:
                self.restart(node)

    # -- monitoring

    def _sample(self):
        while not self._stop.wait(1.0):
            self.sample_once()

    def sample_once(self):
        with self._lock:
            for node in self.nodes:
                proc = node.proc
                if proc is None:
                    continue
                code = proc.poll()
                if code is not None:
                    if not node.expect_exit:
                        node.unexpected_exits.append(code)
                        node.expect_exit = True  # counted once
                    continue
                try:
                    with open(f"/proc/{proc.pid}/status") as f:
                        for line in f:
                            if line.startswith("VmRSS:"):
                                node.max_rss_kb = max(node.max_rss_kb, int(line.split()[1]))
                except (OSError, ValueError):
                    pass

    def panics(self, node):
        try:
            with open(node.log, errors="replace") as f:
                return [line.strip()[:300] for line in f if "panicked" in line][:5]
        except OSError:
            return []

    def crash_report(self):
        self.sample_once()
        return {n.name: {"unexpected_exits": list(n.unexpected_exits), "panics": self.panics(n), "kills": n.kills}
                for n in self.nodes}

    # -- teardown

    def teardown(self):
        """Stops every node (SIGKILL), unmounts the tmpfs data dirs. Never raises."""
        self._stop.set()
        errors = []
        for node in self.nodes:
            try:
                self.kill(node)
            except OSError as e:
                errors.append(f"{node.name}: {e}")
        for node in self.nodes:
            if node.mounted:
                proc = subprocess.run(["umount", node.disk], capture_output=True, text=True)
                if proc.returncode != 0:
                    proc = subprocess.run(["umount", "-l", node.disk], capture_output=True, text=True)
                if proc.returncode == 0:
                    node.mounted = False
                else:
                    errors.append(f"umount {node.disk}: {proc.stderr.strip()}")
        return errors
