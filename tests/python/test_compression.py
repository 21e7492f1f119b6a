"""Frame compression as drivers negotiate it in STARTUP: LZ4 (4-byte length
prefix + raw block) and Snappy, on protocol v4, with payloads large enough
that compression actually happens."""

import pytest
from cassandra.cluster import Cluster


@pytest.mark.parametrize("compression", ["lz4", "snappy"])
def test_driver_with_compression_reads_and_writes(shoal_node, compression):
    cluster = Cluster([shoal_node.host], port=shoal_node.port, compression=compression, protocol_version=4)
    try:
        session = cluster.connect()
        ks = f"compression_{compression}"
        session.execute(
            f"CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
        )
        session.execute(f"CREATE TABLE IF NOT EXISTS {ks}.t (k int PRIMARY KEY, v text)")
        big = "shoal " * 2000  # compressible, well above the driver's minimum size
        insert = session.prepare(f"INSERT INTO {ks}.t (k, v) VALUES (?, ?)")
        for k in range(20):
            session.execute(insert, (k, f"{k}:{big}"))
        rows = {r.k: r.v for r in session.execute(f"SELECT k, v FROM {ks}.t")}
        assert len(rows) == 20
        assert all(v == f"{k}:{big}" for k, v in rows.items())
    finally:
        cluster.shutdown()
