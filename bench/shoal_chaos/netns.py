"""The network: one namespace per node, one for the client, one for the bridge.

Layout for a run with prefix P (it carries the PID: parallel runs never share a name):
  P-br   holds bridge `br0`; each other namespace's veth peer is a port of it
  P-n1.. node i's namespace: `eth0` with 10.77.0.(10+i)/24
  P-cl   the client's namespace: `eth0` with 10.77.0.100/24
The addresses live inside these namespaces only, so runs in parallel may use the same ones.

Faults are applied inside a node's namespace, so they travel with the node and nothing on the host
changes:
  - partitions: an nft table `inet chaos` with input and output rules that drop packets from/to the
    peers the node must not see (a silent drop, like a pulled cable: TCP connections stall and time out);
  - lossy links: nft `numgen random` drops a share of the node's packets both ways;
  - delay and reordering: tc netem on the node's eth0, when the kernel has sch_netem (`netem_available`).
The client namespace is never cut off: a node on the minority side still answers its clients, with
Unavailable or timeouts, as a real partitioned coordinator does.
"""

import subprocess

SUBNET = "10.77.0"
CLIENT_HOST = 100


def run(cmd, check=True, input=None, timeout=30):
    proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` exited with {proc.returncode}: {proc.stderr.strip()}")
    return proc


def available():
    """None when the harness can run here (root, `ip netns` and nft work), else why not."""
    import os
    import shutil

    if os.geteuid() != 0:
        return "not root (network namespaces need CAP_NET_ADMIN)"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (scripts/setup.sh installs nftables)"
    probe = f"shoalchaos-probe-{os.getpid()}"
    try:
        if run(["ip", "netns", "add", probe], check=False).returncode != 0:
            return "`ip netns add` does not work here"
        rules = "table inet probe {\n chain c { type filter hook output priority 0; policy accept; }\n}\n"
        if run(["ip", "netns", "exec", probe, "nft", "-f", "-"], check=False, input=rules).returncode != 0:
            return "nft does not work inside a network namespace here"
    finally:
        run(["ip", "netns", "del", probe], check=False)
    return None


class Network:
    def __init__(self, prefix, nodes):
        self.prefix = prefix
        self.n = nodes
        self.bridge_ns = f"{prefix}-br"
        self.client_ns = f"{prefix}-cl"
        self.created = []
        self.netem = None
        # Per node: the peer addresses it drops, and its loss percentage.
        self.blocked = {i: set() for i in range(1, nodes + 1)}
        self.loss = {i: 0 for i in range(1, nodes + 1)}
        self.netem_on = set()

    def node_ns(self, i):
        return f"{self.prefix}-n{i}"

    def address(self, i):
        return f"{SUBNET}.{10 + i}"

    @property
    def client_address(self):
        return f"{SUBNET}.{CLIENT_HOST}"

    def _add_ns(self, name):
        run(["ip", "netns", "add", name])
        self.created.append(name)
        run(["ip", "-n", name, "link", "set", "lo", "up"])

    def _attach(self, ns, port, address):
        # Both ends are created directly in their namespaces: nothing appears on the host.
        run(["ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port, "netns", self.bridge_ns])
        run(["ip", "-n", self.bridge_ns, "link", "set", port, "master", "br0"])
        run(["ip", "-n", self.bridge_ns, "link", "set", port, "up"])
        run(["ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0"])
        run(["ip", "-n", ns, "link", "set", "eth0", "up"])

    def create(self):
        self._add_ns(self.bridge_ns)
        run(["ip", "-n", self.bridge_ns, "link", "add", "br0", "type", "bridge"])
        run(["ip", "-n", self.bridge_ns, "link", "set", "br0", "up"])
        for i in range(1, self.n + 1):
            self._add_ns(self.node_ns(i))
            self._attach(self.node_ns(i), f"n{i}", self.address(i))
            self._apply(i)
        self._add_ns(self.client_ns)
        self._attach(self.client_ns, "cl", self.client_address)

    def teardown(self):
        """Deletes every namespace the run created (their veths go with them). Never raises."""
        errors = []
        for name in reversed(self.created):
            proc = run(["ip", "netns", "del", name], check=False)
            if proc.returncode != 0:
                errors.append(f"{name}: {proc.stderr.strip()}")
        self.created = []
        return errors

    def exec_prefix(self, ns):
        return ["ip", "netns", "exec", ns]

    # -- faults

    def _apply(self, i):
        """Rewrites node i's nft table atomically from `blocked` and `loss`."""
        rules = ["table inet chaos {", " chain input { type filter hook input priority 0; policy accept;"]
        rules += [f"  ip saddr {self.address(p)} drop" for p in sorted(self.blocked[i])]
        if self.loss[i]:
            rules.append(f"  ip saddr {SUBNET}.0/24 {self._loss_match(i)}drop")
        rules += [" }", " chain output { type filter hook output priority 0; policy accept;"]
        rules += [f"  ip daddr {self.address(p)} drop" for p in sorted(self.blocked[i])]
        if self.loss[i]:
            rules.append(f"  ip daddr {SUBNET}.0/24 {self._loss_match(i)}drop")
        rules += [" }", "}"]
        # `table` then `delete table` makes the first run's delete succeed; the whole file is one transaction.
        text = "table inet chaos {}\ndelete table inet chaos\n" + "\n".join(rules) + "\n"
        run(self.exec_prefix(self.node_ns(i)) + ["nft", "-f", "-"], input=text)

    def _loss_match(self, i):
        return "" if self.loss[i] >= 100 else f"numgen random mod 100 < {self.loss[i]} "

    def partition(self, groups):
        """Cuts the cluster into groups that do not see each other (both directions)."""
        side = {}
        for g, members in enumerate(groups):
            for m in members:
                side[m] = g
        for i in range(1, self.n + 1):
            self.blocked[i] = {p for p in range(1, self.n + 1) if p != i and side.get(p) != side.get(i)}
            self._apply(i)

    def cut(self, pairs):
        """Drops traffic between each pair (a, b), both ways (e.g. a bridge partition)."""
        for a, b in pairs:
            self.blocked[a].add(b)
            self.blocked[b].add(a)
        for i in {x for pair in pairs for x in pair}:
            self._apply(i)

    def set_loss(self, i, percent):
        self.loss[i] = int(percent)
        self._apply(i)

    def netem_available(self):
        if self.netem is None:
            ns = self.client_ns
            probe = run(self.exec_prefix(ns) + ["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
                        check=False)
            self.netem = probe.returncode == 0
            if self.netem:
                run(self.exec_prefix(ns) + ["tc", "qdisc", "del", "dev", "lo", "root"], check=False)
        return self.netem

    def set_netem(self, i, delay_ms, jitter_ms, reorder_pct):
        """Delay with jitter and reordering on node i's outgoing packets; False when the kernel lacks netem."""
        if not self.netem_available():
            return False
        args = ["delay", f"{delay_ms}ms", f"{jitter_ms}ms"]
        if reorder_pct:
            args += ["reorder", f"{reorder_pct}%", "50%"]
        run(self.exec_prefix(self.node_ns(i)) + ["tc", "qdisc", "replace", "dev", "eth0", "root", "netem", *args])
        self.netem_on.add(i)
        return True

    def heal(self):
        """Removes every network fault."""
        for i in range(1, self.n + 1):
            self.blocked[i] = set()
            self.loss[i] = 0
            self._apply(i)
        for i in sorted(self.netem_on):
            run(self.exec_prefix(self.node_ns(i)) + ["tc", "qdisc", "del", "dev", "eth0", "root"], check=False)
        self.netem_on = set()

    def describe(self):
        return {i: {"blocked": sorted(self.blocked[i]), "loss": self.loss[i]} for i in range(1, self.n + 1)}
