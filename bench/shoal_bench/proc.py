"""Readers of /proc (Linux): the whole machine's busy and stolen CPU ticks, direct reclaim, the CPU
and memory probes (yardsticks no server code touches), a server's peak and current RSS, its CPU
seconds in all and per thread name, data on disk, the machine's description, and the `Sampler`
thread that records these every few seconds during a long run."""

import hashlib
import os
import re
import threading
import time

from .util import read_text

CLK_TCK = os.sysconf("SC_CLK_TCK")


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def machine_ticks():
    """The whole machine's (busy, stolen) CPU ticks from /proc/stat, read at one instant. Stolen: time the
    hypervisor ran something else while this VM's CPUs wanted to run (it counts as busy too)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[0] + v[1] + v[2] + v[5] + v[6] + v[7], v[7]  # user nice system irq softirq steal; steal


def machine_busy_ticks():
    return machine_ticks()[0]


def direct_reclaim_pages():
    """Pages scanned by allocating threads themselves (/proc/vmstat `pgscan_direct`): memory so short
    that the server's (or anyone's) allocations and page-cache writes reclaim on their own CPU time."""
    for line in read_text("/proc/vmstat").splitlines():
        if line.startswith("pgscan_direct "):
            return int(line.split()[1])
    return 0


PROBE_BLOCK = bytes(range(256)) * 4096  # 1 MiB: stays in the core's cache, so the probe is pure compute
PROBE_MIB = 16


def cpu_probe():
    """The machine's speed as a yardstick that no server code touches: SHA-256 of the same 16 MiB,
    in MiB per second of this thread's own CPU time (so being preempted does not count; a host whose
    other tenants share our cores' caches and pipelines shows as a slower probe). ~10 ms of one core."""
    h = hashlib.sha256()
    t0 = time.thread_time()
    for _ in range(PROBE_MIB):
        h.update(PROBE_BLOCK)
    dt = time.thread_time() - t0
    return PROBE_MIB / dt if dt > 0 else None


MEM_PROBE_MIB = 128  # well past any last-level cache a VM shows, so each copy goes to memory and back
_mem_probe_bufs = []  # the memory probe's two buffers, allocated on its first call (a cache, not state)


def memory_probe():
    """The machine's memory speed, a yardstick beside `cpu_probe`: one copy of 128 MiB into a buffer
    allocated once (no page faults), in MiB per second of this thread's own CPU time. A host whose other
    tenants load its memory bus and shared caches shows as a slower copy. ~20 ms of one core."""
    if not _mem_probe_bufs:
        _mem_probe_bufs.extend([PROBE_BLOCK * MEM_PROBE_MIB, memoryview(bytearray(MEM_PROBE_MIB << 20))])
        _mem_probe_bufs[1][:] = _mem_probe_bufs[0]  # both buffers' pages are real (no zero page) from here on
    src, dst = _mem_probe_bufs
    t0 = time.thread_time()
    dst[:] = src  # a memoryview's slice assignment is one memcpy
    dt = time.thread_time() - t0
    return MEM_PROBE_MIB / dt if dt > 0 else None


def reset_hwm(pids):
    for pid in pids:
        try:
            with open(f"/proc/{pid}/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass


def hwm_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def proc_cpu_s(pid):
    """utime + stime of a process in seconds (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            v = f.read().rsplit(")", 1)[1].split()
        return (int(v[11]) + int(v[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def thread_cpu_s(pid):
    """utime + stime of a process's threads in seconds, summed per thread name with trailing digits and
    separators dropped, so a pool's threads add up ({} once the process is gone). A thread that has
    exited takes its seconds with it: per-name differences can dip below zero when a pool shrinks."""
    names = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return names
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                text = f.read()
            name = text[text.index("(") + 1:text.rindex(")")].rstrip("0123456789").rstrip("-_:#") or "?"
            v = text.rsplit(")", 1)[1].split()
            names[name] = names.get(name, 0.0) + (int(v[11]) + int(v[12])) / CLK_TCK
        except (OSError, ValueError, IndexError):
            pass  # the thread ended meanwhile
    return names


def rss_kib(pid):
    for line in read_text(f"/proc/{pid}/status").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def dir_bytes(path):
    total = 0
    for root, _, files in os.walk(path or "/nonexistent"):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass  # a file compacted away meanwhile
    return total


def machine():
    cpu = re.search(r"^model name\s*:\s*(.*)$", read_text("/proc/cpuinfo"), re.M)
    mem = re.search(r"^MemTotal:\s*(\d+)", read_text("/proc/meminfo"), re.M)
    return (f"{cpu.group(1) if cpu else 'unknown CPU'}, nproc {os.cpu_count()}, "
            f"MemTotal {int(mem.group(1)) / 1048576:.1f} GiB, Linux {os.uname().release}")


class Sampler(threading.Thread):
    """Every `every` seconds while a long run goes: the server's CPU seconds (in all and per thread
    name) and RSS, its data on disk, the whole machine's busy and stolen CPU seconds (/proc/stat: other
    engineers' jobs included), pages reclaimed directly and the CPU and memory probes' speeds (`cpu_probe`,
    `memory_probe`)."""

    def __init__(self, server, every=5.0):
        super().__init__(daemon=True)
        self.server, self.every, self.samples, self.halt = server, every, [], threading.Event()

    def sample(self):
        pids = self.server.pids
        threads = {}
        for pid in pids:
            for name, sec in thread_cpu_s(pid).items():
                threads[name] = threads.get(name, 0.0) + sec
        busy, steal = machine_ticks()
        self.samples.append(dict(t=time.time(), cpu_s=sum(c or 0 for c in map(proc_cpu_s, pids)), threads=threads,
                                 rss_mib=sum(rss_kib(p) for p in pids) / 1024,
                                 disk_mib=dir_bytes(self.server.data_root) / 2**20,
                                 busy_s=busy / CLK_TCK, steal_s=steal / CLK_TCK,
                                 reclaim_pages=direct_reclaim_pages(), probe_mib_s=cpu_probe(),
                                 mem_probe_mib_s=memory_probe()))

    def run(self):
        self.sample()
        while not self.halt.wait(self.every):
            self.sample()
        self.sample()

    def finish(self):
        self.halt.set()
        self.join(60)
