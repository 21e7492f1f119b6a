"""bench/chaos's command line.

  bench/chaos SCENARIO [--seed N] [--seconds S] [--json PATH] [options]   one scenario on a fresh cluster
  bench/chaos ci [--seconds S] [--json-dir DIR]    every scenario, one after the other, on one fresh cluster
  bench/chaos check                                exits 0 when the harness can run here, else prints why

SCENARIO: partition-majority, partition-bridge, kill-loop, pause, skew, disk-full, flaky, mixed
(power-loss is reserved). Needs root (network namespaces, tmpfs mounts), nft, and $SHOAL_VENV's Python
with the DataStax driver; the server is $SHOAL_BIN (default: the release build of the cargo target dir).
Exit status: 0 when every scenario passed, 1 when one failed, 2 when the harness could not run.
"""

import argparse
import os
import signal
import sys
import tempfile
import time

from . import netns, scenarios
from .cluster import Cluster

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def default_bin():
    if os.environ.get("SHOAL_BIN"):
        return os.environ["SHOAL_BIN"]
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
    return os.path.join(target, "release", "shoal")


def default_python():
    venv = os.environ.get("SHOAL_VENV") or os.path.join(os.path.expanduser("~"), ".cache", "shoal", "venv")
    return os.path.join(venv, "bin", "python")


class Context:
    """One run's namespaces, nodes and child processes; `close()` removes all of them."""

    def __init__(self, opts, log):
        self.prefix = f"chaos{os.getpid()}"
        self.run_dir = tempfile.mkdtemp(prefix=f"shoal-{self.prefix}-")
        self.net = netns.Network(self.prefix, opts.nodes)
        config = {}
        for item in opts.config:
            key, _, value = item.partition("=")
            config[key] = parse_value(value)
        if opts.commitlog_sync:
            config["commitlog_sync"] = opts.commitlog_sync
        self.cluster = Cluster(self.net, self.run_dir, opts.shoal_bin, nodes=opts.nodes, disk_mb=opts.disk_mb,
                               config=config, log=log)
        self.children = []
        self.log = log

    def start(self):
        t = time.monotonic()
        self.net.create()
        self.cluster.start_all(timeout=180)
        self.log(f"chaos: {len(self.cluster.nodes)} nodes up in {time.monotonic() - t:.1f}s "
                 f"(namespaces {self.prefix}-*, run dir {self.run_dir})")

    def close(self, keep):
        errors = []
        for child in self.children:
            if child.poll() is None:
                child.kill()
                child.wait()
        errors += self.cluster.teardown()
        errors += self.net.teardown()
        if keep:
            self.log(f"chaos: logs and histories kept in {self.run_dir}")
        else:
            import shutil

            shutil.rmtree(self.run_dir, ignore_errors=True)
        for e in errors:
            self.log(f"chaos: teardown: {e}")


def parse_value(text):
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text


def parser():
    p = argparse.ArgumentParser(prog="bench/chaos", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", choices=[*scenarios.SCENARIOS, *scenarios.RESERVED, "ci", "check"])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--seconds", type=int, default=None, help="nemesis time per scenario (default 60; ci: 40)")
    p.add_argument("--json", help="the scenario's JSON report (ci: the summary)")
    p.add_argument("--json-dir", help="ci: one JSON report per scenario in this directory")
    p.add_argument("--nodes", type=int, default=3, help="cluster size, and the keyspaces' RF (default 3)")
    p.add_argument("--threads", type=int, default=4, help="client threads (default 4)")
    p.add_argument("--rate", type=float, default=150.0, help="client operations a second, all threads (default 150)")
    p.add_argument("--keys", type=int, default=40, help="partitions the workload spreads over (default 40)")
    p.add_argument("--write-ratio", type=float, default=0.6)
    p.add_argument("--timeout", type=float, default=5.0, help="client request timeout, seconds (default 5)")
    p.add_argument("--write-cl", default="QUORUM", help="the workload's write level (default QUORUM; the checkers "
                                                        "assume QUORUM: anything weaker is a sabotage)")
    p.add_argument("--read-cl", default="QUORUM", help="the workload's read level (default QUORUM)")
    p.add_argument("--rss-mb", type=int, default=2048, help="checker (e): each node's RSS bound (default 2048 MiB)")
    p.add_argument("--disk-mb", type=int, default=512, help="each node's tmpfs data disk (default 512 MiB)")
    p.add_argument("--commitlog-sync", choices=["periodic", "batch", "group"], help="the nodes' commitlog_sync")
    p.add_argument("--power-loss-all", action="store_true",
                   help="power-loss: every node loses power at once (not one at a time); only batch and group "
                        "commit logs promise to keep acknowledged writes then")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="an extra line of every node's YAML (VALUE parsed as JSON when it is), e.g. "
                        "hinted_handoff_enabled=false")
    p.add_argument("--keep", action="store_true", help="keep the run dir (logs, histories); kept anyway on FAIL")
    p.add_argument("--shoal-bin", default=default_bin())
    p.add_argument("--python", default=default_python(), help="Python with the DataStax driver ($SHOAL_VENV)")
    return p


def main(argv=None):
    opts = parser().parse_args(argv)
    log = scenarios.log_stderr
    why = netns.available()
    if opts.scenario == "check":
        print(why or "ok")
        return 0 if why is None else 2
    if opts.scenario in scenarios.RESERVED:
        print(f"{opts.scenario}: {scenarios.RESERVED[opts.scenario]}")
        return 2
    if why:
        print(f"bench/chaos cannot run here: {why}", file=sys.stderr)
        return 2
    for path, what in ((opts.shoal_bin, "shoal binary (SHOAL_BIN)"), (opts.python, "venv Python (SHOAL_VENV)")):
        if not os.access(path, os.X_OK):
            print(f"bench/chaos: no {what} at {path}", file=sys.stderr)
            return 2
    names = list(scenarios.SCENARIOS) if opts.scenario == "ci" else [opts.scenario]
    seconds = opts.seconds or (40 if opts.scenario == "ci" else 60)

    # SIGTERM (and SIGHUP) unwind like Ctrl-C, through the finally below.
    def interrupted(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGHUP, interrupted)
    ctx = Context(opts, log)
    reports, failed, keep = [], False, opts.keep
    t0 = time.monotonic()
    try:
        ctx.start()
        for i, name in enumerate(names):
            report = scenarios.run_scenario(ctx, name, opts.seed + i, seconds, opts, log)
            reports.append(report)
            print(scenarios.verdict_line(report), flush=True)
            if opts.json_dir:
                scenarios.write_json(os.path.join(opts.json_dir, f"{name}.json"), report)
            if report["verdict"] != "PASS":
                failed = True
        summary = {"verdict": "FAIL" if failed else "PASS", "seconds_total": round(time.monotonic() - t0, 1),
                   "scenarios": {r["scenario"]: r["verdict"] for r in reports}}
        if opts.scenario == "ci":
            print(f"chaos ci: {summary['verdict']} ({sum(r['verdict'] == 'PASS' for r in reports)}/{len(reports)} "
                  f"scenarios passed) in {summary['seconds_total']}s", flush=True)
            scenarios.write_json(opts.json, {**summary, "reports": reports})
        else:
            scenarios.write_json(opts.json, reports[0])
    except KeyboardInterrupt as e:
        log(f"chaos: interrupted ({e}); tearing down")
        failed, keep = True, True
        return 130
    except Exception as e:  # noqa: BLE001 - the harness itself failed: say why, tear down, exit 2
        import traceback

        traceback.print_exc()
        log(f"chaos: the harness failed: {e}")
        keep = True
        return 2
    finally:
        # A second Ctrl-C must not cut the teardown short.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        ctx.close(keep=keep or failed)
    return 1 if failed else 0
