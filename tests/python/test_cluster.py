"""The cluster, end to end: real `shoal server` processes on 127.0.0.x started
by `shoal cluster up`, driven by the DataStax Python driver and `shoal tool`.

Each test states the "Done when" line of the cluster issue it shows. The
3-node RF=3 cluster is shared by the tests of one module-scoped fixture, in
file order (they restart nodes, so each leaves the cluster whole again)."""

import json
import re
import socket
import struct
import subprocess
import threading
import time

import pytest
from cassandra import ConsistencyLevel, Unavailable
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy, WhiteListRoundRobinPolicy
from cassandra.query import SimpleStatement

from cluster_harness import ShoalCluster
from shoal_harness import EXTERNAL, wait_until

pytestmark = pytest.mark.skipif(bool(EXTERNAL), reason="starts its own cluster of shoal processes")

KS = "clu"


def session_on(cluster, hosts, cl=ConsistencyLevel.ONE, policy=None):
    """A driver session that only uses `hosts` as coordinators."""
    profile = ExecutionProfile(
        load_balancing_policy=policy or WhiteListRoundRobinPolicy(hosts),
        consistency_level=cl,
        request_timeout=30,
    )
    c = Cluster(hosts, port=cluster.native_port, execution_profiles={EXEC_PROFILE_DEFAULT: profile}, protocol_version=4)
    return c, c.connect()


def wait_state(cluster, address, state, observer=1, timeout=60):
    """Waits until node `observer` reports `address` in nodetool state `state` (UN, DN)."""

    def ok():
        doc = cluster.tool("status", node=observer)
        for dc in doc["datacenters"]:
            for n in dc["nodes"]:
                if n["address"] == address:
                    return n["state"] == state
        return False

    wait_until(ok, timeout, interval=0.5, what=f"{address} {state} as seen by node {observer}")


class EventListener:
    """A raw native-protocol v4 connection that REGISTERs for TOPOLOGY_CHANGE and
    STATUS_CHANGE and collects the EVENT frames pushed to it."""

    def __init__(self, host, port):
        self.sock = socket.create_connection((host, port), timeout=10)
        self.seen = []  # every (kind, change, address) event read so far
        body = struct.pack(">H", 1) + self._string("CQL_VERSION") + self._string("3.0.0")
        self._send(0x01, body)
        assert self._read()[0] == 0x02  # READY
        self._send(0x0B, struct.pack(">H", 2) + self._string("TOPOLOGY_CHANGE") + self._string("STATUS_CHANGE"))
        assert self._read()[0] == 0x02

    @staticmethod
    def _string(s):
        return struct.pack(">H", len(s)) + s.encode()

    def _send(self, opcode, body, stream=1):
        self.sock.sendall(struct.pack(">BBhBI", 4, 0, stream, opcode, len(body)) + body)

    def _exact(self, n):
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return out

    def _read(self):
        _, _, _, opcode, length = struct.unpack(">BBhBI", self._exact(9))
        return opcode, self._exact(length)

    def wait_for(self, kind, change, address, timeout=60):
        """Waits for EVENT `kind` (e.g. STATUS_CHANGE) `change` (UP/DOWN/NEW_NODE) for `address`."""
        deadline = time.time() + timeout
        seen = self.seen
        while time.time() < deadline:
            self.sock.settimeout(max(0.1, deadline - time.time()))
            try:
                opcode, body = self._read()
            except socket.timeout:
                break
            if opcode != 0x0C:
                continue
            pos = 0
            fields = []
            for _ in range(2):
                (n,) = struct.unpack_from(">H", body, pos)
                fields.append(body[pos + 2 : pos + 2 + n].decode())
                pos += 2 + n
            size = body[pos]
            ip = socket.inet_ntop(socket.AF_INET if size == 4 else socket.AF_INET6, body[pos + 1 : pos + 1 + size])
            seen.append((fields[0], fields[1], ip))
            if (fields[0], fields[1], ip) == (kind, change, address):
                return
        raise AssertionError(f"no {kind} {change} {address} event within {timeout}s; saw {seen}")

    def close(self):
        self.sock.close()


def tool_when_up(c, *args, node, refused, nodes=None):
    """`c.tool(*args, node=node)`, for an operation that needs other nodes up. When it is refused with
    `refused` in its error (a loaded machine's failure detector held a live node down for a moment), it
    runs once more after each of `nodes` (default: all) is UN as `node` sees it, as an operator would."""
    out = c.tool(*args, node=node, check=False)
    error = out.get("error", "") if isinstance(out, dict) else ""
    if refused in error:
        for i in nodes or range(1, c.nodes + 1):
            wait_state(c, c.address(i), "UN", observer=node)
        return c.tool(*args, node=node)
    assert not error, out
    return out


def pending_hint_bytes(cluster, nodes):
    """The hint bytes nodes `nodes` hold for others (`shoal tool listpendinghints`), summed."""
    return sum(cluster.tool("listpendinghints", node=i)["total_bytes"] for i in nodes)


def wait_no_hints(cluster, nodes, timeout=60):
    wait_until(lambda: pending_hint_bytes(cluster, nodes) == 0, timeout, interval=0.5, what="hints replayed")


def write_kv(session, prefix, n):
    """Rows (f"{prefix}{i}", i) for i below n into the kv table."""
    insert = session.prepare(f"INSERT INTO {KS}.kv (k, v) VALUES (?, ?)")
    for i in range(n):
        session.execute(insert, (f"{prefix}{i}", i))


def missing_kv(session, prefix, n):
    """The i below n whose row `write_kv` wrote the session does not read back."""
    rows = {r.k: r.v for r in session.execute(f"SELECT k, v FROM {KS}.kv")}
    return [i for i in range(n) if rows.get(f"{prefix}{i}") != i]


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    with ShoalCluster(tmp_path_factory.mktemp("cluster3") / "c", nodes=3, config={"write_request_timeout": "2000ms"}) as c:
        cl, s = session_on(c, c.contact_points)
        s.execute(f"CREATE KEYSPACE {KS} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 3}}")
        s.execute(f"CREATE TABLE {KS}.kv (k text PRIMARY KEY, v int)")
        assert cl.control_connection.wait_for_schema_agreement()
        cl.shutdown()
        yield c


def test_token_aware_driver_sees_three_hosts_and_agrees_with_getendpoints(three):
    """3 nodes, RF=3: TokenAwarePolicy(DCAwareRoundRobinPolicy()) sees 3 hosts, and for 1,000 keys
    cluster.metadata.get_replicas(ks, key) equals `shoal tool getendpoints`."""
    cluster = Cluster(
        three.contact_points[:1],
        port=three.native_port,
        execution_profiles={EXEC_PROFILE_DEFAULT: ExecutionProfile(load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()))},
        protocol_version=4,
    )
    session = cluster.connect()
    try:
        hosts = sorted(h.address for h in cluster.metadata.all_hosts())
        assert hosts == sorted(three.contact_points)
        assert all(h.is_up for h in cluster.metadata.all_hosts())
        assert {str(h.host_id) for h in cluster.metadata.all_hosts()} == {
            n["host_id"] for dc in three.tool("status")["datacenters"] for n in dc["nodes"]
        }
        # Token-aware routing needs the token map: 16 tokens per node.
        assert len(cluster.metadata.token_map.ring) == 48
        session.execute(f"INSERT INTO {KS}.kv (k, v) VALUES ('probe', 1)")
        for i in range(1000):
            key = f"key{i}"
            driver = [h.address for h in cluster.metadata.get_replicas(KS, key.encode())]
            ours = three.tool("getendpoints", KS, "kv", key, node=1 + i % 3)["endpoints"]
            assert sorted(driver) == sorted(ours), key
            assert len(ours) == 3
    finally:
        cluster.shutdown()


def test_quorum_survives_a_killed_node_and_hints_bring_it_back(three):
    """Writes at QUORUM succeed with one node killed by SIGKILL; at ALL they fail with Unavailable;
    after the node restarts, hints replay and a CL ONE read served by that node alone returns
    every write made while it was down, without repair."""
    down = three.address(3)
    events = EventListener(three.address(1), three.native_port)
    three.stop(3)
    events.wait_for("STATUS_CHANGE", "DOWN", down)
    wait_state(three, down, "DN", observer=1)
    wait_state(three, down, "DN", observer=2)
    cluster, s = session_on(three, [three.address(1), three.address(2)], cl=ConsistencyLevel.QUORUM)
    try:
        write_kv(s, "down", 300)
        with pytest.raises(Unavailable) as e:
            s.execute(SimpleStatement(f"INSERT INTO {KS}.kv (k, v) VALUES ('all', 1)", consistency_level=ConsistencyLevel.ALL))
        assert e.value.consistency == ConsistencyLevel.ALL
        assert e.value.required_replicas == 3 and e.value.alive_replicas == 2
        assert pending_hint_bytes(three, (1, 2)) > 0, "writes to a down replica must be hinted"
    finally:
        cluster.shutdown()
    three.start(3)
    events.wait_for("STATUS_CHANGE", "UP", down)
    events.close()
    # A restart is DOWN then UP: the node never leaves the ring meanwhile (its new incarnation's state
    # arrives over gossip rounds; until it is whole, the old one stands for it).
    assert ("TOPOLOGY_CHANGE", "REMOVED_NODE", down) not in events.seen, events.seen
    wait_state(three, down, "UN", observer=1)
    wait_no_hints(three, [1, 2])
    cluster, s = session_on(three, [down], cl=ConsistencyLevel.ONE)
    try:
        missing = missing_kv(s, "down", 300)
        assert not missing, f"{len(missing)} writes missing on the restarted node, e.g. {missing[:5]}"
        one = s.execute(SimpleStatement(f"SELECT v FROM {KS}.kv WHERE k = 'down7'")).one()
        assert one.v == 7
    finally:
        cluster.shutdown()


def test_a_drained_node_is_down_to_its_peers_and_a_restart_brings_it_back(three):
    """`shoal tool drain` on node 3 (as Cassandra's: stop serving clients, announce a shutdown,
    flush): nodes 1 and 2 see it DN while its process is still up, so writes at QUORUM through
    them hint it; after a restart on its disk the hints replay and node 3 alone serves them."""
    drained = three.address(3)
    assert three.tool("drain", node=3)["mode"] == "DRAINED"
    wait_state(three, drained, "DN", observer=1)
    wait_state(three, drained, "DN", observer=2)
    cluster, s = session_on(three, [three.address(1), three.address(2)], cl=ConsistencyLevel.QUORUM)
    try:
        write_kv(s, "drained", 100)
        assert pending_hint_bytes(three, (1, 2)) > 0, "writes to a drained replica must be hinted"
    finally:
        cluster.shutdown()
    three.stop(3, graceful=True)
    three.start(3)
    wait_state(three, drained, "UN", observer=1)
    wait_no_hints(three, [1, 2])
    cluster, s = session_on(three, [drained], cl=ConsistencyLevel.ONE)
    try:
        missing = missing_kv(s, "drained", 100)
        assert not missing, f"{len(missing)} writes missing on the drained node, e.g. {missing[:5]}"
    finally:
        cluster.shutdown()


def stress(cluster, *args, timeout=180):
    """`shoal stress` with the cluster's first node as contact point."""
    cmd = [cluster.bin_path, "stress", *args, "-node", cluster.address(1), "-port", f"native={cluster.native_port}"]
    return subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


def test_simplenative_stress_sends_each_key_to_its_replica(three, tmp_path):
    """`shoal stress -mode simplenative` (the stress tool's own client, ADR 0004) on 3 nodes: RF=3
    QUORUM writes verify through it. With node 3 down at RF=1 and one thread writing keys in order,
    the first key to fail is the first key node 3 owns, and it fails on the connection to node 3
    (the client routed it there: token-aware), not with a coordinator's Unavailable, after its
    ten tries. At RF=3 CL ONE the dead node costs only retries: a write routed to node 3 is tried
    again on the next replica (cassandra-stress's default, `-errors retries=9`), and with
    `-errors retries=0` the first such write ends the run."""
    sn = ["-mode", "simplenative"]
    rf3 = ["-schema", "keyspace=sn3", "replication(factor=3)"]
    w = stress(three, "write", "n=3000", "cl=QUORUM", *rf3, "-rate", "threads=16", *sn)
    assert w.returncode == 0, w.stdout + w.stderr
    v = stress(three, "verify", "n=3000", "cl=QUORUM", *rf3, *sn)
    assert v.returncode == 0 and "0 missing, 0 with wrong values" in v.stdout, v.stdout + v.stderr

    rf1 = ["-schema", "keyspace=sn1", "replication(factor=1)"]
    first = stress(three, "write", "n=10", "no-warmup", *rf1, *sn)
    assert first.returncode == 0, first.stdout + first.stderr
    down = three.address(3)
    three.stop(3)
    wait_state(three, down, "DN", observer=1)
    try:
        r = stress(three, "write", "n=3000", "no-warmup", *rf1, "-rate", "threads=1", *sn)
        assert r.returncode == 1, r.stdout + r.stderr
        m = re.search(r"write of key (\d+) after 10 tries: (.*)", r.stderr)
        assert m, r.stderr
        key, why = m.group(1), m.group(2)
        assert f"cannot connect to {down}:" in why, why
        cluster, s = session_on(three, [three.address(1)], policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()))
        try:
            def replicas(k):
                return [h.address for h in cluster.metadata.get_replicas("sn1", k.encode())]
            assert replicas(key) == [down], key
            earlier = [f"{i:010d}" for i in range(1, int(key))]
            assert all(replicas(k) != [down] for k in earlier), "an earlier key of node 3 was written"
        finally:
            cluster.shutdown()

        report = tmp_path / "retried.json"
        cl1 = ["write", "n=3000", "cl=ONE", "no-warmup", *rf3, "-rate", "threads=4", *sn]
        r = stress(three, *cl1, "--json", str(report))
        assert r.returncode == 0, r.stdout + r.stderr
        summary = json.loads(report.read_text())["summary"]
        assert summary["ops"] == 3000 and summary["errors"] == 0, summary
        assert 0 < summary["retries"] < 3000, summary
        r = stress(three, *cl1, "-errors", "retries=0")
        assert r.returncode == 1 and f"cannot connect to {down}:" in r.stderr, r.stdout + r.stderr
    finally:
        three.start(3)
        wait_state(three, down, "UN", observer=1)


def test_schema_created_on_one_node_is_visible_everywhere(three):
    """Schema created on one node is visible through every node; the driver's schema agreement succeeds."""
    cluster, s = session_on(three, [three.address(2)])
    try:
        s.execute("CREATE KEYSPACE sch WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2}")
        s.execute("CREATE TABLE sch.t (a int, b int, c text, PRIMARY KEY (a, b))")
        s.execute("CREATE TYPE sch.addr (street text, zip int)")
        assert cluster.control_connection.wait_for_schema_agreement(wait_time=30)
    finally:
        cluster.shutdown()
    versions = set()
    for i in (1, 2, 3):
        c, s = session_on(three, [three.address(i)])
        try:
            tables = {r.table_name for r in s.execute("SELECT table_name FROM system_schema.tables WHERE keyspace_name = 'sch'")}
            assert tables == {"t"}, f"node {i}"
            udts = {r.type_name for r in s.execute("SELECT type_name FROM system_schema.types WHERE keyspace_name = 'sch'")}
            assert udts == {"addr"}, f"node {i} lost the last DDL"
            versions.add(s.execute("SELECT schema_version FROM system.local").one().schema_version)
            s.execute("INSERT INTO sch.t (a, b, c) VALUES (1, 2, 'x')")
        finally:
            c.shutdown()
    assert len(versions) == 1
    # Gossip carries each node's version to the others within a few rounds;
    # every node's describecluster must then agree on the one version.
    (version,) = versions
    for i in (1, 2, 3):
        started, seen = time.monotonic(), {}
        def agreed():
            seen.update(schema_versions=three.tool("describecluster", node=i)["schema_versions"])
            return list(seen["schema_versions"]) == [str(version)]
        try:
            wait_until(agreed, timeout=20, interval=0.2)
        except AssertionError:
            raise AssertionError(f"node {i}'s describecluster never showed only {version}: last {seen}") from None
        print(f"node {i}: one schema version after {time.monotonic() - started:.1f}s")
        assert sorted(seen["schema_versions"][str(version)]) == sorted(three.address(j) for j in (1, 2, 3))


def test_ddl_is_applied_on_every_live_node_before_it_is_answered(three):
    """A DDL's answer comes after every live peer applied it: a driver that does not wait for
    schema agreement (or counts a node it has not connected to yet as down, as the Java driver 4
    does) can use the new table on another node at once. Before the wait, 7 of 40 prepares on
    node 3 right after a CREATE TABLE on node 1 failed with "unconfigured table"."""
    def no_agreement_session(i):
        profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([three.address(i)]))
        c = Cluster([three.address(i)], port=three.native_port, execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                    protocol_version=4, max_schema_agreement_wait=0)
        return c, c.connect()
    c1, s1 = no_agreement_session(1)
    c3, s3 = no_agreement_session(3)
    try:
        s1.execute("CREATE KEYSPACE ddlwait WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        for i in range(30):
            s1.execute(f"CREATE TABLE ddlwait.t{i} (k int PRIMARY KEY, v int)")
            s3.prepare(f"SELECT v FROM ddlwait.t{i} WHERE k = ?")
            s3.execute(f"INSERT INTO ddlwait.t{i} (k, v) VALUES (1, {i})")
            s1.execute(f"ALTER TABLE ddlwait.t{i} ADD w text")
            s3.execute(f"SELECT w FROM ddlwait.t{i} WHERE k = 1")
    finally:
        c1.shutdown()
        c3.shutdown()


def test_ddl_made_at_the_same_time_on_different_nodes_keeps_every_change(three):
    """Schemas merge per keyspace, table and type (last write wins per object), not whole: tables
    created at once through three nodes all survive, on every node (the Java driver's test classes,
    run in parallel, lost tables before)."""
    sessions = [session_on(three, [three.address(i)]) for i in (1, 2, 3)]
    try:
        sessions[0][1].execute(
            "CREATE KEYSPACE ddlrace WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        errors = []

        def create(n):
            _, s = sessions[n]
            try:
                for i in range(15):
                    s.execute(f"CREATE TABLE ddlrace.n{n}_t{i} (k int PRIMARY KEY, v int)")
                    if i % 5 == 0:
                        s.execute(f"CREATE TYPE ddlrace.n{n}_u{i} (a int)")
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(f"node {n + 1}: {e!r}")
        threads = [threading.Thread(target=create, args=(n,)) for n in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors, errors
        expected = {f"n{n}_t{i}" for n in range(3) for i in range(15)}
        expected_types = {f"n{n}_u{i}" for n in range(3) for i in (0, 5, 10)}
        for n, (_, s) in enumerate(sessions):
            def complete():
                tables = {r.table_name for r in s.execute(
                    "SELECT table_name FROM system_schema.tables WHERE keyspace_name = 'ddlrace'")}
                types = {r.type_name for r in s.execute(
                    "SELECT type_name FROM system_schema.types WHERE keyspace_name = 'ddlrace'")}
                return tables == expected and types == expected_types
            wait_until(complete, timeout=20, interval=0.2)
            s.execute("INSERT INTO ddlrace.n2_t14 (k, v) VALUES (1, 1)")
    finally:
        for c, _ in sessions:
            c.shutdown()


def test_truncate_empties_the_table_on_every_node(three):
    cluster, s = session_on(three, [three.address(1)], cl=ConsistencyLevel.ALL)
    try:
        s.execute("CREATE TABLE sch.trunc (k int PRIMARY KEY, v int)")
        assert cluster.control_connection.wait_for_schema_agreement(wait_time=30)
        for k in range(30):
            s.execute(f"INSERT INTO sch.trunc (k, v) VALUES ({k}, {k})")
        s.execute("TRUNCATE sch.trunc")
    finally:
        cluster.shutdown()
    for i in (1, 2, 3):
        c, s = session_on(three, [three.address(i)], cl=ConsistencyLevel.ONE)
        try:
            assert list(s.execute("SELECT * FROM sch.trunc")) == [], f"node {i}"
        finally:
            c.shutdown()


def test_a_node_of_another_cluster_is_refused(three, tmp_path):
    """A node configured with another cluster_name never joins: gossip drops its messages."""
    from shoal_harness import ShoalNode

    stranger = ShoalNode(tmp_path / "stranger", host="127.0.0.20", cluster_name="Other Cluster",
                         config={"storage_port": three.storage_port},
                         extra_args=["--seeds", f"127.0.0.20,{three.address(1)}"])
    stranger.start()
    try:
        time.sleep(3)
        nodes = [n["address"] for dc in three.tool("status")["datacenters"] for n in dc["nodes"]]
        assert "127.0.0.20" not in nodes and len(nodes) == 3
        c, s = session_on(three, [three.address(1)])
        try:
            assert "127.0.0.20" not in {str(r.peer) for r in s.execute("SELECT peer FROM system.peers")}
        finally:
            c.shutdown()
    finally:
        stranger.stop()


def test_restart_under_a_new_address_keeps_identity_and_data(three):
    """A node restarted on its old data directory under a different 127.0.0.x address rejoins with
    the same host id and its data: no streaming, no repair, nothing lost."""
    old = three.address(2)
    status = three.tool("status")
    host_id = next(n["host_id"] for dc in status["datacenters"] for n in dc["nodes"] if n["address"] == old)
    cluster, s = session_on(three, three.contact_points, cl=ConsistencyLevel.ALL)
    try:
        for i in range(100):
            s.execute(f"INSERT INTO {KS}.kv (k, v) VALUES ('move{i}', {i})")
    finally:
        cluster.shutdown()
    events = EventListener(three.address(1), three.native_port)
    three.stop(2, graceful=True)
    events.wait_for("STATUS_CHANGE", "DOWN", old)
    new = "127.0.0.9"
    three.start(2, address=new)
    events.wait_for("TOPOLOGY_CHANGE", "NEW_NODE", new)
    events.close()
    wait_state(three, new, "UN", observer=1)
    wait_state(three, new, "UN", observer=3)
    doc = three.tool("status", node=1)
    nodes = [n for dc in doc["datacenters"] for n in dc["nodes"]]
    assert len(nodes) == 3, nodes
    moved = [n for n in nodes if n["host_id"] == host_id]
    assert len(moved) == 1 and moved[0]["address"] == new
    assert old not in {n["address"] for n in nodes}
    assert pending_hint_bytes(three, (1,)) == 0
    # Its own data, read from it alone.
    cluster, s = session_on(three, [new], cl=ConsistencyLevel.ONE)
    try:
        local = s.execute("SELECT host_id, rpc_address FROM system.local").one()
        assert str(local.host_id) == host_id
        rows = {r.k: r.v for r in s.execute(f"SELECT k, v FROM {KS}.kv")}
        assert all(rows.get(f"move{i}") == i for i in range(100))
        assert all(rows.get(f"down{i}") == i for i in range(300))
    finally:
        cluster.shutdown()
    # Drivers see the node at its new address.
    cluster, s = session_on(three, [three.address(1)])
    try:
        peers = {str(r.peer): str(r.host_id) for r in s.execute("SELECT peer, host_id FROM system.peers")}
        assert peers.get(new) == host_id and old not in peers
    finally:
        cluster.shutdown()


def test_quorum_read_repairs_a_stale_replica(tmp_path):
    """A replica holding a stale value is repaired by a QUORUM read."""
    with ShoalCluster(tmp_path / "c", nodes=3, config={"hinted_handoff_enabled": False}) as c:
        cluster, s = session_on(c, [c.address(1)], cl=ConsistencyLevel.ALL)
        try:
            s.execute("CREATE KEYSPACE rr WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
            s.execute("CREATE TABLE rr.t (k int PRIMARY KEY, v text)")
            assert cluster.control_connection.wait_for_schema_agreement(wait_time=30)
            for k in range(20):
                s.execute(f"INSERT INTO rr.t (k, v) VALUES ({k}, 'old')")
        finally:
            cluster.shutdown()
        stale = c.address(3)
        c.stop(3)
        wait_state(c, stale, "DN", observer=1)
        cluster, s = session_on(c, [c.address(1)], cl=ConsistencyLevel.QUORUM)
        try:
            for k in range(20):
                s.execute(f"UPDATE rr.t SET v = 'new' WHERE k = {k}")
        finally:
            cluster.shutdown()
        assert pending_hint_bytes(c, (1,)) == 0, "hinted handoff is off in this cluster"
        c.start(3)
        wait_state(c, stale, "UN", observer=1)
        # Node 3 alone still has the old values.
        cluster, s = session_on(c, [stale], cl=ConsistencyLevel.ONE)
        try:
            assert s.execute("SELECT v FROM rr.t WHERE k = 0").one().v == "old"
            # A QUORUM read coordinated by the stale node contacts it and one up-to-date replica.
            for k in range(1, 20):
                row = s.execute(SimpleStatement(f"SELECT v FROM rr.t WHERE k = {k}", consistency_level=ConsistencyLevel.QUORUM)).one()
                assert row.v == "new", k
            # Repaired: node 3 alone now answers the new value.
            for k in range(1, 20):
                assert s.execute(f"SELECT v FROM rr.t WHERE k = {k}").one().v == "new", k
            # The key that was not read at QUORUM is still stale: nothing else repaired it.
            assert s.execute("SELECT v FROM rr.t WHERE k = 0").one().v == "old"
        finally:
            cluster.shutdown()


def test_two_dcs_three_racks_local_quorum_and_each_quorum(tmp_path):
    """2 DCs x 3 nodes on 3 racks, NetworkTopologyStrategy {dc1:3, dc2:3}: exactly 3 replicas per DC
    on distinct racks; LOCAL_QUORUM succeeds with the other DC fully down; EACH_QUORUM fails then."""
    with ShoalCluster(tmp_path / "c", nodes=6, dcs=2, racks=3) as c:
        status = c.tool("status")
        where = {n["address"]: (dc["name"], n["rack"]) for dc in status["datacenters"] for n in dc["nodes"]}
        assert len(where) == 6
        assert sorted({dc for dc, _ in where.values()}) == ["dc1", "dc2"]
        cluster, s = session_on(c, [c.address(1)], cl=ConsistencyLevel.EACH_QUORUM)
        try:
            s.execute("CREATE KEYSPACE geo WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 3, 'dc2': 3}")
            s.execute("CREATE TABLE geo.t (k int PRIMARY KEY, v int)")
            assert cluster.control_connection.wait_for_schema_agreement(wait_time=30)
            s.execute("INSERT INTO geo.t (k, v) VALUES (0, 0)")
        finally:
            cluster.shutdown()
        for key in range(200):
            endpoints = c.tool("getendpoints", "geo", "t", str(key), node=1 + key % 6)["endpoints"]
            assert len(endpoints) == 6, endpoints
            for dc in ("dc1", "dc2"):
                racks = [where[e][1] for e in endpoints if where[e][0] == dc]
                assert len(racks) == 3 and len(set(racks)) == 3, (key, dc, racks)
        dc2 = [a for a, (dc, _) in where.items() if dc == "dc2"]
        for i in range(1, 7):
            if c.address(i) in dc2:
                c.stop(i)
        dc1 = [a for a, (dc, _) in where.items() if dc == "dc1"]
        # Every dc1 node may coordinate below: each must have seen dc2 go down.
        for i in range(1, 7):
            if c.address(i) in dc1:
                for a in dc2:
                    wait_state(c, a, "DN", observer=i)
        policy = DCAwareRoundRobinPolicy(local_dc="dc1")
        cluster, s = session_on(c, dc1, cl=ConsistencyLevel.LOCAL_QUORUM, policy=policy)
        try:
            for k in range(1, 51):
                s.execute(f"INSERT INTO geo.t (k, v) VALUES ({k}, {k})")
            assert s.execute("SELECT v FROM geo.t WHERE k = 7").one().v == 7
            with pytest.raises(Unavailable) as e:
                s.execute(SimpleStatement("INSERT INTO geo.t (k, v) VALUES (99, 99)", consistency_level=ConsistencyLevel.EACH_QUORUM))
            assert e.value.consistency == ConsistencyLevel.EACH_QUORUM
            assert e.value.alive_replicas == 0 and e.value.required_replicas == 2
        finally:
            cluster.shutdown()


OPS_COMMANDS = [["tpstats"], ["tablestats", KS], ["tablehistograms", KS, "kv"], ["proxyhistograms"],
                ["compactionstats"], ["netstats"], ["gossipinfo"]]
VIEWS = ["clients", "settings", "thread_pools", "local_read_latency", "local_write_latency", "local_scan_latency",
         "disk_usage", "caches"]


def test_ops_commands_and_virtual_tables_on_every_node(three, cqlsh_bin):
    """Issue 25: after writes and reads at QUORUM through every node, each node prints `tpstats`,
    `tablestats`, `tablehistograms`, `proxyhistograms`, `compactionstats`, `netstats` and `gossipinfo`
    (nodetool's text, and `--json` that parses), and cqlsh reads each `system_views` table on it."""
    cl, s = session_on(three, three.contact_points)
    try:
        ins = s.prepare(f"INSERT INTO {KS}.kv (k, v) VALUES (?, ?)")
        ins.consistency_level = ConsistencyLevel.QUORUM
        sel = s.prepare(f"SELECT v FROM {KS}.kv WHERE k = ?")
        sel.consistency_level = ConsistencyLevel.QUORUM
        for i in range(300):
            s.execute(ins, (f"ops{i}", i))
            s.execute(sel, (f"ops{i}",))
    finally:
        cl.shutdown()
    for node in (1, 2, 3):
        host = three.address(node)
        for command in OPS_COMMANDS:
            text = subprocess.run([three.bin_path, "tool", "-h", host, "-p", str(three.admin_port), *command],
                                  capture_output=True, text=True, timeout=60)
            assert text.returncode == 0 and text.stdout.strip(), (node, command, text.stderr)
            doc = three.tool(*command, node=node)
            assert isinstance(doc, dict) and "error" not in doc, (node, command, doc)
        gossip = three.tool("gossipinfo", node=node)
        assert len(gossip["endpoints"]) == 3 and all(e["status"] == "NORMAL" for e in gossip["endpoints"]), gossip
        proxy = three.tool("proxyhistograms", node=node)
        assert proxy["write"]["count"] > 0 and proxy["read"]["count"] > 0, (node, proxy)
        local = three.tool("tablestats", KS, node=node)["keyspaces"][0]["tables"][0]
        assert local["local_write_count"] >= 300, (node, local)  # RF=3: every node holds every row
        for view in VIEWS:
            out = subprocess.run([cqlsh_bin, host, str(three.native_port), "-e", f"SELECT * FROM system_views.{view}"],
                                 capture_output=True, text=True, timeout=120)
            assert out.returncode == 0 and "rows)" in out.stdout, (node, view, out.stdout, out.stderr)
