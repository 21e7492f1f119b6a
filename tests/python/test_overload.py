"""Self-protection of the native port (issue 22), as Cassandra 4.1/5.0 does it:
the bytes of requests admitted and not yet answered are bounded over the node
(`native_transport_max_request_data_in_flight`, 16 MiB here) and per client
address (`..._per_ip`, 8 MiB), and connections over
`native_transport_max_concurrent_connections` (`..._per_ip`) are closed as they
are accepted.

A flood: raw sockets from 127.0.0.2 pipeline 10,000 requests of ~100 KiB each
(about 1 GB) on as many stream ids, without waiting for answers, while a driver
session from 127.0.0.1 (another address, so another per-IP budget) keeps
working. Two kinds of flood:

- INSERTs, with the commit log in `group` mode (50 ms window), so that a write
  waits for its group's fsync and writes really are in flight together. (In
  `periodic` mode a connection runs its writes as it reads them, and in every
  mode a connection takes a write-stage slot before it reads on: a flood of
  writes is already slowed down by `concurrent_writes`.) What the node admits
  it also stores, so its memory grows by what storage keeps too.
- SELECTs made 100 KiB long by a comment, on a node with one read slot
  (`concurrent_reads: 1`): reads run as tasks of their own, so without the
  limits a node holds up to 1,024 per connection (`MAX_IN_FLIGHT`), 400 MB of
  requests here (measured: RSS +966 MiB with the limits at 8 GiB, +48 to +78
  MiB with them). Nothing is stored: the node's memory growth is the requests
  in flight.

Every test runs its own node and is bounded in time."""

import re
import socket
import struct
import threading
import time

import pytest
from cassandra.cluster import Cluster

from shoal_harness import EXTERNAL
from test_bad_input import OP_ERROR, OP_READY, OP_RESULT, OP_STARTUP, frame, long_string, parse_error, read_frame, string_map

pytestmark = pytest.mark.skipif(bool(EXTERNAL), reason="starts its own nodes")

OP_QUERY = 0x07
OVERLOADED = 0x1001
GLOBAL_LIMIT = 16 << 20
PER_IP_LIMIT = 8 << 20
VALUE_BYTES = 100 << 10
FLOOD_HOST = "127.0.0.2"  # the flood's source address: the driver's (127.0.0.1) has its own per-IP limit
MIB = 1 << 20

# Cassandra's message (5.0, pre-v5 connections), its missing space included.
OVERLOADED_MESSAGE = re.compile(
    r"Request breached limit on bytes in flight\. \(Using \d+/%d bytes of endpoint limit and \d+/%d bytes of "
    r"global limit\.\)Server is currently in an overloaded state and cannot accept more requests\."
    % (PER_IP_LIMIT, GLOBAL_LIMIT)
)


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


class RssSampler(threading.Thread):
    """The node's peak RSS while it runs (every 10 ms)."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self.done = pid, rss_bytes(pid), threading.Event()

    def run(self):
        while not self.done.wait(0.01):
            self.peak = max(self.peak, rss_bytes(self.pid))

    def stop(self):
        self.done.set()
        self.join(timeout=5)
        return self.peak


VALUE = bytes(range(256)) * (VALUE_BYTES // 256)
PADDING = " /* " + "x" * VALUE_BYTES + " */"


def insert_frame(stream, key):
    """QUERY "INSERT INTO ov.t (k, v) VALUES (?, ?)" with a 100 KiB blob bound, at ONE."""
    body = (
        long_string("INSERT INTO ov.t (k, v) VALUES (?, ?)")
        + struct.pack(">HBH", 0x0001, 0x01, 2)
        + struct.pack(">ii", 4, key)
        + struct.pack(">i", len(VALUE))
        + VALUE
    )
    return frame(OP_QUERY, body, stream=stream)


def select_frame(stream, key):
    """QUERY "SELECT v FROM ov.small WHERE k = ?", 100 KiB long with a comment, at ONE."""
    body = long_string("SELECT v FROM ov.small WHERE k = ?" + PADDING) + struct.pack(">HBHii", 0x0001, 0x01, 1, 4, key)
    return frame(OP_QUERY, body, stream=stream)


class Flooder:
    """One raw connection from FLOOD_HOST: STARTUP, then `count` requests
    (`make_frame(stream, key)`) on streams 1..count, sent at once, 16 frames
    to a send; a thread reads the answers meanwhile."""

    def __init__(self, node, make_frame, first_key, count, throw_on_overload=False):
        assert count < 32768
        self.make_frame, self.first_key, self.count = make_frame, first_key, count
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((FLOOD_HOST, 0))
        self.sock.settimeout(10)
        self.sock.connect((node.host, node.port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        options = {"CQL_VERSION": "3.0.0"}
        if throw_on_overload:
            options["THROW_ON_OVERLOAD"] = "1"
        self.sock.sendall(frame(OP_STARTUP, string_map(options), stream=0))
        kind, header, body = read_frame(self.sock)
        assert kind == "frame" and header[3] == OP_READY, f"STARTUP: {kind} {header} {body!r}"
        self.ok, self.overloaded, self.other, self.message = 0, 0, [], None
        self.error = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.writer = threading.Thread(target=self._write, daemon=True)

    def start(self):
        self.reader.start()
        self.writer.start()

    def _write(self):
        try:
            for start in range(1, self.count + 1, 16):
                chunk = b"".join(
                    self.make_frame(s, self.first_key + s) for s in range(start, min(start + 16, self.count + 1))
                )
                self.sock.sendall(chunk)
        except OSError as e:
            self.error = f"send: {e!r}"

    def _read(self):
        buf = bytearray()
        answered = 0
        try:
            while answered < self.count:
                while len(buf) >= 9:
                    (length,) = struct.unpack(">I", buf[5:9])
                    if len(buf) < 9 + length:
                        break
                    opcode, body = buf[4], bytes(buf[9 : 9 + length])
                    del buf[: 9 + length]
                    answered += 1
                    if opcode == OP_RESULT:
                        self.ok += 1
                    elif opcode == OP_ERROR:
                        code, msg = parse_error(body)
                        if code == OVERLOADED:
                            self.overloaded += 1
                            self.message = self.message or msg
                        else:
                            self.other.append((hex(code), msg))
                    else:
                        self.other.append((hex(opcode), body[:100]))
                if answered >= self.count:
                    break
                chunk = self.sock.recv(1 << 20)
                if not chunk:
                    self.error = f"closed after {answered} answers"
                    return
                buf += chunk
        except OSError as e:
            self.error = f"recv after {answered} answers: {e!r}"

    def join(self, deadline):
        for t in (self.writer, self.reader):
            t.join(timeout=max(0.1, deadline - time.monotonic()))
        assert not self.reader.is_alive(), (
            f"flood connection: {self.ok + self.overloaded + len(self.other)}/{self.count} answers before the deadline"
        )
        self.sock.close()
        assert self.error is None, self.error
        assert not self.other, f"unexpected answers: {self.other[:5]}"
        assert self.ok + self.overloaded == self.count


def flood(node, connections, per_connection, make_frame=insert_frame, throw_on_overload=False, timeout=40):
    """Floods `node` and, meanwhile, runs small queries through a driver session
    from 127.0.0.1. Returns (flooders, peak RSS over the baseline, baseline,
    queries the driver ran while the flood went on)."""
    cluster = Cluster([node.host], port=node.port, protocol_version=4)
    try:
        session = cluster.connect()
        session.execute("CREATE KEYSPACE ov WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute("CREATE TABLE ov.t (k int PRIMARY KEY, v blob)")
        session.execute("CREATE TABLE ov.small (k int PRIMARY KEY, v int)")
        insert = session.prepare("INSERT INTO ov.small (k, v) VALUES (?, ?)")
        select = session.prepare("SELECT v FROM ov.small WHERE k = ?")
        time.sleep(1.0)  # let start-up settle before the baseline
        baseline = rss_bytes(node.pid)
        sampler = RssSampler(node.pid)
        sampler.start()
        flooders = [Flooder(node, make_frame, i * 100_000, per_connection, throw_on_overload) for i in range(connections)]
        deadline = time.monotonic() + timeout
        for f in flooders:
            f.start()
        # The other client: each query answered, and quickly, while the flood goes on.
        served, k = 0, 0
        while any(f.reader.is_alive() for f in flooders) and time.monotonic() < deadline:
            started = time.monotonic()
            session.execute(insert, (k, k), timeout=5)
            assert session.execute(select, (k,), timeout=5).one().v == k
            assert session.execute("SELECT release_version FROM system.local", timeout=5).one() is not None
            assert time.monotonic() - started < 5
            served += 1
            k += 1
        for f in flooders:
            f.join(deadline)
        peak = sampler.stop()
        assert node.is_running(), f"the node died; log:\n{node.log_tail()}"
        assert session.execute(select, (0,)).one() is not None
        return flooders, peak - baseline, baseline, served
    finally:
        cluster.shutdown()


def report(what, flooders, grown, baseline, served):
    ok = sum(f.ok for f in flooders)
    overloaded = sum(f.overloaded for f in flooders)
    print(
        f"{what}: {ok} served, {overloaded} Overloaded; node RSS {baseline / MIB:.0f} MiB at rest, "
        f"peak +{grown / MIB:.0f} MiB; the driver ran {served} rounds meanwhile"
    )
    return ok, overloaded


# What the node may hold above its resting RSS while large reads flood it: the
# requests in flight (16 MiB of bodies, the global limit) live about twice over
# (each frame in the buffer it was read into, which it keeps alive, and its
# query text decoded), and read buffers, answers on their way, the driver's
# requests and the allocator's slack take some more (mimalloc returns freed
# pages after 2 s). Without the limits: +966 MiB; with them, +48 to +78 MiB.
READS_RSS_BOUND = 3 * 16 * MIB + 48 * MIB

# The same for INSERTs, plus what storage keeps of what was admitted: memtables
# (8 MiB each, 32 MiB active in all, a few frozen ones flushing) and the
# allocator's pages of 100 KiB values. A driver writing 300 MB alone grows this
# node by 90 to 130 MiB; the flood writes 150 to 350 MB in all and grew it by
# 200 to 320 MiB (and, with the limits at 8 GiB, 1 GB in all, by about 300 MiB:
# for writes `concurrent_writes` already slows the readers down).
WRITES_RSS_BOUND = 448 * MIB

LIMITS = {
    "native_transport_max_request_data_in_flight": "16MiB",
    "native_transport_max_request_data_in_flight_per_ip": "8MiB",
}
# A slow node: one read at a time, the others queue for the read stage.
READS = {**LIMITS, "concurrent_reads": 1}
WRITES = {
    **LIMITS,
    "commitlog_sync": "group",
    "commitlog_sync_group_window": "50ms",
    "memtable_size": "8MiB",
    "memtable_heap_space": "32MiB",
}


def check_overloaded(flooders, written, overloaded):
    assert overloaded > 0 and written > 0, f"{written} served, {overloaded} Overloaded"
    for f in flooders:
        if f.message is not None:
            assert OVERLOADED_MESSAGE.fullmatch(f.message), f.message


def test_a_flood_of_inserts_is_answered_overloaded_and_others_are_served(shoal_node_factory):
    """The default (`native_transport_throw_on_overload: true`): a client that
    floods gets Overloaded answers, at once, for what does not fit, without
    having asked for them; the node stays up and in bounded memory; the driver
    is served throughout."""
    node = shoal_node_factory(config=WRITES)
    flooders, grown, baseline, served = flood(node, connections=4, per_connection=2500)
    written, overloaded = report("INSERTs, throw on overload", flooders, grown, baseline, served)
    check_overloaded(flooders, written, overloaded)
    assert grown < WRITES_RSS_BOUND, f"the node's RSS grew by {grown / MIB:.0f} MiB (bound {WRITES_RSS_BOUND / MIB:.0f})"
    assert served > 0, "the driver ran nothing while the flood went on"


def test_a_flood_of_large_reads_holds_no_more_than_the_limit(shoal_node_factory):
    node = shoal_node_factory(config=READS)
    flooders, grown, baseline, served = flood(node, connections=4, per_connection=2500, make_frame=select_frame)
    answered, overloaded = report("SELECTs, throw on overload", flooders, grown, baseline, served)
    check_overloaded(flooders, answered, overloaded)
    assert grown < READS_RSS_BOUND, f"the node's RSS grew by {grown / MIB:.0f} MiB (bound {READS_RSS_BOUND / MIB:.0f})"
    assert served > 0, "the driver ran nothing while the flood went on"


def test_a_client_asks_for_overloaded_with_throw_on_overload(shoal_node_factory):
    """`native_transport_throw_on_overload: false` (Cassandra's behaviour): a
    client that sent THROW_ON_OVERLOAD=1 in its STARTUP is answered Overloaded."""
    node = shoal_node_factory(config={**READS, "native_transport_throw_on_overload": False})
    flooders, grown, baseline, served = flood(
        node, connections=2, per_connection=2500, make_frame=select_frame, throw_on_overload=True
    )
    answered, overloaded = report("SELECTs, THROW_ON_OVERLOAD=1", flooders, grown, baseline, served)
    check_overloaded(flooders, answered, overloaded)
    assert grown < READS_RSS_BOUND, f"the node's RSS grew by {grown / MIB:.0f} MiB (bound {READS_RSS_BOUND / MIB:.0f})"


def test_backpressure_serves_everything_in_bounded_memory(shoal_node_factory):
    """`native_transport_throw_on_overload: false` and a client that did not ask:
    a connection whose next request does not fit is not read until it does (TCP
    slows the client down). Every request is served, none answered Overloaded,
    memory stays bounded, and the other client is served meanwhile."""
    node = shoal_node_factory(config={**READS, "native_transport_throw_on_overload": False})
    flooders, grown, baseline, served = flood(node, connections=4, per_connection=2500, make_frame=select_frame)
    answered, overloaded = report("SELECTs, backpressure", flooders, grown, baseline, served)
    assert (answered, overloaded) == (10_000, 0)
    assert grown < READS_RSS_BOUND, f"the node's RSS grew by {grown / MIB:.0f} MiB (bound {READS_RSS_BOUND / MIB:.0f})"
    assert served > 0, "the driver ran nothing while the flood went on"


def raw_connection(node, source, timeout=5.0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((source, 0))
    s.settimeout(timeout)
    s.connect((node.host, node.port))
    return s


def started(node, source):
    """A connection from `source` that was answered READY, or None if the node closed it."""
    s = raw_connection(node, source)
    try:
        s.sendall(frame(OP_STARTUP, string_map({"CQL_VERSION": "3.0.0"}), stream=0))
    except OSError:
        s.close()
        return None
    kind, header, body = read_frame(s)
    if kind == "closed":
        s.close()
        return None
    assert header[3] == OP_READY, f"STARTUP: {header} {body!r}"
    return s


def test_connections_over_the_limits_are_closed(shoal_node_factory):
    node = shoal_node_factory(
        config={"native_transport_max_concurrent_connections": 5, "native_transport_max_concurrent_connections_per_ip": 3}
    )
    deadline = time.monotonic() + 30
    first = [started(node, "127.0.0.3") for _ in range(3)]
    assert all(first), "the first 3 connections from 127.0.0.3 were refused"
    assert started(node, "127.0.0.3") is None, "a 4th connection from 127.0.0.3 was served"
    assert "Exceeded maximum native connection limit per ip of 3 by using 4 connections" in node.log_tail(100_000)
    second = [started(node, "127.0.0.4") for _ in range(2)]
    assert all(second), "127.0.0.4 is refused for 127.0.0.3's connections"
    assert started(node, "127.0.0.5") is None, "a 6th connection was served (limit 5)"
    # A connection that closes makes room (the node notices the close).
    first.pop().close()
    while (s := started(node, "127.0.0.5")) is None:
        assert time.monotonic() < deadline, "no room after a connection closed"
        time.sleep(0.05)
    s.close()
    for s in first + second:
        s.close()
    # Every connection closed: a driver gets its connections.
    while True:
        cluster = Cluster([node.host], port=node.port, protocol_version=4)
        try:
            assert cluster.connect().execute("SELECT release_version FROM system.local").one() is not None
            break
        except Exception:
            assert time.monotonic() < deadline, "the driver could not connect once the connections closed"
            time.sleep(0.2)
        finally:
            cluster.shutdown()
    assert node.is_running()
