"""Password authentication (issue 22): a node with `authenticator: PasswordAuthenticator`,
the Python driver's PlainTextAuthProvider, the raw native-protocol exchange (AUTHENTICATE,
AUTH_RESPONSE, AUTH_SUCCESS, errors), the role statements and their result shapes, roles kept
across a restart, and cqlsh -u/-p. The messages are Cassandra 5.0.9's."""

import os
import socket
import struct
import subprocess
import time

import pytest
from cassandra import AuthenticationFailed, InvalidRequest, Unauthorized
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import NoHostAvailable

from shoal_harness import EXTERNAL, ShoalNode, connect_cluster

pytestmark = pytest.mark.skipif(bool(EXTERNAL), reason="starts its own node with PasswordAuthenticator")

AUTH_CONFIG = {"authenticator": "PasswordAuthenticator", "authorizer": "CassandraAuthorizer"}


@pytest.fixture(scope="module")
def auth_node(tmp_path_factory):
    node = ShoalNode(tmp_path_factory.mktemp("auth-node"), config=AUTH_CONFIG)
    node.start()
    yield node
    node.stop()


def connect(node, user, password):
    cluster = connect_cluster(node, auth_provider=PlainTextAuthProvider(user, password))
    return cluster, cluster.connect()


def login_error(node, auth_provider):
    """The error a connection attempt ends in (the driver's AuthenticationFailed's text)."""
    kwargs = {} if auth_provider is None else {"auth_provider": auth_provider}
    cluster = connect_cluster(node, **kwargs)
    try:
        with pytest.raises(NoHostAvailable) as e:
            cluster.connect()
    finally:
        cluster.shutdown()
    errors = list(e.value.errors.values())
    assert errors and all(isinstance(x, AuthenticationFailed) for x in errors), errors
    return str(errors[0])


@pytest.fixture(scope="module")
def superuser(auth_node):
    cluster, session = connect(auth_node, "cassandra", "cassandra")
    yield session
    cluster.shutdown()


def test_default_superuser_logs_in_and_is_warned_about(auth_node, superuser):
    row = superuser.execute("SELECT cluster_name FROM system.local").one()
    assert row.cluster_name
    assert "default superuser 'cassandra' exists with its default password" in auth_node.log_tail(200000)
    assert "Created default superuser role 'cassandra'" in auth_node.log_tail(200000)


def test_wrong_password_is_refused_with_cassandras_message(auth_node):
    message = login_error(auth_node, PlainTextAuthProvider("cassandra", "wrong"))
    assert "code=0100 [Bad credentials]" in message, message
    assert "Provided username cassandra and/or password are incorrect" in message, message
    message = login_error(auth_node, PlainTextAuthProvider("nobody", "x"))
    assert "Provided username nobody and/or password are incorrect" in message, message


def test_no_credentials_is_refused(auth_node):
    assert "Remote end requires authentication" in login_error(auth_node, None)


def test_created_role_logs_in_and_cannot_create_roles(auth_node, superuser):
    superuser.execute("CREATE ROLE alice WITH PASSWORD = 'p' AND LOGIN = true")
    cluster, alice = connect(auth_node, "alice", "p")
    try:
        assert alice.execute("SELECT key FROM system.local").one().key == "local"
        with pytest.raises(Unauthorized, match="User alice does not have sufficient privileges to perform the requested operation"):
            alice.execute("CREATE ROLE mallory WITH PASSWORD = 'm' AND LOGIN = true")
        with pytest.raises(Unauthorized, match="User alice has no SELECT permission on <table system_auth.roles>"):
            alice.execute("SELECT * FROM system_auth.roles")
        # A role may change its own password, not its superuser status.
        with pytest.raises(Unauthorized, match="You aren't allowed to alter your own superuser status"):
            alice.execute("ALTER ROLE alice WITH SUPERUSER = true")
        rows = list(alice.execute("LIST ROLES"))
        assert [(r.role, r.super, r.login) for r in rows] == [("alice", False, True)]
    finally:
        cluster.shutdown()
    superuser.execute("DROP ROLE alice")


def test_a_role_without_login_is_refused(auth_node, superuser):
    superuser.execute("CREATE ROLE nologin WITH PASSWORD = 'n'")
    message = login_error(auth_node, PlainTextAuthProvider("nologin", "n"))
    assert "nologin is not permitted to log in" in message, message
    superuser.execute("DROP ROLE nologin")


def test_alter_role_changes_the_password(auth_node, superuser):
    superuser.execute("CREATE ROLE bob WITH PASSWORD = 'old' AND LOGIN = true")
    superuser.execute("ALTER ROLE bob WITH PASSWORD = 'new'")
    assert "Provided username bob and/or password are incorrect" in login_error(
        auth_node, PlainTextAuthProvider("bob", "old"))
    cluster, bob = connect(auth_node, "bob", "new")
    try:
        # Its own password, by itself.
        bob.execute("ALTER ROLE bob WITH PASSWORD = 'newer'")
    finally:
        cluster.shutdown()
    cluster, _ = connect(auth_node, "bob", "newer")
    cluster.shutdown()
    superuser.execute("DROP ROLE bob")


def test_drop_role(auth_node, superuser):
    superuser.execute("CREATE ROLE carol WITH PASSWORD = 'c' AND LOGIN = true")
    superuser.execute("DROP ROLE carol")
    assert "Provided username carol and/or password are incorrect" in login_error(
        auth_node, PlainTextAuthProvider("carol", "c"))
    with pytest.raises(InvalidRequest, match="carol doesn't exist"):
        superuser.execute("DROP ROLE carol")
    superuser.execute("DROP ROLE IF EXISTS carol")
    with pytest.raises(InvalidRequest, match="Cannot DROP primary role for current login"):
        superuser.execute("DROP ROLE cassandra")


def test_create_role_errors(superuser):
    superuser.execute("CREATE ROLE dave")
    with pytest.raises(InvalidRequest, match="dave already exists"):
        superuser.execute("CREATE ROLE dave")
    superuser.execute("CREATE ROLE IF NOT EXISTS dave")
    with pytest.raises(InvalidRequest, match="Role nosuch doesn't exist"):
        superuser.execute("ALTER ROLE nosuch WITH LOGIN = true")
    superuser.execute("DROP ROLE dave")


def test_list_roles_and_users_shapes(superuser):
    superuser.execute("CREATE ROLE erin WITH PASSWORD = 'e' AND LOGIN = true AND SUPERUSER = false")
    superuser.execute("CREATE USER 'Frank' WITH PASSWORD 'f' SUPERUSER")
    superuser.execute("CREATE ROLE grace")
    result = superuser.execute("LIST ROLES")
    assert result.column_names == ["role", "super", "login", "options", "datacenters"]
    rows = {r.role: r for r in result}
    assert {"cassandra", "erin", "Frank", "grace"} <= set(rows)
    assert (rows["cassandra"].super, rows["cassandra"].login) == (True, True)
    assert (rows["erin"].super, rows["erin"].login, rows["erin"].datacenters) == (False, True, "ALL")
    assert (rows["Frank"].super, rows["Frank"].login) == (True, True)
    assert (rows["grace"].super, rows["grace"].login) == (False, False)
    assert not rows["grace"].options
    names = [r.role for r in result]
    assert names == sorted(names)
    users = superuser.execute("LIST USERS")
    assert users.column_names == ["name", "super", "datacenters"]
    by_name = {r.name: r.super for r in users}
    assert by_name.get("Frank") is True and by_name.get("erin") is False and "grace" not in by_name
    # The stored rows, with Cassandra's schema.
    stored = {r.role: r for r in superuser.execute("SELECT role, can_login, is_superuser, salted_hash FROM system_auth.roles")}
    assert stored["erin"].salted_hash.startswith("$2a$10$") and len(stored["erin"].salted_hash) == 60
    assert stored["grace"].salted_hash is None
    for name in ("erin", "grace"):
        superuser.execute(f"DROP ROLE {name}")
    superuser.execute("DROP USER 'Frank'")


# ------------------------------------------------------------- the raw exchange

def _frame(opcode, body, stream=0):
    return struct.pack(">BBhBi", 0x04, 0, stream, opcode, len(body)) + body


def _string_map(d):
    out = struct.pack(">H", len(d))
    for k, v in d.items():
        out += struct.pack(">H", len(k)) + k.encode() + struct.pack(">H", len(v)) + v.encode()
    return out


def _read_frame(sock):
    def exactly(n):
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            assert chunk, "connection closed"
            buf += chunk
        return buf
    header = exactly(9)
    _version, _flags, stream, opcode, length = struct.unpack(">BBhBi", header)
    return stream, opcode, exactly(length)


def _error(body):
    code, n = struct.unpack(">iH", body[:6])
    return code, body[6:6 + n].decode()


def test_raw_exchange(auth_node):
    with socket.create_connection((auth_node.host, auth_node.port), timeout=10) as s:
        s.sendall(_frame(0x01, _string_map({"CQL_VERSION": "3.0.0"})))
        _, opcode, body = _read_frame(s)
        assert opcode == 0x03  # AUTHENTICATE
        n = struct.unpack(">H", body[:2])[0]
        assert body[2:2 + n].decode() == "org.apache.cassandra.auth.PasswordAuthenticator"
        # Anything but AUTH_RESPONSE is refused, on its own stream.
        query = b"SELECT * FROM system.local"
        s.sendall(_frame(0x07, struct.pack(">i", len(query)) + query + struct.pack(">HB", 1, 0), stream=3))
        stream, opcode, body = _read_frame(s)
        assert (stream, opcode) == (3, 0x00)
        assert _error(body) == (0x000A, "Unexpected message QUERY, expecting SASL_RESPONSE")
        s.sendall(_frame(0x05, b"", stream=4))
        stream, opcode, body = _read_frame(s)
        assert _error(body) == (0x000A, "Unexpected message OPTIONS, expecting SASL_RESPONSE")
        # A bad token, then a wrong password: errors, and the connection stays open.
        s.sendall(_frame(0x0F, struct.pack(">i", 7) + b"user\x00pw", stream=5))
        _, opcode, body = _read_frame(s)
        assert _error(body) == (0x0100, "Authentication ID must not be null")
        token = b"\x00cassandra\x00nope"
        s.sendall(_frame(0x0F, struct.pack(">i", len(token)) + token, stream=6))
        _, opcode, body = _read_frame(s)
        assert _error(body) == (0x0100, "Provided username cassandra and/or password are incorrect")
        # The retry succeeds: AUTH_SUCCESS with a null token.
        token = b"\x00cassandra\x00cassandra"
        s.sendall(_frame(0x0F, struct.pack(">i", len(token)) + token, stream=7))
        stream, opcode, body = _read_frame(s)
        assert (stream, opcode, body) == (7, 0x10, struct.pack(">i", -1))
        s.sendall(_frame(0x07, struct.pack(">i", len(query)) + query + struct.pack(">HB", 1, 0), stream=8))
        stream, opcode, body = _read_frame(s)
        assert (stream, opcode) == (8, 0x08)  # RESULT


# ------------------------------------------------------------- durability, cqlsh, default config

def test_roles_survive_a_restart(shoal_node_factory):
    node = shoal_node_factory(config=AUTH_CONFIG)
    cluster, session = connect(node, "cassandra", "cassandra")
    session.execute("CREATE ROLE henry WITH PASSWORD = 'h' AND LOGIN = true")
    session.execute("ALTER ROLE cassandra WITH PASSWORD = 'changed'")
    cluster.shutdown()
    node.restart()
    cluster, session = connect(node, "henry", "h")
    cluster.shutdown()
    cluster, session = connect(node, "cassandra", "changed")
    assert {r.role for r in session.execute("LIST ROLES")} == {"cassandra", "henry"}
    cluster.shutdown()
    # Not recreated: roles exist.
    assert node.log_tail(200000).count("Created default superuser role 'cassandra'") == 1


def test_cqlsh_with_credentials(cqlsh_bin, auth_node, tmp_path):
    env = dict(os.environ)
    env["HOME"] = str(tmp_path)
    env["CQL_HISTORY"] = str(tmp_path / "cqlsh_history")
    cmd = [cqlsh_bin, auth_node.host, str(auth_node.port), "-u", "cassandra", "-p", "cassandra",
           "--connect-timeout", "20", "--request-timeout", "30", "-e", "LIST ROLES"]
    proc = subprocess.run(cmd, env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "cassandra" in proc.stdout and "datacenters" in proc.stdout, proc.stdout
    cmd[cmd.index("-p") + 1] = "wrong"
    proc = subprocess.run(cmd, env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode != 0
    assert "Provided username cassandra and/or password are incorrect" in proc.stdout + proc.stderr


def test_allow_all_refuses_role_statements_as_cassandra(session):
    """The shared node runs the default AllowAllAuthenticator: sessions are anonymous."""
    with pytest.raises(Unauthorized, match="You have to be logged in and not anonymous to perform this request"):
        session.execute("LIST ROLES")
    with pytest.raises(InvalidRequest, match="org.apache.cassandra.auth.CassandraRoleManager doesn't support PASSWORD"):
        session.execute("CREATE ROLE r WITH PASSWORD = 'x' AND LOGIN = true")


def test_repeated_failed_logins_from_one_address_are_slowed(tmp_path_factory):
    """After 5 failures from an address its attempts wait 0.1 s, doubling per failure (Shoal
    only: Cassandra has no such guard); other addresses are not slowed."""
    node = ShoalNode(tmp_path_factory.mktemp("throttle"), config=AUTH_CONFIG)
    node.start()
    try:
        wrong = b"\x00cassandra\x00wrong"
        with socket.create_connection((node.host, node.port), timeout=30) as s:
            s.sendall(_frame(0x01, _string_map({"CQL_VERSION": "3.0.0"})))
            assert _read_frame(s)[1] == 0x03
            took = []
            for i in range(8):
                started = time.monotonic()
                s.sendall(_frame(0x0F, struct.pack(">i", len(wrong)) + wrong, stream=10 + i))
                _, _, body = _read_frame(s)
                took.append(time.monotonic() - started)
                assert _error(body) == (0x0100, "Provided username cassandra and/or password are incorrect")
        # The 6th, 7th and 8th attempts waited 0.1, 0.2 and 0.4 s before their check.
        assert sum(took[5:]) >= 0.6, took
        assert "5 failed logins from 127.0.0.1: its further attempts are slowed down" in node.log_tail(200000)
        # Another address logs in at once.
        other = socket.socket()
        try:
            other.settimeout(10)
            other.bind(("127.0.0.2", 0))
            other.connect((node.host, node.port))
            other.sendall(_frame(0x01, _string_map({"CQL_VERSION": "3.0.0"})))
            assert _read_frame(other)[1] == 0x03
            right = b"\x00cassandra\x00cassandra"
            started = time.monotonic()
            other.sendall(_frame(0x0F, struct.pack(">i", len(right)) + right, stream=1))
            assert _read_frame(other)[1] == 0x10
            assert time.monotonic() - started < 0.5
        finally:
            other.close()
    finally:
        node.stop()
