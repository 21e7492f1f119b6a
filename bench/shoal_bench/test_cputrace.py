"""Tests of bench/shoal_bench/cputrace.py: its /proc readers, thread kinds, summaries, and a real trace of
this process burning CPU.

    python3 -m unittest discover -s bench/shoal_bench -t bench -p "test_*.py"
"""

import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from shoal_bench import cputrace as ct  # noqa: E402


class Readers(unittest.TestCase):
    def test_a_task_stat_line_gives_its_name_cpu_ticks_and_parent(self):
        line = "4242 (tokio-runtime-w) S 1 4242 4242 0 -1 4194368 12 0 0 0 150 25 0 0 20 0 9 0 100 0 0\n"
        self.assertEqual(ct.parse_task_stat(line), ("tokio-runtime-w", 175, 1))
        odd = "7 (a (b) c) R 2 0 0 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 5 0 0"
        self.assertEqual(ct.parse_task_stat(odd), ("a (b) c", 7, 2), "names with spaces and parens")

    def test_thread_kinds_drop_instance_numbers(self):
        cases = {"tokio-runtime-w": "tokio-runtime-w", "bulk-1": "bulk", "rocksdb:low0": "rocksdb:low",
                 "kworker/u8:3-events_unbound": "kworker/u8", "ksoftirqd/1": "ksoftirqd", "jbd2/vda-8": "jbd2/vda",
                 "stream-receive": "stream-receive", "7": "7"}
        for comm, kind in cases.items():
            self.assertEqual(ct.thread_kind(comm), kind, comm)

    def test_the_machine_line_is_split_into_its_fields(self):
        text = "cpu  100 5 30 900 7 1 2 40 0 0\ncpu0 50 2 15 450 3 0 1 20 0 0\n"
        self.assertEqual(ct.machine_ticks(text), dict(user=100, nice=5, system=30, idle=900, iowait=7, irq=1,
                                                      softirq=2, steal=40))

    def test_a_summary_sums_the_window_and_ranks_kinds(self):
        samples = [(10.0, {"a": 1.0}, {"user": 1.0}), (10.5, {"a": 0.5, "b": 2.0, "z": 0.0}, {"user": 1.0}),
                   (11.0, {"b": 1.0}, {"user": 0.5, "softirq": 0.25}), (20.0, {"a": 9.0}, {"user": 9.0})]
        s = ct.summarize(samples, 10.2, 11.5)
        self.assertEqual(s["kinds"], [["b", 3.0], ["a", 0.5]], "zero kinds left out, the window only")
        self.assertEqual(s["machine"], dict(user=1.5, softirq=0.25))
        self.assertAlmostEqual(s["seconds"], 0.5)
        self.assertEqual(ct.summarize(samples, 30, 40), dict(seconds=0.0, kinds=[], machine={}))


class Live(unittest.TestCase):
    def test_a_trace_of_a_busy_process_sees_its_cpu(self):
        # A child burns CPU (a process of its own: this one's GIL would starve the sampler).
        child = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 1.0\nwhile time.time() < end: pass"])
        trace = ct.CpuTrace(lambda: {"burner": child.pid}, every=0.1)
        trace.start()
        child.wait(30)
        samples = trace.stop()
        s = ct.summarize(samples, 0, time.time() + 1)
        burned = sum(v for k, v in s["kinds"] if k.startswith("burner:"))
        self.assertGreater(burned, 0.5, s)
        self.assertGreater(s["machine"].get("user", 0) + s["machine"].get("nice", 0), 0.5, s)

    def test_a_proc_that_cannot_be_read_gives_an_empty_trace(self):
        with tempfile.TemporaryDirectory() as d:
            trace = ct.CpuTrace(lambda: {"gone": 99999999}, every=0.05, proc=d)
            trace.start()
            time.sleep(0.2)
            self.assertEqual(ct.summarize(trace.stop(), 0, time.time() + 1)["kinds"], [])


if __name__ == "__main__":
    unittest.main()
