"""The alert history survives a `kill -9`, and SIGTERM sends what is pending.

Real processes only: a real `headless` with a webhook sink pointed at a
loopback server, and the real dashboard in a tmux pane on a private
server (``tmux -L``). Every alert that was shown (on stdout, on the
screen) or sent (a POST) must be in the history file after `kill -9` of
the process the test started: the history is written, fsynced, before the
Monitor hands an alert to anyone else.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "shell"))
from crash_texts import QUIET, STEP, TRACEBACK  # noqa: E402
from loopback_http import LoopbackServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _crash(trial: int) -> str:
    # Minutes apart on the log's clock: two separate incidents.
    return STEP.format(m=5 + 3 * trial, s=0, n=100 + trial) + TRACEBACK.format(r=trial, t=trial + 1)


def _steps(n: int) -> str:
    return "".join(STEP.format(m=0, s=i % 60, n=i + 1) for i in range(n))


def _history(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if open(f"/proc/{pid}/stat").read().split()[2] == "Z":
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_kill_9_of_headless_leaves_every_printed_and_posted_alert_in_the_history(tmp_path: Path) -> None:
    log, history = tmp_path / "train.log", tmp_path / "alerts.jsonl"
    log.write_text(_steps(10))
    with LoopbackServer() as server:
        (tmp_path / "c.toml").write_text(
            f'alerts_file = "{history}"\n[[alerts.sink]]\nkind = "webhook"\nurl = "{server.url}"\n' + QUIET)
        proc = subprocess.Popen(
            [sys.executable, "-m", "dflash_watch.cli", "headless", "--no-gpu", "--config", str(tmp_path / "c.toml"),
             "--log", str(log)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert proc.stdout is not None
        printed = []
        try:
            for trial in range(2):
                with open(log, "a", encoding="utf-8") as fh:
                    fh.write(_crash(trial))
                ready, _, _ = select.select([proc.stdout], [], [], 15.0)
                assert ready, f"no alert for crash {trial}"
                printed.append(json.loads(proc.stdout.readline()))
            posted = [json.loads(r.body) for r in server.wait_for(2)]
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            proc.stdout.close()
    assert [a["detector"] for a in printed] == ["crash", "crash"]
    assert "1.00 GiB" in printed[0]["message"] and "2.00 GiB" in printed[1]["message"]
    on_disk = _history(history)
    routing = ("host", "startsAt", "endsAt", "fingerprint")  # the webhook's additions (contract-additions 10)
    for alert in printed + [{k: v for k, v in p.items() if k not in routing} for p in posted]:
        assert alert in on_disk


def test_sigterm_of_headless_gives_a_pending_delivery_its_last_chance(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(_steps(10))
    with LoopbackServer([500, 200]) as server:
        (tmp_path / "c.toml").write_text(
            f'[[alerts.sink]]\nkind = "webhook"\nurl = "{server.url}"\nbackoff_s = 60\n' + QUIET)
        proc = subprocess.Popen(
            [sys.executable, "-m", "dflash_watch.cli", "headless", "--no-gpu", "--config", str(tmp_path / "c.toml"),
             "--log", str(log)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(_crash(0))
        first = server.wait_for(1, timeout=15.0)
        assert len(first) == 1  # refused with a 500; the next try is 60 s away...
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=15)
        assert len(server.received) == 2  # ...but leaving tried again at once
    assert proc.returncode == 0
    assert server.received[1].body == server.received[0].body
    assert json.loads(out.splitlines()[0])["detector"] == "crash"
    assert "sink webhook[0]: delivery of the crash alert (firing) failed: HTTP 500" in err
    assert "sink webhook[0]: delivered the crash alert (firing) on retry 1" in err


class Tmux:
    """A pane driver on a private server (the ``tmux_socket`` fixture ends it)."""

    def __init__(self, socket: str) -> None:
        self.socket = socket

    def __call__(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True,
                              timeout=10).stdout

    def wait_for(self, predicate, timeout: float = 20.0) -> str:
        deadline, screen = time.monotonic() + timeout, ""
        while time.monotonic() < deadline:
            screen = self("capture-pane", "-p", "-t", "ui")
            if predicate(screen):
                return screen
            time.sleep(0.1)
        raise AssertionError(f"timed out; the screen was:\n{screen}")


@pytest.fixture
def tmux(tmux_socket: str) -> Tmux:
    return Tmux(tmux_socket)


def _dashboard(tmp_path: Path, tmux: Tmux, log: Path, history: Path, shown: str = "step 10/1,000") -> int:
    (tmp_path / "c.toml").write_text(f'alerts_file = "{history}"\n' + QUIET)
    env = f"env -u COLUMNS -u LINES PYTHONPATH={ROOT}"
    tmux("new-session", "-d", "-s", "ui", "-x", "120", "-y", "40",
         f"{env} {sys.executable} -m dflash_watch.cli watch --config {tmp_path / 'c.toml'} --log {log} --no-gpu")
    tmux.wait_for(lambda s: shown in s)
    return int(tmux("list-panes", "-t", "ui", "-F", "#{pane_pid}").split()[0])


def test_kill_9_of_the_dashboard_leaves_the_alert_it_showed_in_the_history(tmp_path: Path, tmux: Tmux) -> None:
    log, history = tmp_path / "train.log", tmp_path / "alerts.jsonl"
    log.write_text(_steps(10) + _crash(0))
    pid = _dashboard(tmp_path, tmux, log, history, shown="crash/cuda_oom")  # in the alert panel...
    os.kill(pid, signal.SIGKILL)
    assert _gone(pid, 5.0)
    (alert,) = _history(history)  # ...so on disk
    assert (alert["detector"], alert["kind"], alert["state"]) == ("crash", "cuda_oom", "firing")


def test_sigterm_of_the_dashboard_writes_the_crash_it_had_not_read_yet(tmp_path: Path, tmux: Tmux) -> None:
    log, history = tmp_path / "train.log", tmp_path / "alerts.jsonl"
    log.write_text(_steps(10))
    pid = _dashboard(tmp_path, tmux, log, history)
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(_crash(1))
    os.kill(pid, signal.SIGTERM)  # before the 0.5 s tail round has seen it, almost always
    t0 = time.monotonic()
    assert _gone(pid, 5.0)
    assert time.monotonic() - t0 < 3.0  # the bound (2 s) holds
    (alert,) = _history(history)
    assert alert["detector"] == "crash" and "2.00 GiB" in alert["message"]
