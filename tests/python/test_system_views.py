"""Issue 25's virtual tables: Cassandra 4.0+'s `system_views` (clients, settings, thread_pools,
local_read_latency / local_write_latency / local_scan_latency, disk_usage, caches), read through cqlsh
and the Python driver on a real node. Each node answers for itself; the keyspace is described in
`system_virtual_schema` as Cassandra's is."""

import subprocess

from shoal_harness import connect_cluster, create_keyspace

TABLES = ["caches", "clients", "disk_usage", "local_read_latency", "local_scan_latency", "local_write_latency",
          "settings", "thread_pools"]


def test_system_views_answer_from_the_nodes_state(shoal_node_factory, cqlsh_bin):
    node = shoal_node_factory()
    c = connect_cluster(node)
    try:
        s = c.connect()
        create_keyspace(s, "sv")
        s.execute("CREATE TABLE sv.t (k int PRIMARY KEY, v text)")
        for i in range(40):
            s.execute("INSERT INTO sv.t (k, v) VALUES (%s, %s)", (i, "x" * 100))
        for i in range(25):
            s.execute("SELECT * FROM sv.t WHERE k = %s", (i,))
        for i in range(5):  # read again: served by the row cache
            assert s.execute("SELECT v FROM sv.t WHERE k = %s", (i,)).one().v == "x" * 100
        listed = sorted(r.table_name for r in s.execute(
            "SELECT table_name FROM system_virtual_schema.tables WHERE keyspace_name = 'system_views'"))
        assert listed == TABLES, listed
        assert not list(s.execute("SELECT * FROM system_schema.tables WHERE keyspace_name = 'system_views'"))

        clients = list(s.execute("SELECT * FROM system_views.clients"))
        assert clients, "this very connection is a client"
        mine = [r for r in clients if r.driver_name and "Python Driver" in r.driver_name]
        assert mine and all(r.connection_stage == "ready" and r.protocol_version in (4, 5) for r in mine), clients
        assert sum(r.request_count for r in mine) >= 70, mine
        assert all(r.username == "anonymous" and r.ssl_enabled is False for r in mine), mine

        settings = {r.name: r.value for r in s.execute("SELECT * FROM system_views.settings")}
        assert settings["native_transport_port"] == str(node.port), settings
        assert settings["admin_port"] == str(node.config["admin_port"])
        assert settings["commitlog_sync"] == "periodic" and settings["authenticator"] == "AllowAllAuthenticator"
        one = s.execute("SELECT value FROM system_views.settings WHERE name = 'cluster_name'").one()
        assert one.value == node.cluster_name

        pools = {r.name: r for r in s.execute("SELECT * FROM system_views.thread_pools")}
        assert set(pools) == {"MutationStage", "ReadStage"}
        assert pools["MutationStage"].completed_tasks > 0 and pools["ReadStage"].completed_tasks > 0, pools

        w = s.execute("SELECT * FROM system_views.local_write_latency WHERE keyspace_name = 'sv' AND table_name = 't'").one()
        r = s.execute("SELECT * FROM system_views.local_read_latency WHERE keyspace_name = 'sv' AND table_name = 't'").one()
        assert w.count == 40 and r.count == 30, (w, r)
        assert r.p99th_ms >= r.p50th_ms > 0 and r.max_ms >= r.p99th_ms, r
        assert w.per_second is None  # not measured: null, not a made-up number

        disk = s.execute("SELECT * FROM system_views.disk_usage WHERE keyspace_name = 'sv'").one()
        assert disk.table_name == "t" and disk.mebibytes >= 0
        caches = {r.name: r for r in s.execute("SELECT * FROM system_views.caches")}
        assert set(caches) == {"chunks", "rows"}, caches
        chunks, rows = caches["chunks"], caches["rows"]
        assert chunks.capacity_bytes > 0 and chunks.hit_count is None, chunks
        # 25 partitions read once (misses that fill), 5 of them again (hits).
        assert rows.capacity_bytes > 0 and rows.entry_count >= 25 and rows.size_bytes > 25 * 100, rows
        assert rows.hit_count >= 5 and rows.request_count >= 30, rows
        assert abs(rows.hit_ratio - rows.hit_count / rows.request_count) < 1e-9, rows
    finally:
        c.shutdown()

    # cqlsh reads every table.
    for table in TABLES:
        out = subprocess.run([cqlsh_bin, node.host, str(node.port), "-e", f"SELECT * FROM system_views.{table}"],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and "rows)" in out.stdout, (table, out.stdout, out.stderr)
