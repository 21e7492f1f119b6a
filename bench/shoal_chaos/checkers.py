"""The checkers: pure functions over a recorded history and what the cluster returned after healing.

A history is a list of operations (dicts), as `client.py` records them:
  {"kind": "write"|"read", "key": int, "value": int (writes), "start": float, "end": float,
   "result": "ok"|"fail"|"unknown", "seen": [int, ...] (reads that returned), "error": str}
`start` is taken just before the request is sent and `end` just after its answer (one monotonic clock,
one process). Each write adds a value never written before to its key's partition (the workload's rows
are (key, value) pairs), so "was this write applied" is a question about one row.

Result meanings: "ok" acknowledged at QUORUM; "fail" definitely not applied (Unavailable: nothing was
sent) or a read that errored; "unknown" a timeout or lost connection: the write may or may not be
applied, and no checker may demand either.

Each checker returns a dict with "ok" (bool) and counts; `overall` folds them into a verdict.
"""

from collections import defaultdict

KINDS = ("write", "read")
RESULTS = ("ok", "fail", "unknown")
SAMPLE = 10


def counts(history):
    """ok/fail/unknown per operation kind."""
    out = {k: {r: 0 for r in RESULTS} for k in KINDS}
    for op in history:
        out[op["kind"]][op["result"]] += 1
    return out


def error_counts(history, top=8):
    """The most frequent error messages (first line, cut to 120 characters), per kind."""
    tally = defaultdict(int)
    for op in history:
        if op.get("error"):
            tally[(op["kind"], op["error"].splitlines()[0][:120])] += 1
    ranked = sorted(tally.items(), key=lambda kv: -kv[1])[:top]
    return [{"kind": k, "error": e, "count": n} for (k, e), n in ranked]


def check_lost(history, final_rows):
    """(a) No acknowledged write lost: every write acknowledged at QUORUM is among `final_rows` (the
    (key, value) pairs read back at ALL after healing and repair). Also no phantom: every row read back
    was written by some attempted write (ok, fail or unknown)."""
    final_rows = set(map(tuple, final_rows))
    attempted = {(op["key"], op["value"]) for op in history if op["kind"] == "write"}
    acked = [(op["key"], op["value"]) for op in history if op["kind"] == "write" and op["result"] == "ok"]
    lost = [row for row in acked if row not in final_rows]
    unknown = [(op["key"], op["value"]) for op in history if op["kind"] == "write" and op["result"] == "unknown"]
    failed = [(op["key"], op["value"]) for op in history if op["kind"] == "write" and op["result"] == "fail"]
    phantoms = sorted(row for row in final_rows if row not in attempted)
    return {
        "ok": not lost and not phantoms,
        "acknowledged": len(acked),
        "lost": len(lost),
        "lost_sample": [list(r) for r in lost[:SAMPLE]],
        "unknown_present": sum(1 for r in unknown if r in final_rows),
        "unknown_absent": sum(1 for r in unknown if r not in final_rows),
        # Unavailable writes are never sent; one read back would mean an answer lied.
        "failed_present": sum(1 for r in failed if r in final_rows),
        "phantoms": len(phantoms),
        "phantom_sample": [list(r) for r in phantoms[:SAMPLE]],
        "rows_read_back": len(final_rows),
    }


def check_quorum_reads(history):
    """(c) A QUORUM read that began after a QUORUM write of its key was acknowledged sees that write.

    For each key the acknowledged writes are sorted by completion time; a successful read must contain
    every one that completed strictly before the read started."""
    writes = defaultdict(list)
    for op in history:
        if op["kind"] == "write" and op["result"] == "ok":
            writes[op["key"]].append((op["end"], op["value"]))
    for key in writes:
        writes[key].sort()
    checked, stale, sample = 0, 0, []
    for op in history:
        if op["kind"] != "read" or op["result"] != "ok":
            continue
        checked += 1
        seen = set(op.get("seen") or ())
        missing = [v for end, v in writes.get(op["key"], ()) if end < op["start"] and v not in seen]
        if missing:
            stale += 1
            if len(sample) < SAMPLE:
                sample.append({"key": op["key"], "read_start": op["start"], "missing": missing[:5],
                               "missing_count": len(missing)})
    return {"ok": stale == 0, "reads_checked": checked, "stale_reads": stale, "stale_sample": sample}


def check_convergence(rows_by_node, differing_by_node):
    """(b) Replicas converge after repair: each node, read alone at ONE, returns the same rows, and a full
    `repair --preview` from each node finds no partition whose replicas' digests differ.

    `rows_by_node`: node name -> set of (key, value) or None when the read failed;
    `differing_by_node`: node name -> partitions_differing (int) or None when the preview failed."""
    sets = {n: (None if rows is None else set(map(tuple, rows))) for n, rows in rows_by_node.items()}
    failed_reads = sorted(n for n, s in sets.items() if s is None)
    present = [s for s in sets.values() if s is not None]
    union = set().union(*present) if present else set()
    missing = {n: len(union - s) for n, s in sets.items() if s is not None and union - s}
    previews_failed = sorted(n for n, d in differing_by_node.items() if d is None)
    differing = {n: d for n, d in differing_by_node.items() if d}
    return {
        "ok": not failed_reads and not missing and not previews_failed and not differing,
        "rows_per_node": {n: (None if s is None else len(s)) for n, s in sets.items()},
        "rows_missing_per_node": missing,
        "reads_failed": failed_reads,
        "partitions_differing": differing_by_node,
        "previews_failed": previews_failed,
    }


def check_crashes(nodes):
    """(d) No node crashed except those the harness killed. `nodes`: node name -> {"unexpected_exits":
    [exit statuses of processes that ended without the harness killing them], "panics": [log lines with
    "panicked"]}."""
    bad = {n: info for n, info in nodes.items() if info["unexpected_exits"] or info["panics"]}
    return {"ok": not bad, "nodes": nodes}


def check_rss(max_rss_kb, bound_kb):
    """(e) Every node's resident set stayed under the bound. `max_rss_kb`: node name -> the largest
    VmRSS sampled (KiB)."""
    over = {n: kb for n, kb in max_rss_kb.items() if kb > bound_kb}
    return {"ok": not over and bool(max_rss_kb), "bound_kb": bound_kb, "max_rss_kb": max_rss_kb, "over": over}


CHECKERS = ("no_lost_writes", "convergence", "quorum_reads", "no_crashes", "rss")


def overall(checks):
    """The verdict: PASS when every checker ran and passed."""
    failed = [name for name in CHECKERS if not checks.get(name, {}).get("ok", False)]
    return ("PASS" if not failed else "FAIL"), failed
