"""Schema agreement on a 3-node cluster, as drivers use it: DDL through one node, the driver's
agreement check on another (its control connection: system.local and system.peers), then the new
table used at once through every node. Once the check passes, every node must know the table
(the Java driver 4 prepares on every node right after its check; its TypesTest saw "unconfigured
table people" before, issue 23).

Bounded: one cluster, a fixed number of rounds, each wait with its own timeout."""

import threading
import time

import pytest
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import WhiteListRoundRobinPolicy

from cluster_harness import ShoalCluster
from shoal_harness import EXTERNAL, wait_until

pytestmark = pytest.mark.skipif(bool(EXTERNAL), reason="starts its own cluster of shoal processes")

ROUNDS = 12
WORKERS = 4
AGREEMENT_WAIT_S = 10


def pinned(cluster, address, **kwargs):
    """A driver cluster that sends everything (its control connection too) to `address` only."""
    profiles = {EXEC_PROFILE_DEFAULT: ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([address]),
                                                       request_timeout=30)}
    return Cluster([address], port=cluster.native_port, execution_profiles=profiles, protocol_version=4, **kwargs)


def versions_reported(session):
    """{address: schema_version} as `session`'s node reports them (itself and its peers)."""
    local = session.execute("SELECT rpc_address, schema_version FROM system.local").one()
    out = {str(local.rpc_address): local.schema_version}
    for row in session.execute("SELECT rpc_address, schema_version FROM system.peers"):
        out[str(row.rpc_address)] = row.schema_version
    return out


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    with ShoalCluster(tmp_path_factory.mktemp("agree") / "c", nodes=3) as c:
        yield c


@pytest.mark.parametrize("workers", [1, WORKERS], ids=["one_client", "clients_at_once"])
def test_after_agreement_every_node_prepares_the_new_table(three, workers):
    """One client, then several at once (as the Java test classes run in parallel), each in its own
    keyspace: a CREATE TYPE and a CREATE TABLE using it through node 2, 3 or 1 in turn, the driver's
    agreement wait on node 1's control connection, then a PREPARE and an INSERT through each node;
    at the end every node reports one schema version for all. Without the DDL's wait for its live
    peers, node 1 agreed at once (its own old version and the coordinator's, stale in gossip) and
    then had no such table."""
    addresses = three.contact_points
    # The DDL sessions: one per node, none waiting for agreement itself (max_schema_agreement_wait=0).
    ddl = [pinned(three, a, max_schema_agreement_wait=0) for a in addresses]
    ddl_sessions = [c.connect() for c in ddl]
    # The agreement checker: a control connection on node 1, as the Java tests' contact point.
    control = pinned(three, addresses[0])
    control.connect()
    users = [pinned(three, a, max_schema_agreement_wait=0, prepare_on_all_hosts=False) for a in addresses]
    user_sessions = [c.connect() for c in users]
    failures, errors = [], []

    def work(w):
        ks = f"agree{workers}_{w}"
        try:
            ddl_sessions[w % 3].execute(
                f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
            assert control.control_connection.wait_for_schema_agreement(wait_time=AGREEMENT_WAIT_S)
            for r in range(ROUNDS):
                via = ddl_sessions[(w + r + 1) % 3]
                via.execute(f"CREATE TYPE {ks}.addr{r} (street text, number int)")
                via.execute(f"CREATE TABLE {ks}.people{r} (k int PRIMARY KEY, home frozen<addr{r}>, v int)")
                if not control.control_connection.wait_for_schema_agreement(wait_time=AGREEMENT_WAIT_S):
                    failures.append(f"{ks} round {r}: no agreement within {AGREEMENT_WAIT_S} s")
                    continue
                agreed = versions_reported(ddl_sessions[0])
                for n, s in enumerate(user_sessions):
                    try:
                        insert = s.prepare(f"INSERT INTO {ks}.people{r} (k, v) VALUES (?, ?)")
                        s.execute(insert, (n, r))
                    except Exception as e:  # noqa: BLE001 - collected and reported below
                        failures.append(f"{ks} round {r}, node {n + 1} after agreement on {agreed}: {e}")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"worker {w}: {e!r}")

    try:
        threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=240)
        assert not any(t.is_alive() for t in threads), "workers still running after 240 s"
        assert not errors, errors
        assert not failures, f"{len(failures)} uses failed after schema agreement: {failures[:5]}"
        # Quiet now: every node soon reports one version for everyone (gossip carries each node's own
        # version to its peers), each node's own system.local included: the same schema, the same digest.
        def one_version():
            reports = [versions_reported(s) for s in user_sessions]
            versions = {v for report in reports for v in report.values()}
            return len(versions) == 1 and all(len(report) == 3 for report in reports) and reports
        wait_until(one_version, timeout=10, interval=0.2, what="one schema version on every node")
        print(f"{workers} workers x {ROUNDS} rounds in {time.monotonic() - started:.1f} s")
    finally:
        for c in ddl + users + [control]:
            c.shutdown()
