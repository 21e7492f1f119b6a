"""Unit tests of bench/scaling's verdict, table and arguments (no servers)."""

import contextlib
import io
import unittest

from .scaling import parse_args, rate_for, rf_for, table, verdict


def row(n, cpu, ops=20000):
    return dict(nodes=n, rf=rf_for(n), rate=20000, ops_s=ops, p50_ms=0.5, p99_ms=2.0, server_cpu_us_per_write=cpu,
                server_cpu_us_per_replica_write=cpu / rf_for(n))


class ScalingTest(unittest.TestCase):
    def test_every_size_from_3_to_8_must_be_within_15_percent_of_3_nodes(self):
        rows = [row(1, 5.0), row(3, 30.0), row(4, 31.0), row(8, 34.4)]
        base, met = verdict(rows)
        self.assertEqual(base, 30.0)
        self.assertTrue(met)
        self.assertAlmostEqual(rows[-1]["vs_3_nodes"], 34.4 / 30)
        self.assertFalse(verdict([row(3, 30.0), row(6, 35.0)])[1])  # +16.7%
        self.assertFalse(verdict([row(3, 30.0), row(8, 25.0)])[1])  # -16.7%

    def test_no_3_node_run_means_no_verdict(self):
        rows = [row(1, 5.0), row(2, 12.0)]
        self.assertEqual(verdict(rows), (None, False))
        self.assertIn("| 1 | 1 | 20,000 | 20,000 |", table(rows))

    def test_a_run_short_of_the_rate_is_marked(self):
        self.assertIn("15,000 (short of the rate)", table([row(3, 30.0, ops=15000)]))

    def test_the_rate_grows_with_the_nodes_unless_one_total_is_given(self):
        self.assertEqual(rate_for(parse_args(["--rate-per-node", "5000"]), 8), 40000)
        self.assertEqual(rate_for(parse_args(["--rate", "30000"]), 8), 30000)

    def test_sizes_are_parsed_and_checked(self):
        self.assertEqual(parse_args(["--nodes", "1,3,8"]).sizes, [1, 3, 8])
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
            parse_args(["--nodes", "0,3"])


if __name__ == "__main__":
    unittest.main()
