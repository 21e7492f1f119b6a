"""token(k) is Cassandra's Murmur3Partitioner, checked against fixed vectors
(taken from Cassandra and the drivers' own test suites) and against the
Python driver's partitioner."""

import struct

import pytest

# (key bytes, Cassandra's token)
VECTORS = [
    (b"123", -7468325962851647638),
    (b"\x00\xff\x10\xfa\x99" * 10, 5837342703291459765),
    (b"\xfe" * 8, -8927430733708461935),
    (b"\x10" * 8, 1446172840243228796),
    (b"9223372036854775807", 7162290910810015547),
    (b"test", -6017608668500074083),
    ("kremówki".encode("utf-8"), 4354931215268080151),
]


def _utf8(b):
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


TEXT_VECTORS = [(_utf8(k), t) for k, t in VECTORS if _utf8(k) is not None]


@pytest.fixture(scope="module")
def keyed(module_ks_session):
    s = module_ks_session
    s.execute("CREATE TABLE by_blob (k blob PRIMARY KEY, v int)")
    s.execute("CREATE TABLE by_text (k text PRIMARY KEY, v int)")
    s.execute("CREATE TABLE by_int (k int PRIMARY KEY, v int)")
    s.execute("CREATE TABLE by_bigint (k bigint PRIMARY KEY, v int)")
    s.execute("CREATE TABLE by_pair (a text, b int, v int, PRIMARY KEY ((a, b)))")
    return s


def test_driver_partitioner_agrees_with_vectors(cluster):
    from_key = cluster.metadata.token_map.token_class.from_key
    bad = [(k, t, from_key(k).value) for k, t in VECTORS if from_key(k).value != t]
    assert not bad, f"driver Murmur3 differs from the vectors (test data problem): {bad}"


@pytest.mark.parametrize("key,token", VECTORS, ids=[k.hex()[:16] for k, _ in VECTORS])
def test_blob_key_token(keyed, key, token):
    keyed.execute("INSERT INTO by_blob (k, v) VALUES (%s, 1)", (key,))
    row = keyed.execute("SELECT token(k) AS t FROM by_blob WHERE k = %s", (key,)).one()
    assert row is not None, "row not found"
    assert row.t == token, f"token({key!r}) = {row.t}, Cassandra gives {token}"


@pytest.mark.parametrize("key,token", TEXT_VECTORS, ids=[k for k, _ in TEXT_VECTORS])
def test_text_key_token(keyed, key, token):
    ins = keyed.prepare("INSERT INTO by_text (k, v) VALUES (?, 1)")
    keyed.execute(ins, (key,))
    sel = keyed.prepare("SELECT token(k) AS t FROM by_text WHERE k = ?")
    row = keyed.execute(sel, (key,)).one()
    assert row is not None, "row not found"
    assert row.t == token, f"token({key!r}) = {row.t}, Cassandra gives {token}"
    # Also as a literal in the CQL text.
    lit = key.replace("'", "''")
    assert keyed.execute(f"SELECT token(k) AS t FROM by_text WHERE k = '{lit}'").one().t == token


def test_many_text_keys_agree_with_driver(keyed):
    keys = [f"key{i}" for i in range(200)]
    ins = keyed.prepare("INSERT INTO by_text (k, v) VALUES (?, ?)")
    for i, k in enumerate(keys):
        keyed.execute(ins, (k, i))
    from_key = keyed.cluster.metadata.token_map.token_class.from_key
    got = {r.k: r.t for r in keyed.execute("SELECT k, token(k) AS t FROM by_text")}
    bad = [(k, got.get(k), from_key(k.encode()).value) for k in keys if got.get(k) != from_key(k.encode()).value]
    assert not bad, f"{len(bad)} keys disagree with the driver's partitioner, e.g. {bad[:3]}"


def test_int_and_bigint_key_tokens(keyed):
    from_key = keyed.cluster.metadata.token_map.token_class.from_key
    for k in (0, 1, -1, 2**31 - 1, -(2**31), 42):
        keyed.execute("INSERT INTO by_int (k, v) VALUES (%s, 0)", (k,))
        t = keyed.execute("SELECT token(k) AS t FROM by_int WHERE k = %s", (k,)).one().t
        assert t == from_key(struct.pack(">i", k)).value, f"int key {k}: token {t}"
    for k in (0, 1, -1, 2**63 - 1, -(2**63)):
        keyed.execute("INSERT INTO by_bigint (k, v) VALUES (%s, 0)", (k,))
        t = keyed.execute("SELECT token(k) AS t FROM by_bigint WHERE k = %s", (k,)).one().t
        assert t == from_key(struct.pack(">q", k)).value, f"bigint key {k}: token {t}"


def test_composite_key_token(keyed):
    from_key = keyed.cluster.metadata.token_map.token_class.from_key
    for a, b in (("x", 1), ("", 0), ("kremówki", -5), ("a" * 300, 2**31 - 1)):
        keyed.execute("INSERT INTO by_pair (a, b, v) VALUES (%s, %s, 0)", (a, b))
        t = keyed.execute("SELECT token(a, b) AS t FROM by_pair WHERE a = %s AND b = %s", (a, b)).one().t
        ab = a.encode()
        composite = struct.pack(">H", len(ab)) + ab + b"\x00" + struct.pack(">H", 4) + struct.pack(">i", b) + b"\x00"
        assert t == from_key(composite).value, f"token(({a[:10]!r}, {b})) = {t}"


def test_token_restriction_selects_by_token(keyed):
    from_key = keyed.cluster.metadata.token_map.token_class.from_key
    for k, _ in VECTORS:
        keyed.execute("INSERT INTO by_blob (k, v) VALUES (%s, 2)", (k,))
    tokens = sorted(t for _, t in VECTORS)
    lo, hi = tokens[1], tokens[4]
    got = [r.t for r in keyed.execute(f"SELECT token(k) AS t FROM by_blob WHERE token(k) > {lo} AND token(k) <= {hi}")]
    assert got == tokens[2:5], f"token range ({lo}, {hi}]: {got}"
    row = keyed.execute(f"SELECT k FROM by_blob WHERE token(k) = {VECTORS[0][1]}").one()
    assert row is not None and row.k == VECTORS[0][0]
    assert from_key(row.k).value == VECTORS[0][1]
