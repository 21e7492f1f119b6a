"""concurrent_reads / concurrent_writes (Cassandra's read and mutation stage
sizes) bound how many requests execute at once; more wait their turn. With one
slot each, many clients reading and writing at once on several connections
still all get their answers: the stages queue, they never drop or deadlock."""

from cassandra.cluster import Cluster
from cassandra.concurrent import execute_concurrent_with_args


def test_one_slot_each_still_serves_every_request(shoal_node_factory):
    node = shoal_node_factory(config={"concurrent_reads": 1, "concurrent_writes": 1})
    clusters = [Cluster([node.host], port=node.port, protocol_version=4) for _ in range(3)]
    try:
        sessions = [c.connect() for c in clusters]
        s = sessions[0]
        s.execute("CREATE KEYSPACE st WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE st.t (k int PRIMARY KEY, v int)")
        for i, session in enumerate(sessions):
            ins = session.prepare("INSERT INTO st.t (k, v) VALUES (?, ?)")
            rows = [(i * 1000 + k, k) for k in range(1000)]
            results = execute_concurrent_with_args(session, ins, rows, concurrency=100, raise_on_first_error=True)
            assert all(ok for ok, _ in results)
        for i, session in enumerate(sessions):
            sel = session.prepare("SELECT v FROM st.t WHERE k = ?")
            results = execute_concurrent_with_args(session, sel, [(i * 1000 + k,) for k in range(1000)], concurrency=100)
            assert [r.one().v for ok, r in results if ok] == list(range(1000))
    finally:
        for c in clusters:
            c.shutdown()
