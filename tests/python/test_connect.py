"""The DataStax driver connects with default settings and builds its metadata
(keyspaces, hosts, token map) from the system tables."""

import uuid

import pytest
from cassandra import InvalidRequest
from cassandra.cluster import Cluster

from shoal_harness import CLUSTER_NAME, EXTERNAL

MURMUR3 = "org.apache.cassandra.dht.Murmur3Partitioner"
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def _local(session):
    row = session.execute("SELECT * FROM system.local WHERE key = 'local'").one()
    assert row is not None, "system.local WHERE key='local' returned no row"
    return row


def test_driver_connects_with_default_settings(shoal_node):
    cluster = Cluster([shoal_node.host], port=shoal_node.port)
    try:
        session = cluster.connect()
        row = session.execute("SELECT release_version FROM system.local").one()
        assert row is not None and row.release_version, "no release_version from system.local"
        assert cluster.protocol_version in (4, 5), f"negotiated protocol version {cluster.protocol_version}, expected 4 or 5"
        assert not cluster.is_shutdown
    finally:
        cluster.shutdown()


def test_explicit_protocol_v4(shoal_node):
    cluster = Cluster([shoal_node.host], port=shoal_node.port, protocol_version=4)
    try:
        session = cluster.connect()
        assert session.execute("SELECT key FROM system.local").one().key == "local"
        assert cluster.protocol_version == 4
    finally:
        cluster.shutdown()


def test_metadata_lists_system_and_created_keyspace(cluster, keyspace):
    names = set(cluster.metadata.keyspaces)
    assert "system" in names, f"'system' missing from cluster.metadata.keyspaces: {sorted(names)}"
    assert "system_schema" in names, f"'system_schema' missing from cluster.metadata.keyspaces: {sorted(names)}"
    assert keyspace in names, f"created keyspace {keyspace} missing from metadata (schema-change refresh): {sorted(names)}"
    ks = cluster.metadata.keyspaces[keyspace]
    assert ks.replication_strategy is not None
    assert type(ks.replication_strategy).__name__ == "SimpleStrategy", f"replication strategy {ks.replication_strategy!r}"
    assert ks.replication_strategy.replication_factor == 1


def test_metadata_has_one_host_matching_system_local(cluster, session):
    local = _local(session)
    hosts = cluster.metadata.all_hosts()
    assert len(hosts) == 1, f"expected exactly one host, got {hosts}"
    host = hosts[0]
    assert host.is_up, f"host {host} is not up"
    assert host.host_id == local.host_id, f"host_id {host.host_id} != system.local {local.host_id}"
    assert host.datacenter == local.data_center
    assert host.rack == local.rack
    assert host.release_version == local.release_version


def test_token_map_holds_the_nodes_tokens(cluster, session):
    tm = cluster.metadata.token_map
    assert tm is not None, "cluster.metadata.token_map is None (partitioner or tokens missing in system.local?)"
    assert tm.token_class.__name__ == "Murmur3Token", f"token class {tm.token_class}"
    if not EXTERNAL:
        assert len(tm.ring) == 16, f"expected 16 tokens (num_tokens default), got {len(tm.ring)}"
    local_tokens = {int(t) for t in _local(session).tokens}
    ring_tokens = {t.value for t in tm.ring}
    assert ring_tokens == local_tokens, "token map ring differs from system.local tokens"
    owners = set(tm.token_to_host_owner.values())
    assert owners == set(cluster.metadata.all_hosts()), f"token owners {owners}"


def test_token_map_routes_every_key_to_the_node(cluster, keyspace):
    tm = cluster.metadata.token_map
    host = cluster.metadata.all_hosts()[0]
    for key in (b"a", b"123", b"\x00\xff" * 8, uuid.uuid4().bytes):
        replicas = cluster.metadata.get_replicas(keyspace, key)
        assert replicas == [host], f"replicas for {key!r} in {keyspace}: {replicas}"
    assert tm.get_replicas(keyspace, tm.token_class.from_key(b"xyz")) == [host]


def test_system_local_columns(session):
    row = _local(session)
    if not EXTERNAL:
        assert row.cluster_name == CLUSTER_NAME, f"cluster_name {row.cluster_name!r}, expected {CLUSTER_NAME!r}"
    else:
        assert row.cluster_name
    assert row.partitioner == MURMUR3, f"partitioner {row.partitioner!r}"
    assert row.release_version and row.release_version[0].isdigit(), f"release_version {row.release_version!r}"
    assert int(row.release_version.split(".")[0]) >= 4, f"release_version {row.release_version!r} must be >= 4 (schema parser V4)"
    assert isinstance(row.host_id, uuid.UUID), f"host_id {row.host_id!r} is not a uuid"
    assert isinstance(row.data_center, str) and row.data_center, f"data_center {row.data_center!r}"
    assert isinstance(row.rack, str) and row.rack, f"rack {row.rack!r}"
    assert row.cql_version and row.cql_version[0].isdigit(), f"cql_version {row.cql_version!r} (cqlsh needs it)"
    assert isinstance(row.schema_version, uuid.UUID), f"schema_version {row.schema_version!r}"
    tokens = row.tokens
    assert tokens, "system.local.tokens is empty"
    if not EXTERNAL:
        assert len(tokens) == 16, f"expected 16 tokens, got {len(tokens)}"
    for t in tokens:
        assert isinstance(t, str), f"token {t!r} is not text"
        v = int(t)
        assert I64_MIN <= v <= I64_MAX and str(v) == t, f"token {t!r} is not a decimal i64"


def test_system_local_selected_columns_in_requested_order(session):
    rs = session.execute("SELECT host_id, rpc_address, data_center, rack, tokens, cluster_name FROM system.local WHERE key='local'")
    assert rs.column_names == ["host_id", "rpc_address", "data_center", "rack", "tokens", "cluster_name"]
    row = rs.one()
    assert row.rpc_address is not None


@pytest.mark.parametrize("table", ["peers", "peers_v2"])
def test_system_peers_are_empty_on_one_node(session, table):
    rows = list(session.execute(f"SELECT * FROM system.{table}"))
    assert rows == [], f"system.{table} should be empty on a single node, got {rows}"


def test_unknown_table_is_invalid_request(session):
    with pytest.raises(InvalidRequest):
        session.execute("SELECT * FROM system.no_such_table_xyz")


def test_schema_agreement(cluster, keyspace, session):
    session.execute(f"CREATE TABLE {keyspace}.t (k int PRIMARY KEY, v int)")
    assert cluster.control_connection.wait_for_schema_agreement(wait_time=10), "schema agreement not reached"
