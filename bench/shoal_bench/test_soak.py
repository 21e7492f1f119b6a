"""Unit tests of bench/soak's analysis on synthetic data (no servers): slopes, restart windows and the
attribution of errors, the minutes, the bounds and the verdict, the stress's interval lines."""

import contextlib
import io
import unittest

from . import soak
from .test_lifecycle import HDR_495

START = 1_700_000_000.0


def interval(t, ops=1000, errors=0, p99=2.0, duration=10.0, hdr=None):
    """A stress interval starting t seconds into the soak."""
    iv = dict(start_unix_s=START + t, duration_s=duration, elapsed_s=t + duration, ops=ops, errors=errors,
              latency=dict(p99_ms=p99))
    if hdr:
        iv["latency_hdr"] = hdr
    return iv


def minutes(n, ops_s=lambda m: 100.0, p99=lambda m: 2.0, rss=lambda m: 300.0, disk=lambda m: 500.0, restart=()):
    """n synthetic minute rows (1-based), RSS and disk given per node (three nodes alike)."""
    rows = []
    for m in range(1, n + 1):
        per_rss = {str(i): rss(m) / 3 for i in (1, 2, 3)}
        per_disk = {str(i): disk(m) / 3 for i in (1, 2, 3)}
        rows.append(dict(minute=m, secs=60.0, ops=ops_s(m) * 60, ops_s=ops_s(m), p99_ms=p99(m), errors=0,
                         restart=m in restart, rss_mb=per_rss, rss_total_mb=rss(m), disk_mb=per_disk,
                         disk_total_mb=disk(m)))
    return rows


def check(verdict, name):
    return next(c for c in verdict["checks"] if c["name"].startswith(name))


RESTART_OK = [dict(node=1, ok=True, t_stop=START + 300, t_ready=START + 320)]


class SlopeTest(unittest.TestCase):
    def test_least_squares_recovers_a_line(self):
        slope, intercept = soak.least_squares([(x, 3 * x + 2) for x in range(10)])
        self.assertAlmostEqual(slope, 3)
        self.assertAlmostEqual(intercept, 2)
        self.assertIsNone(soak.least_squares([(1, 5)]))
        self.assertIsNone(soak.least_squares([(1, 5), (1, 6)]))  # one x: no line

    def test_slope_per_hour_as_percent_of_the_mean(self):
        # +1 op/s per minute around a mean of 100 + 30.5: 60 op/s per hour.
        rows = minutes(60, ops_s=lambda m: 100.0 + m)
        self.assertAlmostEqual(soak.slope_per_hour(rows, "ops_s"), 60.0)
        self.assertAlmostEqual(soak.slope_pct_per_hour(rows, "ops_s"), 100 * 60 / 130.5)
        self.assertAlmostEqual(soak.slope_pct_per_hour(minutes(30), "ops_s"), 0.0)

    def test_durations(self):
        self.assertEqual(soak.parse_duration("10m"), 600)
        self.assertEqual(soak.parse_duration("90"), 90)
        self.assertEqual(soak.parse_duration("1.5h"), 5400)
        with self.assertRaises(ValueError):
            soak.parse_duration("ten minutes")


class RestartTest(unittest.TestCase):
    def test_errors_inside_a_window_belong_to_its_restart(self):
        restarts = [dict(t_stop=START + 300, t_ready=START + 320), dict(t_stop=START + 900, t_ready=START + 930)]
        windows = soak.restart_windows(restarts, before=10, after=60)
        self.assertEqual(windows[0], (START + 290, START + 380))
        ivs = [interval(0, errors=0), interval(280, errors=1),  # [280, 290): touches the window's start only
               interval(285, errors=2),  # overlaps [290, 380)
               interval(370, errors=3),  # overlaps its end
               interval(380, errors=4),  # after it
               interval(920, errors=5)]
        per, outside, where = soak.attribute_errors(ivs, windows)
        self.assertEqual(per, [5, 5])
        self.assertEqual(outside, 5)
        self.assertEqual(where, [(START + 280, 1), (START + 380, 4)])

    def test_a_restart_that_never_came_back_owns_every_later_error(self):
        windows = soak.restart_windows([dict(t_stop=START + 300, t_ready=None)], before=10, after=60)
        per, outside, _ = soak.attribute_errors([interval(5000, errors=7)], windows)
        self.assertEqual((per, outside), ([7], 0))

    def test_minutes_overlapping_a_window_are_marked_and_left_out_of_the_slopes(self):
        windows = soak.restart_windows(RESTART_OK, before=10, after=60)  # [290, 380) s
        ivs = [interval(t, ops=1000) for t in range(0, 600, 10)]
        samples = [dict(t=START + t, rss_mb={"1": 100.0 + t, "2": None, "3": 50.0}, disk_mb={"1": 10.0, "2": 20.0,
                                                                                                 "3": 30.0})
                   for t in range(0, 600, 10)]
        rows = soak.minute_rows(ivs, START, samples, windows)
        self.assertEqual([r["minute"] for r in rows], list(range(1, 11)))
        self.assertEqual([r["restart"] for r in rows], [False] * 4 + [True] * 3 + [False] * 3)
        self.assertAlmostEqual(rows[0]["ops_s"], 100.0)
        self.assertEqual(rows[0]["rss_mb"], {"1": 150.0, "3": 50.0})  # the largest sample; a down node has none
        self.assertEqual(rows[0]["rss_total_mb"], 200.0)
        self.assertEqual(rows[0]["disk_total_mb"], 60.0)
        self.assertEqual([r["minute"] for r in soak.steady_rows(rows)], [1, 2, 3, 4, 8, 9, 10])

    def test_a_minute_p99_merges_its_histograms(self):
        ivs = [interval(0, p99=99.0, hdr=HDR_495), interval(10, p99=99.0, hdr=HDR_495)]
        rows = soak.minute_rows(ivs, START, [], [])
        self.assertEqual(rows[0]["p99_ms"], 6.055)  # from the histograms, not the intervals' own p99
        self.assertEqual(soak.minute_rows([interval(0, p99=4.0), interval(10, p99=7.5)], START, [], [])[0]["p99_ms"],
                         7.5)  # no histograms: the worst interval's


class VerdictTest(unittest.TestCase):
    def analyse(self, rows, restarts=RESTART_OK, rate=100, outside=0):
        return soak.analyse(rows, restarts, rate, outside, rss_bound_pct=25, disk_bound_pct=50)

    def test_a_flat_run_passes(self):
        v = self.analyse(minutes(60, restart={5, 6}))
        self.assertTrue(v["passed"], v["checks"])
        self.assertEqual(v["slopes"]["steady_minutes"], 58)

    def test_throughput_sagging_6_percent_an_hour_fails(self):
        v = self.analyse(minutes(60, ops_s=lambda m: 100.0 * (1 - 0.001 * m)))  # -0.1%/min
        self.assertFalse(check(v, "throughput slope")["ok"])
        self.assertAlmostEqual(v["slopes"]["throughput_pct_per_h"], -6.0 / 0.9695, places=2)
        self.assertFalse(v["passed"])

    def test_p99_growing_fails_but_4_percent_an_hour_passes(self):
        self.assertFalse(check(self.analyse(minutes(60, p99=lambda m: 2.0 + 0.01 * m)), "p99 slope")["ok"])
        self.assertTrue(check(self.analyse(minutes(60, p99=lambda m: 2.0 * (1 + 0.04 * m / 60))), "p99 slope")["ok"])

    def test_a_restart_minute_spike_does_not_count_against_the_slopes(self):
        spike = minutes(60, p99=lambda m: 500.0 if m == 55 else 2.0, restart={55})
        self.assertTrue(check(self.analyse(spike), "p99 slope")["ok"])
        self.assertEqual(self.analyse(spike)["slopes"]["steady_minutes"], 59)
        # Unmarked, one minute's spike moves the least-squares slope far past 5 %/h, not Theil-Sen's.
        unmarked = self.analyse(minutes(60, p99=lambda m: 500.0 if m == 55 else 2.0))
        self.assertTrue(check(unmarked, "p99 slope")["ok"])
        self.assertGreater(unmarked["slopes"]["p99_pct_per_h_least_squares"], 100)
        # Spikes in every later minute are a trend, whichever the estimator.
        self.assertFalse(check(self.analyse(minutes(60, p99=lambda m: 2.0 if m <= 30 else 500.0)), "p99 slope")["ok"])

    def test_theil_sen_is_the_median_pairwise_slope(self):
        self.assertAlmostEqual(soak.theil_sen([(x, 3 * x + 2) for x in range(10)]), 3)
        self.assertAlmostEqual(soak.theil_sen([(x, x) for x in range(5)] + [(5, 300)]), 1)  # 5 of 15 pairs off
        self.assertIsNone(soak.theil_sen([(1, 5), (1, 6)]))

    def test_rss_and_disk_bounds_compare_the_thirds(self):
        growing = self.analyse(minutes(60, rss=lambda m: 300.0 + 3 * m))  # thirds' maxima 360 and 480 MB: +33%
        c = check(growing, "RSS bounded")
        self.assertFalse(c["ok"])
        self.assertAlmostEqual(c["value"]["growth"], 480 / 360 - 1)
        self.assertAlmostEqual(growing["slopes"]["rss_mb_per_h"], 180.0)
        self.assertTrue(check(self.analyse(minutes(60, rss=lambda m: 300.0 + 2 * m)), "RSS bounded")["ok"])  # +23.5%
        sawtooth = self.analyse(minutes(60, rss=lambda m: 300.0 + 10 * (m % 10)))  # restarts reset it
        self.assertTrue(check(sawtooth, "RSS bounded")["ok"])
        # Disk: the thirds' maxima 560 and 680 MB (+21%) pass the 50% bound; 700 and 1100 MB (+57%) do not.
        self.assertTrue(check(self.analyse(minutes(60, disk=lambda m: 500.0 + 3 * m)), "disk bounded")["ok"])
        self.assertFalse(check(self.analyse(minutes(60, disk=lambda m: 500.0 + 10 * m)), "disk bounded")["ok"])

    def test_errors_outside_the_windows_fail_and_so_does_a_lost_restart(self):
        self.assertFalse(self.analyse(minutes(60), outside=1)["passed"])
        lost = [dict(node=2, ok=False, t_stop=START + 600, t_ready=None, error="start timed out")]
        v = self.analyse(minutes(60), restarts=RESTART_OK + lost)
        self.assertEqual(check(v, "restarts back")["shown"], "1 of 2")
        self.assertFalse(v["passed"])

    def test_a_client_short_of_the_fixed_rate_fails(self):
        self.assertFalse(check(self.analyse(minutes(60, ops_s=lambda m: 90.0)), "fixed rate held")["ok"])

    def test_too_few_steady_minutes_give_no_slope(self):
        v = self.analyse(minutes(7, restart={3, 4}))
        self.assertIsNone(v["slopes"]["throughput_pct_per_h"])
        self.assertFalse(v["passed"])
        self.assertIn("fewer than", check(v, "throughput slope")["note"])


class OutputTest(unittest.TestCase):
    def test_interval_lines_of_a_mixed_run(self):
        line = "120345,2001,2001,0.001200,60,1.200,0.900,2.100,4.500,9.000,15.000,3,1000,1.1,4.0,1001,1.3,5.0"
        self.assertEqual(soak.parse_interval_line(line),
                         dict(total_ops=120345, op_rate=2001.0, elapsed_s=60.0, p99_ms=4.5, errors=3))
        self.assertIsNone(soak.parse_interval_line("total ops,op/s,pk/s,row/s,..."))
        self.assertIsNone(soak.parse_interval_line("Warming up"))

    def test_long_runs_show_blocks_of_minutes(self):
        text = soak.minutes_table(minutes(600, restart={15}))
        self.assertIn("Blocks of 5 minutes", text)
        self.assertIn("| 11-15 (R) |", text)
        self.assertEqual(text.count("\n| "), 1 + 120)  # the header and 120 blocks

    def test_the_report_and_chart_of_a_short_run_say_it_is_a_validation(self):
        a = soak.parse(["--minutes", "12", "--restart-every", "3m"])
        rows = minutes(12, restart={4, 5})
        restarts = [dict(RESTART_OK[0], index=1, how="SIGTERM", t_stopped=START + 302, error=None)]
        doc = dict(command="bench/soak --minutes 12", machine="m", date="d", commit="c", binary="b", work="w",
                   note="a busy machine", args=vars(a), soak_s=720.0, wall_s=900.0, interrupted=False,
                   start_unix_s=START, rate=2000, calibration=dict(op_rate=4000.0), soak_command="shoal stress mixed",
                   retries=9, retries_used=3, restarts=restarts,
                   errors=dict(total=2, per_restart=[2], in_restart_windows=2, outside=0),
                   minutes=rows, verdict=soak.analyse(rows, restarts, 100, 0, 25, 50))
        md = soak.render_md(doc, "![soak.svg](soak.svg)")
        self.assertIn("**Validation run** (12.0 minutes", md)
        self.assertIn("> a busy machine", md)
        self.assertIn("| 1 | 1 | SIGTERM | 5.0 | 2.0 | 18.0 | yes | 2 |", md)
        self.assertIn("| 4 (R) |", md)
        spec = soak.chart(doc)
        self.assertEqual(len(spec["panels"]), 5)
        self.assertEqual(spec["panels"][-1]["series"][1]["points"], [[5.0, 0.0], [5.0, 1.0], [5.0, 0.0]])
        doc["soak_s"] = 3600.0
        self.assertNotIn("Validation run", soak.render_md(doc, ""))
        self.assertIn("num_tokens 16, the server's defaults otherwise", soak.render_md(doc, ""))
        doc["args"] = vars(soak.parse(["--shoal-config", "compaction_throughput: 16MiB/s"]))
        self.assertIn("num_tokens 16, `compaction_throughput: 16MiB/s`, the server's defaults otherwise",
                      soak.render_md(doc, ""))

    def test_a_run_is_analysed_from_its_stress_report_and_raw_record(self):
        a = soak.parse(["--minutes", "10", "--restart-every", "3m", "--warmup", "0s"])
        ivs = [interval(t, ops=1000, errors=2 if t == 180 else 0, hdr=HDR_495) for t in range(0, 600, 10)]
        ivs.append(interval(600, ops=3, duration=0.2))  # the final fragment: dropped
        report = dict(summary=dict(start_unix_s=START, elapsed_s=600.2, retries=4), settings=dict(retries=9),
                      intervals=ivs)
        restarts = [dict(index=1, node=1, how="SIGTERM", t_stop=START + 180, t_stopped=START + 181,
                         t_ready=START + 190, ok=True, error=None)]
        samples = [dict(t=START + t, rss_mb={"1": 300.0, "2": 310.0, "3": 290.0},
                        disk_mb={"1": 100.0, "2": 100.0, "3": 100.0}) for t in range(0, 610, 10)]
        raw = dict(command="bench/soak --minutes 10", args=vars(a), rate=100, calibration=dict(op_rate=200.0),
                   soak_command="shoal stress mixed", interrupted=False, wall_s=700.0, restarts=restarts,
                   samples=samples, machine="m", date="d", commit="c", binary="b")
        doc = soak.build_doc(raw, report, "/nonexistent")
        self.assertEqual(len(doc["minutes"]), 10)
        self.assertEqual(doc["errors"], dict(total=2, per_restart=[2], in_restart_windows=2, outside=0,
                                             outside_at_minute=[]))
        self.assertEqual([r["minute"] for r in doc["minutes"] if r["restart"]], [3, 4, 5])  # [170, 250) s
        self.assertEqual(doc["verdict"]["slopes"]["steady_minutes"], 7)
        self.assertTrue(doc["verdict"]["passed"], doc["verdict"]["checks"])
        self.assertIn("| 1 | 1 | SIGTERM | 3.0 | 1.0 | 9.0 | yes | 2 |", soak.render_md(doc, ""))
        # The first 2 minutes as a warm-up: out of the throughput and p99 slopes, marked (W).
        raw["args"] = vars(soak.parse(["--minutes", "10", "--restart-every", "3m", "--warmup", "2m"]))
        doc = soak.build_doc(raw, report, "/nonexistent")
        self.assertEqual([r["minute"] for r in doc["minutes"] if r["warmup"]], [1, 2])
        self.assertEqual(doc["verdict"]["slopes"]["steady_minutes"], 5)
        self.assertEqual(doc["verdict"]["slopes"]["warmup_minutes"], 2)
        self.assertIn("| 2 (W) |", soak.render_md(doc, ""))

    def test_warm_up_minutes_are_out_of_the_slopes_and_shown_beside_them(self):
        rows = minutes(60, p99=lambda m: 90.0 / m if m <= 5 else 6.0)
        for r in rows:
            r["warmup"] = r["minute"] <= 5
        v = soak.analyse(rows, [], 100, 0, 25, 50)
        self.assertTrue(check(v, "p99 slope")["ok"])
        self.assertEqual((v["slopes"]["steady_minutes"], v["slopes"]["warmup_minutes"]), (55, 5))
        self.assertAlmostEqual(v["slopes"]["p99_pct_per_h"], 0.0)
        self.assertLessEqual(v["slopes"]["p99_pct_per_h_with_warmup"], 0.0)

    def test_arguments(self):
        a = soak.parse(["--minutes", "12", "--restart-every", "3m"])
        self.assertEqual((a.soak_s, a.restart_every_s, a.window_after_s, a.warmup_s), (720, 180, 60, 300))
        self.assertEqual(soak.parse([]).soak_s, 3600)
        self.assertEqual(soak.parse(["--hours", "0.5"]).soak_s, 1800)
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
            soak.parse(["--hours", "1", "--minutes", "5"])
        words = soak.soak_words(a, 2500)
        self.assertEqual(words[:4], ["mixed", "duration=720s", "cl=QUORUM", "--keep-going"])
        self.assertIn("fixed=2500/s", words)


if __name__ == "__main__":
    unittest.main()
