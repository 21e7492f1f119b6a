"""Tests of the chart specs (plots, and the comparison's, steadiness's and durability's use of them),
with `shoal stress plot` mocked: no binary, server or Cassandra needed.

    python3 -m pytest bench/shoal_bench        or        python3 bench/shoal_bench/test_plots.py
"""

import argparse
import json
import os
import sys
import tempfile
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/, as bench/compare does

from shoal_bench import compare, durability, plots, steadiness  # noqa: E402
from shoal_bench.util import SHOAL_BIN, Fail  # noqa: E402


def row(system, workload, run, path, ops_s=1000.0, p99=2.0):
    """A run as Bench.stress records it."""
    return dict(scenario="rf1", system=system, workload=workload, run=run, json=path, ops=10_000, errors=0,
                retries=0, ops_s=ops_s, p50=1.0, p95=1.5, p99=p99, p999=3.0, max=9.0, cpu_us=50.0,
                server_cores=1.0, client_cpu_us=2.0, rss_mib=512.0, elapsed=10.0, machine_busy=1.5, intended=False)


def report(path, rate):
    """A stress --json report with three intervals (one with a p50 of 0, as an idle interval has)."""
    ivs = [dict(elapsed_s=t, duration_s=1.0, ops=int(rate), op_rate=rate + t,
                latency=dict(p50_ms=0.0 if t == 1.0 else 0.5 * t, p99_ms=2.0 * t)) for t in (1.0, 2.0, 3.0)]
    with open(path, "w") as f:
        json.dump(dict(summary={}, intervals=ivs), f)


class Server:
    def __init__(self, system, label):
        self.system, self.label = system, label


class PlotTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.results = os.path.join(self.tmp.name, "results")  # where the SVGs and the Markdown go
        self.out = os.path.join(self.tmp.name, "out")  # the raw JSON
        os.makedirs(self.results)
        os.makedirs(self.out)
        self.sh = mock.patch.object(plots, "sh", return_value="").start()
        self.addCleanup(mock.patch.stopall)
        self.addCleanup(self.tmp.cleanup)

    def fake_bench(self):
        """Two systems' write runs (Cassandra's median is run 2) and fixed-rate runs, RF=1 only."""
        args = argparse.Namespace(runs=3, client="simplenative", threads=128, max_s=0, max_threads="")
        bench = compare.Bench(args, self.out)
        for system, rate in (("cassandra", 1000.0), ("shoal", 5000.0)):
            for run, r in ((1, rate * 0.9), (2, rate), (3, rate * 1.1)):
                path = os.path.join(self.out, f"rf1-{system}-write-{run}.json")
                report(path, r)
                bench.rows.append(row(system, "write", run, path, ops_s=r))
            path = os.path.join(self.out, f"rf1-{system}-fixed-1.json")
            report(path, 500.0)
            bench.rows.append(row(system, "fixed", 1, path, ops_s=500.0))
        bench.fixed_rate["rf1"] = (500, "cassandra")
        bench.warmups["rf1"] = (300_000, 150_000)
        bench.wall = 60.0
        return bench

    def spec(self, i=0):
        """The spec passed to the i-th `shoal stress plot` call, and that call's arguments."""
        cmd = self.sh.call_args_list[i].args[0]
        with open(cmd[3]) as f:
            return json.load(f), cmd

    def check_structure(self, spec):
        self.assertEqual(set(spec) - {"log_x"}, {"title", "x_label", "panels"})
        for p in spec["panels"]:
            self.assertEqual(set(p) - {"log_y", "hlines"}, {"title", "y_label", "series"})
            if p["y_label"] == "ms":  # latency is always on a log axis
                self.assertTrue(p["log_y"], p["title"])
            for s in p["series"]:
                self.assertRegex(s["color"], r"^#[0-9a-f]{6}$")
                for pt in s["points"]:
                    self.assertEqual(len(pt), 2)
                    self.assertTrue(all(isinstance(v, float) for v in pt))
            for h in p["hlines"]:
                self.assertEqual(set(h), {"y", "label", "color"})

    def test_results_plots(self):
        bench = self.fake_bench()
        charts = compare.results_plots(bench, self.results)
        self.assertEqual(charts, [("results-write.svg", True), ("results-fixed.svg", True)])
        self.assertEqual(self.sh.call_count, 2)
        spec, cmd = self.spec(0)
        # the spec goes with the raw JSON when the results have their own directory
        self.assertEqual(cmd, [SHOAL_BIN, "stress", "plot", os.path.join(self.out, "results-write.json"),
                               os.path.join(self.results, "results-write.svg")])
        self.assertEqual(self.sh.call_args_list[0].kwargs, {"timeout": 60})
        self.check_structure(spec)
        self.assertEqual(spec["title"], "RF=1 ONE: write, median run")
        self.assertEqual(spec["x_label"], "elapsed seconds")
        self.assertFalse(spec["log_x"])
        self.assertEqual([(p["title"], p["y_label"], p["log_y"]) for p in spec["panels"]],
                         [("Throughput", "op/s", False), ("Latency p50", "ms", True), ("Latency p99", "ms", True)])
        for p in spec["panels"]:
            self.assertEqual([s["name"] for s in p["series"]], ["Cassandra (run 2)", "Shoal (run 2)"])
            self.assertEqual([s["color"] for s in p["series"]], ["#d62728", "#1f77b4"])
        self.assertEqual(spec["panels"][0]["series"][1]["points"], [[1.0, 5001.0], [2.0, 5002.0], [3.0, 5003.0]])
        self.assertEqual(spec["panels"][2]["series"][0]["points"], [[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])
        fixed, cmd = self.spec(1)
        self.assertTrue(cmd[4].endswith("results-fixed.svg"))
        self.assertIn("fixed 500/s", fixed["title"])
        self.assertEqual([s["name"] for s in fixed["panels"][0]["series"]], ["Cassandra (run 1)", "Shoal (run 1)"])

    def test_results_md_references_svgs(self):
        bench = self.fake_bench()
        charts = compare.results_plots(bench, self.results)
        path = os.path.join(self.results, "RESULTS.md")
        vers = {"shoal": "`shoal 0`", "cassandra": "Apache Cassandra 5.0.9"}
        compare.write_results(bench, path, ["bench/compare"], "now", vers, charts, self.results)
        with open(path) as f:
            text = f.read()
        self.assertIn("![results-write.svg](results-write.svg)", text)
        self.assertIn("![results-fixed.svg](results-fixed.svg)", text)
        self.assertNotIn(".png", text)

    def test_spec_beside_svg_without_raw_dir(self):
        bench = self.fake_bench()
        bench.out = self.results  # --quick, --smoke, --out: one directory for everything
        compare.results_plots(bench, self.results)
        _, cmd = self.spec(0)
        self.assertEqual(cmd[3], os.path.join(self.results, "results-write.chart.json"))
        self.assertTrue(os.path.isfile(cmd[3]))

    def test_plotter_failure_is_not_fatal(self):
        self.sh.side_effect = Fail("exit 2: shoal stress plot")
        bench = self.fake_bench()
        charts = compare.results_plots(bench, self.results)
        self.assertEqual(charts, [("results-write.svg", False), ("results-fixed.svg", False)])
        line = plots.md_image("results-write.svg", False, self.results, os.path.join(self.results, "RESULTS.md"),
                              self.out)
        self.assertIn("was not drawn", line)
        self.assertIn("results-write.json", line)

    def test_durability_chart(self):
        rows = {t: dict(ops_s=100.0 * t, p99=0.5 * t) for t in (1, 2, 4, 256)}
        spec = durability.durability_chart(10.0, 1234.0, [(m, sorted(rows.items())) for m in ("batch", "group", "periodic")])
        self.check_structure(spec)
        self.assertTrue(spec["log_x"])
        self.assertEqual(spec["x_label"], "client threads")
        tput, p99 = spec["panels"]
        self.assertTrue(tput["log_y"])  # the modes differ by orders of magnitude
        self.assertTrue(p99["log_y"])
        self.assertEqual([s["name"] for s in tput["series"]], ["batch", "group", "periodic"])
        self.assertEqual([s["color"] for s in tput["series"]], ["#d62728", "#1f77b4", "#2ca02c"])
        self.assertEqual(tput["series"][0]["points"][-1], [256.0, 25600.0])  # threads on x, not log2(threads)
        self.assertEqual(tput["hlines"], [{"y": 1234.0, "label": "the disk: 1,234 fsyncs/s (4 KiB appends)",
                                           "color": "#5a5a5a"}])
        self.assertEqual(p99["hlines"], [])

    def test_steadiness_chart(self):
        ivs = [dict(elapsed_s=10.0 * i, duration_s=10.0, ops=1000, op_rate=100.0, latency=dict(p99_ms=1.0))
               for i in range(1, 13)]
        an = dict(minutes=[dict(minute=1, ops_s=100.0), dict(minute=2, ops_s=90.0)], first=100.0, window_s=300.0)
        args = argparse.Namespace(minutes=2.0, threads=128, keys=10_000_000)
        spec = steadiness.steadiness_chart(args, 10, [(Server("shoal", "Shoal"), an, ivs)])
        self.check_structure(spec)
        self.assertEqual(spec["x_label"], "elapsed minutes")
        self.assertEqual([p["log_y"] for p in spec["panels"]], [False, False, True])
        self.assertEqual([h["label"] for h in spec["panels"][0]["hlines"]], ["Shoal first 5 min +10%", "-10%"])
        self.assertEqual(spec["panels"][0]["series"][0]["name"], "Shoal")
        self.assertEqual(len(spec["panels"][0]["series"][0]["points"]), 2 * len(ivs))  # steps

    def fake_stress(self):
        """Bench.stress without a server: writes a report whose rate is the thread count's (or 1,000)."""
        def stress(bench, server, scenario, workload, run, stress_args, timeout, keep=True, mode=()):
            if not keep:
                return None
            rate = 1000.0 * (run if scenario == "durability" else 1)
            secs = 60.0 if scenario == "steady" else 1.0
            step = 2.0 if scenario == "steady" else 1.0
            path = os.path.join(bench.out, f"{scenario}-{server.system}-{workload}-{run}.json")
            ivs = [dict(elapsed_s=step * i, duration_s=step, ops=int(rate * step), op_rate=rate,
                        latency=dict(p50_ms=0.5, p99_ms=1.0)) for i in range(1, int(secs / step) + 1)]
            with open(path, "w") as f:
                json.dump(dict(summary=dict(start_unix_s=1000.0, elapsed_s=secs, ops=int(rate * secs)), intervals=ivs), f)
            r = row(server.system, workload, run, path, ops_s=rate)
            r["scenario"] = scenario
            bench.rows.append(r)
            return r
        return stress

    def test_steadiness_md_references_svg(self):
        class FakeSampler:
            def __init__(self, server):
                self.samples = [dict(t=1000.0 + 5 * k, cpu_s=k, threads={"w": k / 2}, rss_mib=100.0, disk_mib=10.0 * k,
                                     busy_s=2.0 * k, steal_s=0.0, reclaim_pages=0, probe_mib_s=500.0,
                                     mem_probe_mib_s=5000.0) for k in range(14)]

            def start(self):
                pass

            def finish(self):
                pass
        args = argparse.Namespace(minutes=1.0, threads=128, keys=10_000, warmup=0)
        vers = {"shoal": "`shoal 0`", "cassandra": "Apache Cassandra 5.0.9"}
        with mock.patch.object(compare.Bench, "stress", self.fake_stress()), \
                mock.patch.object(steadiness, "serve", lambda server, work: work(server)), \
                mock.patch.object(steadiness, "Sampler", FakeSampler), \
                mock.patch.object(steadiness, "BENCH_HOME", self.tmp.name), \
                mock.patch("sys.stdout", new_callable=lambda: open(os.devnull, "w")):
            steadiness.steadiness(args, self.out, self.results, False, vers, "now", ["bench/compare", "--steadiness"])
        spec, cmd = self.spec(0)
        self.assertEqual(cmd[3:], [os.path.join(self.out, "steadiness.json"), os.path.join(self.results, "steadiness.svg")])
        self.check_structure(spec)
        with open(os.path.join(self.results, "STEADINESS.md")) as f:
            text = f.read()
        self.assertIn("![steadiness.svg](steadiness.svg)", text)
        self.assertNotIn(".png", text)

    def test_durability_md_references_svg(self):
        args = argparse.Namespace(durability_duration="1s", durability_threads="1,2,4", fsync_seconds=0.02,
                                  durability_modes="batch,group,periodic")
        vers = {"shoal": "`shoal 0`"}
        with mock.patch.object(compare.Bench, "stress", self.fake_stress()), \
                mock.patch.object(durability, "serve", lambda server, work: work(server)), \
                mock.patch.object(durability, "BENCH_HOME", self.tmp.name), \
                mock.patch("sys.stdout", new_callable=lambda: open(os.devnull, "w")):
            durability.durability(args, self.out, self.results, vers, "now", ["bench/compare", "--durability"])
        spec, cmd = self.spec(0)
        self.assertEqual(cmd[3:], [os.path.join(self.out, "durability.json"), os.path.join(self.results, "durability.svg")])
        self.check_structure(spec)
        self.assertTrue(spec["log_x"])
        self.assertEqual([p[0] for p in spec["panels"][0]["series"][0]["points"]], [1.0, 2.0, 4.0])
        with open(os.path.join(self.results, "DURABILITY.md")) as f:
            text = f.read()
        self.assertIn("![durability.svg](durability.svg)", text)
        self.assertNotIn(".png", text)

    def test_series_drops_non_finite(self):
        s = plots.series("x", [(1, 2), (2, float("nan")), (3, float("inf")), (4, 0)])
        self.assertEqual(s, {"name": "x", "points": [[1.0, 2.0], [4.0, 0.0]]})  # no color: the plotter's palette


if __name__ == "__main__":
    unittest.main()
