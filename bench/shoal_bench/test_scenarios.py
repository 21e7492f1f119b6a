"""Tests of bench/compare's LWT and counter scenarios (issue 23): the stress words of each workload, the
scenario choice (--scenarios and the --rf* flags), the runs a scenario makes (stress mocked), and the
RESULTS.md section with its table. No binary, server or Cassandra needed.

    python3 -m unittest discover -s bench/shoal_bench -t bench -p "test_*.py"
"""

import argparse
import os
import sys
import tempfile
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/, as bench/compare does

from shoal_bench import cli, compare  # noqa: E402


def args(**kw):
    base = dict(runs=3, threads=128, max_threads="", client="simplenative", fixed_s=0, warmup=None, quick=True,
                smoke=False, scenarios=None, rf1_only=False, rf3=False, rf3_only=False, auth=False, tls=False,
                steadiness=False, durability=False)
    base.update(kw)
    return argparse.Namespace(**base)


class WorkloadsTest(unittest.TestCase):
    def test_stress_words(self):
        self.assertEqual(compare.extra_workloads("lwt", 20000), [
            ("lwt", ["lwt", "n=20000", "truncate=always", "ratio(insert=1,update=1)", "cl=QUORUM",
                     "serial-cl=SERIAL"])])
        self.assertEqual(compare.extra_workloads("counter", 500), [
            ("counter_write", ["counter_write", "n=500", "truncate=always", "cl=ONE", "add=fixed(1)"]),
            ("counter_read", ["counter_read", "n=500", "cl=ONE", "-pop", "dist=uniform(1..500)"])])
        for sc, _ in compare.EXTRA_SCENARIOS:
            for _, words in compare.extra_workloads(sc, 10):
                first_option = next((i for i, w in enumerate(words) if w.startswith("-")), len(words))
                self.assertTrue(all("=" in w or "(" in w for w in words[1:first_option]), words)
                self.assertTrue(all(not w.startswith("-") or w == "-pop" for w in words), words)
        with self.assertRaises(ValueError):
            compare.extra_workloads("rf1", 10)


class ScenarioChoiceTest(unittest.TestCase):
    def test_defaults_and_flags(self):
        self.assertEqual(cli.scenario_names(args()), ["rf1", "lwt", "counter"])
        self.assertEqual(cli.scenario_names(args(rf3=True)), ["rf1", "rf3", "lwt", "counter"])
        self.assertEqual(cli.scenario_names(args(rf1_only=True)), ["rf1"])
        self.assertEqual(cli.scenario_names(args(rf3_only=True)), ["rf3"])
        self.assertEqual(cli.scenario_names(args(scenarios="counter,lwt")), ["lwt", "counter"])
        self.assertEqual(cli.scenario_names(args(scenarios="rf3, rf1")), ["rf1", "rf3"])
        for bad in ("lwt,bogus", ",", "RF1"):
            with self.assertRaisesRegex(ValueError, "--scenarios"):
                cli.scenario_names(args(scenarios=bad))
        self.assertIn("need the rf1 scenario", cli.security_args_problem(args(auth=True, scenarios="lwt")))
        self.assertIsNone(cli.security_args_problem(args(auth=True, scenarios="rf1,lwt")))

    def test_the_command_line_refuses_bad_choices_with_exit_2(self):
        for argv in (["--scenarios", "bogus"], ["--scenarios", "lwt", "--rf3"], ["--auth", "--scenarios", "counter"],
                     ["--steadiness", "--scenarios", "lwt"], ["--lwt-n", "0"]):
            with mock.patch.object(sys, "argv", ["bench/compare"] + argv), \
                    mock.patch("sys.stderr", new_callable=lambda: open(os.devnull, "w")):
                with self.assertRaises(SystemExit) as e:
                    cli.run()
                self.assertEqual(e.exception.code, 2, argv)


class Server:
    system, label = "shoal", "Shoal"


class RunsTest(unittest.TestCase):
    def test_a_warm_up_then_each_workload_runs_times(self):
        b = compare.Bench(args(runs=3, threads=64), "/tmp")
        calls = []
        with mock.patch.object(compare.Bench, "stress",
                               lambda self, server, sc, wl, run, words, timeout, keep=True, mode=():
                               calls.append((sc, wl, run, words, keep))):
            b.scenario(Server(), "counter", [], 1000)
        self.assertEqual([(wl, run, keep) for _, wl, run, _, keep in calls],
                         [("warmup-counter_write", 0, False)] + [("counter_write", r, True) for r in (1, 2, 3)] +
                         [("counter_read", r, True) for r in (1, 2, 3)])
        self.assertEqual(calls[0][3], ["counter_write", "n=1000", "truncate=always", "cl=ONE", "add=fixed(1)", "-rate",
                                       "threads=64"])
        self.assertEqual(calls[-1][3][-2:], ["-rate", "threads=64"])
        self.assertEqual(b.extra_warmups, {"counter": (1000, "counter_write")})
        calls.clear()
        b.args.warmup = 300
        with mock.patch.object(compare.Bench, "stress",
                               lambda self, server, sc, wl, run, words, timeout, keep=True, mode=():
                               calls.append((sc, wl, run, words, keep))):
            b.scenario(Server(), "lwt", [], 5000)
        self.assertEqual(calls[0][3][:2], ["lwt", "n=300"])
        self.assertEqual([c[1] for c in calls], ["warmup-lwt", "lwt", "lwt", "lwt"])
        self.assertEqual(calls[1][3][1], "n=5000")


class ReportTest(unittest.TestCase):
    def bench(self):
        b = compare.Bench(args(runs=3), "/tmp")
        b.started = "2026-11-27 11:00 UTC"
        b.extra_warmups = {"lwt": (20000, "lwt"), "counter": (100000, "counter_write")}
        for system, base_ops, cpu in (("cassandra", 5000.0, 400.0), ("shoal", 10000.0, 100.0)):
            for run, scale in ((1, 1.0), (2, 1.2), (3, 0.8)):
                b.rows.append(dict(scenario="lwt", system=system, workload="lwt", run=run, ops_s=base_ops * scale,
                                   cpu_us=cpu, client_cpu_us=5.0, p50=2.0, p95=4.0, p99=8.0 * scale, p999=20.0,
                                   rss_mib=500.0, applied=900, not_applied=100))
                b.rows.append(dict(scenario="counter", system=system, workload="counter_write", run=run,
                                   ops_s=base_ops * 4 * scale, cpu_us=cpu / 4, client_cpu_us=2.0, p50=1.0, p95=2.0,
                                   p99=4.0, p999=9.0, rss_mib=400.0, applied=None, not_applied=None))
        b.commands[("lwt", "lwt")] = "shoal stress lwt n=20000 ..."
        b.commands[("rf1", "write")] = "shoal stress write n=100000 ..."
        return b

    def test_the_table_and_section(self):
        b = self.bench()
        table = compare.extra_table(b)
        self.assertIn("| LWT | lwt | Cassandra | 5,000 | 2.00 | 4.00 | 8.00 | 20.00 | 400.0 | 2,700 / 300 (90.0%) |",
                      table)
        self.assertIn("| LWT | lwt | **Shoal/Cassandra** | **2.00x** | **1.00x** | **1.00x** | **1.00x** | **1.00x** | "
                      "**0.25x** |  |", table)
        self.assertIn("| COUNTER | counter_write | Shoal | 40,000 |", table)
        self.assertNotIn("counter_read", table, "not measured, not shown")
        section = "\n".join(compare.extra_section(b, ["bench/compare", "--quick", "--runs", "3", "--scenarios",
                                                      "lwt,counter"]))
        self.assertTrue(section.startswith(compare.EXTRA_HEADING))
        self.assertIn("by `bench/compare --quick --runs 3 --scenarios lwt,counter` on ", section)
        self.assertIn("LWT: 20,000 lwt operations, COUNTER: 100,000 counter_write operations", section)
        self.assertIn("# lwt lwt\nshoal stress lwt n=20000 ...", section)
        self.assertNotIn("write n=100000", section, "only this section's commands")
        self.assertIn("Short runs (--quick)", section)
        self.assertEqual(compare.applied_share(b, "counter", "shoal", "counter_write"), "")
        self.assertIsNone(compare.extra_table(compare.Bench(args(), "/tmp")))

    def test_a_run_without_them_keeps_the_last_measured_section(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "RESULTS.md")
            with open(path, "w") as f:
                f.write(f"# R\n\n## Results\n\nx\n\n{compare.EXTRA_HEADING}\n\nMeasured then.\n\n"
                        "## Issue 5 targets\n\n- MET\n")
            kept = compare.carried_section(path, compare.EXTRA_HEADING)
            self.assertEqual(kept[:3], [compare.EXTRA_HEADING, "", "Measured then."])

    def test_a_run_of_them_alone_replaces_only_their_section(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "RESULTS.md")
            with open(path, "w") as f:
                f.write("# R\n\n## Results\n\nx\n\n## Issue 5 targets\n\n- MET\n")
            compare.update_section(path, compare.EXTRA_HEADING, [compare.EXTRA_HEADING, "", "First.", ""])
            with open(path) as f:
                self.assertEqual(f.read(), f"# R\n\n## Results\n\nx\n\n{compare.EXTRA_HEADING}\n\nFirst.\n\n"
                                 "## Issue 5 targets\n\n- MET\n")
            compare.update_section(path, compare.EXTRA_HEADING, [compare.EXTRA_HEADING, "", "Second.", "", "| t |"])
            with open(path) as f:
                self.assertEqual(f.read(), f"# R\n\n## Results\n\nx\n\n{compare.EXTRA_HEADING}\n\nSecond.\n\n| t |"
                                 "\n\n## Issue 5 targets\n\n- MET\n")
            with open(path, "w") as f:
                f.write(f"# R\n\n{compare.EXTRA_HEADING}\n\nOld, last.\n")
            compare.update_section(path, compare.EXTRA_HEADING, [compare.EXTRA_HEADING, "", "New."])
            with open(path) as f:
                self.assertEqual(f.read(), f"# R\n\n{compare.EXTRA_HEADING}\n\nNew.\n")


if __name__ == "__main__":
    unittest.main()
