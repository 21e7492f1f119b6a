"""Request tracing (issue 23): `session.execute(..., trace=True)` and
`ResultSet.get_query_trace()`, cqlsh's `TRACING ON`, and the `system_traces`
tables they read. The single-node tests hold for Apache Cassandra 5.0.9 too
(SHOAL_TEST_EXTERNAL): they check the structure of a trace (its session row,
its events, their sources, timings and TTL), not the events' wording, which
differs. The cluster test starts three Shoal nodes."""

import datetime
import time

import pytest
from cassandra import ConsistencyLevel
from cassandra.query import BatchStatement, QueryTrace, SimpleStatement

from cluster_harness import ShoalCluster
from shoal_harness import EXTERNAL
from test_cqlsh import _ok, run_cqlsh

TRACE_WAIT_S = 10
# Cassandra writes trace rows with a TTL of one day.
TRACE_TTL_S = 86400


@pytest.fixture(scope="module")
def kv(module_ks_session):
    module_ks_session.execute("CREATE TABLE IF NOT EXISTS kv (k int PRIMARY KEY, v text)")
    return module_ks_session


def trace_of(result):
    trace = result.get_query_trace(max_wait_sec=TRACE_WAIT_S)
    assert trace is not None, "a traced request's answer carries its tracing session id"
    return trace


def check_trace(trace, coordinator, request_prefix="Execute"):
    assert trace.trace_id.version == 1, "session ids are time UUIDs"
    assert isinstance(trace.duration, datetime.timedelta) and trace.duration.total_seconds() > 0
    assert str(trace.coordinator) == coordinator
    assert trace.request_type.startswith(request_prefix), trace.request_type
    assert trace.client is not None
    age = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None) - trace.started_at
    assert abs(age.total_seconds()) < 600, trace.started_at
    assert trace.events, "a trace has events"
    for e in trace.events:
        assert e.description
        assert e.thread_name
        assert e.source_elapsed is not None and e.source_elapsed.total_seconds() >= 0
    by_source = {}
    for e in trace.events:
        by_source.setdefault(str(e.source), []).append(e.source_elapsed)
    # On each Shoal node, events come in the order they happened. Cassandra's do not always: each of its
    # stages' threads counts source_elapsed from its own start (a batch's mutations interleave).
    if not EXTERNAL:
        for source, elapsed in by_source.items():
            assert elapsed == sorted(elapsed), (source, elapsed)
    return by_source


def test_system_traces_tables_are_cassandras(session):
    rows = session.execute(
        "SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = 'system_traces'").one()
    assert rows.replication == {
        "class": "org.apache.cassandra.locator.SimpleStrategy", "replication_factor": "2"}
    columns = {
        (r.table_name, r.column_name): (r.type, r.kind)
        for r in session.execute(
            "SELECT table_name, column_name, type, kind FROM system_schema.columns WHERE keyspace_name = 'system_traces'")
    }
    assert columns == {
        ("sessions", "session_id"): ("uuid", "partition_key"),
        ("sessions", "client"): ("inet", "regular"),
        ("sessions", "command"): ("text", "regular"),
        ("sessions", "coordinator"): ("inet", "regular"),
        ("sessions", "coordinator_port"): ("int", "regular"),
        ("sessions", "duration"): ("int", "regular"),
        ("sessions", "parameters"): ("map<text, text>", "regular"),
        ("sessions", "request"): ("text", "regular"),
        ("sessions", "started_at"): ("timestamp", "regular"),
        ("events", "session_id"): ("uuid", "partition_key"),
        ("events", "event_id"): ("timeuuid", "clustering"),
        ("events", "activity"): ("text", "regular"),
        ("events", "source"): ("inet", "regular"),
        ("events", "source_elapsed"): ("int", "regular"),
        ("events", "source_port"): ("int", "regular"),
        ("events", "thread"): ("text", "regular"),
    }
    tables = {
        r.table_name: (r.comment, r.gc_grace_seconds, r.default_time_to_live)
        for r in session.execute(
            "SELECT table_name, comment, gc_grace_seconds, default_time_to_live FROM system_schema.tables "
            "WHERE keyspace_name = 'system_traces'")
    }
    assert tables == {"sessions": ("tracing sessions", 0, 0), "events": ("tracing events", 0, 0)}


def test_untraced_request_has_no_trace(kv):
    result = kv.execute("INSERT INTO kv (k, v) VALUES (0, 'plain')")
    assert result.get_query_trace() is None, "no tracing session id in the answer"


def test_traced_write_and_read(kv, shoal_node):
    write = kv.execute("INSERT INTO kv (k, v) VALUES (1, 'one')", trace=True)
    trace = trace_of(write)
    sources = check_trace(trace, shoal_node.host, "Execute CQL3 query")
    assert list(sources) == [shoal_node.host], "one node: every event is the coordinator's"
    assert trace.parameters["query"] == "INSERT INTO kv (k, v) VALUES (1, 'one')"
    assert trace.parameters["consistency_level"] == "LOCAL_ONE"

    read = kv.execute(SimpleStatement("SELECT v FROM kv WHERE k = 1", consistency_level=ConsistencyLevel.ONE),
                      trace=True)
    assert read.one().v == "one", "tracing does not change the answer"
    trace = trace_of(read)
    check_trace(trace, shoal_node.host, "Execute CQL3 query")
    assert trace.parameters["consistency_level"] == "ONE"
    assert trace.trace_id != write.response_future.get_query_trace_ids()[0]


def test_trace_rows_live_one_day(kv):
    result = kv.execute("INSERT INTO kv (k, v) VALUES (2, 'two')", trace=True)
    trace = trace_of(result)
    ttls = [r.ttl for r in kv.execute(
        "SELECT ttl(activity) AS ttl FROM system_traces.events WHERE session_id = %s", [trace.trace_id])]
    assert ttls and all(TRACE_TTL_S - 120 < t <= TRACE_TTL_S for t in ttls), ttls
    row = kv.execute("SELECT ttl(duration) AS d, ttl(request) AS r, command FROM system_traces.sessions "
                     "WHERE session_id = %s", [trace.trace_id]).one()
    assert TRACE_TTL_S - 120 < row.d <= TRACE_TTL_S and TRACE_TTL_S - 120 < row.r <= TRACE_TTL_S
    assert row.command == "QUERY"


def test_traced_prepared_statement(kv, shoal_node):
    insert = kv.prepare("INSERT INTO kv (k, v) VALUES (?, ?)")
    trace = trace_of(kv.execute(insert, (3, "three"), trace=True))
    check_trace(trace, shoal_node.host, "Execute CQL3 prepared query")
    select = kv.prepare("SELECT v FROM kv WHERE k = ?")
    result = kv.execute(select, (3,), trace=True)
    assert result.one().v == "three"
    check_trace(trace_of(result), shoal_node.host, "Execute CQL3 prepared query")


def test_traced_batch(kv, shoal_node):
    batch = BatchStatement()
    batch.add("INSERT INTO kv (k, v) VALUES (4, 'four')")
    batch.add(kv.prepare("INSERT INTO kv (k, v) VALUES (?, ?)"), (5, "five"))
    trace = trace_of(kv.execute(batch, trace=True))
    check_trace(trace, shoal_node.host, "Execute batch of CQL3 queries")
    assert kv.execute("SELECT v FROM kv WHERE k = 5").one().v == "five"


def test_cqlsh_tracing_on(cqlsh_bin, shoal_node, tmp_path, kv):
    ks = kv.keyspace
    script = tmp_path / "trace.cql"
    script.write_text(
        f"TRACING ON;\n"
        f"INSERT INTO {ks}.kv (k, v) VALUES (6, 'six');\n"
        f"SELECT v FROM {ks}.kv WHERE k = 6;\n"
        f"TRACING OFF;\n"
        f"SELECT v FROM {ks}.kv WHERE k = 6;\n")
    out = _ok(run_cqlsh(cqlsh_bin, shoal_node, tmp_path, "-f", str(script)))
    assert "Now Tracing is enabled" in out or "TRACING set to ON" in out, out
    assert out.count("Tracing session:") == 2, out
    for header in ("activity", "timestamp", "source", "source_elapsed", "client"):
        assert header in out, out
    assert out.count("Request complete") == 2, out
    assert "six" in out


def test_tracing_session_id_is_readable_by_id(kv, shoal_node):
    """What drivers do: poll the session row until its duration is set, then read its events."""
    result = kv.execute("SELECT v FROM kv WHERE k = 1", trace=True)
    [trace_id] = result.response_future.get_query_trace_ids()
    trace = QueryTrace(trace_id, kv)
    trace.populate(max_wait=TRACE_WAIT_S)
    check_trace(trace, shoal_node.host)


@pytest.mark.skipif(bool(EXTERNAL), reason="starts its own cluster of shoal processes")
def test_cluster_trace_spans_replicas(tmp_path):
    from test_cluster import session_on

    with ShoalCluster(tmp_path / "c", nodes=3) as c:
        cluster, s = session_on(c, [c.address(1)], cl=ConsistencyLevel.QUORUM)
        try:
            s.execute("CREATE KEYSPACE tr WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
            s.execute("CREATE TABLE tr.kv (k int PRIMARY KEY, v text)")
            assert cluster.control_connection.wait_for_schema_agreement(wait_time=30)
            coordinator = c.address(1)
            insert = s.prepare("INSERT INTO tr.kv (k, v) VALUES (?, ?)")
            batch = BatchStatement()
            batch.add(insert, (2, "two"))
            batch.add("INSERT INTO tr.kv (k, v) VALUES (3, 'three')")
            for statement, values in (("INSERT INTO tr.kv (k, v) VALUES (1, 'one')", None),
                                      (insert, (4, "four")), (batch, None),
                                      ("SELECT v FROM tr.kv WHERE k = 1", None)):
                result = s.execute(statement, values, trace=True)
                trace = trace_of(result)
                check_trace(trace, coordinator, "Execute")
                assert trace.parameters["consistency_level"] == "QUORUM"
                # Replicas write their events on their own: wait for them to be readable.
                deadline = time.time() + TRACE_WAIT_S
                while True:
                    sources = {str(e.source) for e in trace.events}
                    if len(sources) > 1 or time.time() > deadline:
                        break
                    time.sleep(0.2)
                    trace = QueryTrace(trace.trace_id, s)
                    trace.populate(max_wait=TRACE_WAIT_S)
                assert coordinator in sources and len(sources) > 1, (statement, [
                    (str(e.source), e.description) for e in trace.events])
                check_trace(trace, coordinator)
                assert any("message received" in e.description for e in trace.events if str(e.source) != coordinator)
                assert any(e.description.startswith("Sending") for e in trace.events if str(e.source) == coordinator)
            assert s.execute("SELECT v FROM tr.kv WHERE k = 1").one().v == "one"
            assert s.execute("SELECT v FROM tr.kv WHERE k = 2").one().v == "two"
            # The trace is readable from any node (written through the normal write path).
            other, s3 = session_on(c, [c.address(3)], cl=ConsistencyLevel.ONE)
            try:
                rows = list(s3.execute("SELECT source FROM system_traces.events WHERE session_id = %s",
                                       [trace.trace_id]))
                assert {str(r.source) for r in rows} == sources
            finally:
                other.shutdown()
        finally:
            cluster.shutdown()
