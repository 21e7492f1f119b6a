"""TLS on the native port (issue 22): `client_encryption_options` in Cassandra 5's PEM shape.
A throw-away CA, node and client certificates are made with the openssl command line. The
Python driver with an `SSLContext` and cqlsh `--ssl` connect to a TLS-only node; a plain client
gets a clean disconnect, not a hang; with `require_client_auth` a client without a certificate
is refused and one with a certificate the truststore vouches for is served; with `optional`
plain and TLS clients share the port; a bad keystore stops the node with a clear message."""

import os
import shutil
import socket
import ssl
import subprocess
import time

import pytest
from cassandra.cluster import NoHostAvailable

from shoal_harness import EXTERNAL, ShoalNode, connect_cluster

pytestmark = [
    pytest.mark.skipif(bool(EXTERNAL), reason="starts its own nodes with TLS"),
    pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make certificates"),
]


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_cert(d, name, ca=True):
    """An EC key and a certificate for `name` signed by the test CA (IP SAN 127.0.0.1)."""
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
    (d / f"{name}.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-out", f"{name}.pem", "-extfile", f"{name}.ext", cwd=d)
    # Cassandra 5's PEM keystore: the private key and the certificate chain in one file.
    (d / f"{name}-keystore.pem").write_text((d / f"{name}.key").read_text() + (d / f"{name}.pem").read_text())


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=shoal-test-ca", cwd=d)
    make_cert(d, "node")
    make_cert(d, "client")
    # A client certificate from a CA the node does not trust.
    other = d / "other"
    other.mkdir()
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=other-ca", cwd=other)
    make_cert(other, "client")
    return d


def tls_node(tmp_path_factory, certs, name, **options):
    encryption = {"enabled": True, "keystore": str(certs / "node-keystore.pem"), **options}
    node = ShoalNode(tmp_path_factory.mktemp(name), config={"client_encryption_options": encryption})
    node.start()
    return node


@pytest.fixture(scope="module")
def tls_only(tmp_path_factory, certs):
    node = tls_node(tmp_path_factory, certs, "tls-only")
    yield node
    node.stop()


def client_context(certs, cert_dir=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(str(certs / "ca.pem"))
    ctx.check_hostname = True
    if cert_dir is not None:
        ctx.load_cert_chain(str(cert_dir / "client.pem"), str(cert_dir / "client.key"))
    return ctx


def tls_session(node, ctx):
    cluster = connect_cluster(node, ssl_context=ctx, ssl_options={"server_hostname": "127.0.0.1"},
                              connect_timeout=10)
    return cluster, cluster.connect()


def test_driver_with_an_ssl_context_reads_and_writes(tls_only, certs):
    cluster, session = tls_session(tls_only, client_context(certs))
    try:
        session.execute("CREATE KEYSPACE tls WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute("CREATE TABLE tls.t (k int PRIMARY KEY, v blob)")
        big = os.urandom(200_000)  # several TLS records
        session.execute("INSERT INTO tls.t (k, v) VALUES (1, %s)", (big,))
        assert session.execute("SELECT v FROM tls.t WHERE k = 1").one().v == big
    finally:
        cluster.shutdown()


def test_a_plain_client_is_disconnected_not_left_hanging(tls_only):
    started = time.monotonic()
    cluster = connect_cluster(tls_only, connect_timeout=20)
    try:
        with pytest.raises(NoHostAvailable):
            cluster.connect()
    finally:
        cluster.shutdown()
    assert time.monotonic() - started < 15, "the plain client waited for a timeout instead of being closed"
    # At the socket level: an OPTIONS frame gets the connection closed, with no CQL answer.
    with socket.create_connection((tls_only.host, tls_only.port), timeout=10) as s:
        s.sendall(bytes([0x04, 0, 0, 1, 0x05, 0, 0, 0, 0]))
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        # Whatever came back (a TLS alert at most) is not a CQL frame.
        assert not data or data[0] != 0x84, data


def test_cqlsh_ssl(cqlsh_bin, tls_only, certs, tmp_path):
    (tmp_path / ".cassandra").mkdir()
    (tmp_path / ".cassandra" / "cqlshrc").write_text(
        f"[ssl]\ncertfile = {certs / 'ca.pem'}\nvalidate = true\n")
    env = dict(os.environ, HOME=str(tmp_path), CQL_HISTORY=str(tmp_path / "hist"))
    cmd = [cqlsh_bin, tls_only.host, str(tls_only.port), "--ssl", "--connect-timeout", "20",
           "-e", "SELECT cluster_name FROM system.local"]
    proc = subprocess.run(cmd, env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "cluster_name" in proc.stdout
    # Without --ssl cqlsh cannot talk to the node, and says so instead of hanging.
    plain = [c for c in cmd if c != "--ssl"]
    proc = subprocess.run(plain, env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode != 0


def test_require_client_auth(tmp_path_factory, certs):
    node = tls_node(tmp_path_factory, certs, "tls-mutual", require_client_auth=True,
                    truststore=str(certs / "ca.pem"))
    try:
        for ctx in (client_context(certs), client_context(certs, certs / "other")):
            cluster = connect_cluster(node, ssl_context=ctx, ssl_options={"server_hostname": "127.0.0.1"},
                                      connect_timeout=10)
            try:
                with pytest.raises(NoHostAvailable):
                    cluster.connect()
            finally:
                cluster.shutdown()
        cluster, session = tls_session(node, client_context(certs, certs))
        try:
            assert session.execute("SELECT release_version FROM system.local").one() is not None
        finally:
            cluster.shutdown()
    finally:
        node.stop()


def test_optional_serves_plain_and_tls_on_one_port(tmp_path_factory, certs):
    node = tls_node(tmp_path_factory, certs, "tls-optional", optional=True)
    try:
        cluster, session = tls_session(node, client_context(certs))
        try:
            assert session.execute("SELECT release_version FROM system.local").one() is not None
        finally:
            cluster.shutdown()
        cluster = connect_cluster(node)
        try:
            assert cluster.connect().execute("SELECT release_version FROM system.local").one() is not None
        finally:
            cluster.shutdown()
    finally:
        node.stop()


def test_a_bad_keystore_stops_the_node_with_a_clear_message(tmp_path_factory, certs):
    bad = certs / "bad.pem"
    bad.write_text((certs / "node.pem").read_text())  # a certificate, no key
    node = ShoalNode(tmp_path_factory.mktemp("tls-bad"),
                     config={"client_encryption_options": {"enabled": True, "keystore": str(bad)}})
    with pytest.raises(BaseException):
        node.start(timeout=20)
    assert "holds no usable private key" in node.log_tail(20000)


# ------------------------------------------------ a cluster with --auth --tls (internode encryption)

def cluster_session(cluster, host, tls_dir, user="cassandra", password="cassandra"):
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import WhiteListRoundRobinPolicy

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(str(tls_dir / "ca.pem"))
    ctx.load_cert_chain(str(tls_dir / "client.pem"))
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([host]), request_timeout=30)
    c = Cluster([host], port=cluster.native_port, execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                protocol_version=4, ssl_context=ctx, ssl_options={"server_hostname": host},
                auth_provider=PlainTextAuthProvider(user, password), connect_timeout=10)
    return c, c.connect()


def test_an_auth_tls_cluster_forms_and_keeps_intruders_out(tmp_path_factory):
    from cassandra import ConsistencyLevel
    from cassandra.query import SimpleStatement

    from cluster_harness import ShoalCluster
    from shoal_harness import wait_until

    with ShoalCluster(tmp_path_factory.mktemp("secure") / "c", nodes=3, launcher_args=["--auth", "--tls"]) as c:
        tls_dir = c.workdir / "tls"
        assert "logins required" in c.up_output and "TLS: clients trust" in c.up_output
        first = c.contact_points[0]

        def admin():
            try:
                return cluster_session(c, first, tls_dir)
            except Exception:  # noqa: BLE001 - the default superuser is set up in the background
                return None
        wait_until(lambda: admin() is not None, 60, interval=1, what="a TLS login as the default superuser")
        ac, session = cluster_session(c, first, tls_dir)
        try:
            session.execute("CREATE KEYSPACE sec WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
            session.execute("CREATE TABLE sec.t (k int PRIMARY KEY, v text)")
            for k in range(50):
                session.execute(SimpleStatement("INSERT INTO sec.t (k, v) VALUES (%s, 'x')",
                                                consistency_level=ConsistencyLevel.ALL), (k,))
            # Every replica answered over encrypted internode connections.
            rows = session.execute(SimpleStatement("SELECT count(*) FROM sec.t", consistency_level=ConsistencyLevel.ALL))
            assert rows.one()[0] == 50
        finally:
            ac.shutdown()

        # Intruders gossip to the seed with the cluster's name and port: one without TLS, one with a
        # certificate of another CA. Neither enters the ring; the cluster keeps serving.
        other_ca = tmp_path_factory.mktemp("other-ca")
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=other-ca", cwd=other_ca)
        make_cert(other_ca, "node")
        foreign = {"internode_encryption": "all", "keystore": str(other_ca / "node-keystore.pem"),
                   "truststore": str(other_ca / "ca.pem"), "require_client_auth": True}
        intruders = []
        for i, extra in enumerate([{}, {"server_encryption_options": foreign}]):
            config = {"storage_port": c.storage_port, **extra}
            node = ShoalNode(tmp_path_factory.mktemp(f"intruder{i}"), host=f"127.0.0.{20 + i}", config=config,
                             cluster_name=c.cluster_name, extra_args=["--seeds", first])
            node.proc = subprocess.Popen(node.command(), stdin=subprocess.DEVNULL,
                                         stdout=open(node.log_path, "ab"), stderr=subprocess.STDOUT,
                                         cwd=str(node.workdir))
            intruders.append(node)
        try:
            time.sleep(8)
            for n in range(1, 4):
                doc = c.tool("status", node=n)
                addresses = {e["address"] for dc in doc["datacenters"] for e in dc["nodes"]}
                assert addresses == set(c.contact_points), (n, addresses)
            log = c.log_path(1).read_text(errors="replace")
            assert "TLS handshake failed" in log, log[-3000:]
        finally:
            for node in intruders:
                if node.proc.poll() is None:
                    node.proc.kill()
                node.proc.wait(timeout=10)


def test_answers_reach_a_client_that_reads_late(tls_only, certs):
    """Answers a full socket did not take stay in the TLS session until flushed: a client that
    sends many requests for large rows before it reads anything still gets every answer."""
    import struct

    cluster, session = tls_session(tls_only, client_context(certs))
    try:
        session.execute("CREATE KEYSPACE IF NOT EXISTS late WITH replication = "
                        "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute("CREATE TABLE IF NOT EXISTS late.t (k int PRIMARY KEY, v blob)")
        session.execute("INSERT INTO late.t (k, v) VALUES (1, %s)", (os.urandom(300_000),))
    finally:
        cluster.shutdown()

    def frame(opcode, body, stream=0):
        return struct.pack(">BBhBi", 0x04, 0, stream, opcode, len(body)) + body

    def read_frame(s):
        def exactly(n):
            data = b""
            while len(data) < n:
                chunk = s.recv(n - len(data))
                if not chunk:
                    raise AssertionError("connection closed")
                data += chunk
            return data
        header = exactly(9)
        _, _, stream, opcode, length = struct.unpack(">BBhBi", header)
        return stream, opcode, exactly(length)

    raw = socket.create_connection((tls_only.host, tls_only.port), timeout=20)
    s = client_context(certs).wrap_socket(raw, server_hostname="127.0.0.1")
    try:
        startup = struct.pack(">H", 1) + struct.pack(">H", 11) + b"CQL_VERSION" + struct.pack(">H", 5) + b"3.0.0"
        s.sendall(frame(0x01, startup))
        assert read_frame(s)[1] == 0x02  # READY
        query = b"SELECT v FROM late.t WHERE k = 1"
        body = struct.pack(">i", len(query)) + query + struct.pack(">HB", 1, 0)
        n = 100  # 100 x 300 KB of answers: far more than the socket buffers hold
        s.sendall(b"".join(frame(0x07, body, stream=i + 1) for i in range(n)))
        time.sleep(1.0)  # let the server fill the socket and stall
        streams = set()
        for _ in range(n):
            stream, opcode, _ = read_frame(s)
            assert opcode == 0x08, opcode  # RESULT
            streams.add(stream)
        assert streams == set(range(1, n + 1))
    finally:
        s.close()
