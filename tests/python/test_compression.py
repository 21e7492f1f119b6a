"""Frame compression as drivers negotiate it in STARTUP: LZ4 (4-byte length
prefix + raw block) and Snappy, on protocol v4, with payloads large enough
that compression actually happens. The driver test checks that the driver's
connections did agree on the algorithm; the raw test checks that the server's
answers are compressed frames (flag 0x01) that decompress to the answer."""

import socket
import struct

import lz4.block
import pytest
import snappy
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
        # The control connection and the pool's connections agreed on it in STARTUP.
        conns = [cluster.control_connection._connection]
        for pool in session.get_pools():
            conns.append(pool._connection)
            extra = getattr(pool, "_connections", None) or {}
            conns.extend(extra.values() if isinstance(extra, dict) else extra)
        conns = [c for c in conns if c is not None]
        assert len(conns) >= 2, conns
        for conn in conns:
            assert conn.compressor is not None and conn.decompressor is not None, f"{conn}: no {compression} negotiated"
    finally:
        cluster.shutdown()


def _frame(opcode, body, stream=1):
    return struct.pack(">BBhBI", 4, 0, stream, opcode, len(body)) + body


def _read_frame(sock):
    def exact(n):
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            assert chunk, "connection closed"
            buf += chunk
        return buf

    version, flags, stream, opcode, length = struct.unpack(">BBhBI", exact(9))
    return flags, opcode, exact(length)


def _string(s):
    return struct.pack(">H", len(s)) + s.encode()


@pytest.mark.parametrize("compression", ["lz4", "snappy"])
def test_server_answers_in_compressed_frames(shoal_node, compression):
    big = "compress me " * 500
    cluster = Cluster([shoal_node.host], port=shoal_node.port, protocol_version=4)
    try:
        s = cluster.connect()
        s.execute("CREATE KEYSPACE IF NOT EXISTS rawcomp WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE IF NOT EXISTS rawcomp.t (k int PRIMARY KEY, v text)")
        s.execute("INSERT INTO rawcomp.t (k, v) VALUES (1, %s)", (big,))
    finally:
        cluster.shutdown()
    with socket.create_connection((shoal_node.host, shoal_node.port), timeout=10) as sock:
        startup = struct.pack(">H", 2) + _string("CQL_VERSION") + _string("3.0.0") + _string("COMPRESSION") + _string(compression)
        sock.sendall(_frame(0x01, startup))
        flags, opcode, _ = _read_frame(sock)
        assert opcode == 0x02 and flags & 0x01 == 0, f"STARTUP: opcode {opcode:#x} flags {flags:#x} (READY goes out uncompressed)"
        query = "SELECT v FROM rawcomp.t WHERE k = 1"
        sock.sendall(_frame(0x07, struct.pack(">i", len(query)) + query.encode() + struct.pack(">HB", 1, 0), stream=2))
        flags, opcode, body = _read_frame(sock)
        assert opcode == 0x08, f"QUERY: opcode {opcode:#x}"
        assert flags & 0x01, f"the RESULT frame is not compressed (flags {flags:#x}) after {compression} was agreed"
        if compression == "lz4":
            (size,) = struct.unpack(">I", body[:4])
            plain = lz4.block.decompress(body[4:], uncompressed_size=size)
        else:
            plain = snappy.uncompress(body)
        assert big.encode() in plain, "the decompressed RESULT does not hold the value"
        assert len(body) < len(plain) / 10, f"{len(body)} compressed bytes for {len(plain)}: not compressed"
