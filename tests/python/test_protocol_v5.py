"""Native protocol v5: negotiation, the segment layer (uncompressed and LZ4,
several envelopes per segment, envelopes split over segments, both ways, bad
CRCs), and v5's message changes (int flags, keyspace per query / prepare /
batch, now_in_seconds, the result metadata id and Metadata_changed), through
the python driver (protocol_version=5) and through raw sockets with a small v5
client of our own. Differential: SHOAL_TEST_EXTERNAL=127.0.0.1:19042 runs the
same tests against Cassandra 5.0.9."""

import socket
import struct
import threading
import time
import zlib

import lz4.block as lz4block
import pytest
from cassandra import ProtocolVersion
from cassandra.cluster import Cluster
from cassandra.query import BatchStatement, SimpleStatement

from shoal_harness import EXTERNAL, ShoalNode, create_keyspace, unique_keyspace_name

OP_ERROR, OP_STARTUP, OP_READY, OP_OPTIONS, OP_SUPPORTED, OP_QUERY, OP_RESULT, OP_PREPARE, OP_EXECUTE = (
    0x00, 0x01, 0x02, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A)
PROTOCOL_ERROR = 0x000A
MAX_PAYLOAD = 128 * 1024 - 1


# ------------------------------------------------------------ a raw v5 client


def crc24(value, length):
    crc = 0x875060
    for _ in range(length):
        crc ^= (value & 0xFF) << 16
        value >>= 8
        for _ in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= 0x1974F0B
    return crc & 0xFFFFFF


def crc32(payload):
    return zlib.crc32(payload, zlib.crc32(b"\xfa\x2d\x55\xca")) & 0xFFFFFFFF


def segment(payload, self_contained=True, lz4=False, corrupt=None):
    """One segment around `payload` (at most MAX_PAYLOAD bytes)."""
    assert len(payload) <= MAX_PAYLOAD
    if lz4:
        body = lz4block.compress(payload, store_size=False) if payload else b""
        if len(body) >= len(payload):
            body, ulen = payload, 0
        else:
            ulen = len(payload)
        header = len(body) | (ulen << 17) | ((1 << 34) if self_contained else 0)
        head = header.to_bytes(5, "little") + crc24(header, 5).to_bytes(3, "little")
    else:
        body = payload
        header = len(payload) | ((1 << 17) if self_contained else 0)
        head = header.to_bytes(3, "little") + crc24(header, 3).to_bytes(3, "little")
    trailer = crc32(body).to_bytes(4, "little")
    if corrupt == "header":
        head = head[:-1] + bytes([head[-1] ^ 0x01])
    elif corrupt == "payload":
        trailer = bytes([trailer[0] ^ 0x01]) + trailer[1:]
    return head + body + trailer


def segments_of(envelope, lz4=False):
    """An envelope as one self-contained segment, or split over several."""
    if len(envelope) <= MAX_PAYLOAD:
        return segment(envelope, True, lz4)
    return b"".join(segment(envelope[i:i + MAX_PAYLOAD], False, lz4) for i in range(0, len(envelope), MAX_PAYLOAD))


def envelope(opcode, body, stream=1, version=5, flags=0):
    return struct.pack(">BBhBI", version, flags, stream, opcode, len(body)) + body


def string(s):
    b = s.encode()
    return struct.pack(">H", len(b)) + b


def long_string(s):
    b = s.encode()
    return struct.pack(">I", len(b)) + b


def short_bytes(b):
    return struct.pack(">H", len(b)) + b


def string_map(d):
    return struct.pack(">H", len(d)) + b"".join(string(k) + string(v) for k, v in d.items())


def query_body(text, flags=0, extra=b"", values=()):
    body = long_string(text) + struct.pack(">H", 1)  # ONE
    if values:
        flags |= 0x01
    body += struct.pack(">I", flags)
    if values:
        body += struct.pack(">H", len(values)) + b"".join(struct.pack(">i", len(v)) + v for v in values)
    return body + extra


class RawV5:
    """A v5 connection: STARTUP unframed, then envelopes in segments."""

    def __init__(self, node, lz4=False, timeout=10):
        self.sock = socket.create_connection((node.host, node.port), timeout=timeout)
        self.lz4 = lz4
        self.raw = b""
        self.payload = b""
        options = {"CQL_VERSION": "3.0.0"}
        if lz4:
            options["COMPRESSION"] = "lz4"
        self.sock.sendall(envelope(OP_STARTUP, string_map(options), stream=0))
        header, body = self._read_unframed()
        assert header[0] == 0x85 and header[3] == OP_READY, (header, body)

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf

    def _read_unframed(self):
        head = self._exact(9)
        version, flags, stream, opcode, length = struct.unpack(">BBhBI", head)
        return (version, flags, stream, opcode), self._exact(length)

    def read_segment(self):
        """(self_contained, payload), checking both CRCs."""
        hl = 8 if self.lz4 else 6
        head = self._exact(hl)
        fields = int.from_bytes(head[:hl - 3], "little")
        assert int.from_bytes(head[hl - 3:], "little") == crc24(fields, hl - 3), "bad header CRC from the server"
        length = fields & 0x1FFFF
        body = self._exact(length)
        assert int.from_bytes(self._exact(4), "little") == crc32(body), "bad payload CRC from the server"
        if self.lz4:
            ulen = (fields >> 17) & 0x1FFFF
            if ulen:
                body = lz4block.decompress(body, uncompressed_size=ulen)
            return bool(fields >> 34 & 1), body
        return bool(fields >> 17 & 1), body

    def read_envelope(self):
        """The next response envelope: ((version, flags, stream, opcode), body)."""
        while True:
            if len(self.payload) >= 9:
                version, flags, stream, opcode, length = struct.unpack(">BBhBI", self.payload[:9])
                if len(self.payload) >= 9 + length:
                    body = self.payload[9:9 + length]
                    self.payload = self.payload[9 + length:]
                    return (version, flags, stream, opcode), body
            self.payload += self.read_segment()[1]

    def send(self, *envelopes):
        """The envelopes, all in one self-contained segment when they fit."""
        data = b"".join(envelopes)
        if len(data) <= MAX_PAYLOAD:
            self.sock.sendall(segment(data, True, self.lz4))
        else:
            self.sock.sendall(b"".join(segments_of(e, self.lz4) for e in envelopes))

    def request(self, opcode, body, stream=1):
        self.send(envelope(opcode, body, stream))
        header, body = self.read_envelope()
        assert header[2] == stream, header
        return header, body

    def expect_closed(self, timeout=5):
        """True when the server closes the connection without another byte."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False
        assert data == b"", f"expected a close, got {data[:80]!r}"
        return True

    def expect_error_then_close(self):
        """The ProtocolError a corrupt segment gets (stream 0), then the close."""
        header, body = self.read_envelope()
        assert header[0] == 0x85 and header[2] == 0 and header[3] == OP_ERROR, header
        code, message = parse_error(body)
        assert self.expect_closed(), "the connection must be closed after the error"
        return code, message


def parse_error(body):
    (code,) = struct.unpack(">i", body[:4])
    (n,) = struct.unpack(">H", body[4:6])
    return code, body[6:6 + n].decode()


def rows_flags(body):
    """RESULT Rows: (metadata flags, column count, metadata id or None, rest)."""
    kind, flags, count = struct.unpack(">iii", body[:12])
    assert kind == 2, kind
    pos = 12
    if flags & 0x0002:
        (n,) = struct.unpack(">i", body[pos:pos + 4])
        pos += 4 + n
    new_id = None
    if flags & 0x0008:
        (n,) = struct.unpack(">H", body[pos:pos + 2])
        new_id = body[pos + 2:pos + 2 + n]
        pos += 2 + n
    return flags, count, new_id


# ------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def v5(shoal_node):
    """A driver Cluster pinned to protocol v5, and a keyspace for the module."""
    cluster = Cluster([shoal_node.host], port=shoal_node.port, protocol_version=5)
    session = cluster.connect()
    ks = unique_keyspace_name("protocol_v5")
    create_keyspace(session, ks)
    try:
        yield cluster, session, ks
    finally:
        session.execute(f"DROP KEYSPACE IF EXISTS {ks}")
        cluster.shutdown()


def connections(cluster, session):
    conns = [cluster.control_connection._connection]
    for pool in session.get_pools():
        conns.append(pool._connection)
    return [c for c in conns if c is not None]


# ------------------------------------------------------------ negotiation


def test_driver_negotiates_v5_by_default(shoal_node):
    # The driver opens at DSE_V2, is refused twice, and settles on v5.
    cluster = Cluster([shoal_node.host], port=shoal_node.port)
    try:
        session = cluster.connect()
        assert cluster.protocol_version == ProtocolVersion.V5
        assert session.execute("SELECT release_version FROM system.local").one() is not None
        for conn in connections(cluster, session):
            assert conn.protocol_version == 5, conn
            assert conn._is_checksumming_enabled, f"{conn}: v5 without segments"
    finally:
        cluster.shutdown()


def test_v4_still_works(shoal_node):
    cluster = Cluster([shoal_node.host], port=shoal_node.port, protocol_version=4)
    try:
        session = cluster.connect()
        assert session.execute("SELECT release_version FROM system.local").one() is not None
        for conn in connections(cluster, session):
            assert conn.protocol_version == 4 and not conn._is_checksumming_enabled
    finally:
        cluster.shutdown()


def raw_options(node, version, flags=0):
    with socket.create_connection((node.host, node.port), timeout=10) as s:
        s.sendall(envelope(OP_OPTIONS, b"", stream=3, version=version, flags=flags))
        head = b""
        while len(head) < 9:
            head += s.recv(9 - len(head))
        v, f, stream, opcode, length = struct.unpack(">BBhBI", head)
        body = b""
        while len(body) < length:
            body += s.recv(length - len(body))
        return (v, f, stream, opcode), body


def parse_multimap(body):
    (n,) = struct.unpack(">H", body[:2])
    pos, out = 2, {}
    for _ in range(n):
        (kl,) = struct.unpack(">H", body[pos:pos + 2])
        key = body[pos + 2:pos + 2 + kl].decode()
        pos += 2 + kl
        (m,) = struct.unpack(">H", body[pos:pos + 2])
        pos += 2
        values = []
        for _ in range(m):
            (vl,) = struct.unpack(">H", body[pos:pos + 2])
            values.append(body[pos + 2:pos + 2 + vl].decode())
            pos += 2 + vl
        out[key] = values
    return out


@pytest.mark.parametrize("flags", [0x00, 0x10], ids=["plain", "use_beta"])
def test_v5_options_answered_in_v5(shoal_node, flags):
    header, body = raw_options(shoal_node, 5, flags)
    assert header[0] == 0x85 and header[3] == OP_SUPPORTED, header
    supported = parse_multimap(body)
    assert {"4/v4", "5/v5"} <= set(supported["PROTOCOL_VERSIONS"]), supported
    assert "lz4" in supported["COMPRESSION"]


@pytest.mark.parametrize("version", [6, 7, 0x42])
def test_newer_versions_are_refused(shoal_node, version):
    # Cassandra speaks v6 as a beta and asks for the USE_BETA flag; Shoal does
    # not speak v6. Either way a ProtocolError the drivers step down from.
    header, body = raw_options(shoal_node, version)
    assert header[3] == OP_ERROR, header
    code, message = parse_error(body)
    assert code == PROTOCOL_ERROR, (code, message)
    if version != 6:
        assert "unsupported protocol version" in message
        assert "5/v5" in message and "4/v4" in message, message
        assert header[0] == 0x85


def test_snappy_is_refused_on_v5(shoal_node):
    with socket.create_connection((shoal_node.host, shoal_node.port), timeout=10) as s:
        s.sendall(envelope(OP_STARTUP, string_map({"CQL_VERSION": "3.0.0", "COMPRESSION": "snappy"}), stream=0))
        head = s.recv(9)
        v, f, stream, opcode, length = struct.unpack(">BBhBI", head)
        body = b""
        while len(body) < length:
            body += s.recv(length - len(body))
        assert (v, opcode) == (0x85, OP_ERROR)
        assert parse_error(body) == (PROTOCOL_ERROR, "Snappy compression is not supported in protocol V5")


# ------------------------------------------------------------ the driver on v5


@pytest.mark.parametrize("compression", [False, "lz4"], ids=["plain", "lz4"])
def test_driver_queries_prepared_paging_and_large_values(shoal_node, v5, compression):
    _, admin, ks = v5
    table = f"{ks}.big_{'lz4' if compression else 'plain'}"
    admin.execute(f"CREATE TABLE IF NOT EXISTS {table} (k int, c int, v blob, PRIMARY KEY (k, c))")
    cluster = Cluster([shoal_node.host], port=shoal_node.port, protocol_version=5, compression=compression)
    try:
        session = cluster.connect()
        for conn in connections(cluster, session):
            assert conn.protocol_version == 5 and conn._is_checksumming_enabled
            if compression:
                assert conn.compressor is not None, f"{conn}: lz4 not negotiated"
        insert = session.prepare(f"INSERT INTO {table} (k, c, v) VALUES (?, ?, ?)")
        # Values around and well above one segment's payload: requests and
        # answers split over several segments (incompressible and compressible).
        sizes = [0, 1, 1000, MAX_PAYLOAD - 100, MAX_PAYLOAD + 1, 300 * 1024, 1024 * 1024]
        values = {}
        for c, size in enumerate(sizes):
            v = bytes((i * 7 + c) % 251 for i in range(size)) if c % 2 else b"x" * size
            values[c] = v
            session.execute(insert, (1, c, v))
        rows = list(session.execute(SimpleStatement(f"SELECT c, v FROM {table} WHERE k = 1", fetch_size=2)))
        assert [r.c for r in rows] == list(range(len(sizes)))
        assert all(r.v == values[r.c] for r in rows)
        select = session.prepare(f"SELECT c, v FROM {table} WHERE k = ? AND c = ?")
        for c, v in values.items():
            assert session.execute(select, (1, c)).one().v == v
        # Many requests in flight: several envelopes per segment both ways.
        futures = [session.execute_async(select, (1, c % 3)) for c in range(200)]
        for i, f in enumerate(futures):
            assert f.result().one().v == values[i % 3]
        # Paging over many small rows, with the driver's page state.
        small = f"{table}_paging"
        session.execute(f"CREATE TABLE IF NOT EXISTS {small} (k int, c int, PRIMARY KEY (k, c))")
        ins = session.prepare(f"INSERT INTO {small} (k, c) VALUES (0, ?)")
        for c in range(250):
            session.execute(ins, (c,))
        result = session.execute(SimpleStatement(f"SELECT c FROM {small} WHERE k = 0", fetch_size=17))
        assert [r.c for r in result] == list(range(250))
        prepared = session.prepare(f"SELECT c FROM {small} WHERE k = ?")
        prepared.fetch_size = 40
        assert [r.c for r in session.execute(prepared, (0,))] == list(range(250))
    finally:
        cluster.shutdown()


def test_driver_batches(v5):
    _, session, ks = v5
    session.execute(f"CREATE TABLE IF NOT EXISTS {ks}.b (k int, c int, v text, PRIMARY KEY (k, c))")
    insert = session.prepare(f"INSERT INTO {ks}.b (k, c, v) VALUES (?, ?, ?)")
    batch = BatchStatement()
    for c in range(10):
        batch.add(insert, (1, c, f"v{c}"))
    batch.add(SimpleStatement(f"INSERT INTO {ks}.b (k, c, v) VALUES (1, 100, 'simple')"))
    batch.add(SimpleStatement(f"UPDATE {ks}.b SET v = %s WHERE k = 1 AND c = 200"), ("updated",))
    session.execute(batch)
    rows = {r.c: r.v for r in session.execute(f"SELECT c, v FROM {ks}.b WHERE k = 1")}
    assert rows == {**{c: f"v{c}" for c in range(10)}, 100: "simple", 200: "updated"}


def test_keyspace_per_query_prepare_and_batch(shoal_node, v5):
    _, admin, ks = v5
    admin.execute(f"CREATE TABLE IF NOT EXISTS {ks}.kq (k int PRIMARY KEY, v int)")
    # A session without a keyspace: the statements name it, unqualified tables.
    cluster = Cluster([shoal_node.host], port=shoal_node.port, protocol_version=5)
    try:
        session = cluster.connect()
        session.execute(SimpleStatement("INSERT INTO kq (k, v) VALUES (1, 10)", keyspace=ks))
        assert session.execute(SimpleStatement("SELECT v FROM kq WHERE k = 1", keyspace=ks)).one().v == 10
        prepared = session.prepare("SELECT v FROM kq WHERE k = ?", keyspace=ks)
        assert session.execute(prepared, (1,)).one().v == 10
        batch = BatchStatement()
        batch.keyspace = ks
        batch.add(SimpleStatement("INSERT INTO kq (k, v) VALUES (2, 20)"))
        batch.add(session.prepare("INSERT INTO kq (k, v) VALUES (?, ?)", keyspace=ks), (3, 30))
        session.execute(batch)
        assert sorted(r.v for r in session.execute(f"SELECT v FROM {ks}.kq")) == [10, 20, 30]
        # The keyspace of one statement does not become the session's: without
        # it, the unqualified table has no keyspace.
        with pytest.raises(Exception, match="(?i)keyspace"):
            session.execute("SELECT v FROM kq WHERE k = 1")
    finally:
        cluster.shutdown()


def test_prepared_select_star_after_alter_table(v5):
    _, session, ks = v5
    session.execute(f"CREATE TABLE IF NOT EXISTS {ks}.alt (k int PRIMARY KEY, a int)")
    session.execute(f"INSERT INTO {ks}.alt (k, a) VALUES (1, 1)")
    prepared = session.prepare(f"SELECT * FROM {ks}.alt WHERE k = ?")
    assert prepared.result_metadata_id, "v5 PREPARED carries a result metadata id"
    row = session.execute(prepared, (1,)).one()
    assert row._fields == ("k", "a")
    session.execute(f"ALTER TABLE {ks}.alt ADD b text")
    session.execute(f"UPDATE {ks}.alt SET b = 'new' WHERE k = 1")
    row = session.execute(prepared, (1,)).one()
    assert row._fields == ("k", "a", "b") and row.b == "new"


# ------------------------------------------------------------ raw v5


def test_result_metadata_id_and_metadata_changed(shoal_node, v5):
    _, session, ks = v5
    session.execute(f"CREATE TABLE IF NOT EXISTS {ks}.mc (k int PRIMARY KEY, a int)")
    session.execute(f"INSERT INTO {ks}.mc (k, a) VALUES (1, 1)")
    with RawV5(shoal_node) as c:
        header, body = c.request(OP_PREPARE, long_string(f"SELECT * FROM {ks}.mc WHERE k = ?") + struct.pack(">i", 0))
        assert header[3] == OP_RESULT and struct.unpack(">i", body[:4])[0] == 4, body
        (n,) = struct.unpack(">H", body[4:6])
        statement_id = body[6:6 + n]
        (m,) = struct.unpack(">H", body[6 + n:8 + n])
        metadata_id = body[8 + n:8 + n + m]
        assert m > 0

        def execute(known_id, skip=True):
            flags = 0x02 if skip else 0
            params = struct.pack(">HI", 1, flags | 0x01) + struct.pack(">H", 1) + struct.pack(">i", 4) + struct.pack(">i", 1)
            header, body = c.request(OP_EXECUTE, short_bytes(statement_id) + short_bytes(known_id) + params)
            assert header[3] == OP_RESULT, parse_error(body)
            return rows_flags(body)

        flags, count, new_id = execute(metadata_id)
        assert (flags & 0x0008, flags & 0x0004, count, new_id) == (0, 0x0004, 2, None)
        flags, count, new_id = execute(metadata_id, skip=False)
        assert (flags & 0x0008, flags & 0x0004, count) == (0, 0, 2)
        session.execute(f"ALTER TABLE {ks}.mc ADD b int")
        # Cassandra drops its prepared statements of a table that changed: the
        # EXECUTE is answered Unprepared and the client prepares it again (the
        # same statement id; what a second client holding the old metadata id
        # meets next). Shoal keeps them. Either way the old metadata id then
        # gets Metadata_changed.
        header, body = c.request(OP_EXECUTE, short_bytes(statement_id) + short_bytes(metadata_id)
                                 + struct.pack(">HI", 1, 0x01) + struct.pack(">Hi", 1, 4) + struct.pack(">i", 1))
        if header[3] == OP_ERROR:
            assert parse_error(body)[0] == 0x2500, parse_error(body)
            header, body = c.request(OP_PREPARE, long_string(f"SELECT * FROM {ks}.mc WHERE k = ?") + struct.pack(">i", 0))
            assert body[6:6 + n] == statement_id
        flags, count, new_id = execute(metadata_id)
        assert flags & 0x0008, "Metadata_changed after ALTER TABLE"
        assert flags & 0x0004 == 0, "full column specs with Metadata_changed"
        assert count == 3 and new_id and new_id != metadata_id
        flags, count, again = execute(new_id)
        assert (flags & 0x0008, flags & 0x0004, count, again) == (0, 0x0004, 3, None)


def test_several_envelopes_in_one_segment_and_split_envelopes(shoal_node, v5):
    _, session, ks = v5
    session.execute(f"CREATE TABLE IF NOT EXISTS {ks}.raw (k int PRIMARY KEY, v text)")
    for lz4 in (False, True):
        with RawV5(shoal_node, lz4=lz4) as c:
            # Three queries in one self-contained segment: three answers.
            q = query_body("SELECT release_version FROM system.local")
            c.send(envelope(OP_QUERY, q, 1), envelope(OP_QUERY, q, 2), envelope(OP_QUERY, q, 3))
            streams = sorted(c.read_envelope()[0][2] for _ in range(3))
            assert streams == [1, 2, 3]
            # A request bigger than a segment (a 400 KiB literal in the query
            # text): split over non-self-contained segments; the answer that
            # reads it back comes split as well, and in between a small
            # request shares a segment with the big one's last part.
            blob = ("ab" if lz4 else "xy") * (200 * 1024)
            insert = envelope(OP_QUERY, query_body(f"INSERT INTO {ks}.raw (k, v) VALUES (1, '{blob}')"), 7)
            small = envelope(OP_QUERY, query_body("SELECT release_version FROM system.local"), 8)
            parts = [insert[i:i + MAX_PAYLOAD] for i in range(0, len(insert), MAX_PAYLOAD)]
            c.sock.sendall(b"".join(segment(p, False, lz4) for p in parts[:-1]))
            c.sock.sendall(segment(parts[-1], False, lz4) + segment(small, True, lz4))
            streams = []
            for _ in range(2):
                header, body = c.read_envelope()
                assert header[3] == OP_RESULT, parse_error(body) if header[3] == OP_ERROR else header
                streams.append(header[2])
            assert sorted(streams) == [7, 8]
            header, body = c.request(OP_QUERY, query_body(f"SELECT v FROM {ks}.raw WHERE k = 1"), 9)
            assert header[3] == OP_RESULT and blob.encode() in body


WRITE_TIMEOUT = 0x1100


@pytest.mark.skipif(
    bool(EXTERNAL),
    reason="Cassandra 4+ ends a contended CAS timeout with a contentions [short] that the Java driver 4 never reads",
)
def test_cas_write_timeout_ends_after_its_write_type(tmp_path):
    """A v5 WRITE_TIMEOUT of write type CAS carries nothing after the write
    type. The Java driver 4 decodes a segment's envelopes straight off its
    payload and reads no contentions count, so two more bytes became a
    "next envelope" and failed the connection (`readerIndex(80) + length(2)
    exceeds writerIndex(80)`, seen under a contended LWT load). 8 connections
    each send 16 LWTs on one row in one segment, against a 1 ms
    cas_contention_timeout: the losers time out, and each timeout's body ends
    right after "CAS"; every connection goes on. And one connection's 32 pipelined LWTs contend as
    well: they run side by side, not one after another as a group of plain writes does."""
    node = ShoalNode(tmp_path / "n", config={"cas_contention_timeout": "1ms"})
    node.start()
    try:
        cluster = Cluster([node.host], port=node.port, protocol_version=5)
        session = cluster.connect()
        session.execute("CREATE KEYSPACE cas WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute("CREATE TABLE cas.t (k int PRIMARY KEY, v int)")
        session.execute("INSERT INTO cas.t (k, v) VALUES (0, 0)")
        cluster.shutdown()
        per = 16
        conns = [RawV5(node) for _ in range(8)]
        answers, failures = [], []

        def run(c):
            try:
                c.send(*(envelope(OP_QUERY, query_body(f"UPDATE cas.t SET v = {i + 1} WHERE k = 0 IF v = {i}"), i + 1)
                         for i in range(per)))
                got = [c.read_envelope() for _ in range(per)]
                assert sorted(h[2] for h, _ in got) == list(range(1, per + 1))
                header, _ = c.request(OP_QUERY, query_body("SELECT v FROM cas.t WHERE k = 0"), per + 1)
                assert header[3] == OP_RESULT, header
                answers.extend(got)
            except Exception as e:  # noqa: BLE001 - reported below, with the others
                failures.append(repr(e))

        threads = [threading.Thread(target=run, args=(c,)) for c in conns]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        for c in conns:
            c.close()
        assert not failures, failures
        timeouts = [b for h, b in answers if h[3] == OP_ERROR and parse_error(b)[0] == WRITE_TIMEOUT]
        assert timeouts, [parse_error(b) if h[3] == OP_ERROR else h for h, b in answers]
        for body in timeouts:
            (n_msg,) = struct.unpack(">H", body[4:6])
            at = 6 + n_msg + 2 + 4 + 4  # message, consistency, received, block_for
            (n_type,) = struct.unpack(">H", body[at:at + 2])
            assert body[at + 2:at + 2 + n_type] == b"CAS"
            assert len(body) == at + 2 + n_type, f"{len(body) - at - 2 - n_type} bytes after the write type"
        # A connection's pipelined LWTs run side by side (not as one group of writes, one after
        # another): 32 on one connection contend too. Up to 5 tries: on a loaded machine (CI runs
        # two test files at once on 2 cores) one worker may happen to take a batch's LWTs in turn;
        # run as one group, none of the tries would ever contend.
        for _ in range(5):
            with RawV5(node) as c:
                c.send(*(envelope(OP_QUERY, query_body(f"UPDATE cas.t SET v = {i + 1} WHERE k = 0 IF v = {i}"), i + 1)
                         for i in range(32)))
                got = [c.read_envelope() for _ in range(32)]
            if any(h[3] == OP_ERROR and parse_error(b)[0] == WRITE_TIMEOUT for h, b in got):
                break
        else:
            raise AssertionError(f"32 pipelined LWTs never contended in 5 tries: {got}")
    finally:
        node.stop()


def test_v4_frame_on_a_v5_connection(shoal_node):
    with RawV5(shoal_node) as c:
        c.send(envelope(OP_QUERY, query_body("SELECT release_version FROM system.local")[:-4] + b"\x00", 4, version=4))
        header, body = c.read_envelope()
        assert header[0] == 0x85 and header[2] == 4 and header[3] == OP_ERROR
        assert parse_error(body) == (
            PROTOCOL_ERROR,
            "Invalid message version. Got 4/v4 but previousmessages on this connection had version 5/v5",
        )
        # The connection goes on.
        header, _ = c.request(OP_QUERY, query_body("SELECT release_version FROM system.local"), 5)
        assert header[3] == OP_RESULT


def crc_message(message, where, read, computed):
    # "<connection id> invalid, unrecoverable CRC mismatch detected in frame header. Read 1, Computed 2"
    connection_id, _, rest = message.partition(" ")
    assert len(connection_id) == 8 and int(connection_id, 16) >= 0, message
    assert rest == f"invalid, unrecoverable CRC mismatch detected in frame {where}. Read {read}, Computed {computed}"


def signed(u32):
    return u32 - (1 << 32) if u32 >= 1 << 31 else u32


@pytest.mark.parametrize("lz4", [False, True], ids=["plain", "lz4"])
@pytest.mark.parametrize("corrupt", ["header", "payload"])
@pytest.mark.parametrize("self_contained", [True, False], ids=["self_contained", "part"])
def test_bad_crc_is_answered_then_closed(shoal_node, corrupt, self_contained, lz4):
    with RawV5(shoal_node, lz4=lz4) as c:
        q = envelope(OP_QUERY, query_body("SELECT release_version FROM system.local"))
        good = segment(q, self_contained, lz4=lz4)
        bad = segment(q, self_contained, lz4=lz4, corrupt=corrupt)
        c.sock.sendall(bad)
        code, message = c.expect_error_then_close()
        assert code == PROTOCOL_ERROR
        if corrupt == "header":
            hl = 8 if lz4 else 6
            crc_message(message, "header", int.from_bytes(bad[hl - 3:hl], "little"),
                        int.from_bytes(good[hl - 3:hl], "little"))
        else:
            crc_message(message, "body", signed(int.from_bytes(bad[-4:], "little")),
                        signed(int.from_bytes(good[-4:], "little")))


def test_bytes_that_are_no_segment_close_the_connection(shoal_node):
    with RawV5(shoal_node) as c:
        # An unframed envelope after READY: its first bytes read as a header
        # whose CRC24 does not match.
        data = envelope(OP_QUERY, query_body("SELECT release_version FROM system.local"))
        c.sock.sendall(data)
        code, message = c.expect_error_then_close()
        fields = int.from_bytes(data[:3], "little")
        crc_message(message, "header", int.from_bytes(data[3:6], "little"), crc24(fields, 3))


@pytest.mark.parametrize("lz4", [False, True], ids=["plain", "lz4"])
def test_envelope_compression_flag_is_ignored(shoal_node, lz4):
    # v5 compresses segments, not envelopes: Cassandra reads a body flagged
    # 0x01 as it is.
    with RawV5(shoal_node, lz4=lz4) as c:
        c.send(envelope(OP_QUERY, query_body("SELECT release_version FROM system.local"), 3, flags=0x01))
        header, body = c.read_envelope()
        assert header[3] == OP_RESULT, parse_error(body)


def test_lz4_incompressible_segments(shoal_node):
    with RawV5(shoal_node, lz4=True) as c:
        # Tiny envelopes go in segments whose uncompressed length is 0 (raw
        # payload); both directions.
        header, body = c.request(OP_QUERY, query_body("SELECT key FROM system.local"), 9)
        assert header[3] == OP_RESULT


def test_now_in_seconds_is_the_requests_now(shoal_node, v5):
    _, session, ks = v5
    session.execute(f"CREATE TABLE IF NOT EXISTS {ks}.now (k int PRIMARY KEY, v int)")
    now = int(time.time())

    def run(c, text, now_in_seconds=None, stream=2):
        flags, extra = (0x180, string(ks) + struct.pack(">i", now_in_seconds)) if now_in_seconds else (0x80, string(ks))
        header, body = c.request(OP_QUERY, query_body(text, flags, extra), stream)
        assert header[3] == OP_RESULT, parse_error(body)
        return body

    def count(body):
        # RESULT Rows of one int column, global table spec: the rows count follows the specs.
        flags, columns = struct.unpack(">ii", body[4:12])
        assert columns == 1 and flags & 0x0001
        pos = 12
        for _ in range(3):  # keyspace, table, column name
            (n,) = struct.unpack(">H", body[pos:pos + 2])
            pos += 2 + n
        return struct.unpack(">i", body[pos + 2:pos + 6])[0]

    with RawV5(shoal_node) as c:
        # Written "1000 s ago" with a TTL of 100: expired by now.
        run(c, "INSERT INTO now (k, v) VALUES (1, 1) USING TTL 100", now - 1000)
        assert count(run(c, "SELECT v FROM now WHERE k = 1")) == 0
        assert count(run(c, "SELECT v FROM now WHERE k = 1", now - 950)) == 1
        # Written now with a TTL of 100: live now, expired at now + 1000.
        run(c, "INSERT INTO now (k, v) VALUES (2, 2) USING TTL 100")
        assert count(run(c, "SELECT v FROM now WHERE k = 2")) == 1
        assert count(run(c, "SELECT v FROM now WHERE k = 2", now + 1000)) == 0
        # The same through a BATCH carrying now_in_seconds.
        batch = bytes([1]) + struct.pack(">H", 1) + b"\x00" + long_string("INSERT INTO now (k, v) VALUES (3, 3) USING TTL 100")
        batch += struct.pack(">H", 0) + struct.pack(">H", 1) + struct.pack(">I", 0x180) + string(ks)
        batch += struct.pack(">i", now - 1000)
        header, body = c.request(0x0D, batch, 4)
        assert header[3] == OP_RESULT, parse_error(body)
        assert count(run(c, "SELECT v FROM now WHERE k = 3")) == 0
        assert count(run(c, "SELECT v FROM now WHERE k = 3", now - 950)) == 1
