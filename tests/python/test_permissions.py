"""Roles and permissions (issue 22): `authorizer: CassandraAuthorizer` over the replicated
`system_auth` tables. GRANT / REVOKE of permissions and roles, LIST PERMISSIONS, the check
every statement passes, the creator's automatic grants and their removal with what they were
on, and a GRANT made through one node of a 3-node cluster taking effect on every node within
the validity period. Messages and result shapes are Cassandra 5.0.9's."""

import time

import pytest
from cassandra import InvalidRequest, Unauthorized
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import WhiteListRoundRobinPolicy
from cassandra.protocol import SyntaxException

from cluster_harness import ShoalCluster
from shoal_harness import EXTERNAL, ShoalNode, connect_cluster, wait_until

pytestmark = pytest.mark.skipif(bool(EXTERNAL), reason="starts its own nodes with CassandraAuthorizer")

AUTH = {"authenticator": "PasswordAuthenticator", "authorizer": "CassandraAuthorizer"}


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    n = ShoalNode(tmp_path_factory.mktemp("perm-node"), config=AUTH)
    n.start()
    yield n
    n.stop()


def login(node, user, password):
    cluster = connect_cluster(node, auth_provider=PlainTextAuthProvider(user, password))
    return cluster, cluster.connect()


@pytest.fixture(scope="module")
def admin(node):
    cluster, session = login(node, "cassandra", "cassandra")
    session.execute("CREATE KEYSPACE perm WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE perm.t (k int PRIMARY KEY, v text)")
    session.execute("CREATE TABLE perm.other (k int PRIMARY KEY, v text)")
    session.execute("INSERT INTO perm.t (k, v) VALUES (1, 'one')")
    yield session
    cluster.shutdown()


def rows(session, query):
    return [tuple(r) for r in session.execute(query)]


def test_select_grant_reads_one_table_and_nothing_else(node, admin):
    admin.execute("CREATE ROLE reader WITH PASSWORD = 'r' AND LOGIN = true")
    admin.execute("GRANT SELECT ON perm.t TO reader")
    cluster, reader = login(node, "reader", "r")
    try:
        assert rows(reader, "SELECT k, v FROM perm.t") == [(1, "one")]
        with pytest.raises(Unauthorized, match=r"User reader has no MODIFY permission on <table perm.t> or any of its parents"):
            reader.execute("INSERT INTO perm.t (k, v) VALUES (2, 'two')")
        with pytest.raises(Unauthorized, match=r"User reader has no SELECT permission on <table perm.other> or any of its parents"):
            reader.execute("SELECT * FROM perm.other")
        with pytest.raises(Unauthorized, match=r"User reader has no CREATE permission on <all keyspaces> or any of its parents"):
            reader.execute("CREATE KEYSPACE nope WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        with pytest.raises(Unauthorized, match=r"User reader has no DROP permission on <table perm.t> or any of its parents"):
            reader.execute("DROP TABLE perm.t")
        # What drivers read on connect stays readable; the auth tables do not.
        assert reader.execute("SELECT release_version FROM system.local").one() is not None
        with pytest.raises(Unauthorized, match=r"no SELECT permission on <table system_auth.roles>"):
            reader.execute("SELECT * FROM system_auth.roles")
        # Revoked through this node: refused at once.
        admin.execute("REVOKE SELECT ON perm.t FROM reader")
        with pytest.raises(Unauthorized, match=r"User reader has no SELECT permission on <table perm.t>"):
            reader.execute("SELECT * FROM perm.t")
        # A keyspace-wide grant covers its tables.
        admin.execute("GRANT MODIFY ON KEYSPACE perm TO reader")
        reader.execute("INSERT INTO perm.other (k, v) VALUES (5, 'five')")
    finally:
        cluster.shutdown()
        admin.execute("DROP ROLE reader")


def test_prepared_statements_and_protocol_batches_are_checked_too(node, admin):
    from cassandra.query import BatchStatement

    admin.execute("CREATE ROLE preparer WITH PASSWORD = 'p' AND LOGIN = true")
    admin.execute("GRANT SELECT ON perm.t TO preparer")
    cluster, s = login(node, "preparer", "p")
    try:
        insert = s.prepare("INSERT INTO perm.t (k, v) VALUES (?, ?)")
        with pytest.raises(Unauthorized, match=r"User preparer has no MODIFY permission on <table perm.t>"):
            s.execute(insert, (7, "seven"))
        batch = BatchStatement()
        batch.add(insert, (8, "eight"))
        with pytest.raises(Unauthorized, match=r"User preparer has no MODIFY permission on <table perm.t>"):
            s.execute(batch)
        select = s.prepare("SELECT v FROM perm.t WHERE k = ?")
        assert s.execute(select, (1,)).one().v == "one"
        assert rows(admin, "SELECT k FROM perm.t WHERE k IN (7, 8)") == []
    finally:
        cluster.shutdown()
        admin.execute("DROP ROLE preparer")


def test_list_permissions_shape_and_order(admin):
    admin.execute("CREATE ROLE lister")
    admin.execute("GRANT SELECT, MODIFY ON TABLE perm.t TO lister")
    admin.execute("GRANT ALL PERMISSIONS ON KEYSPACE perm TO lister")
    rs = admin.execute("LIST ALL PERMISSIONS OF lister")
    assert [c for c in rs.column_names] == ["role", "username", "resource", "permission"]
    got = [tuple(r) for r in rs]
    keyspace_perms = ["CREATE", "ALTER", "DROP", "SELECT", "MODIFY", "AUTHORIZE", "UNMASK", "SELECT_MASKED"]
    assert got == [("lister", "lister", "<keyspace perm>", p) for p in keyspace_perms] + [
        ("lister", "lister", "<table perm.t>", "SELECT"),
        ("lister", "lister", "<table perm.t>", "MODIFY"),
    ]
    # ON a table lists its parents' grants too, unless NORECURSIVE.
    on_table = rows(admin, "LIST SELECT ON perm.t OF lister")
    assert on_table == [("lister", "lister", "<keyspace perm>", "SELECT"), ("lister", "lister", "<table perm.t>", "SELECT")]
    assert rows(admin, "LIST SELECT ON perm.t OF lister NORECURSIVE") == [("lister", "lister", "<table perm.t>", "SELECT")]
    admin.execute("REVOKE ALL ON KEYSPACE perm FROM lister")
    admin.execute("REVOKE SELECT, MODIFY ON perm.t FROM lister")
    # Nothing to list: VOID, which the driver shows as no rows.
    assert rows(admin, "LIST ALL PERMISSIONS OF lister") == []
    admin.execute("DROP ROLE lister")


def test_grant_errors_are_cassandras(admin):
    admin.execute("CREATE ROLE e1")
    with pytest.raises(SyntaxException, match="Resource type DataResource does not support any of the requested permissions"):
        admin.execute("GRANT EXECUTE ON TABLE perm.t TO e1")
    with pytest.raises(InvalidRequest, match="Role nobody doesn't exist"):
        admin.execute("GRANT SELECT ON perm.t TO nobody")
    with pytest.raises(InvalidRequest, match=r"Resource <keyspace nosuch> doesn't exist"):
        admin.execute("GRANT SELECT ON KEYSPACE nosuch TO e1")
    with pytest.raises(Unauthorized, match="Granting permissions on system keyspaces is strictly limited"):
        admin.execute("GRANT MODIFY ON system_auth.roles TO e1")
    with pytest.raises(InvalidRequest, match=r"<role ghost> doesn't exist"):
        admin.execute("LIST ALL PERMISSIONS OF ghost")
    admin.execute("DROP ROLE e1")


def test_creators_get_their_creations_and_drops_take_the_grants(node, admin):
    admin.execute("CREATE ROLE maker WITH PASSWORD = 'm' AND LOGIN = true")
    admin.execute("GRANT CREATE ON ALL KEYSPACES TO maker")
    cluster, maker = login(node, "maker", "m")
    try:
        maker.execute("CREATE KEYSPACE made WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        # All applicable permissions on the new keyspace: tables in it, writes, reads.
        maker.execute("CREATE TABLE made.t (k int PRIMARY KEY)")
        maker.execute("INSERT INTO made.t (k) VALUES (1)")
        assert rows(maker, "SELECT k FROM made.t") == [(1,)]
        resources = {r.resource for r in admin.execute("LIST ALL PERMISSIONS OF maker")}
        assert {"<keyspace made>", "<all functions in made>", "<table made.t>", "<all keyspaces>"} <= resources
        maker.execute("DROP KEYSPACE made")
        resources = {r.resource for r in admin.execute("LIST ALL PERMISSIONS OF maker")}
        assert resources == {"<all keyspaces>"}, resources
        # A keyspace made again under the same name does not bring old grants back.
        admin.execute("CREATE KEYSPACE made WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        admin.execute("CREATE TABLE made.t (k int PRIMARY KEY)")
        with pytest.raises(Unauthorized, match=r"User maker has no MODIFY permission on <table made.t>"):
            maker.execute("INSERT INTO made.t (k) VALUES (1)")
        admin.execute("DROP KEYSPACE made")
    finally:
        cluster.shutdown()
        admin.execute("DROP ROLE maker")


def test_role_grants_carry_permissions(node, admin):
    admin.execute("CREATE ROLE readers")
    admin.execute("GRANT SELECT ON KEYSPACE perm TO readers")
    admin.execute("CREATE ROLE dana WITH PASSWORD = 'd' AND LOGIN = true")
    admin.execute("GRANT readers TO dana")
    with pytest.raises(InvalidRequest, match="dana is a member of readers"):
        admin.execute("GRANT readers TO dana")
    # A cycle: dana already holds readers (Cassandra names them in this order).
    with pytest.raises(InvalidRequest, match="dana is a member of readers"):
        admin.execute("GRANT dana TO readers")
    cluster, dana = login(node, "dana", "d")
    try:
        assert rows(dana, "SELECT k, v FROM perm.t WHERE k = 1") == [(1, "one")]
        assert {r.role for r in dana.execute("LIST ROLES")} == {"dana", "readers"}
        # LIST PERMISSIONS OF a role of one's own is allowed and names the holder.
        assert rows(dana, "LIST SELECT OF dana") == [("readers", "readers", "<keyspace perm>", "SELECT")]
        with pytest.raises(Unauthorized, match="You are not authorized to view everyone's permissions"):
            dana.execute("LIST ALL PERMISSIONS")
        admin.execute("REVOKE readers FROM dana")
        with pytest.raises(Unauthorized, match="User dana has no SELECT permission on <table perm.t>"):
            dana.execute("SELECT * FROM perm.t")
        with pytest.raises(InvalidRequest, match="dana is not a member of readers"):
            admin.execute("REVOKE readers FROM dana")
    finally:
        cluster.shutdown()
        admin.execute("DROP ROLE dana")
        admin.execute("DROP ROLE readers")


def test_dropping_a_role_removes_its_grants(admin):
    admin.execute("CREATE ROLE gone")
    admin.execute("GRANT SELECT ON perm.t TO gone")
    admin.execute("DROP ROLE gone")
    admin.execute("CREATE ROLE gone")
    assert rows(admin, "LIST ALL PERMISSIONS OF gone") == []
    assert not [r for r in admin.execute("SELECT * FROM system_auth.resource_role_permissons_index") if r.role == "gone"]
    admin.execute("DROP ROLE gone")


def session_on(cluster, host, user, password):
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([host]), request_timeout=30)
    c = Cluster([host], port=cluster.native_port, execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                protocol_version=4, auth_provider=PlainTextAuthProvider(user, password))
    return c, c.connect()


def test_a_grant_reaches_every_node_of_a_cluster_within_the_validity(tmp_path_factory):
    config = {**AUTH, "permissions_validity": "1s", "roles_validity": "1s"}
    with ShoalCluster(tmp_path_factory.mktemp("perm-cluster") / "c", nodes=3, config=config) as c:
        first = c.contact_points[0]
        # The default superuser exists once the cluster answers (set up in the background).
        def admin_session():
            try:
                return session_on(c, first, "cassandra", "cassandra")
            except Exception:  # noqa: BLE001 - not set up yet
                return None
        wait_until(lambda: admin_session() is not None, 60, interval=1, what="the default superuser")
        ac, admin = session_on(c, first, "cassandra", "cassandra")
        admin.execute("ALTER KEYSPACE system_auth WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        admin.execute("CREATE KEYSPACE app WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        admin.execute("CREATE TABLE app.t (k int PRIMARY KEY, v int)")
        admin.execute("INSERT INTO app.t (k, v) VALUES (1, 1)")
        admin.execute("CREATE ROLE app WITH PASSWORD = 'a' AND LOGIN = true")
        sessions = []
        try:
            for host in c.contact_points:
                sessions.append(session_on(c, host, "app", "a"))
            for _, s in sessions:
                with pytest.raises(Unauthorized, match="User app has no SELECT permission on <table app.t>"):
                    s.execute("SELECT * FROM app.t")
            admin.execute("GRANT SELECT ON app.t TO app")
            granted = time.monotonic()
            for _, s in sessions:
                def can_read(s=s):
                    try:
                        return [tuple(r) for r in s.execute("SELECT k, v FROM app.t")] == [(1, 1)]
                    except Unauthorized:
                        return False
                wait_until(can_read, 10, interval=0.2, what="the grant on every node")
            # The validity is 1s: every node saw it well within two.
            assert time.monotonic() - granted < 3.0
            admin.execute("REVOKE SELECT ON app.t FROM app")
            for _, s in sessions:
                def refused(s=s):
                    try:
                        s.execute("SELECT * FROM app.t")
                        return False
                    except Unauthorized:
                        return True
                wait_until(refused, 10, interval=0.2, what="the revoke on every node")
        finally:
            for cl, _ in sessions:
                cl.shutdown()
            ac.shutdown()
