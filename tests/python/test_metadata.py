"""The driver's schema metadata (built from system_schema.*) describes tables
exactly: columns, types, partition and clustering keys with their order,
static columns, UDTs; ALTER TABLE shows up after a refresh."""

import pytest


@pytest.fixture
def events(ks_session, cluster, keyspace):
    ks_session.execute("CREATE TYPE addr (street text, zip int)")
    ks_session.execute(
        """
        CREATE TABLE events (
            tenant text, bucket int, ts timeuuid, seq int,
            payload text, tags set<text>, attrs map<text, int>, home frozen<addr>, owner text static,
            PRIMARY KEY ((tenant, bucket), ts, seq)
        ) WITH CLUSTERING ORDER BY (ts DESC, seq ASC) AND comment = 'event log'
        """
    )
    return ks_session


def _table(cluster, keyspace, name):
    ks = cluster.metadata.keyspaces.get(keyspace)
    assert ks is not None, f"keyspace {keyspace} missing from driver metadata"
    assert name in ks.tables, f"table {name} missing from metadata of {keyspace}: {list(ks.tables)}"
    return ks.tables[name]


def test_columns_keys_and_types(events, cluster, keyspace):
    tm = _table(cluster, keyspace, "events")
    assert [c.name for c in tm.partition_key] == ["tenant", "bucket"]
    assert [c.name for c in tm.clustering_key] == ["ts", "seq"]
    assert [c.is_reversed for c in tm.clustering_key] == [True, False], "ts DESC, seq ASC"
    assert [c.name for c in tm.primary_key] == ["tenant", "bucket", "ts", "seq"]
    types = {name: col.cql_type for name, col in tm.columns.items()}
    assert types == {
        "tenant": "text",
        "bucket": "int",
        "ts": "timeuuid",
        "seq": "int",
        "payload": "text",
        "tags": "set<text>",
        "attrs": "map<text, int>",
        "home": "frozen<addr>",
        "owner": "text",
    }, f"column types: {types}"
    assert tm.columns["owner"].is_static, "owner is static"
    assert not tm.columns["payload"].is_static
    assert tm.is_cql_compatible, "flags must be {compound} (otherwise the driver assumes COMPACT STORAGE)"
    assert tm.options.get("comment") == "event log", f"table options: {tm.options}"
    # Columns come in Cassandra's order: partition key, clustering key, then the rest by name.
    assert list(tm.columns)[:4] == ["tenant", "bucket", "ts", "seq"], f"column order {list(tm.columns)}"


def test_export_as_string(events, cluster, keyspace):
    tm = _table(cluster, keyspace, "events")
    cql = tm.export_as_string()
    assert f"CREATE TABLE {keyspace}.events" in cql, cql
    assert "PRIMARY KEY ((tenant, bucket), ts, seq)" in cql, cql
    assert "CLUSTERING ORDER BY (ts DESC, seq ASC)" in cql, cql
    assert "owner text static" in cql, cql
    ks_cql = cluster.metadata.keyspaces[keyspace].export_as_string()
    assert f"CREATE KEYSPACE {keyspace}" in ks_cql and "SimpleStrategy" in ks_cql, ks_cql
    assert f"CREATE TYPE {keyspace}.addr" in ks_cql, ks_cql
    assert cluster.metadata.export_schema_as_string()


def test_user_type_metadata(events, cluster, keyspace):
    ut = cluster.metadata.keyspaces[keyspace].user_types.get("addr")
    assert ut is not None, "UDT addr missing from metadata (system_schema.types)"
    assert ut.field_names == ["street", "zip"]
    assert ut.field_types == ["text", "int"]


def test_alter_table_add_and_drop_column(events, cluster, keyspace):
    events.execute("ALTER TABLE events ADD extra bigint")
    cluster.refresh_schema_metadata()
    tm = _table(cluster, keyspace, "events")
    assert "extra" in tm.columns and tm.columns["extra"].cql_type == "bigint", f"columns: {list(tm.columns)}"
    events.execute("INSERT INTO events (tenant, bucket, ts, seq, extra) VALUES ('a', 1, now(), 1, 42)")
    assert events.execute("SELECT extra FROM events WHERE tenant = 'a' AND bucket = 1").one().extra == 42

    events.execute("ALTER TABLE events DROP extra")
    cluster.refresh_schema_metadata()
    tm = _table(cluster, keyspace, "events")
    assert "extra" not in tm.columns, f"dropped column still in metadata: {list(tm.columns)}"
    rs = events.execute("SELECT * FROM events WHERE tenant = 'a' AND bucket = 1")
    assert "extra" not in rs.column_names


def test_metadata_follows_schema_changes_without_refresh(ks_session, cluster, keyspace):
    ks_session.execute("CREATE TABLE auto (k int PRIMARY KEY)")
    assert "auto" in cluster.metadata.keyspaces[keyspace].tables, "driver refreshes on SCHEMA_CHANGE results"
    ks_session.execute("ALTER TABLE auto ADD v text")
    assert "v" in cluster.metadata.keyspaces[keyspace].tables["auto"].columns
    ks_session.execute("DROP TABLE auto")
    assert "auto" not in cluster.metadata.keyspaces[keyspace].tables


def test_drop_keyspace_leaves_metadata(session, cluster):
    from shoal_harness import create_keyspace, unique_keyspace_name

    name = unique_keyspace_name("dropme")
    create_keyspace(session, name)
    assert name in cluster.metadata.keyspaces
    session.execute(f"DROP KEYSPACE {name}")
    assert name not in cluster.metadata.keyspaces
    cluster.refresh_schema_metadata()
    assert name not in cluster.metadata.keyspaces


def test_system_schema_rows(session, events, keyspace):
    rows = list(session.execute(
        "SELECT column_name, kind, position, clustering_order, type FROM system_schema.columns "
        "WHERE keyspace_name = %s AND table_name = 'events'", (keyspace,)))
    got = {r.column_name: (r.kind, r.position, r.clustering_order, r.type) for r in rows}
    assert got["tenant"] == ("partition_key", 0, "none", "text"), got["tenant"]
    assert got["bucket"] == ("partition_key", 1, "none", "int"), got["bucket"]
    assert got["ts"] == ("clustering", 0, "desc", "timeuuid"), got["ts"]
    assert got["seq"] == ("clustering", 1, "asc", "int"), got["seq"]
    assert got["owner"] == ("static", -1, "none", "text"), got["owner"]
    assert got["payload"] == ("regular", -1, "none", "text"), got["payload"]
    assert got["home"][3] == "frozen<addr>", got["home"]
    t = session.execute("SELECT flags FROM system_schema.tables WHERE keyspace_name = %s AND table_name = 'events'",
                        (keyspace,)).one()
    assert t is not None and set(t.flags) == {"compound"}, f"flags: {t}"


def test_schema_change_event_reaches_other_clients(shoal_node, ks_session, keyspace):
    """A second client learns about DDL done by the first through the
    SCHEMA_CHANGE events its control connection REGISTERed for."""
    from shoal_harness import connect_cluster, wait_until

    other = connect_cluster(shoal_node)
    try:
        other.connect()
        assert keyspace in other.metadata.keyspaces
        ks_session.execute("CREATE TABLE pushed (k int PRIMARY KEY, v int)")
        wait_until(lambda: "pushed" in other.metadata.keyspaces[keyspace].tables, timeout=20, interval=0.2,
                   what="the other client's metadata to show the new table (SCHEMA_CHANGE event)")
        ks_session.execute("ALTER TABLE pushed ADD w text")
        wait_until(lambda: "w" in other.metadata.keyspaces[keyspace].tables["pushed"].columns, timeout=20,
                   interval=0.2, what="the other client's metadata to show the new column")
    finally:
        other.shutdown()
