"""Settled cost and read-back (issue 24): after a write phase, each server is flushed and waited on until it
owes no background work and its CPU is idle, so the CPU it spends on flushes and compactions after the
client stopped counts too; then `shoal stress verify` reads back what the phase wrote.

- `settle`: flush, then poll the server's compaction status until nothing is pending or running, then until
  its processes' utime+stime grow by less than `IDLE_SHARE` of a core over `IDLE_WINDOW_S` seconds, or hold
  steady (within `STEADY_SHARE` of a core over two windows) below `BACKGROUND_SHARE` of a core: a server's
  own idle background (Cassandra's JVM idles at 3-7% of a core here: GC, gossip, metrics), which would
  otherwise never count as settled (and the status is still idle); bounded by a timeout (the result says
  when it ran out). That background, over the settle, counts in the settled figure. Its clock, sleep, CPU reader
  and status reader are parameters, so the logic is tested without a server.
- Status readers: Cassandra's `nodetool compactionstats` text (`pending_from_nodetool`: 5.0's one aligned table,
  `pending tasks  N`, or 4.x's `pending tasks: N`, and the active compactions: the rows under its `id  compaction
  type  keyspace  table ...` header up to `active compaction remaining time`) and Shoal's `shoal tool
  compactionstats --json` (`pending_from_shoal`).
- `verify_counts`: missing and wrong rows from a `shoal stress verify --json` report's summary.
- `settled_cpu_us`: the settled CPU per operation: the server's CPU inside the stress window plus the tail
  (from the end of the window until settled), divided by the window's operations.

Invariants: `settle` never waits longer than its timeout (plus one poll); a status reader that fails counts
as not idle (a server that cannot say is not assumed settled)."""

import json
import re
import time

IDLE_SHARE = 0.02   # of one core: the server counts as idle below this
IDLE_WINDOW_S = 2.0  # over this many seconds
BACKGROUND_SHARE = 0.10  # a steady rate below this (of one core) with nothing pending is the idle background
STEADY_SHARE = 0.02  # two windows' rates within this (of one core) are steady
POLL_S = 1.0         # between status polls (each Cassandra poll starts a nodetool JVM: not too often)


def pending_from_nodetool(text):
    """(pending tasks, active compactions) from `nodetool compactionstats` output; ValueError when the text
    has no `pending tasks` line (nodetool failed)."""
    m = re.search(r"^\s*pending tasks:?\s+(\d+)\s*$", text, re.M)
    if not m:
        raise ValueError(f"no 'pending tasks' in nodetool compactionstats output: {text.strip()[:200]!r}")
    active = 0
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^\s*id\s+compaction type\s+keyspace\s+table\b", line):
            for row in lines[i + 1:]:
                if not row.strip() or row.strip().lower().startswith("active compaction remaining time"):
                    break
                active += 1
            break
    return int(m.group(1)), active


def pending_from_shoal(text):
    """(pending tasks, running compactions + flushes + a major compaction) from `shoal tool compactionstats
    --json`; ValueError when it is not that JSON."""
    try:
        v = json.loads(text)
        pending = int(v["pending_tasks"])
        running = int(v.get("running_compactions", 0)) + int(v.get("running_flushes", 0)) + \
            (1 if v.get("major_compaction") else 0)
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"not a compactionstats answer ({e}): {text.strip()[:200]!r}")
    return pending, running


def settle(flush, status, cpu_s, timeout_s, clock=time.monotonic, sleep=time.sleep, poll_s=POLL_S,
           idle_share=IDLE_SHARE, window_s=IDLE_WINDOW_S):
    """Flushes (`flush()`), then waits until `status()` = (pending, running) is (0, 0) and the server's CPU
    (`cpu_s()`, seconds) grows by less than idle_share * window_s over window_s, or by a steady rate below
    BACKGROUND_SHARE over two windows in a row. Returns a dict: seconds (from the flush to settled),
    timed_out, polls, last (the last status, or the error text)."""
    t0 = clock()
    flush()
    polls, last = 0, None

    def idle_now():
        nonlocal polls, last
        polls += 1
        try:
            last = status()
        except Exception as e:  # noqa: BLE001 - a failed status read is "not idle", reported in `last`
            last = str(e)
            return False
        return last == (0, 0)

    while not idle_now():
        if clock() - t0 > timeout_s:
            return dict(seconds=clock() - t0, timed_out=True, polls=polls, last=last)
        sleep(poll_s)
    previous = None  # the last window's rate, in cores
    while True:
        c0 = cpu_s()
        sleep(window_s)
        rate = (cpu_s() - c0) / window_s
        steady = previous is not None and rate < BACKGROUND_SHARE and abs(rate - previous) <= STEADY_SHARE
        previous = rate
        if (rate < idle_share or steady) and idle_now():
            return dict(seconds=clock() - t0, timed_out=False, polls=polls, last=last)
        if clock() - t0 > timeout_s:
            return dict(seconds=clock() - t0, timed_out=True, polls=polls, last=last)


def verify_counts(report):
    """(keys checked, missing, wrong, errors) of a `shoal stress verify --json` report (a dict)."""
    s = report["summary"]
    return s["ops"] + s["errors"], s.get("missing", 0), s.get("mismatched", 0), s["errors"]


def settled_cpu_us(window_cpu_s, tail_cpu_s, ops):
    """Server CPU-us per operation including the settle tail; None without operations."""
    if not ops or window_cpu_s is None or tail_cpu_s is None:
        return None
    return (window_cpu_s + tail_cpu_s) * 1e6 / ops


# The long runs (--long): write phases of at least LONG_FACTOR times Shoal's memtable budget (memtable_space,
# 1 GiB by default), so flushes and compactions reach their steady state. cassandra-stress's standard1 row
# as `shoal stress` writes it by default: a 10-byte key and 5 columns of 34 bytes.
LONG_FACTOR = 10
MEMTABLE_SPACE = 1 << 30
ROW_BYTES = 10 + 5 * 34


def long_write_n(memtable_space=MEMTABLE_SPACE, row_bytes=ROW_BYTES, factor=LONG_FACTOR):
    """Rows for a write phase of at least `factor` memtable budgets of raw row bytes (rounded up to 100,000)."""
    rows = -(-factor * memtable_space // row_bytes)
    return -(-rows // 100_000) * 100_000
