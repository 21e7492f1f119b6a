"""Non-frozen user-defined types (issue 23): a column `a address` without
frozen<> is stored one cell per field, so a field can be written, deleted and
expire on its own (`SET a.f = v`, `DELETE a.f`, `USING TTL` per field), and a
read assembles the value from the live fields (a missing one is null, a value
with no live field is null). Whole-value writes replace every field.

Every expected answer and error text here was read from a Cassandra 5.0.9
node (SHOAL_TEST_EXTERNAL=127.0.0.1:PORT): the same tests pass against both."""

import json
import time

import pytest
from cassandra import ConsistencyLevel, InvalidRequest
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import WhiteListRoundRobinPolicy
from cassandra.protocol import SyntaxException
from cassandra.query import SimpleStatement

from cluster_harness import ShoalCluster
from shoal_harness import EXTERNAL, wait_until

# Needs processes of its own (a cluster), which a Cassandra under test has not.
shoal_only = pytest.mark.skipif(bool(EXTERNAL), reason="starts its own cluster of shoal processes")


@pytest.fixture(scope="module")
def s(module_ks_session):
    s = module_ks_session
    s.execute("CREATE TYPE address (street text, zip int, tags frozen<list<text>>)")
    return s


def message(error):
    """The server's message inside the driver's error text."""
    text = str(error)
    return text.split('message="', 1)[1].rsplit('"', 1)[0] if 'message="' in text else text


def invalid(session, query, params=None):
    with pytest.raises(InvalidRequest) as e:
        session.execute(query, params)
    return message(e.value)


def value(session, query, params=None):
    rows = list(session.execute(query, params))
    assert len(rows) == 1, rows
    return rows[0][0]


def fields(udt):
    """A UDT value read by the driver as a plain dict (None stays None)."""
    return None if udt is None else dict(udt._asdict())


def table(s, name, columns="k int PRIMARY KEY, a address"):
    s.execute(f"CREATE TABLE {name} ({columns})")
    return name


# ---- schema ----------------------------------------------------------------


def test_create_and_alter_table_accept_a_non_frozen_udt(s):
    table(s, "schema1")
    s.execute("ALTER TABLE schema1 ADD b address")
    types = {
        r.column_name: r.type
        for r in s.execute(
            "SELECT column_name, type FROM system_schema.columns WHERE keyspace_name = %s AND table_name = 'schema1'",
            [s.keyspace],
        )
    }
    assert types == {"k": "int", "a": "address", "b": "address"}
    s.execute("CREATE TABLE schema1f (k int PRIMARY KEY, f frozen<address>)")
    t = value(
        s,
        "SELECT type FROM system_schema.columns WHERE keyspace_name = %s AND table_name = 'schema1f'"
        " AND column_name = 'f'",
        [s.keyspace],
    )
    assert t == "frozen<address>"


def test_describe_prints_the_column_unfrozen(s):
    table(s, "desc1", "k int PRIMARY KEY, a address, f frozen<address>")
    text = list(s.execute(f"DESCRIBE TABLE {s.keyspace}.desc1"))[0].create_statement
    # Multi-cell columns after the others, as Cassandra lists them.
    assert "    k int PRIMARY KEY,\n    f frozen<address>,\n    a address\n)" in text, text


def test_non_frozen_udt_refused_inside_collections(s):
    assert invalid(s, "CREATE TABLE bad1 (k int PRIMARY KEY, l list<address>)") == (
        "Non-frozen UDTs are not allowed inside collections: list<address>"
    )
    assert invalid(s, "CREATE TABLE bad2 (k int PRIMARY KEY, m map<int, address>)") == (
        "Non-frozen UDTs are not allowed inside collections: map<int, address>"
    )
    assert invalid(s, "CREATE TABLE bad3 (k int PRIMARY KEY, st set<address>)") == (
        "Non-frozen UDTs are not allowed inside collections: set<address>"
    )
    table(s, "coll1", "k int PRIMARY KEY")
    assert invalid(s, "ALTER TABLE coll1 ADD c list<address>") == (
        "Non-frozen UDTs are not allowed inside collections: list<address>"
    )


def test_non_frozen_udt_refused_in_the_primary_key(s):
    ks = s.keyspace
    assert invalid(s, "CREATE TABLE bad4 (k address PRIMARY KEY, v int)") == (
        f"Invalid non-frozen user-defined type \"{ks}.address\" for PRIMARY KEY column 'k'"
    )
    assert invalid(s, "CREATE TABLE bad5 (k int, c address, v int, PRIMARY KEY (k, c))") == (
        f"Invalid non-frozen user-defined type \"{ks}.address\" for PRIMARY KEY column 'c'"
    )


def test_a_user_type_cannot_contain_a_non_frozen_udt(s):
    assert invalid(s, "CREATE TYPE wrap (a address)") == "A user type cannot contain non-frozen UDTs"
    s.execute("CREATE TYPE wrap_ok (a frozen<address>)")
    assert invalid(s, "ALTER TYPE wrap_ok ADD b address") == "A user type cannot contain non-frozen UDTs"


def test_a_non_frozen_udt_with_a_non_frozen_collection_field_is_refused_as_a_column(s):
    """A type may declare `list<int>` (system_schema.types shows it so); a column of it must be
    frozen, as its field's cells would need cells of their own."""
    s.execute("CREATE TYPE withlist (n int, l list<int>, m map<text, int>)")
    row = s.execute(
        "SELECT field_types FROM system_schema.types WHERE keyspace_name = %s AND type_name = 'withlist'", (s.keyspace,)
    ).one()
    assert list(row.field_types) == ["int", "list<int>", "map<text, int>"]
    refused = "Non-frozen UDTs with nested non-frozen collections are not supported"
    assert invalid(s, "CREATE TABLE badl (k int PRIMARY KEY, v withlist)") == refused
    table(s, "addl", "k int PRIMARY KEY, x int")
    assert invalid(s, "ALTER TABLE addl ADD v withlist") == f"{refused} for column v"
    assert invalid(s, "ALTER TABLE addl ADD (w int, v2 withlist)") == f"{refused} for column v2"
    table(s, "okl", "k int PRIMARY KEY, v frozen<withlist>")
    s.execute("INSERT INTO okl (k, v) VALUES (1, {n: 1, l: [3, 1, 3], m: {'a': 1}})")
    assert fields(value(s, "SELECT v FROM okl WHERE k = 1")) == {"n": 1, "l": [3, 1, 3], "m": {"a": 1}}


def test_index_on_a_non_frozen_udt_refused(s):
    table(s, "idx1")
    assert invalid(s, "CREATE INDEX ON idx1 (a)") == "Cannot create index on non-frozen UDT column a"


# ---- writes and reads ----------------------------------------------------------


def test_insert_reads_back_with_missing_fields_null(s):
    table(s, "rw1")
    s.execute("INSERT INTO rw1 (k, a) VALUES (1, {street: 'main', zip: 5})")
    assert fields(value(s, "SELECT a FROM rw1 WHERE k = 1")) == {"street": "main", "zip": 5, "tags": None}


def test_field_update_writes_one_field(s):
    table(s, "rw2")
    s.execute("INSERT INTO rw2 (k, a) VALUES (1, {street: 'main', zip: 5, tags: ['x']})")
    s.execute("UPDATE rw2 SET a.zip = 7 WHERE k = 1")
    assert fields(value(s, "SELECT a FROM rw2 WHERE k = 1")) == {"street": "main", "zip": 7, "tags": ["x"]}
    # A field update on a new row creates it with that field alone.
    s.execute("UPDATE rw2 SET a.street = 'side', a.tags = ['y', 'z'] WHERE k = 2")
    assert fields(value(s, "SELECT a FROM rw2 WHERE k = 2")) == {"street": "side", "zip": None, "tags": ["y", "z"]}


def test_whole_value_write_replaces_every_field(s):
    table(s, "rw3")
    s.execute("INSERT INTO rw3 (k, a) VALUES (1, {street: 'main', zip: 5, tags: ['x']})")
    s.execute("UPDATE rw3 SET a = {street: 'y'} WHERE k = 1")
    assert fields(value(s, "SELECT a FROM rw3 WHERE k = 1")) == {"street": "y", "zip": None, "tags": None}
    s.execute("INSERT INTO rw3 (k, a) VALUES (1, {zip: 9})")
    assert fields(value(s, "SELECT a FROM rw3 WHERE k = 1")) == {"street": None, "zip": 9, "tags": None}


def test_field_set_to_null_and_field_delete(s):
    table(s, "rw4")
    s.execute("INSERT INTO rw4 (k, a) VALUES (1, {street: 'main', zip: 5})")
    s.execute("UPDATE rw4 SET a.street = null WHERE k = 1")
    assert fields(value(s, "SELECT a FROM rw4 WHERE k = 1")) == {"street": None, "zip": 5, "tags": None}
    s.execute("DELETE a.zip FROM rw4 WHERE k = 1")
    # No live field left: the column reads as null; the row lives on (INSERT's row marker).
    assert value(s, "SELECT a FROM rw4 WHERE k = 1") is None


def test_value_of_null_fields_reads_as_null(s):
    table(s, "rw5")
    s.execute("INSERT INTO rw5 (k, a) VALUES (1, {street: null})")
    assert value(s, "SELECT a FROM rw5 WHERE k = 1") is None


def test_set_null_and_delete_remove_every_field(s):
    table(s, "rw6")
    s.execute("INSERT INTO rw6 (k, a) VALUES (1, {street: 'a', zip: 1})")
    s.execute("UPDATE rw6 SET a = null WHERE k = 1")
    assert value(s, "SELECT a FROM rw6 WHERE k = 1") is None
    s.execute("UPDATE rw6 SET a.zip = 7 WHERE k = 2")
    s.execute("DELETE a FROM rw6 WHERE k = 2")
    # Row 2 had no row marker (UPDATE): with its only column gone it is gone.
    assert list(s.execute("SELECT * FROM rw6 WHERE k = 2")) == []


def test_static_non_frozen_udt(s):
    table(s, "st1", "k int, c int, s address static, PRIMARY KEY (k, c)")
    s.execute("UPDATE st1 SET s.zip = 4 WHERE k = 1")
    rows = list(s.execute("SELECT k, c, s FROM st1"))
    assert [(r.k, r.c, fields(r.s)) for r in rows] == [(1, None, {"street": None, "zip": 4, "tags": None})]


def test_field_updates_in_a_batch(s):
    table(s, "b1")
    s.execute(
        "BEGIN BATCH UPDATE b1 SET a.zip = 1 WHERE k = 1; UPDATE b1 SET a.street = 's' WHERE k = 1; APPLY BATCH"
    )
    assert fields(value(s, "SELECT a FROM b1 WHERE k = 1")) == {"street": "s", "zip": 1, "tags": None}


def test_later_whole_write_wins_over_earlier_fields_by_timestamp(s):
    table(s, "ts1")
    s.execute("UPDATE ts1 USING TIMESTAMP 100 SET a.zip = 1 WHERE k = 1")
    s.execute("UPDATE ts1 USING TIMESTAMP 200 SET a = {street: 'x'} WHERE k = 1")
    assert fields(value(s, "SELECT a FROM ts1 WHERE k = 1")) == {"street": "x", "zip": None, "tags": None}
    # A field written later than the whole value, but with an older timestamp, loses too.
    s.execute("UPDATE ts1 USING TIMESTAMP 150 SET a.zip = 2 WHERE k = 1")
    assert fields(value(s, "SELECT a FROM ts1 WHERE k = 1")) == {"street": "x", "zip": None, "tags": None}
    s.execute("UPDATE ts1 USING TIMESTAMP 300 SET a.zip = 3 WHERE k = 1")
    assert fields(value(s, "SELECT a FROM ts1 WHERE k = 1")) == {"street": "x", "zip": 3, "tags": None}


# ---- selection ------------------------------------------------------------------


def test_field_selectors(s):
    table(s, "sel1")
    s.execute("INSERT INTO sel1 (k, a) VALUES (1, {street: 'main', zip: 5})")
    rs = s.execute("SELECT k, a.street, a.zip AS z, a.tags FROM sel1 WHERE k = 1")
    assert rs.column_names == ["k", "a.street", "z", "a.tags"]
    assert list(rs) == [(1, "main", 5, None)]
    s.execute("INSERT INTO sel1 (k) VALUES (2)")
    assert list(s.execute("SELECT a.zip FROM sel1 WHERE k = 2")) == [(None,)]
    assert invalid(s, "SELECT a.nope FROM sel1") == "a of type address has no field nope"
    assert invalid(s, "SELECT k.x FROM sel1") == "Invalid field selection: k of type int is not a user type"


def test_field_selector_on_a_frozen_udt(s):
    table(s, "sel2", "k int PRIMARY KEY, f frozen<address>")
    s.execute("INSERT INTO sel2 (k, f) VALUES (1, {street: 'main', zip: 5})")
    assert list(s.execute("SELECT f.zip, f.street FROM sel2 WHERE k = 1")) == [(5, "main")]
    assert invalid(s, "SELECT f.nope FROM sel2") == "f of type frozen<address> has no field nope"


def test_writetime_and_ttl_of_a_field(s):
    table(s, "meta1")
    s.execute("UPDATE meta1 USING TIMESTAMP 1000 SET a.zip = 1 WHERE k = 1")
    s.execute("UPDATE meta1 USING TIMESTAMP 2000 AND TTL 100 SET a.street = 'x' WHERE k = 1")
    row = list(
        s.execute(
            "SELECT writetime(a.street), ttl(a.street), writetime(a.zip), ttl(a.zip), writetime(a.tags),"
            " maxwritetime(a.zip) FROM meta1 WHERE k = 1"
        )
    )[0]
    assert row[0] == 2000 and 90 <= row[1] <= 100, row
    assert (row[2], row[3], row[4], row[5]) == (1000, None, None, 1000), row


def test_writetime_of_a_frozen_udt_field_is_the_values(s):
    table(s, "meta2", "k int PRIMARY KEY, f frozen<address>")
    s.execute("INSERT INTO meta2 (k, f) VALUES (1, {zip: 5}) USING TIMESTAMP 3000 AND TTL 500")
    row = list(s.execute("SELECT writetime(f.zip), ttl(f.zip), writetime(f.street), ttl(f.street) FROM meta2"))[0]
    # A null field has none.
    assert row[0] == 3000 and 490 <= row[1] <= 500 and (row[2], row[3]) == (None, None), row


def test_field_ttl_expires_that_field_alone(s):
    table(s, "ttl1")
    s.execute("INSERT INTO ttl1 (k, a) VALUES (1, {street: 'main', zip: 5})")
    s.execute("UPDATE ttl1 USING TTL 1 SET a.street = 'brief' WHERE k = 1")
    assert fields(value(s, "SELECT a FROM ttl1 WHERE k = 1"))["street"] == "brief"
    time.sleep(2.5)
    assert fields(value(s, "SELECT a FROM ttl1 WHERE k = 1")) == {"street": None, "zip": 5, "tags": None}


# ---- errors ------------------------------------------------------------------------


def test_field_operation_errors(s):
    table(s, "err1", "k int PRIMARY KEY, a address, f frozen<address>, i int")
    assert invalid(s, "UPDATE err1 SET a.nope = 1 WHERE k = 1") == "UDT column a does not have a field named nope"
    assert invalid(s, "DELETE a.nope FROM err1 WHERE k = 1") == "UDT column a does not have a field named nope"
    assert invalid(s, "UPDATE err1 SET f.zip = 1 WHERE k = 1") == "Invalid operation (f.zip = 1) for frozen UDT column f"
    assert invalid(s, "DELETE f.zip FROM err1 WHERE k = 1") == "Frozen UDT column f does not support field deletions"
    assert invalid(s, "UPDATE err1 SET i.zip = 1 WHERE k = 1") == "Invalid operation (i.zip = 1) for non-UDT column i"
    assert invalid(s, "DELETE i.zip FROM err1 WHERE k = 1") == "Invalid field deletion operation for non-UDT column i"
    assert invalid(s, "UPDATE err1 SET a.zip = 'str' WHERE k = 1") == 'Invalid STRING constant (str) for "a.zip" of type int'
    assert invalid(s, "UPDATE err1 SET a = a + {zip: 1} WHERE k = 1") == (
        "Invalid operation (a = a + {zip: 1}) for tuple column a"
    )
    assert invalid(s, "UPDATE err1 SET f = f + {zip: 1} WHERE k = 1") == (
        "Invalid operation (f = f + {zip: 1}) for tuple column f"
    )
    assert invalid(s, "UPDATE err1 SET a = a - {zip: 1} WHERE k = 1") == (
        "Invalid operation (a = a - {zip: 1}) for non counter column a"
    )
    assert invalid(s, "DELETE a[0] FROM err1 WHERE k = 1") == "Invalid deletion operation for non collection column a"
    assert invalid(s, "UPDATE err1 SET a[0] = 1 WHERE k = 1") == "Invalid operation (a[0] = 1) for non collection column a"
    with pytest.raises(SyntaxException):
        s.execute("UPDATE err1 SET a.zip = a.zip + 1 WHERE k = 1")
    for clash in ("a.zip = 1, a.zip = 2", "a = {zip: 1}, a.zip = 2", "a.zip = 2, a = {zip: 1}"):
        with pytest.raises(SyntaxException) as e:
            s.execute(f"UPDATE err1 SET {clash} WHERE k = 1")
        assert message(e.value).endswith("Multiple incompatible setting of column a"), e.value
    # Two different fields of one column in one statement are fine.
    s.execute("UPDATE err1 SET a.zip = 1, a.street = 's' WHERE k = 1")
    assert fields(value(s, "SELECT a FROM err1 WHERE k = 1")) == {"street": "s", "zip": 1, "tags": None}
    assert invalid(s, "SELECT * FROM err1 WHERE a = {zip: 1} ALLOW FILTERING") == (
        "Non-frozen UDT column 'a' (address) cannot be restricted by any relation"
    )


# ---- prepared statements, LWT, JSON ------------------------------------------------


def test_prepared_field_update(s):
    table(s, "prep1")
    ps = s.prepare("UPDATE prep1 SET a.zip = ? WHERE k = ?")
    assert [(c.name, c.type.typename) for c in ps.column_metadata] == [("a.zip", "int"), ("k", "int")]
    s.execute(ps, [42, 1])
    s.execute(ps, [None, 2])
    assert fields(value(s, "SELECT a FROM prep1 WHERE k = 1")) == {"street": None, "zip": 42, "tags": None}
    assert list(s.execute("SELECT a FROM prep1 WHERE k = 2")) == []
    whole = s.prepare("INSERT INTO prep1 (k, a) VALUES (?, ?)")
    s.execute(whole, [3, ("elm", None, ["t"])])
    assert fields(value(s, "SELECT a FROM prep1 WHERE k = 3")) == {"street": "elm", "zip": None, "tags": ["t"]}
    s.execute(s.prepare("UPDATE prep1 SET a.street = ? WHERE k = 3"), ["oak"])
    assert fields(value(s, "SELECT a FROM prep1 WHERE k = 3")) == {"street": "oak", "zip": None, "tags": ["t"]}


def test_conditions_on_fields(s):
    table(s, "lwt1")
    s.execute("INSERT INTO lwt1 (k, a) VALUES (1, {street: 'x', zip: 5})")
    r = list(s.execute("UPDATE lwt1 SET a.zip = 1 WHERE k = 1 IF a.zip = 7"))[0]
    assert r[0] is False and fields(r.a) == {"street": "x", "zip": 5, "tags": None}
    assert list(s.execute("UPDATE lwt1 SET a.zip = 1 WHERE k = 1 IF a.street = 'x'"))[0][0] is True
    assert list(s.execute("UPDATE lwt1 SET a.zip = 2 WHERE k = 1 IF a = {street: 'x', zip: 1}"))[0][0] is True
    assert fields(value(s, "SELECT a FROM lwt1 WHERE k = 1")) == {"street": "x", "zip": 2, "tags": None}


def test_json_both_ways(s):
    table(s, "json1")
    s.execute("INSERT INTO json1 (k, a) VALUES (1, {street: 'x', zip: 5})")
    assert json.loads(value(s, "SELECT JSON * FROM json1 WHERE k = 1")) == {
        "k": 1,
        "a": {"street": "x", "zip": 5, "tags": None},
    }
    assert value(s, "SELECT JSON * FROM json1 WHERE k = 1") == '{"k": 1, "a": {"street": "x", "zip": 5, "tags": null}}'
    s.execute("""INSERT INTO json1 JSON '{"k": 2, "a": {"zip": 9}}'""")
    assert fields(value(s, "SELECT a FROM json1 WHERE k = 2")) == {"street": None, "zip": 9, "tags": None}
    assert value(s, "SELECT toJson(a) FROM json1 WHERE k = 2") == '{"street": null, "zip": 9, "tags": null}'
    # INSERT JSON replaces the whole value too.
    s.execute("""INSERT INTO json1 JSON '{"k": 1, "a": {"tags": ["q"]}}'""")
    assert fields(value(s, "SELECT a FROM json1 WHERE k = 1")) == {"street": None, "zip": None, "tags": ["q"]}
    s.execute("DELETE a.zip FROM json1 WHERE k = 2")
    assert value(s, "SELECT JSON a FROM json1 WHERE k = 2") == '{"a": null}'


# ---- type changes -------------------------------------------------------------------


def test_alter_type_add_and_rename_field_keeps_cells(s):
    s.execute("CREATE TYPE place (street text, zip int)")
    table(s, "alt1", "k int PRIMARY KEY, p place")
    s.execute("INSERT INTO alt1 (k, p) VALUES (1, {street: 'main', zip: 5})")
    s.execute("ALTER TYPE place ADD country text")
    assert fields(value(s, "SELECT p FROM alt1 WHERE k = 1")) == {"street": "main", "zip": 5, "country": None}
    s.execute("UPDATE alt1 SET p.country = 'nz' WHERE k = 1")
    s.execute("ALTER TYPE place RENAME country TO nation")
    rows = list(s.execute("SELECT p, p.nation FROM alt1 WHERE k = 1"))
    assert [(fields(r[0]), r[1]) for r in rows] == [({"street": "main", "zip": 5, "nation": "nz"}, "nz")]
    s.execute("UPDATE alt1 SET p.nation = 'au' WHERE k = 1")
    assert value(s, "SELECT p.nation FROM alt1 WHERE k = 1") == "au"


# ---- replication ------------------------------------------------------------------


def session_on(cluster, hosts, cl):
    """A driver session that only uses `hosts` as coordinators."""
    profile = ExecutionProfile(
        load_balancing_policy=WhiteListRoundRobinPolicy(hosts), consistency_level=cl, request_timeout=30
    )
    c = Cluster(hosts, port=cluster.native_port, execution_profiles={EXEC_PROFILE_DEFAULT: profile}, protocol_version=4)
    return c, c.connect()


def wait_state(cluster, address, state):
    def ok():
        doc = cluster.tool("status", node=1)
        return any(n["address"] == address and n["state"] == state for dc in doc["datacenters"] for n in dc["nodes"])

    wait_until(ok, 60, interval=0.5, what=f"{address} {state} as seen by node 1")


@shoal_only
def test_read_repair_carries_field_cells_and_field_deletions(tmp_path):
    """A replica that missed field writes and a field deletion is repaired by
    a QUORUM read: the field cells travel like a collection's elements."""
    with ShoalCluster(tmp_path / "c", nodes=3, config={"hinted_handoff_enabled": False}) as c:
        cluster, s = session_on(c, [c.address(1)], ConsistencyLevel.ALL)
        try:
            s.execute("CREATE KEYSPACE rr WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
            s.execute("CREATE TYPE rr.address (street text, zip int)")
            s.execute("CREATE TABLE rr.t (k int PRIMARY KEY, a address)")
            assert cluster.control_connection.wait_for_schema_agreement(wait_time=30)
            for k in range(10):
                s.execute(f"INSERT INTO rr.t (k, a) VALUES ({k}, {{street: 'old', zip: 1}})")
        finally:
            cluster.shutdown()
        stale = c.address(3)
        c.stop(3)
        wait_state(c, stale, "DN")
        cluster, s = session_on(c, [c.address(1)], ConsistencyLevel.QUORUM)
        try:
            for k in range(10):
                s.execute(f"UPDATE rr.t SET a.zip = {k + 100} WHERE k = {k}")
                s.execute(f"DELETE a.street FROM rr.t WHERE k = {k}")
        finally:
            cluster.shutdown()
        c.start(3)
        wait_state(c, stale, "UN")
        cluster, s = session_on(c, [stale], ConsistencyLevel.ONE)
        try:
            # Node 3 alone still has the old fields.
            assert fields(s.execute("SELECT a FROM rr.t WHERE k = 0").one().a) == {"street": "old", "zip": 1}
            for k in range(1, 10):
                read = SimpleStatement(f"SELECT a FROM rr.t WHERE k = {k}", consistency_level=ConsistencyLevel.QUORUM)
                assert fields(s.execute(read).one().a) == {"street": None, "zip": k + 100}, k
            # Repaired: node 3 alone now has the new field and the field's deletion.
            for k in range(1, 10):
                assert fields(s.execute(f"SELECT a FROM rr.t WHERE k = {k}").one().a) == {
                    "street": None,
                    "zip": k + 100,
                }, k
            assert fields(s.execute("SELECT a FROM rr.t WHERE k = 0").one().a) == {"street": "old", "zip": 1}
        finally:
            cluster.shutdown()
