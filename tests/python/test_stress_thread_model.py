"""The data model from the classic Cassandra stress thread (users, group
members, a group timeline keyed by timeuuid, a status table with a composite
partition key): four prepared writes per new user, then the reads that the
application does: a group's members, and a time slice of its timeline."""

import datetime
import uuid

import pytest
from cassandra.util import uuid_from_time

USERS_PER_GROUP = 120
BASE = datetime.datetime(2013, 3, 1, 12, 0, 0)  # naive UTC, like the driver returns


def _joined(i):
    """User i of a group joined i minutes after BASE."""
    return BASE + datetime.timedelta(minutes=i)


def _epoch(dt):
    return (dt - datetime.datetime(1970, 1, 1)).total_seconds()


@pytest.fixture(scope="module")
def model(module_ks_session):
    s = module_ks_session
    s.execute("CREATE TABLE users (user_id text PRIMARY KEY, email text, first_name text, last_name text)")
    s.execute(
        "CREATE TABLE group_members (group_id uuid, user_id text, date_joined timestamp, date_left timestamp, "
        "active tinyint, PRIMARY KEY (group_id, user_id))"
    )
    s.execute(
        "CREATE TABLE group_timeline (group_id uuid, date_joined timeuuid, user_id text, "
        "PRIMARY KEY (group_id, date_joined))"
    )
    s.execute(
        "CREATE TABLE member_status (group_id uuid, user_id text, status text, updated timestamp, "
        "PRIMARY KEY ((group_id, user_id)))"
    )
    ins_user = s.prepare("INSERT INTO users (user_id, email, first_name, last_name) VALUES (?, ?, ?, ?)")
    ins_member = s.prepare(
        "INSERT INTO group_members (group_id, user_id, date_joined, date_left, active) VALUES (?, ?, ?, ?, ?)"
    )
    ins_timeline = s.prepare("INSERT INTO group_timeline (group_id, date_joined, user_id) VALUES (?, ?, ?)")
    ins_status = s.prepare("INSERT INTO member_status (group_id, user_id, status, updated) VALUES (?, ?, ?, ?)")

    groups = [uuid.UUID(int=0x1000 + g) for g in range(2)]
    timeuuids = {}
    for g, group in enumerate(groups):
        futures = []
        for i in range(USERS_PER_GROUP):
            user = f"user{g}_{i:04d}"
            joined = _joined(i)
            tu = uuid_from_time(_epoch(joined))
            timeuuids[(g, i)] = tu
            # The four writes of a new user.
            futures.append(s.execute_async(ins_user, (user, f"{user}@example.com", f"First{i}", f"Last{g}")))
            futures.append(s.execute_async(ins_member, (group, user, joined, None, 1)))
            futures.append(s.execute_async(ins_timeline, (group, tu, user)))
            futures.append(s.execute_async(ins_status, (group, user, "joined", joined)))
            if len(futures) >= 200:
                for f in futures:
                    f.result()
                futures = []
        for f in futures:
            f.result()
    return s, groups, timeuuids


def test_users_are_readable(model):
    s, _, _ = model
    sel = s.prepare("SELECT email, first_name, last_name FROM users WHERE user_id = ?")
    row = s.execute(sel, ("user1_0042",)).one()
    assert row is not None and (row.email, row.first_name, row.last_name) == ("user1_0042@example.com", "First42", "Last1")
    assert s.execute("SELECT count(*) FROM users").one().count == 2 * USERS_PER_GROUP


def test_group_members_in_user_id_order(model):
    s, groups, _ = model
    sel = s.prepare("SELECT user_id, date_joined, date_left, active FROM group_members WHERE group_id = ?")
    rows = list(s.execute(sel, (groups[0],)))
    assert [r.user_id for r in rows] == [f"user0_{i:04d}" for i in range(USERS_PER_GROUP)], "members sorted by user_id"
    assert all(r.active == 1 and r.date_left is None for r in rows)
    assert rows[7].date_joined == _joined(7), f"timestamp round trip: {rows[7].date_joined}"


def test_timeline_time_slice_with_literals(model):
    s, groups, _ = model
    lo, hi = _joined(10), _joined(20)
    q = (
        f"SELECT user_id, date_joined FROM group_timeline WHERE group_id = {groups[1]} "
        f"AND date_joined > minTimeuuid('{lo:%Y-%m-%d %H:%M:%S}+0000') "
        f"AND date_joined < maxTimeuuid('{hi:%Y-%m-%d %H:%M:%S}+0000')"
    )
    got = [r.user_id for r in s.execute(q)]
    assert got == [f"user1_{i:04d}" for i in range(10, 21)], f"time slice [{lo}, {hi}] in join order: {got}"


def test_timeline_time_slice_prepared(model):
    s, groups, timeuuids = model
    sel = s.prepare(
        "SELECT date_joined, user_id FROM group_timeline WHERE group_id = ? "
        "AND date_joined > minTimeuuid(?) AND date_joined < maxTimeuuid(?)"
    )
    rows = list(s.execute(sel, (groups[0], _joined(50), _joined(59))))
    assert [r.user_id for r in rows] == [f"user0_{i:04d}" for i in range(50, 60)]
    assert [r.date_joined for r in rows] == [timeuuids[(0, i)] for i in range(50, 60)], "timeuuids round-trip"


def test_timeline_newest_first(model):
    s, groups, _ = model
    sel = s.prepare("SELECT user_id FROM group_timeline WHERE group_id = ? ORDER BY date_joined DESC LIMIT 5")
    got = [r.user_id for r in s.execute(sel, (groups[0],))]
    assert got == [f"user0_{i:04d}" for i in range(USERS_PER_GROUP - 1, USERS_PER_GROUP - 6, -1)], got


def test_timeline_slice_with_dateof(model):
    s, groups, _ = model
    rows = list(s.execute(
        f"SELECT toTimestamp(date_joined) AS at, user_id FROM group_timeline WHERE group_id = {groups[0]} "
        f"AND date_joined >= minTimeuuid('{_joined(3):%Y-%m-%d %H:%M:%S}+0000') LIMIT 2"))
    assert [(r.user_id, r.at) for r in rows] == [("user0_0003", _joined(3)), ("user0_0004", _joined(4))]


def test_member_status_by_composite_partition_key(model):
    s, groups, _ = model
    sel = s.prepare("SELECT status, updated FROM member_status WHERE group_id = ? AND user_id = ?")
    assert sel.routing_key_indexes == [0, 1]
    row = s.execute(sel, (groups[1], "user1_0005")).one()
    assert row is not None and row.status == "joined" and row.updated == _joined(5)
    assert s.execute(sel, (groups[0], "user1_0005")).one() is None, "both key parts are part of the partition"


def test_user_leaves_group(model):
    s, groups, _ = model
    left = BASE + datetime.timedelta(days=3)
    upd = s.prepare("UPDATE group_members SET date_left = ?, active = ? WHERE group_id = ? AND user_id = ?")
    s.execute(upd, (left, 0, groups[1], "user1_0099"))
    st = s.prepare("UPDATE member_status SET status = ?, updated = ? WHERE group_id = ? AND user_id = ?")
    s.execute(st, ("left", left, groups[1], "user1_0099"))
    row = s.execute(
        f"SELECT date_left, active FROM group_members WHERE group_id = {groups[1]} AND user_id = 'user1_0099'").one()
    assert (row.date_left, row.active) == (left, 0)
    row = s.execute(
        f"SELECT status FROM member_status WHERE group_id = {groups[1]} AND user_id = 'user1_0099'").one()
    assert row.status == "left"
