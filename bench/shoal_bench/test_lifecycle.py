"""Tests of bench/lifecycle's readers (HDR histograms, `ss -ti`, Cassandra's logs), its tables and its
Cassandra skip path: no binary, cluster or Cassandra needed.

    python3 -m pytest bench/shoal_bench        or        python3 bench/shoal_bench/test_lifecycle.py
"""

import io
import os
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/, as bench/lifecycle does

from shoal_bench import lifecycle as lc  # noqa: E402

# A `shoal stress --json` latency_hdr of 495 writes whose report said p50 0.822 ms, p99 6.055 ms.
HDR_495 = ("HISTFAAAAWR4nC1RMU7EQAx0Zh1nNyGcjigFAoROpwNRoRNCVyBESUXBA3gB30BCiApdQYVo+AoVPT+g5wmMfUTK2ll7PJ7J/sN6EMGRbJ7"
           "0Hys/vtcfcvW7ufgBprqCAAUjLpCwhzongFkD7ayBtAumjH5qj05rYDthTsCIZEklqgswST4qRZYFogoxBiK81vP1Fn4XxtrIMxA8oFeTHf"
           "Yo/GFMSMQGCpNIOHELIERFrSDuCmeJNdkREiv3TK12cGq96At02AU6YIYaNRl6zI0plfg2YOqrUoVOmU3YncVIyHG4DhmdNqAVt05fXHNgq"
           "J/fAz0555xMLl7eYUU9bqMWlBwqXOxrhRsu4V65QoJEfV2U2HyJZetxgMRWLy77MZHjQA25xmfFnjBYnX3EewUiFuYmO/EZ7nUzocMpLp2XX"
           "umMZ1ZuM9KMZEbvT3DIAvSpYvtbOO6/wKdnfPklSZ771qJix/gDvX4Yig==")

CASS_LOG = """\
INFO  [Stream-Deserializer-/127.0.0.1:7000-1] 2026-11-26 22:00:01,250 StreamResultFuture.java:187 - [Stream #abc ID#0] Creating new streaming plan for Bootstrap from /127.0.0.1:7000 channel.remote /127.0.0.1:7000
INFO  [Stream-Deserializer-/127.0.0.1:7000-1] 2026-11-26 22:00:01,500 StreamResultFuture.java:187 - [Stream #abc ID#0] Prepare completed. Receiving 12 files(1.037GiB), sending 0 files(0.000KiB)
INFO  [Stream-Deserializer-/127.0.0.2:7000-1] 2026-11-26 22:00:01,600 StreamResultFuture.java:187 - [Stream #abc ID#0] Prepare completed. Receiving 3 files(512.500MiB), sending 1 files(10.000KiB)
INFO  [Messaging] 2026-11-26 22:00:11,250 StreamResultFuture.java:200 - [Stream #abc] Session with /127.0.0.1:7000 is complete
INFO  [Messaging] 2026-11-26 22:00:21,250 StreamResultFuture.java:200 - [Stream #abc] All sessions completed
"""

SS_BEFORE = """\
0      0      127.0.0.1:43222 127.0.0.1:56269
\t bbr wscale:10,10 bytes_sent:611 bytes_acked:612 bytes_received:1000 segs_out:105
0      0      127.0.0.2:56269 127.0.0.1:39830
\t bbr wscale:10,10 bytes_sent:13530080 bytes_acked:13530080 segs_out:256
"""
SS_AFTER = """\
0      0      127.0.0.1:43222 127.0.0.1:56269
\t bbr wscale:10,10 bytes_sent:611 bytes_acked:612 bytes_received:5000 segs_out:105
0      0      127.0.0.2:56269 127.0.0.1:39830
\t bbr wscale:10,10 bytes_sent:13530080 bytes_acked:13530080 bytes_received:300 segs_out:256
0      0      127.0.0.3:56269 127.0.0.1:40000
\t bbr wscale:10,10 bytes_received:700 segs_out:2
"""


class HdrTest(unittest.TestCase):
    def test_decodes_what_stress_reported(self):
        h = lc.hdr_decode(HDR_495)
        self.assertEqual(sum(h.values()), 495)
        self.assertEqual(lc.hdr_percentile_ms([h], 50), 0.822)
        self.assertEqual(lc.hdr_percentile_ms([h], 99), 6.055)

    def test_merges_histograms(self):
        h = lc.hdr_decode(HDR_495)
        self.assertEqual(sum(sum(x.values()) for x in [h, h]), 990)
        self.assertEqual(lc.hdr_percentile_ms([h, h], 99), 6.055)
        self.assertIsNone(lc.hdr_percentile_ms([], 99))

    def test_window_takes_the_overlapping_intervals(self):
        iv = dict(latency_hdr=HDR_495, duration_s=1.0, ops=495, errors=0)
        report = dict(intervals=[dict(iv, start_unix_s=t) for t in (100.0, 101.0, 102.0, 103.0)])
        w = lc.window_latency(report, 101.5, 102.5)
        self.assertEqual((w["intervals"], w["ops"], w["p99_ms"]), (2, 990, 6.055))
        self.assertIsNone(lc.window_latency(report, 200, 201)["p99_ms"])


class WireMeterTest(unittest.TestCase):
    def test_sums_growth_per_socket_new_sockets_from_zero(self):
        outs = iter([SS_BEFORE, SS_AFTER, SS_AFTER])
        with mock.patch.object(lc.subprocess, "run",
                               side_effect=lambda *a, **k: subprocess.CompletedProcess(a, 0, next(outs), "")):
            meter = lc.WireMeter(56269, every=60)
            meter.start()
            self.assertEqual(meter.stop(), 4000 + 300 + 700)


class CassandraLogTest(unittest.TestCase):
    def test_stream_bytes_and_time(self):
        got, secs = lc.CassandraSystem.stream_stats(CASS_LOG, "receiving")
        self.assertEqual(got, int(1.037 * 2**30) + int(512.5 * 2**20))
        self.assertAlmostEqual(secs, 20.0)
        self.assertEqual(lc.CassandraSystem.stream_stats(CASS_LOG, "sending")[0], 10240)

    def test_sizes(self):
        self.assertEqual(lc.cass_bytes("Load : 1.05 GiB"), int(1.05 * 2**30))
        self.assertEqual(lc.cass_bytes("512B"), 512)
        self.assertEqual(lc.cass_bytes("nothing"), 0)


def fake_result(system, label, note=None):
    phase = dict(node=4, bytes=870e6, stream_s=5.0, mb_s=174.0, mb_s_whole=80.0, seconds=11.0, wire_bytes=871e6)
    res = dict(system=system, label=label, version="v", dd=dict(write_mb_s=2000.0, read_mb_s=1300.0),
               load=dict(rows=1000, load_bytes=[1.1e9] * 3, seconds=20.0), baseline=dict(p99_ms=2.0),
               repair=dict(true_bytes=10e6, repair=dict(time_s=40.0, partitions_differing=10, bytes_repaired=12e6,
                                                        wire_bytes=16e6, reported_wire_bytes=16e6, wire_vs_true=1.6)))
    res["bootstrap"] = dict(phase, time_to_normal_s=11.0)
    res["bootstrap+load"] = dict(phase, time_to_normal_s=12.0, client=dict(p99_ms=3.0, lead_p99_ms=2.5, errors=0))
    res["decommission"] = dict(phase, time_s=10.0)
    if note:
        res["note"] = note
    return res


class RenderTest(unittest.TestCase):
    def test_tables_goals_and_side_by_side(self):
        md = lc.render([fake_result("shoal", "Shoal"), fake_result("cassandra", "Cassandra"),
                        fake_result("shoal", "Shoal", note="on Cassandra's data set")], "bench/lifecycle")
        self.assertIn("| Shoal | bootstrap | 870 | 11.0 | 5.0 | 174 | 80 | 0.09 |", md)
        self.assertIn("client p99 3.00 ms vs 2.00 ms in the baseline = 1.50x (goal <= 2x: met", md)
        self.assertIn("repair: 1.60x the true difference on the wire (goal <= 1.5x: NOT met)", md)
        self.assertIn("Side by side on the same data set (1,000 rows", md)
        self.assertEqual(md.count("Goals ("), 1)  # the same-size run is for the side-by-side only

    def test_cycles_table_and_medians(self):
        res = dict(system="shoal", label="Shoal", version="v", dd=dict(write_mb_s=2000.0), baseline=dict(p99_ms=2.0),
                   load=dict(rows=10, load_bytes=[1e9] * 3, seconds=5.0), cycles=[])
        for during in (30.0, 10.0, 20.0):
            op = dict(bytes=450e6, mb_s=100.0, seconds=9.0, time_to_normal_s=9.0,
                      client=dict(p99_ms=during, lead_p99_ms=2.5), cpu=dict(kinds=[["node1:bulk", 1.25]]))
            res["cycles"].append({"bootstrap+load": op, "decommission+load": dict(op, time_s=8.0)})
        md = lc.render([res], "bench/lifecycle --cycles 3")
        self.assertIn("| 1 | bootstrap+load | 9.0 | 450 | 100 | 2.50 | 30.00 | 12.00x | 15.00x | node1:bulk 1.2 |", md)
        self.assertIn("bootstrap+load: median client p99 during it 20.00 ms over 3 cycles (10.00x the baseline's "
                      "2.00 ms; range 10.00-30.00 ms)", md)
        self.assertNotIn("| system | operation |", md, "no empty phase tables")
        self.assertEqual(lc.parse(["--cycles", "2", "--cpu-trace"]).cycles, 2)


class CommandLineTest(unittest.TestCase):
    def test_smoke_defaults(self):
        a = lc.parse(["--smoke"])
        self.assertEqual((a.gb_per_node, a.dd_mib, a.baseline_s, a.system), (0.05, 256, 10, "both"))
        a = lc.parse([])
        self.assertEqual((a.gb_per_node, a.cassandra_gb_per_node, a.dd_mib, a.baseline_s), (5.0, 1.0, 2048, 20))
        self.assertEqual(lc.parse(["--smoke", "--gb-per-node", "0.2"]).gb_per_node, 0.2)

    def test_cassandra_missing_is_skipped(self):
        with tempfile.TemporaryDirectory() as d, mock.patch.object(lc, "cassandra_installed",
                                                                   return_value=(False, "5.0.9")):
            err = io.StringIO()
            with redirect_stderr(err), redirect_stdout(io.StringIO()), self.assertRaises(SystemExit) as e:
                lc.main(["--system", "cassandra", "--dir", os.path.join(d, "w")])
            self.assertEqual(e.exception.code, 0)
            self.assertIn("skipping Cassandra", err.getvalue())
            self.assertFalse(os.path.exists(os.path.join(d, "w")))


if __name__ == "__main__":
    unittest.main()
