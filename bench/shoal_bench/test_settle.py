"""Tests of issue 24's additions to bench/compare: settle detection on a fake clock, CPU reader and status
(`settle.settle`), the compaction status parsers (nodetool's text, Shoal's JSON), the verify report, the
settled CPU per operation, the long run's n, the cassandra_latest.yaml merge and cassandra-env.sh's heap, and
the tables (settled column, verify column, the ratio against the faster Cassandra configuration). No binary,
server or Cassandra needed.

    python3 -m unittest discover -s bench/shoal_bench -t bench -p "test_*.py"
"""

import argparse
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/, as bench/compare does

from shoal_bench import cassconf, cli, compare, settle  # noqa: E402


class FakeServer:
    """A server on a fake clock: `script` is [(until_t, (pending, running), cpu cores busy)]."""

    def __init__(self, script):
        self.t, self.cpu, self.script, self.flushed = 0.0, 0.0, script, 0

    def phase(self):
        for until, status, busy in self.script:
            if self.t < until:
                return status, busy
        return self.script[-1][1], self.script[-1][2]

    def sleep(self, dt):
        # CPU accrues at the busy rate of each instant slept through (in 0.1 s steps).
        steps = int(round(dt / 0.1))
        for _ in range(steps):
            self.cpu += self.phase()[1] * 0.1
            self.t += 0.1

    def status(self):
        return self.phase()[0]

    def flush(self):
        self.flushed += 1


def run_settle(server, timeout=100.0):
    return settle.settle(server.flush, server.status, lambda: server.cpu, timeout, clock=lambda: server.t,
                         sleep=server.sleep)


class SettleTest(unittest.TestCase):
    def test_waits_for_the_compactions_then_for_idle_cpu(self):
        # Compacting for 10 s (one core busy), then done but still busy (a flush tail) until 15 s, then idle.
        s = FakeServer([(10, (2, 1), 1.0), (15, (0, 0), 0.5), (1e9, (0, 0), 0.001)])
        r = run_settle(s)
        self.assertFalse(r["timed_out"])
        self.assertEqual(s.flushed, 1)
        self.assertGreaterEqual(r["seconds"], 15.0)
        self.assertLess(r["seconds"], 20.0)

    def test_idle_at_once_takes_one_cpu_window(self):
        s = FakeServer([(1e9, (0, 0), 0.0)])
        r = run_settle(s)
        self.assertFalse(r["timed_out"])
        self.assertAlmostEqual(r["seconds"], settle.IDLE_WINDOW_S, places=5)

    def test_a_busy_cpu_without_pending_work_is_not_settled(self):
        # 25% of a core forever (over the background line): the timeout ends it, and says so.
        s = FakeServer([(1e9, (0, 0), 0.25)])
        r = run_settle(s, timeout=30)
        self.assertTrue(r["timed_out"])
        self.assertGreaterEqual(r["seconds"], 30)
        self.assertLess(r["seconds"], 30 + settle.IDLE_WINDOW_S + 0.5)

    def test_a_steady_idle_background_is_settled(self):
        # Cassandra's JVM idles at a few % of a core: after the compactions, 5% steady is settled in two windows.
        s = FakeServer([(6, (1, 1), 1.0), (1e9, (0, 0), 0.05)])
        r = run_settle(s)
        self.assertFalse(r["timed_out"])
        self.assertGreaterEqual(r["seconds"], 6 + settle.IDLE_WINDOW_S)
        self.assertLess(r["seconds"], 6 + 1 + 2 * settle.IDLE_WINDOW_S + 0.5)
        # A tail still falling (9%, then 5%) is not steady yet; steady once it stops falling.
        s = FakeServer([(2, (0, 0), 0.09), (4, (0, 0), 0.05), (1e9, (0, 0), 0.05)])
        r = run_settle(s)
        self.assertFalse(r["timed_out"])
        self.assertAlmostEqual(r["seconds"], 3 * settle.IDLE_WINDOW_S, places=5)

    def test_work_that_never_ends_times_out(self):
        s = FakeServer([(1e9, (1, 1), 1.0)])
        r = run_settle(s, timeout=20)
        self.assertTrue(r["timed_out"])
        self.assertEqual(r["last"], (1, 1))

    def test_a_failing_status_is_not_idle(self):
        s = FakeServer([(1e9, (0, 0), 0.0)])

        def broken():
            raise ValueError("nodetool: connection refused")
        r = settle.settle(s.flush, broken, lambda: s.cpu, 5, clock=lambda: s.t, sleep=s.sleep)
        self.assertTrue(r["timed_out"])
        self.assertIn("connection refused", r["last"])

    def test_new_work_after_idle_cpu_restarts_the_wait(self):
        # Idle status at first, but a compaction starts while the CPU window is measured (busy): not settled
        # until it is over and the CPU is quiet again.
        s = FakeServer([(1, (0, 0), 0.0), (8, (1, 1), 1.0), (1e9, (0, 0), 0.0)])
        r = run_settle(s)
        self.assertFalse(r["timed_out"])
        self.assertGreaterEqual(r["seconds"], 8)


# Cassandra 5.0.9's layout (nodetool's CompactionStats: one TableBuilder, so every row shares the columns).
NODETOOL_50 = """\
concurrent compactors                 2
pending tasks                         3
keyspace1                             standard1        3
compactions completed                 42
data compacted                        4253266
compressed data compacted             1368992
compactions aborted                   0
compactions reduced                   0
sstables dropped from compaction      0
15 minute rate                        9.24/minute
mean rate                             114.17/hour
compaction throughput (MiB/s)         64.0
id                                    compaction type  keyspace   table      completed  total    unit   progress
8a7e0a10-cb3d-11ef-9b0a-3b0f6b5b7c1d  Compaction       keyspace1  standard1  1048576    4194304  bytes  25.00%
9b7e0a10-cb3d-11ef-9b0a-3b0f6b5b7c1d  Compaction       keyspace1  standard1  0          4194304  bytes  0.00%
active compaction remaining time      0h00m00s
"""

NODETOOL_40_IDLE = "pending tasks: 0\n\n"


class ParseTest(unittest.TestCase):
    def test_nodetool(self):
        self.assertEqual(settle.pending_from_nodetool(NODETOOL_50), (3, 2))
        self.assertEqual(settle.pending_from_nodetool(NODETOOL_40_IDLE), (0, 0))
        idle50 = "concurrent compactors            2          \npending tasks                    0          \n"
        self.assertEqual(settle.pending_from_nodetool(idle50), (0, 0))
        with self.assertRaises(ValueError):
            settle.pending_from_nodetool("nodetool: Failed to connect to '127.0.0.1:7199' - ConnectException")

    def test_shoal(self):
        self.assertEqual(settle.pending_from_shoal('{"pending_tasks": 2, "running_compactions": 1, '
                                                  '"running_flushes": 1, "major_compaction": true, "tables": []}'),
                         (2, 3))
        self.assertEqual(settle.pending_from_shoal('{"pending_tasks": 0, "running_compactions": 0}'), (0, 0))
        for bad in ("error: Failed to connect", '{"tables": []}', "[]"):
            with self.assertRaises(ValueError):
                settle.pending_from_shoal(bad)

    def test_verify_report(self):
        report = {"summary": {"ops": 990, "errors": 10, "missing": 7, "mismatched": 2}}
        self.assertEqual(settle.verify_counts(report), (1000, 7, 2, 10))
        self.assertEqual(settle.verify_counts({"summary": {"ops": 5, "errors": 0}}), (5, 0, 0, 0))

    def test_settled_cpu_and_long_n(self):
        self.assertAlmostEqual(settle.settled_cpu_us(2.0, 1.0, 1_000_000), 3.0)
        self.assertIsNone(settle.settled_cpu_us(2.0, None, 10))
        self.assertIsNone(settle.settled_cpu_us(2.0, 1.0, 0))
        n = settle.long_write_n()
        self.assertGreaterEqual(n * settle.ROW_BYTES, 10 * (1 << 30))
        self.assertEqual(n % 100_000, 0)
        self.assertEqual(settle.long_write_n(memtable_space=1000, row_bytes=10, factor=10), 100_000)


TEMPLATE = """\
# a comment
cluster_name: reference
num_tokens: 16
memtable_allocation_type: heap_buffers

# the seeds
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "127.0.0.1:7000"
concurrent_reads: 32
"""


class CassandraConfigTest(unittest.TestCase):
    def test_merge_replaces_in_place_and_appends_the_rest(self):
        merged = cassconf.merge_yaml(TEMPLATE, "memtable_allocation_type: offheap_objects\nseed_provider:\n  - x: 1\n"
                                               "sstable:\n  selected_format: bti\n")
        lines = merged.splitlines()
        self.assertIn("memtable_allocation_type: offheap_objects", lines)
        self.assertNotIn("memtable_allocation_type: heap_buffers", lines)
        self.assertLess(lines.index("memtable_allocation_type: offheap_objects"), lines.index("# the seeds"),
                        "replaced in place, the next key's comment kept after it")
        self.assertEqual(lines[lines.index("seed_provider:") + 1], "  - x: 1")
        self.assertNotIn("SimpleSeedProvider", merged)
        self.assertEqual(cassconf.yaml_keys(merged), ["cluster_name", "num_tokens", "memtable_allocation_type",
                                                      "seed_provider", "concurrent_reads", "sstable"])
        self.assertTrue(merged.endswith("sstable:\n  selected_format: bti\n"))

    def test_latest_on_the_real_template(self):
        path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                            "scripts", "cassandra", "cassandra.yaml.template")
        with open(path) as f:
            template = f.read()
        merged = cassconf.merge_yaml(template, cassconf.LATEST)
        keys = cassconf.yaml_keys(merged)
        self.assertEqual(len(keys), len(set(keys)), "each key once")
        for key in cassconf.yaml_keys(cassconf.LATEST):
            self.assertIn(key, keys)
        self.assertIn("memtable_allocation_type: offheap_objects", merged)
        self.assertNotIn("heap_buffers", merged)
        self.assertIn("  selected_format: bti", merged)
        self.assertIn("  class_name: UnifiedCompactionStrategy", merged)
        for kept in ("native_transport_port: @PORT@", "commitlog_sync: periodic", "num_tokens: 16"):
            self.assertIn(kept, merged)

    def test_heap_as_cassandra_env_picks_it(self):
        gib = 1 << 20  # KiB
        self.assertEqual(cassconf.env_heap_mb(int(23.5 * gib)), 6016)  # a quarter of 24,064 MiB
        self.assertEqual(cassconf.env_heap_mb(2 * gib), 1024)          # half, capped at 1 GB
        self.assertEqual(cassconf.env_heap_mb(1 * gib), 512)
        self.assertEqual(cassconf.env_heap_mb(64 * gib), 8192)         # a quarter, capped at 8 GB
        self.assertEqual(cassconf.heap_of("template", env={}), "2G")
        self.assertEqual(cassconf.heap_of("template", env={"CASSANDRA_HEAP": "3G"}), "3G")
        self.assertTrue(cassconf.heap_of("latest", env={"CASSANDRA_HEAP": "3G"}).endswith("M"))
        self.assertEqual(cassconf.heap_of("latest", "4G"), "4G")
        self.assertTrue(cassconf.heap_of("latest").endswith("M"))
        self.assertEqual(cli.cassandra_configs("both"), ["template", "latest"])
        self.assertEqual(cli.cassandra_configs("latest"), ["latest"])


def row(system, workload, ops_s, cpu, settled, p99=5.0, run=1, missing=0, wrong=0):
    return dict(scenario="rf1", system=system, workload=workload, run=run, ops=1000, ops_s=ops_s, p50=1.0, p95=2.0,
                p99=p99, p999=9.0, max=10.0, cpu_us=cpu, settled_cpu_us=settled, rss_mib=100.0, server_cores=1.0,
                client_cpu_us=1.0, elapsed=1.0, machine_busy=1.0, errors=0, retries=0, settle_s=3.0,
                settle_timed_out=False, verified=1000, missing=missing, wrong=wrong)


class TablesTest(unittest.TestCase):
    def bench(self):
        a = argparse.Namespace(runs=1, threads=128, max_threads="", security=None, settle=True, verify=True,
                               settle_timeout=900, cassandra_config="both", cassandra_heap=None)
        b = compare.Bench(a, "/tmp")
        b.rows = [row("cassandra", "write", 30_000, 60.0, 70.0), row("cassandra-latest", "write", 40_000, 45.0, 50.0),
                  row("shoal", "write", 200_000, 5.0, 8.0),
                  row("cassandra", "mixed", 25_000, 80.0, 81.0), row("cassandra-latest", "mixed", 20_000, 90.0, 95.0),
                  row("shoal", "mixed", 50_000, 30.0, 31.0, missing=0, wrong=1)]
        return b

    def test_the_ratio_is_against_the_faster_configuration(self):
        b = self.bench()
        self.assertEqual(compare.best_cassandra(b, "rf1", "write"), "cassandra-latest")
        self.assertEqual(compare.best_cassandra(b, "rf1", "mixed"), "cassandra")
        table = compare.summary_table(b)
        self.assertIn("| RF1 | write | **Shoal/Cassandra (latest, the faster)** | **5.00x** |", table)
        self.assertIn("| RF1 | mixed r9:w1 | **Shoal/Cassandra (template, the faster)** | **2.00x** |", table)
        header = table.splitlines()[0]
        self.assertIn("| server CPU-us/op | settled CPU-us/op |", header)
        self.assertTrue(header.endswith("| verify missing / wrong |"))
        self.assertIn("| RF1 | write | Cassandra (latest) | 40,000 | 1.00 | 2.00 | 5.00 | 9.00 | 45.0 | 50.0 | 100 | 0 / 0 |",
                      table)
        # settled: 8.0 / 50.0 against the latest configuration
        self.assertIn("**0.11x** | **0.16x** |", table)

    def test_targets_and_runs(self):
        b = self.bench()
        t = dict(compare.targets(b))
        settled = [k for k in t if "settled server CPU-us per write" in k]
        self.assertEqual(len(settled), 1)
        self.assertFalse(t[settled[0]], "8.0 / 50.0 = 0.16x is over 1/10")
        verify = [k for k in t if k.startswith("Verify")]
        self.assertEqual(len(verify), 1)
        self.assertFalse(t[verify[0]])
        self.assertIn("1 with missing or wrong rows", verify[0])
        runs = compare.runs_table(b)
        self.assertIn("| settled CPU-us/op | settle s |", runs)
        self.assertIn("| 1,000: 0 / 1 |", runs)

    def test_without_settle_or_verify_the_columns_show_dashes(self):
        b = self.bench()
        for r in b.rows:
            r.update(settled_cpu_us=None, verified=None, missing=None, wrong=None)
        table = compare.summary_table(b)
        self.assertIn("| 45.0 | - | 100 | - |", table)
        self.assertFalse([k for k, _ in compare.targets(b) if "settled" in k or k.startswith("Verify")])


class SettleAfterTest(unittest.TestCase):
    def test_the_row_gets_the_settled_figure_and_a_timeout_a_note(self):
        class Idle:
            label, pids, flushed = "Shoal", [os.getpid()], 0  # this test process: idle while settle sleeps

            def flush(self):
                self.flushed += 1

            def compaction_status(self):
                return (0, 0)

        a = argparse.Namespace(settle=True, settle_timeout=30)
        b = compare.Bench(a, "/tmp")
        server = Idle()
        r = dict(scenario="rf1", workload="write", run=1, ops=1_000_000)
        b.settle_after(server, r, 2.0)
        self.assertEqual(server.flushed, 1)
        self.assertFalse(r["settle_timed_out"])
        self.assertGreaterEqual(r["settle_s"], settle.IDLE_WINDOW_S)
        self.assertGreaterEqual(r["settled_cpu_us"], 2.0)
        self.assertLess(r["settled_cpu_us"], 2.5)  # 2 s of window CPU + this process's few ms of tail
        self.assertEqual(b.notes, [])

        class Busy(Idle):
            def compaction_status(self):
                return (1, 1)
        b.args.settle_timeout = 1
        r = dict(scenario="rf1", workload="write", run=2, ops=1000)
        b.settle_after(Busy(), r, 0.0)
        self.assertTrue(r["settle_timed_out"])
        self.assertIn("not settled after 1 s", b.notes[0])
        b.args.settle = False
        r = dict(scenario="rf1", workload="write", run=3, ops=1000)
        b.settle_after(Busy(), r, 0.0)
        self.assertNotIn("settled_cpu_us", r)


class LongOptionTest(unittest.TestCase):
    def test_long_refuses_n_with_exit_2(self):
        from unittest import mock
        for argv in (["--long", "--n", "1000"], ["--settle-timeout", "0"]):
            with mock.patch.object(sys, "argv", ["bench/compare"] + argv), \
                    mock.patch("sys.stderr", new_callable=lambda: open(os.devnull, "w")):
                with self.assertRaises(SystemExit) as e:
                    cli.run()
                self.assertEqual(e.exception.code, 2, argv)


if __name__ == "__main__":
    unittest.main()
