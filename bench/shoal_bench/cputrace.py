"""Where a machine's CPU goes while an operation runs: per thread kind of the processes under test, of the
kernel's own threads, and the whole machine's split (user, nice, system, irq, softirq, iowait, steal).

A `CpuTrace` samples /proc every `every` seconds on a thread of its own: `/proc/stat`'s first line, and
`/proc/PID/task/TID/stat` (utime + stime) of each process it is given and of every kernel thread (the
children of kthreadd, pid 2: kworkers, ksoftirqd, jbd2, ...). Threads are grouped by kind: their name
with a trailing number or `/N:M`-style suffix removed (`tokio-runtime-w`, `rocksdb:low`, `bulk`,
`kworker/u8`), prefixed by the process label (`node2:bulk`) or `kernel:`. Linux only; where /proc cannot
be read the trace is empty, never an error.

    t = CpuTrace(lambda: {"node1": 1234, "client": 5678}); t.start(); ...; seconds = t.stop()

`stop()` returns the samples: a list of (unix time, {kind: CPU seconds since the previous sample},
{machine field: seconds since the previous sample}). `summarize(samples, t0, t1)` sums those whose end
lies in [t0, t1] and ranks the kinds.
"""

import os
import re
import threading
import time

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def thread_kind(comm):
    """A thread name without its instance number: 'tokio-runtime-w' stays, 'bulk-1' -> 'bulk',
    'kworker/u8:3-events' -> 'kworker/u8', 'ksoftirqd/1' -> 'ksoftirqd', 'rocksdb:low0' -> 'rocksdb:low'."""
    if comm.startswith("kworker/"):
        return re.sub(r":.*$", "", comm)
    name = re.sub(r"/\d+$", "", comm)
    return re.sub(r"[-_]?\d+$", "", name) or comm


def parse_task_stat(text):
    """(comm, utime + stime in ticks, ppid) from a /proc/.../stat line; comm may hold spaces and parens."""
    lp, rp = text.index("("), text.rindex(")")
    comm = text[lp + 1:rp]
    rest = text[rp + 2:].split()
    # rest[0] is the state (field 3); utime and stime are fields 14 and 15, ppid field 4.
    return comm, int(rest[11]) + int(rest[12]), int(rest[1])


def machine_ticks(text):
    """{field: ticks} from /proc/stat's aggregate `cpu` line."""
    first = text.splitlines()[0].split()
    return {k: int(v) for k, v in zip(STAT_FIELDS, first[1:1 + len(STAT_FIELDS)])}


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


class CpuTrace(threading.Thread):
    def __init__(self, processes, every=0.5, proc="/proc"):
        """processes: a callable returning {label: pid} (called at every sample: nodes come and go)."""
        super().__init__(daemon=True)
        self.processes, self.every, self.proc = processes, every, proc
        self.halt = threading.Event()
        self.samples = []
        self.last_threads, self.last_machine = {}, None

    @staticmethod
    def task(path):
        """parse_task_stat of the stat file at `path`; None when it is gone or cannot be read."""
        st = read(path)
        try:
            return parse_task_stat(st) if st else None
        except (ValueError, IndexError):
            return None

    def kernel_pids(self):
        return [int(d) for d in os.listdir(self.proc)
                if d.isdigit() and (self.task(f"{self.proc}/{d}/stat") or (None, 0, 0))[2] == 2]

    def snapshot(self, kernel):
        threads = {}
        try:
            procs = dict(self.processes())
        except Exception:  # a probe of the cluster's status failed: sample the kernel only
            procs = {}
        for label, pid in procs.items():
            tasks = f"{self.proc}/{pid}/task"
            try:
                tids = os.listdir(tasks)
            except OSError:
                continue
            for tid in tids:
                t = self.task(f"{tasks}/{tid}/stat")
                if t:
                    threads[(pid, int(tid))] = (f"{label}:{thread_kind(t[0])}", t[1])
        for pid in kernel:
            t = self.task(f"{self.proc}/{pid}/stat")
            if t:
                threads[(pid, pid)] = (f"kernel:{thread_kind(t[0])}", t[1])
        stat = read(f"{self.proc}/stat")
        return threads, (machine_ticks(stat) if stat else None)

    def sample(self, kernel):
        threads, mach = self.snapshot(kernel)
        kinds = {}
        for key, (kind, ticks) in threads.items():
            before = self.last_threads.get(key)
            if before is not None and ticks >= before[1]:
                kinds[kind] = kinds.get(kind, 0.0) + (ticks - before[1]) / TICK
        split = {}
        if mach and self.last_machine:
            split = {k: (mach[k] - self.last_machine.get(k, mach[k])) / TICK for k in mach}
        if self.last_machine is not None:
            self.samples.append((time.time(), kinds, split))
        self.last_threads, self.last_machine = threads, mach

    def run(self):
        kernel, refreshed = [], 0.0
        while True:
            if time.time() - refreshed > 5:  # kworkers come and go
                kernel, refreshed = self.kernel_pids(), time.time()
            try:
                self.sample(kernel)
            except OSError:
                pass
            if self.halt.wait(self.every):
                return

    def stop(self):
        self.halt.set()
        self.join(10)
        return self.samples


def summarize(samples, t0, t1, top=12):
    """CPU seconds by kind and the machine's split over the samples ending in [t0, t1]: a dict with
    `seconds` (the window's length as sampled), `kinds` (the `top` largest, [kind, seconds]) and `machine`."""
    kinds, split, first, last = {}, {}, None, None
    for t, k, m in samples:
        if t0 <= t <= t1:
            first = t if first is None else first
            last = t
            for name, s in k.items():
                kinds[name] = kinds.get(name, 0.0) + s
            for name, s in m.items():
                split[name] = split.get(name, 0.0) + s
    ranked = sorted(((k, v) for k, v in kinds.items() if v > 0), key=lambda kv: -kv[1])[:top]
    return dict(seconds=(last - first) if first is not None else 0.0,
                kinds=[[k, round(v, 3)] for k, v in ranked],
                machine={k: round(v, 3) for k, v in split.items()})
