"""The fleet path end to end: headless -> Prometheus -> Alertmanager -> a webhook.

Real processes on loopback, each with its own temp storage and an ephemeral
port: ``dflash-watch headless --metrics-port 0``, a ``prometheus`` that
scrapes it every second and evaluates the shipped ``deploy/prometheus/
rules.yml`` every second, an ``alertmanager`` whose only receiver is our
own HTTP server. A traceback written into the log must arrive there as a
``DflashDetectorCritical`` alert with ``detector="crash"``, and then a NaN
loss as ``DflashLossNaN``. Every process
started here is stopped here; nothing else is touched.
"""

from __future__ import annotations

import json
import queue
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"
PROMETHEUS = shutil.which("prometheus")
ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(PROMETHEUS is None, reason="prometheus not installed (Debian package prometheus)"),
    pytest.mark.skipif(ALERTMANAGER is None,
                       reason="alertmanager not installed (Debian package prometheus-alertmanager)"),
]

TRACEBACK = (
    "[rank3]: Traceback (most recent call last):\n"
    '[rank3]:   File "/opt/dflash/train.py", line 412, in <module>\n'
    "[rank3]:     main()\n"
    "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
)


def _steps(first: int, n: int) -> str:
    now = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    return "".join(f"{now},000 - INFO - dflash.train - step {i}/1000 | loss 2.31 | 21.5 Ktok/s\n"
                   for i in range(first, first + n))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Webhook:
    """Alertmanager's receiver: every POST body, with the time it came."""

    def __init__(self) -> None:
        posts: queue.Queue[tuple[float, dict[str, Any]]] = queue.Queue()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                posts.put((time.monotonic(), json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *_args: object) -> None:
                pass

        self.posts = posts
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _poll(what: str, check: Callable[[], Any], timeout: float, procs: list[subprocess.Popen]) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in procs:
            assert p.poll() is None, f"{p.args[0]} exited with {p.returncode} while waiting for {what}"
        try:
            value = check()
        except OSError:
            value = None
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=2) as r:
        return json.loads(r.read())


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen]]:
    """Every process this test starts; each is stopped, then killed if it lingers."""
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.terminate()
    for p in started:
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


def test_a_crash_line_reaches_the_alertmanager_webhook_with_its_labels(tmp_path: Path, procs: list) -> None:
    log = tmp_path / "train.log"
    log.write_text(_steps(1, 5))
    hook = _Webhook()
    try:
        # headless, on a free port it picks and names on stderr.
        headless = subprocess.Popen(
            [sys.executable, "-m", "dflash_watch.cli", "headless", "--no-gpu", "--log", str(log),
             "--metrics-port", "0"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
        )
        procs.append(headless)
        stderr_lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [stderr_lines.put(x) for x in headless.stderr], daemon=True).start()
        line = _poll("headless to name its metrics port", lambda: _metrics_line(stderr_lines), 15, procs)
        metrics_target = line.split("http://", 1)[1].split("/", 1)[0]

        am_port, prom_port = _free_port(), _free_port()
        am_dir, prom_dir = tmp_path / "am", tmp_path / "prom"
        am_dir.mkdir()
        prom_dir.mkdir()
        (am_dir / "alertmanager.yml").write_text(json.dumps({
            "route": {"receiver": "hook", "group_by": ["alertname", "instance", "job"],
                      "group_wait": "0s", "group_interval": "1s", "repeat_interval": "1h"},
            "receivers": [{"name": "hook", "webhook_configs": [{"url": hook.url, "send_resolved": True}]}],
        }))
        procs.append(subprocess.Popen(
            [ALERTMANAGER, f"--config.file={am_dir / 'alertmanager.yml'}", f"--storage.path={am_dir / 'data'}",
             f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address=", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        ))
        (prom_dir / "prometheus.yml").write_text(json.dumps({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(RULES)],
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
            "scrape_configs": [{"job_name": "dflash", "static_configs": [{"targets": [metrics_target]}]}],
        }))
        procs.append(subprocess.Popen(
            [PROMETHEUS, f"--config.file={prom_dir / 'prometheus.yml'}", f"--storage.tsdb.path={prom_dir / 'data'}",
             f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        ))

        api = f"http://127.0.0.1:{prom_port}/api/v1"
        query = f"{api}/query?" + urllib.parse.urlencode({"query": 'dflash_alerts_firing{detector="crash"}'})
        _poll("Prometheus to scrape headless", lambda: _get_json(query)["data"]["result"], 20, procs)
        _poll("Prometheus to find Alertmanager",
              lambda: _get_json(f"{api}/alertmanagers")["data"]["activeAlertmanagers"], 10, procs)
        _poll("Alertmanager to be ready", lambda: urllib.request.urlopen(
            f"http://127.0.0.1:{am_port}/-/ready", timeout=2).status == 200, 10, procs)
        time.sleep(2.0)  # two more scrapes and evaluations of a healthy run
        assert hook.posts.empty(), f"an alert before any crash: {hook.posts.get()[1]}"
        assert _get_json(query)["data"]["result"][0]["value"][1] == "0"

        with open(log, "a", encoding="utf-8") as fh:
            fh.write(_steps(6, 1) + TRACEBACK)
        wrote = time.monotonic()
        got, body = hook.posts.get(timeout=30)
        latency = got - wrote
        alerts = [a for a in body["alerts"] if a["labels"].get("alertname") == "DflashDetectorCritical"]
        assert alerts, f"webhook got {body}"
        labels = alerts[0]["labels"]
        assert alerts[0]["status"] == "firing"
        assert labels["detector"] == "crash"
        assert labels["severity"] == "critical"
        assert labels["job"] == "dflash"
        assert labels["instance"] == metrics_target
        assert not {"host", "hostname", "node"} & set(labels)
        print(f"crash line -> Alertmanager webhook POST: {latency:.2f} s")
        assert latency < 20

        # Issue 19: a NaN loss is exported as NaN, Prometheus keeps it, and
        # the rules' `x != x` turns it into DflashLossNaN at the webhook.
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(_steps(7, 1).replace("loss 2.31", "loss nan"))
        wrote = time.monotonic()
        got, nan_alert = _wait_for(hook, "DflashLossNaN", 30)
        assert nan_alert["status"] == "firing"
        assert nan_alert["labels"]["severity"] == "critical"
        assert nan_alert["labels"]["instance"] == metrics_target
        assert nan_alert["annotations"]["runbook_url"].startswith("README.md#runbook-")
        loss = f"{api}/query?" + urllib.parse.urlencode({"query": "dflash_training_loss"})
        assert _get_json(loss)["data"]["result"][0]["value"][1] == "NaN"
        print(f"NaN loss line -> Alertmanager webhook POST: {got - wrote:.2f} s")
        assert got - wrote < 20
    finally:
        hook.close()


def _wait_for(hook: _Webhook, alertname: str, timeout: float) -> tuple[float, dict[str, Any]]:
    """The first POST (its time, the alert) carrying ``alertname`` firing; other posts are passed over."""
    deadline = time.monotonic() + timeout
    while True:
        got, body = hook.posts.get(timeout=max(0.1, deadline - time.monotonic()))
        for alert in body["alerts"]:
            if alert["labels"].get("alertname") == alertname and alert["status"] == "firing":
                return got, alert
        assert time.monotonic() < deadline, f"no {alertname} within {timeout} s"


def _metrics_line(lines: queue.Queue[str]) -> str | None:
    while not lines.empty():
        line = lines.get()
        if "metrics on http://" in line:
            return line.strip()
    return None
