"""`dfl-report --html` opens offline: headless Chromium loads the page from file:// with no
console error and no request beyond the page itself.

Chromium is driven over the DevTools protocol on a pipe (--remote-debugging-pipe: commands on
fd 3, answers on fd 4, NUL-terminated JSON), so no driver package is needed. Without Chromium
the test skips, except under CI=true, where it fails (`.ci/run` installs Debian's chromium).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.harness import ENV_ROOT, ROOT, launch

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--remote-debugging-pipe")
HEX4 = "nodes: [{id: 0}, {id: 1}, {id: 2}, {id: 3}]\nedges: [[0, 1], [1, 2], [2, 3], [3, 0]]\n"


def chromium() -> str:
    if CHROMIUM is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed (.ci/run installs Debian's chromium)")
        pytest.skip("chromium is not installed")
    return CHROMIUM


class DevTools:
    """A browser under the DevTools protocol: send commands, keep every event."""

    def __init__(self, binary: str, profile: Path) -> None:
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()

        def pipe_fds() -> None:  # in the child: the browser reads fd 3 and writes fd 4
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser, from_browser)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"], close_fds=False,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=pipe_fds)
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def _message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("no answer from chromium")
            chunk = os.read(self._read, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + 30
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self._next_id:
                assert "error" not in reply, reply
                return reply["result"]
            self.events.append(reply)

    def wait_for(self, method: str, since: int, timeout_s: float = 30) -> None:
        """Until an event `method` is among the events from index `since` on."""
        deadline = time.monotonic() + timeout_s
        while not any(e.get("method") == method for e in self.events[since:]):
            self.events.append(self._message(deadline))

    def close(self) -> None:
        try:
            self.call("Browser.close")
        finally:
            self.proc.wait(timeout=10)
            os.close(self._read)
            os.close(self._write)


def visit(page: Path, profile: Path) -> dict[str, Any]:
    """Load `page`; what the console said, what was requested, how many images rendered."""
    browser = DevTools(chromium(), profile)
    try:
        target = browser.call("Target.createTarget", url="about:blank")["targetId"]
        session = browser.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.call(f"{domain}.enable", session)
        before = len(browser.events)  # about:blank's own load must not count
        browser.call("Page.navigate", session, url=page.as_uri())
        browser.wait_for("Page.loadEventFired", since=before)
        time.sleep(0.5)  # anything the page would start after load
        images = browser.call(
            "Runtime.evaluate", session, returnByValue=True,
            expression="[...document.images].filter(i => i.complete && i.naturalWidth > 0)"
                       ".length")["result"]["value"]
        events = browser.events
    finally:
        browser.close()
    return {"requests": [e["params"]["request"]["url"] for e in events
                         if e.get("method") == "Network.requestWillBeSent"],
            "complaints": complaints(events), "images": images}


def complaints(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Uncaught exceptions, console errors and warnings, and the browser's own error and
    warning log entries (a blocked load, a policy violation)."""
    bad = {"Runtime.exceptionThrown": lambda p: True,
           "Runtime.consoleAPICalled": lambda p: p["type"] in ("error", "warning", "assert"),
           "Log.entryAdded": lambda p: p["entry"]["level"] in ("error", "warning")}
    return [e["params"] for e in events if e.get("method") in bad and bad[e["method"]](e["params"])]


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real d-psgd run on a 4-ring, reported as one page."""
    chromium()  # skip (or fail under CI) before running anything
    where = tmp_path_factory.mktemp("html")
    (where / "hex4.yaml").write_text(HEX4)
    proc = launch(where / "runs", str(where / "hex4.yaml"), "d-psgd", "--seed", "0",
                  "--rounds", "3", "--eval-every", "1", "--transport", "inproc",
                  "--dataset", "synthetic")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = where / "report.html"
    report = subprocess.run([sys.executable, "-m", "launcher.report_cli", str(where / "runs"),
                             "--html", str(out)], capture_output=True, text=True, timeout=120,
                            cwd=ROOT, env=ENV_ROOT)
    assert report.returncode == 0, report.stderr
    return out


def test_report_page_loads_offline_without_errors(page: Path, tmp_path: Path) -> None:
    html = page.read_text()
    assert "<script" not in html and "http://" not in html and "https://" not in html
    seen = visit(page, tmp_path / "profile")
    fetched = [url for url in seen["requests"] if not url.startswith("data:")]
    assert fetched == [page.as_uri()]  # data: URIs are the inlined plots, read from the page
    assert seen["complaints"] == []
    assert seen["images"] == html.count("<img") == 3  # accuracy, worst, accuracy vs bits


def test_the_check_sees_a_page_that_fetches(tmp_path: Path) -> None:
    """The same check on a page that loads a remote image and logs an error: both are seen."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/x.png">'
                   "<script>console.error('boom')</script></body></html>")
    seen = visit(bad, tmp_path / "profile")
    assert seen["requests"][0] == bad.as_uri()
    assert "http://127.0.0.1:9/x.png" in seen["requests"]
    assert any(c.get("type") == "error" for c in seen["complaints"])
