"""Headless Chromium driven over its DevTools pipe (`--remote-debugging-pipe`),
with the standard library only: open a page, evaluate JavaScript in it while
it keeps running in real time, take a screenshot. The tests of the dashboard
use it to watch a page that polls the cluster (a one-shot `--dump-dom` with
`--virtual-time-budget` cannot watch a page across a node's stop: virtual time
skips the waits between polls).

    with Chromium() as browser:
        page = browser.open("http://127.0.0.1:7199/dashboard")
        rows = page.evaluate("[...document.querySelectorAll('tr')].length")
        page.screenshot("out.png")

The pipe carries JSON messages separated by NUL bytes: Chromium reads
commands on its fd 3 and writes answers and events on its fd 4.
"""

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

CHROMIUM = os.environ.get("SHOAL_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


class ChromiumError(AssertionError):
    pass


class Page:
    def __init__(self, browser, session_id):
        self.browser = browser
        self.session_id = session_id

    def send(self, method, params=None, timeout=30):
        return self.browser.send(method, params, session_id=self.session_id, timeout=timeout)

    def evaluate(self, expression, timeout=30):
        """The value of a JavaScript expression (a promise is awaited), as JSON."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, timeout=timeout)
        if "exceptionDetails" in result:
            raise ChromiumError(f"{expression!r} threw: {json.dumps(result['exceptionDetails'])[:2000]}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression, timeout, interval=0.25):
        """Evaluates `expression` until it is truthy (a throw counts as not yet: the page may still
        be loading); returns its value."""
        deadline = time.monotonic() + timeout
        value = None
        guarded = f"(() => {{ try {{ return ({expression}); }} catch (e) {{ return null; }} }})()"
        while time.monotonic() < deadline:
            value = self.evaluate(guarded)
            if value:
                return value
            time.sleep(interval)
        raise ChromiumError(f"{expression!r} still {value!r} after {timeout} s")

    def screenshot(self, path, width=1400):
        """A PNG of the whole page, `width` CSS pixels wide."""
        height = int(self.evaluate("document.documentElement.scrollHeight") or 1000)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        time.sleep(0.3)
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))


class Chromium:
    def __init__(self, width=1400, height=1000):
        if not os.access(CHROMIUM, os.X_OK):
            raise ChromiumError(f"chromium not found at {CHROMIUM} (scripts/setup.sh installs Debian's package)")
        self.profile = tempfile.mkdtemp(prefix="shoal-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def place_fds():
            # Chromium expects the pipe on fds 3 (commands in) and 4 (answers out).
            # (Copies above 10 first, so that neither dup2 is a no-op that keeps close-on-exec.)
            a, b = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--remote-debugging-pipe",
             f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "--no-first-run",
             "--hide-scrollbars", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=place_fds, close_fds=False)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._next_id = 0

    def send(self, method, params=None, session_id=None, timeout=30):
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session_id:
            message["sessionId"] = session_id
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            for raw in self._messages(deadline, method):
                answer = json.loads(raw)
                if answer.get("id") == self._next_id:
                    if "error" in answer:
                        raise ChromiumError(f"{method}: {answer['error']}")
                    return answer.get("result", {})

    def _messages(self, deadline, method):
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChromiumError(f"no answer to {method} in time")
            ready, _, _ = select.select([self._from_child], [], [], left)
            if ready:
                chunk = os.read(self._from_child, 1 << 20)
                if not chunk:
                    raise ChromiumError(f"chromium closed its pipe (exit code {self.proc.poll()})")
                self._buffer += chunk
        *done, self._buffer = self._buffer.split(b"\0")
        return done

    def open(self, url):
        target = self.send("Target.createTarget", {"url": url})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        return Page(self, session)

    def close(self):
        try:
            if self.proc.poll() is None:
                try:
                    self.send("Browser.close", timeout=5)
                except (ChromiumError, OSError):
                    pass
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            for fd in (self._to_child, self._from_child):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
