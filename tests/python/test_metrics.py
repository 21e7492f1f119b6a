"""Issue 25's metrics: a real node's Prometheus endpoint (`prometheus_port`, ScyllaDB's 9180) read by the
`prometheus_client` parser from PyPI, and the nodetool-style commands built on the same numbers
(`proxyhistograms`, `tablehistograms`, `tablestats`, `tpstats`). Request counters are checked exactly:
each request the test makes moves its (operation, consistency level) histogram's count by one, and a
`shoal stress` run moves the write count by the number of operations it reports. Needs its own node
(the endpoint is Shoal's: nothing to compare against Cassandra over CQL)."""

import json
import subprocess
import urllib.request

from cassandra import ConsistencyLevel, Unavailable
from cassandra.policies import FallthroughRetryPolicy
from cassandra.query import SimpleStatement
from prometheus_client.parser import text_string_to_metric_families

from shoal_harness import connect_cluster, create_keyspace

# Every family the issue names, by the Prometheus name Shoal gives it.
FAMILIES = {
    "shoal_client_request_latency_seconds": "histogram",
    "shoal_client_request_timeouts": "counter",
    "shoal_client_request_unavailables": "counter",
    "shoal_client_request_failures": "counter",
    "shoal_table_read_latency_seconds": "histogram",
    "shoal_table_range_latency_seconds": "histogram",
    "shoal_table_write_latency_seconds": "histogram",
    "shoal_table_live_sstables": "gauge",
    "shoal_table_live_disk_space_used_bytes": "gauge",
    "shoal_table_total_disk_space_used_bytes": "gauge",
    "shoal_table_memtable_live_data_size_bytes": "gauge",
    "shoal_table_pending_flushes": "gauge",
    "shoal_table_pending_compactions": "gauge",
    "shoal_table_estimated_rows": "gauge",
    "shoal_table_bytes_flushed": "counter",
    "shoal_table_tombstones_scanned": "histogram",
    "shoal_table_live_scanned": "histogram",
    "shoal_pending_compactions": "gauge",
    "shoal_pending_compaction_bytes": "gauge",
    "shoal_thread_pool_active_tasks": "gauge",
    "shoal_thread_pool_pending_tasks": "gauge",
    "shoal_thread_pool_completed_tasks": "counter",
    "shoal_hints_stored": "counter",
    "shoal_hints_replayed": "counter",
    "shoal_hints_pending_bytes": "gauge",
    "shoal_read_repairs": "counter",
    "shoal_dropped_messages": "counter",
    "shoal_streaming_bytes": "counter",
    "shoal_connected_native_clients": "gauge",
    "shoal_commitlog_total_size_bytes": "gauge",
    "shoal_commitlog_fsync_latency_seconds": "histogram",
    "shoal_block_cache_usage_bytes": "gauge",
    "shoal_row_cache_size_bytes": "gauge",
    "shoal_row_cache_capacity_bytes": "gauge",
    "shoal_row_cache_entries": "gauge",
    "shoal_row_cache_hits": "counter",
    "shoal_row_cache_requests": "counter",
    "shoal_memtable_bytes": "gauge",
    "shoal_memory_rss_bytes": "gauge",
    "shoal_compaction_bytes_compacted": "counter",
    "shoal_compaction_bytes_read": "counter",
}


def scrape(node, port_key="prometheus_port"):
    with urllib.request.urlopen(f"http://{node.host}:{node.config[port_key]}/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers["Content-Type"]
        return {f.name: f for f in text_string_to_metric_families(r.read().decode())}


def sample(families, family, suffix="", **labels):
    """The value of one sample (0 when the labelled series is not there yet)."""
    f = families.get(family)
    if f is None:
        return 0
    for s in f.samples:
        if s.name == family + suffix and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    return 0


def count(families, op, cl):
    return sample(families, "shoal_client_request_latency_seconds", "_count", op=op, cl=cl)


def test_every_family_is_scraped_and_request_counts_are_exact(shoal_node_factory):
    node = shoal_node_factory()
    c = connect_cluster(node)
    try:
        s = c.connect()
        create_keyspace(s, "mx")
        s.execute("CREATE TABLE mx.t (k int, c int, v text, PRIMARY KEY (k, c))")
        before = scrape(node)
        ins = s.prepare("INSERT INTO mx.t (k, c, v) VALUES (?, ?, ?)")
        ins.consistency_level = ConsistencyLevel.QUORUM
        for i in range(200):
            s.execute(ins, (i % 20, i, "v"))
        sel = s.prepare("SELECT * FROM mx.t WHERE k = ?")
        sel.consistency_level = ConsistencyLevel.ONE
        for i in range(120):
            s.execute(sel, (i % 20,))
        for _ in range(7):
            list(s.execute(SimpleStatement("SELECT * FROM mx.t", consistency_level=ConsistencyLevel.ONE)))
        # Partition 0 holds 10 rows; delete 4 of them: a read of it goes through 4 row tombstones.
        for ck in range(0, 80, 20):
            s.execute("DELETE FROM mx.t WHERE k = 0 AND c = %s", (ck,))
        tomb_before = scrape(node)
        s.execute(sel, (0,))
        s.execute("INSERT INTO mx.t (k, c, v) VALUES (1000, 1, 'x') IF NOT EXISTS")
        # RF 3 on one node: QUORUM is unavailable, counted as such (and in the latency histogram).
        create_keyspace(s, "mx3", rf=3)
        s.execute("CREATE TABLE mx3.t (k int PRIMARY KEY)")
        for _ in range(3):
            try:
                s.execute(SimpleStatement("INSERT INTO mx3.t (k) VALUES (1)", consistency_level=ConsistencyLevel.QUORUM,
                                          retry_policy=FallthroughRetryPolicy()))
                raise AssertionError("expected Unavailable")
            except Unavailable:
                pass
        after = scrape(node)
    finally:
        c.shutdown()

    for name, kind in FAMILIES.items():
        assert name in after, f"family {name} missing; have {sorted(after)}"
        assert after[name].type == kind, (name, after[name].type)

    def delta(op, cl):
        return count(after, op, cl) - count(before, op, cl)

    assert delta("write", "QUORUM") == 200 + 3
    tombstones = after["shoal_table_tombstones_scanned"]
    sums = [x.value for x in tombstones.samples if x.name.endswith("_sum") and x.labels.get("table") == "t"]
    before_sums = [x.value for x in tomb_before["shoal_table_tombstones_scanned"].samples
                   if x.name.endswith("_sum") and x.labels.get("table") == "t"] or [0]
    assert sums and sums[0] - before_sums[0] >= 4, (sums, before_sums)
    assert delta("read", "ONE") == 121
    assert delta("range", "ONE") == 7
    assert delta("cas_write", "SERIAL") == 1
    unavailable = sample(after, "shoal_client_request_unavailables", "_total", op="write", cl="QUORUM") - sample(
        before, "shoal_client_request_unavailables", "_total", op="write", cl="QUORUM")
    assert unavailable == 3
    # Histograms are well formed: cumulative buckets ending at +Inf == _count.
    for s in after["shoal_client_request_latency_seconds"].samples:
        if s.name.endswith("_count"):
            buckets = [b for b in after["shoal_client_request_latency_seconds"].samples
                       if b.name.endswith("_bucket") and {k: v for k, v in b.labels.items() if k != "le"} == s.labels]
            values = [b.value for b in buckets]
            assert values == sorted(values), buckets
            assert buckets[-1].labels["le"] == "+Inf" and buckets[-1].value == s.value
    # The table's local metrics saw its writes and reads.
    assert sample(after, "shoal_table_write_latency_seconds", "_count", keyspace="mx", table="t") >= 200
    assert sample(after, "shoal_table_read_latency_seconds", "_count", keyspace="mx", table="t") >= 120
    assert sample(after, "shoal_table_memtable_live_data_size_bytes", keyspace="mx", table="t") > 0
    node.tool("flush", "mx")
    flushed = scrape(node)
    assert sample(flushed, "shoal_table_bytes_flushed", "_total", keyspace="mx", table="t") > 0
    assert sample(flushed, "shoal_table_live_sstables", keyspace="mx", table="t") >= 1
    assert sample(flushed, "shoal_table_live_disk_space_used_bytes", keyspace="mx", table="t") > 0
    # 21 partitions were flushed (k 0..19 and the LWT's 1000): their sizes (keys and values) are in the
    # partition size histogram.
    assert sample(flushed, "shoal_table_partition_size_bytes", "_count", keyspace="mx", table="t") == 21
    assert sample(flushed, "shoal_table_partition_size_bytes", "_sum", keyspace="mx", table="t") > 21 * 10
    # A second file, then a major compaction: compactions' bytes are counted.
    c = connect_cluster(node)
    try:
        c.connect().execute("INSERT INTO mx.t (k, c, v) VALUES (1, 1, 'again')")
    finally:
        c.shutdown()
    node.tool("flush", "mx")
    node.tool("compact", "mx")
    compacted = scrape(node)
    assert sample(compacted, "shoal_compaction_bytes_compacted", "_total") > 0
    assert sample(compacted, "shoal_compaction_bytes_read", "_total") > 0
    assert sample(after, "shoal_memory_rss_bytes") > 10 << 20
    assert sample(after, "shoal_connected_native_clients") >= 1
    assert sample(after, "shoal_thread_pool_completed_tasks", "_total", pool="MutationStage") > 0
    # The admin port serves the same endpoint.
    assert "shoal_client_request_latency_seconds" in scrape(node, "admin_port")


def test_a_stress_run_moves_the_write_count_by_its_operations(shoal_node_factory):
    node = shoal_node_factory()
    before = scrape(node)
    out = subprocess.run(
        [node.bin_path, "stress", "write", "n=3000", "no-warmup", "cl=ONE", "-node", node.host, "-port",
         f"native={node.port}", "-rate", "threads=8", "-log", "interval=5s"],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    ops = int(next(line for line in out.stdout.splitlines() if line.startswith("Total operations"))
              .split(":")[1].replace(",", "").strip())
    assert ops == 3000, out.stdout
    after = scrape(node)
    assert count(after, "write", "ONE") - count(before, "write", "ONE") == ops
    assert sample(after, "shoal_table_write_latency_seconds", "_count", keyspace="keyspace1", table="standard1") == ops


def test_nodetool_style_commands_print_and_their_json_parses(shoal_node_factory):
    node = shoal_node_factory()
    c = connect_cluster(node)
    try:
        s = c.connect()
        create_keyspace(s, "mt")
        s.execute("CREATE TABLE mt.t (k int PRIMARY KEY, v int)")
        for i in range(50):
            s.execute("INSERT INTO mt.t (k, v) VALUES (%s, %s)", (i, i))
            s.execute("SELECT * FROM mt.t WHERE k = %s", (i,))
    finally:
        c.shutdown()
    proxy = json.loads(node.tool("proxyhistograms", "--json"))
    assert proxy["write"]["count"] >= 50 and proxy["read"]["count"] >= 50, proxy
    assert proxy["write"]["percentiles_us"]["99"] >= proxy["write"]["percentiles_us"]["50"] > 0
    text = node.tool("proxyhistograms").splitlines()
    assert text[0] == "proxy histograms" and text[1].split()[:3] == ["Percentile", "Read", "Latency"], text
    assert [line.split()[0] for line in text[3:10]] == ["50%", "75%", "95%", "98%", "99%", "Min", "Max"], text

    hist = json.loads(node.tool("tablehistograms", "mt", "t", "--json"))
    assert hist["read_latency_us"]["50"] > 0 and hist["write_latency_us"]["50"] > 0, hist
    # Every read was served by the memtable: no SSTable (0, not the first bucket's 1).
    assert hist["sstables_per_read"]["max"] == 0, hist
    lines = node.tool("tablehistograms", "mt.t").splitlines()
    assert lines[0] == "mt/t histograms" and "SSTables" in lines[1], lines

    stats = json.loads(node.tool("tablestats", "mt", "--json"))
    (ks,) = stats["keyspaces"]
    (t,) = ks["tables"]
    assert (ks["keyspace"], t["table"], t["local_write_count"], t["local_read_count"]) == ("mt", "t", 50, 50), stats
    lines = node.tool("tablestats", "mt.t").splitlines()
    assert lines[0] == "Total number of tables: 1" and "Keyspace : mt" in lines, lines
    assert "\t\tLocal write count: 50" in lines and "\t\tTable: t" in lines, lines

    tp = json.loads(node.tool("tpstats", "--json"))
    assert {p["name"] for p in tp["thread_pools"]} == {"ReadStage", "MutationStage"}
    assert node.tool("tpstats").split()[:6] == ["Pool", "Name", "Active", "Pending", "Completed", "Blocked"]
    assert {"message_type": "MUTATION_REQ", "dropped": 0} in tp["dropped_messages"], tp
    assert "Message type  Dropped" in node.tool("tpstats")

    bad = subprocess.run([node.bin_path, "tool", "-h", node.host, "-p", str(node.config["admin_port"]), "tablestats",
                          "nope"], capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "Unknown keyspace: nope" in bad.stderr, bad.stderr
