"""`shoal stress counter_write` / `counter_read` (cassandra-stress's counter1 workload) and `shoal
stress lwt` (Shoal's extension: INSERT ... IF NOT EXISTS on new keys, UPDATE ... IF v = ? on inserted
ones) run briefly against a real server, through both of the stress tool's clients (the driver and
`-mode simplenative`). The server's rows are then read back with the DataStax driver and checked
against what the stress run reported. With SHOAL_TEST_EXTERNAL the same runs go to that server
(Cassandra), with the stress client from SHOAL_BIN."""

import json
import os
import subprocess

import pytest

from shoal_harness import SHOAL_BIN, unique_keyspace_name

MODES = {"driver": [], "simplenative": ["-mode", "simplenative"]}
N = 1500


def stress(node, words, tmp_path, mode, extra=()):
    """Runs `shoal stress WORDS... -node -port [mode] --json` and returns (stdout, the JSON report)."""
    if not os.access(SHOAL_BIN, os.X_OK):
        pytest.fail(f"shoal binary not found: {SHOAL_BIN} (set SHOAL_BIN or build it)")
    out = tmp_path / f"{words[0]}-{mode}.json"
    cmd = [SHOAL_BIN, "stress", *words, "-rate", "threads=16", "-node", node.host, "-port", f"native={node.port}",
           *MODES[mode], *extra, "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout, json.loads(out.read_text())


@pytest.fixture
def stress_keyspace(session):
    name = unique_keyspace_name("stress")
    yield name
    session.execute(f"DROP KEYSPACE IF EXISTS {name}")


def test_counter_write_then_read(shoal_node, session, stress_keyspace, tmp_path):
    ks = stress_keyspace
    schema = ["-col", "n=2", "-schema", f"keyspace={ks}"]
    # Each mode adds 3 to both counters of keys 1..N, no warmup: every counter ends at 6.
    for mode in MODES:
        out, report = stress(shoal_node, ["counter_write", f"n={N}", "add=fixed(3)", "no-warmup"], tmp_path, mode,
                             schema)
        s = report["summary"]
        assert (s["command"], s["ops"], s["errors"], s["writes"]) == ("counter_write", N, 0, N), out
    table = session.execute(f"SELECT table_name FROM system_schema.columns WHERE keyspace_name = '{ks}' "
                            "AND table_name = 'counter1'")
    assert table.one() is not None, "counter_write creates cassandra-stress's counter1"
    types = {r.column_name: r.type for r in session.execute(
        f"SELECT column_name, type FROM system_schema.columns WHERE keyspace_name = '{ks}' AND table_name = 'counter1'")}
    assert types == {"key": "blob", "C0": "counter", "C1": "counter"}
    rows = list(session.execute(f'SELECT key, "C0", "C1" FROM {ks}.counter1'))
    assert len(rows) == N
    assert {(r.C0, r.C1) for r in rows} == {(6, 6)}
    assert {int(r.key) for r in rows} == set(range(1, N + 1)), "keys are cassandra-stress's 10 digits"
    for mode in MODES:
        out, report = stress(shoal_node, ["counter_read", f"n={N}", "no-warmup"], tmp_path, mode, schema)
        s = report["summary"]
        assert (s["command"], s["ops"], s["errors"], s["missing"], s["reads"]) == ("counter_read", N, 0, 0, N), out
        assert "Rows not found            : 0" in out


def test_counter_write_uniform_increments_add_up(shoal_node, session, stress_keyspace, tmp_path):
    ks = stress_keyspace
    _, report = stress(shoal_node, ["counter_write", "n=400", "add=uniform(1..4)", "no-warmup"], tmp_path,
                       "simplenative", ["-col", "n=1", "-schema", f"keyspace={ks}"])
    assert report["summary"]["errors"] == 0
    values = [r.C0 for r in session.execute(f'SELECT "C0" FROM {ks}.counter1')]
    assert len(values) == 400 and set(values) <= {1, 2, 3, 4} and len(set(values)) == 4, sorted(set(values))


@pytest.mark.parametrize("mode", list(MODES))
def test_lwt_counts_applied_and_refused_statements(shoal_node, session, stress_keyspace, tmp_path, mode):
    ks = stress_keyspace
    out, report = stress(shoal_node, ["lwt", f"n={N}", "truncate=always", "ratio(insert=1,update=2)", "cl=QUORUM",
                                      "serial-cl=SERIAL"], tmp_path, mode, ["-col", "n=1", "-schema", f"keyspace={ks}"])
    s = report["summary"]
    assert (s["command"], s["ops"], s["errors"]) == ("lwt", N, 0), out
    assert s["applied"] + s["not_applied"] == N
    assert s["applied"] > N // 2, s
    header = next(line for line in out.splitlines() if line.startswith("total,"))
    assert header.endswith(",errors,applied,not_applied")
    assert sum(iv["applied"] + iv["not_applied"] for iv in report["intervals"]) == N
    assert "LWT applied" in out and "LWT not applied" in out
    # Every applied insert made a row with v = 0 and every applied update added exactly 1 to one row's v, so
    # the rows' v add up to the applied statements less the rows (truncate=always emptied the warmup's rows).
    rows = list(session.execute(f"SELECT v, \"C0\" FROM {ks}.lwt1"))
    assert rows and all(r.C0 is not None and len(r.C0) == 34 for r in rows)
    assert sum(r.v for r in rows) == s["applied"] - len(rows), (len(rows), s)
