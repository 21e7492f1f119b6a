"""cqlsh (the pip package, 6.2.2) against the node: a DDL+DML script with -f,
single statements with -e, and the server-side DESCRIBE that cqlsh 6 uses."""

import os
import re
import subprocess

import pytest

from shoal_harness import unique_keyspace_name

TIMEOUT_S = 60


def run_cqlsh(cqlsh_bin, node, tmp_path, *args):
    env = dict(os.environ)
    env["HOME"] = str(tmp_path)  # no user cqlshrc, history under the test's dir
    env["CQL_HISTORY"] = str(tmp_path / "cqlsh_history")
    cmd = [cqlsh_bin, node.host, str(node.port), "--connect-timeout", "20", "--request-timeout", "30", *args]
    try:
        proc = subprocess.run(cmd, env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"cqlsh timed out after {TIMEOUT_S}s: {cmd}\nstdout: {e.stdout}\nstderr: {e.stderr}")
    return proc


def _ok(proc):
    assert proc.returncode == 0, f"cqlsh exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "error" not in proc.stderr.lower(), f"cqlsh reported errors:\n{proc.stderr}\nstdout:\n{proc.stdout}"
    return proc.stdout


@pytest.fixture
def cq_ks(session):
    name = unique_keyspace_name("cqlsh")
    yield name
    try:
        session.execute(f"DROP KEYSPACE IF EXISTS {name}")
    except Exception:
        pass


SCRIPT = """
CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}};
USE {ks};
CREATE TABLE fruit (
    name text PRIMARY KEY,
    qty int,
    price decimal,
    tags set<text>
);
INSERT INTO fruit (name, qty, price, tags) VALUES ('apple', 3, 1.25, {{'red', 'sweet'}});
INSERT INTO fruit (name, qty, price) VALUES ('banana', 12, 0.5);
UPDATE fruit SET qty = 4 WHERE name = 'apple';
SELECT name, qty FROM fruit WHERE name = 'apple';
SELECT name, qty, price FROM fruit;
"""


def test_script_file(cqlsh_bin, shoal_node, tmp_path, cq_ks, session):
    script = tmp_path / "script.cql"
    script.write_text(SCRIPT.format(ks=cq_ks))
    out = _ok(run_cqlsh(cqlsh_bin, shoal_node, tmp_path, "-f", str(script)))
    assert re.search(r"^\s*name\s*\|\s*qty\s*$", out, re.M), f"header row missing:\n{out}"
    assert re.search(r"^\s*apple\s*\|\s*4\s*$", out, re.M), f"apple row missing:\n{out}"
    assert "(1 rows)" in out, out
    assert re.search(r"^\s*banana\s*\|\s*12\s*\|\s*0\.5\s*$", out, re.M), f"banana row missing:\n{out}"
    assert "(2 rows)" in out, out
    # The script's writes are visible to the driver too.
    row = session.execute(f"SELECT qty, tags FROM {cq_ks}.fruit WHERE name = 'apple'").one()
    assert row.qty == 4 and set(row.tags) == {"red", "sweet"}


@pytest.fixture
def fruit(cqlsh_bin, shoal_node, tmp_path, cq_ks):
    """The script's keyspace and table, created through cqlsh -f."""
    script = tmp_path / "setup.cql"
    script.write_text(SCRIPT.format(ks=cq_ks))
    _ok(run_cqlsh(cqlsh_bin, shoal_node, tmp_path, "-f", str(script)))
    return cq_ks


def test_execute_option(cqlsh_bin, shoal_node, tmp_path, fruit):
    out = _ok(run_cqlsh(cqlsh_bin, shoal_node, tmp_path, "-e", f"SELECT name, tags FROM {fruit}.fruit WHERE name = 'apple'"))
    assert re.search(r"apple\s*\|\s*\{'red', 'sweet'\}", out), f"set column rendering:\n{out}"
    out = _ok(run_cqlsh(cqlsh_bin, shoal_node, tmp_path, "-k", fruit, "-e", "SELECT count(*) FROM fruit"))
    assert re.search(r"^\s*2\s*$", out, re.M), f"count(*) with -k:\n{out}"


def test_describe_keyspaces(cqlsh_bin, shoal_node, tmp_path, fruit):
    out = _ok(run_cqlsh(cqlsh_bin, shoal_node, tmp_path, "-e", "DESCRIBE KEYSPACES"))
    names = out.split()
    assert fruit in names, f"DESCRIBE KEYSPACES does not list {fruit}:\n{out}"
    assert "system" in names and "system_schema" in names, out


def test_describe_table(cqlsh_bin, shoal_node, tmp_path, fruit):
    out = _ok(run_cqlsh(cqlsh_bin, shoal_node, tmp_path, "-e", f"DESCRIBE TABLE {fruit}.fruit"))
    assert f"CREATE TABLE {fruit}.fruit" in out, f"DESCRIBE TABLE:\n{out}"
    for col in ("name text PRIMARY KEY", "qty int", "price decimal", "tags set<text>"):
        assert col in out, f"{col!r} missing from DESCRIBE TABLE:\n{out}"


def test_describe_keyspace_and_tables(cqlsh_bin, shoal_node, tmp_path, fruit):
    out = _ok(run_cqlsh(cqlsh_bin, shoal_node, tmp_path, "-e", f"DESCRIBE KEYSPACE {fruit}"))
    assert f"CREATE KEYSPACE {fruit}" in out and f"CREATE TABLE {fruit}.fruit" in out, out
    out = _ok(run_cqlsh(cqlsh_bin, shoal_node, tmp_path, "-k", fruit, "-e", "DESCRIBE TABLES"))
    assert "fruit" in out.split(), out


def test_error_is_reported_not_fatal(cqlsh_bin, shoal_node, tmp_path, cq_ks):
    script = tmp_path / "bad.cql"
    script.write_text(
        f"CREATE KEYSPACE {cq_ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}};\n"
        f"SELECT * FROM {cq_ks}.missing;\n"
        f"CREATE TABLE {cq_ks}.after (k int PRIMARY KEY);\n"
        f"INSERT INTO {cq_ks}.after (k) VALUES (7);\n"
        f"SELECT * FROM {cq_ks}.after;\n"
    )
    proc = run_cqlsh(cqlsh_bin, shoal_node, tmp_path, "-f", str(script))
    assert "InvalidRequest" in proc.stderr or "Invalid" in proc.stderr, f"stderr:\n{proc.stderr}"
    assert re.search(r"^\s*7\s*$", proc.stdout, re.M), f"statements after the error still run:\n{proc.stdout}\n{proc.stderr}"


def test_show_version_and_host(cqlsh_bin, shoal_node, tmp_path):
    out = _ok(run_cqlsh(cqlsh_bin, shoal_node, tmp_path, "-e", "SHOW HOST"))
    assert f"{shoal_node.host}:{shoal_node.port}" in out, out
    out = _ok(run_cqlsh(cqlsh_bin, shoal_node, tmp_path, "-e", "SHOW VERSION"))
    assert "CQL spec" in out and "Native protocol" in out, out
