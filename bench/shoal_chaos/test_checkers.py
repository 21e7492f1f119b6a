"""The checkers against known-good and known-bad histories (python3 -m unittest, from bench/)."""

import unittest

from shoal_chaos import checkers


def w(key, value, start, end, result="ok"):
    return {"kind": "write", "key": key, "value": value, "start": start, "end": end, "result": result}


def r(key, seen, start, end, result="ok"):
    op = {"kind": "read", "key": key, "start": start, "end": end, "result": result}
    if result == "ok":
        op["seen"] = list(seen)
    return op


class LostWrites(unittest.TestCase):
    def test_every_acknowledged_write_read_back_passes(self):
        h = [w(1, 10, 0, 1), w(1, 11, 0.5, 2), w(2, 20, 1, 3, "unknown"), w(2, 21, 1, 3, "fail")]
        out = checkers.check_lost(h, [(1, 10), (1, 11)])
        self.assertTrue(out["ok"], out)
        self.assertEqual((out["acknowledged"], out["lost"], out["unknown_absent"]), (2, 0, 1))

    def test_an_acknowledged_write_missing_after_healing_fails(self):
        h = [w(1, 10, 0, 1), w(1, 11, 0.5, 2), w(3, 30, 2, 2.5)]
        out = checkers.check_lost(h, [(1, 10), (3, 30)])
        self.assertFalse(out["ok"])
        self.assertEqual(out["lost"], 1)
        self.assertEqual(out["lost_sample"], [[1, 11]])

    def test_unknown_writes_may_be_present_or_absent(self):
        h = [w(1, 10, 0, 1, "unknown"), w(1, 11, 0, 1, "unknown")]
        out = checkers.check_lost(h, [(1, 10)])
        self.assertTrue(out["ok"])
        self.assertEqual((out["unknown_present"], out["unknown_absent"]), (1, 1))

    def test_a_row_no_write_attempted_is_a_phantom(self):
        out = checkers.check_lost([w(1, 10, 0, 1)], [(1, 10), (1, 99)])
        self.assertFalse(out["ok"])
        self.assertEqual(out["phantoms"], 1)


class QuorumReads(unittest.TestCase):
    def test_a_read_after_an_acknowledged_write_that_misses_it_is_stale(self):
        h = [w(1, 10, 0, 1), r(1, [], 1.5, 2)]
        out = checkers.check_quorum_reads(h)
        self.assertFalse(out["ok"])
        self.assertEqual(out["stale_reads"], 1)
        self.assertEqual(out["stale_sample"][0]["missing"], [10])

    def test_concurrent_reads_may_miss_a_write(self):
        # The read began before the write was acknowledged: either answer is linearizable.
        h = [w(1, 10, 0, 1), r(1, [], 0.5, 2), r(1, [10], 1.1, 2)]
        self.assertTrue(checkers.check_quorum_reads(h)["ok"])

    def test_unacknowledged_writes_and_failed_reads_are_not_demanded(self):
        h = [w(1, 10, 0, 1, "unknown"), w(1, 11, 0, 1, "fail"), r(1, [], 2, 3), r(1, [], 2, 3, "fail"),
             w(2, 20, 0, 1), r(2, [], 2, 3, "unknown")]
        out = checkers.check_quorum_reads(h)
        self.assertTrue(out["ok"], out)
        self.assertEqual(out["reads_checked"], 1)

    def test_other_keys_do_not_count(self):
        h = [w(1, 10, 0, 1), r(2, [], 2, 3)]
        self.assertTrue(checkers.check_quorum_reads(h)["ok"])


class Convergence(unittest.TestCase):
    def test_equal_rows_and_no_differing_partitions_pass(self):
        rows = [(1, 10), (2, 20)]
        out = checkers.check_convergence({"n1": rows, "n2": list(rows), "n3": rows}, {"n1": 0, "n2": 0, "n3": 0})
        self.assertTrue(out["ok"], out)

    def test_a_node_missing_a_row_fails(self):
        out = checkers.check_convergence({"n1": [(1, 10), (2, 20)], "n2": [(1, 10)]}, {"n1": 0, "n2": 0})
        self.assertFalse(out["ok"])
        self.assertEqual(out["rows_missing_per_node"], {"n2": 1})

    def test_differing_digests_or_a_failed_read_fail(self):
        self.assertFalse(checkers.check_convergence({"n1": [], "n2": []}, {"n1": 0, "n2": 3})["ok"])
        self.assertFalse(checkers.check_convergence({"n1": [], "n2": None}, {"n1": 0, "n2": 0})["ok"])
        self.assertFalse(checkers.check_convergence({"n1": [], "n2": []}, {"n1": 0, "n2": None})["ok"])


class CrashesAndMemory(unittest.TestCase):
    def test_an_unexpected_exit_or_a_panic_fails(self):
        clean = {"unexpected_exits": [], "panics": [], "kills": 3}
        self.assertTrue(checkers.check_crashes({"n1": clean})["ok"])
        self.assertFalse(checkers.check_crashes({"n1": clean, "n2": {**clean, "unexpected_exits": [101]}})["ok"])
        panic = "thread 'tokio-runtime-worker' panicked at crates/storage/src/engine.rs:1:1"
        self.assertFalse(checkers.check_crashes({"n1": {**clean, "panics": [panic]}})["ok"])

    def test_rss_over_the_bound_fails(self):
        self.assertTrue(checkers.check_rss({"n1": 100, "n2": 200}, 1000)["ok"])
        self.assertFalse(checkers.check_rss({"n1": 100, "n2": 2000}, 1000)["ok"])
        # No sample at all is not a pass.
        self.assertFalse(checkers.check_rss({}, 1000)["ok"])


class Verdict(unittest.TestCase):
    def test_counts_and_overall(self):
        h = [w(1, 10, 0, 1), w(1, 11, 0, 1, "unknown"), r(1, [10], 2, 3), r(1, [], 2, 3, "fail")]
        self.assertEqual(checkers.counts(h), {"write": {"ok": 1, "fail": 0, "unknown": 1},
                                              "read": {"ok": 1, "fail": 1, "unknown": 0}})
        good = {name: {"ok": True} for name in checkers.CHECKERS}
        self.assertEqual(checkers.overall(good), ("PASS", []))
        self.assertEqual(checkers.overall({**good, "rss": {"ok": False}}), ("FAIL", ["rss"]))
        # A checker that did not run fails the verdict.
        missing = dict(good)
        del missing["convergence"]
        self.assertEqual(checkers.overall(missing), ("FAIL", ["convergence"]))


if __name__ == "__main__":
    unittest.main()
