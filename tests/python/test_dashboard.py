"""The live dashboard (`GET /dashboard` on every node's admin port) in headless Chromium, against
a 3-node cluster under `shoal stress`: the page shows the 3 nodes UN and non-zero cluster and
per-node throughput (from each node's /v1/proxyhistograms, read through the page's node), and a
node that is stopped turns DN on the open page within 10 s. Screenshots of the page under load
and with a node down are taken into the test's directory, and with SHOAL_SAVE_SCREENSHOTS=1 into
bench/dashboard.png and bench/dashboard-node-down.png (the committed pictures).

The page is driven over Chromium's DevTools pipe (headless.py): it runs in real time, so the test
watches the same page poll across the node's stop."""

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from cluster_harness import ShoalCluster
from headless import Chromium
from shoal_harness import EXTERNAL

pytestmark = pytest.mark.skipif(bool(EXTERNAL), reason="starts its own cluster of shoal processes")

BENCH = Path(__file__).resolve().parents[2] / "bench"
SAVE = os.environ.get("SHOAL_SAVE_SCREENSHOTS") == "1"


def keep(path):
    """A screenshot the test took: checked to be a PNG, copied to bench/ when asked."""
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
    if SAVE:
        shutil.copy(path, BENCH / path.name)
STRESS = ["-schema", "keyspace=dash", "replication(factor=3)", "-col", "n=5", "size=FIXED(64)"]

ROWS = """[...document.querySelectorAll('#nodes tbody tr')].map(r => ({
    address: r.dataset.address, state: r.dataset.state, since: Number(r.dataset.stateSince),
    write: r.dataset.writeRate === '' ? null : Number(r.dataset.writeRate),
    read: r.dataset.readRate === '' ? null : Number(r.dataset.readRate)}))"""
TILE = "(id => { const v = document.getElementById(id).dataset.value; return v === '' ? null : Number(v); })"


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.headers.get("Content-Type"), r.read()


def test_the_dashboard_and_its_proxy_answer(tmp_path):
    with ShoalCluster(tmp_path / "c", nodes=2) as c:
        base = f"http://{c.address(1)}:{c.admin_port}"
        status, ctype, body = get(f"{base}/dashboard")
        assert status == 200 and ctype.startswith("text/html") and b"dashboard/dashboard.js" in body
        for asset, kind in [("dashboard.js", "text/javascript"), ("lines.js", "text/javascript"),
                            ("dashboard.css", "text/css")]:
            status, ctype, body = get(f"{base}/dashboard/{asset}")
            assert status == 200 and ctype.startswith(kind) and body
        # Another node's read-only endpoints, through this one.
        _, ctype, body = get(f"{base}/dashboard/peer/{c.address(2)}/v1/info")
        assert ctype == "application/json" and json.loads(body)["address"] == c.address(2)
        _, _, body = get(f"{base}/dashboard/peer/{c.address(2)}/v1/proxyhistograms")
        assert set(json.loads(body)) >= {"read", "write", "range", "cas_read", "cas_write"}
        # Not an open relay: only ring members, only read-only endpoints, only GET.
        for path, code in [("/dashboard/peer/127.0.0.99/v1/info", 404),
                           (f"/dashboard/peer/{c.address(2)}/v1/decommission", 400),
                           (f"/dashboard/peer/{c.address(2)}/metrics", 400),
                           ("/dashboard/nosuch.js", 404), ("/dashboard/../v1/info", 404)]:
            with pytest.raises(urllib.error.HTTPError) as e:
                get(base + path)
            assert e.value.code == code, path
        req = urllib.request.Request(f"{base}/dashboard", method="POST")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        assert e.value.code == 405
        # A node that is down: the proxy says so (502), at once.
        c.stop(2)
        started = time.monotonic()
        with pytest.raises(urllib.error.HTTPError) as e:
            get(f"{base}/dashboard/peer/{c.address(2)}/v1/info")
        assert e.value.code == 502 and time.monotonic() - started < 5


def test_the_dashboard_shows_a_loaded_cluster_and_a_node_going_down(tmp_path):
    with ShoalCluster(tmp_path / "c", nodes=3) as c:
        addresses = [c.address(i) for i in (1, 2, 3)]
        load = subprocess.run(c.stress_command(addresses, ["write", "n=5000", "cl=QUORUM", "no-warmup"], STRESS),
                              capture_output=True, text=True, timeout=180)
        assert load.returncode == 0, load.stdout + load.stderr
        stress = subprocess.Popen(
            c.stress_command(addresses, ["mixed", "ratio(write=1,read=1)", "duration=300s", "cl=ONE", "no-warmup",
                                         "keep-going", "-pop", "seq=1..5000", "-rate", "threads=4", "fixed=400/s"],
                             STRESS),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            with Chromium() as browser:
                page = browser.open(f"http://{addresses[0]}:{c.admin_port}/dashboard")
                page.wait_for("document.getElementById('nodes-up').dataset.up === '3'", 30)

                def loaded():
                    rows = page.evaluate(ROWS)
                    writes, reads = page.evaluate(f"{TILE}('write-rate')"), page.evaluate(f"{TILE}('read-rate')")
                    ok = (len(rows) == 3 and all(r["state"] == "UN" for r in rows)
                          and all((r["write"] or 0) > 0 and (r["read"] or 0) > 0 for r in rows)
                          and (writes or 0) > 50 and (reads or 0) > 50)
                    return (rows, writes, reads) if ok else None

                deadline = time.monotonic() + 60
                while not (got := loaded()):
                    assert time.monotonic() < deadline, (page.evaluate(ROWS), page.evaluate(f"{TILE}('write-rate')"))
                    time.sleep(0.5)
                rows, writes, reads = got
                assert sorted(r["address"] for r in rows) == sorted(addresses)
                # The stress client asks for 400 ops/s in all: the page's sum is of that order.
                assert 100 < writes + reads < 1200, (writes, reads)
                assert page.evaluate(f"{TILE}('write-p99')") > 0
                # A few more polls, so the charts have lines; then the picture under load.
                polls = int(page.evaluate("document.getElementById('updated').dataset.polls"))
                page.wait_for(f"Number(document.getElementById('updated').dataset.polls) >= {polls + 8}", 40)
                assert int(page.evaluate("document.getElementById('chart-throughput').dataset.points")) >= 10
                page.screenshot(tmp_path / "dashboard.png")
                keep(tmp_path / "dashboard.png")

                stopped_at = time.time() * 1000
                c.stop(3)
                state = page.wait_for(
                    f"(r => r && r.state.startsWith('D') && r)({ROWS}.find(r => r.address === '{addresses[2]}'))", 10)
                assert state["state"] == "DN"
                assert state["since"] - stopped_at <= 10_000
                others = [r for r in page.evaluate(ROWS) if r["address"] != addresses[2]]
                assert all(r["state"] == "UN" for r in others)
                assert page.evaluate("document.getElementById('nodes-up').textContent") == "2 / 3"
                time.sleep(4)
                page.screenshot(tmp_path / "dashboard-node-down.png")
                keep(tmp_path / "dashboard-node-down.png")
        finally:
            stress.send_signal(signal.SIGINT)
            try:
                stress.wait(timeout=60)
            except subprocess.TimeoutExpired:
                stress.kill()
                stress.wait()
