"""The real `dflash-watch watch` in a real tmux pane, driven with send-keys.

A fake training job (a script appending progress lines and GPU samples)
runs in one tmux session of a private server (``tmux -L``); the dashboard
runs in another, pointed at the same log, sample file and job session.
The test reads the screen with capture-pane: the step number moves, `/`
filters the log, and `q` quits while the job's pane stays alive.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed"),
]

WRITER = r'''
import json, sys, time
log, samples = sys.argv[1], sys.argv[2]
step = 100
with open(log, "a", buffering=1) as lf, open(samples, "a", buffering=1) as sf:
    lf.write("[2025-11-29 10:00:00,000] [INFO] [train] tokenizer says [bold red]hi[/] \x1b[31mred\x1b[0m\n")
    while True:
        now = time.time()
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
        step += 1
        lf.write(f"[{stamp},000] [INFO] [train] step {step}/50000 | loss 2.100 | 21.5 Ktok/s | lr 2.00e-04\n")
        if step % 5 == 0:
            lf.write(f"[{stamp},000] [INFO] [train] Saving checkpoint to /ckpt/step_{step:06d}\n")
        for gpu in range(2):
            sf.write(json.dumps({"time": now, "gpu": gpu, "used_bytes": 70 * 2**30 + gpu * 2**20,
                                 "total_bytes": 96 * 2**30, "util": 0.97}) + "\n")
        time.sleep(0.25)
'''


class Tmux:
    """A pane driver on a private server (the ``tmux_socket`` fixture ends it)."""

    def __init__(self, socket: str) -> None:
        self.socket = socket

    def __call__(self, *args: str, check: bool = True) -> str:
        out = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10)
        if check and out.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {out.stderr.strip()}")
        return out.stdout

    def capture(self, target: str) -> str:
        return self("capture-pane", "-p", "-t", target, check=False)

    def wait_for(self, target: str, predicate, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.capture(target)
            if predicate(screen):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"timed out; the screen was:\n{screen}")


def _step(screen: str) -> int | None:
    import re

    m = re.search(r"step ([\d,]+)/50,000", screen)
    return int(m.group(1).replace(",", "")) if m else None


@pytest.fixture
def tmux(tmux_socket: str) -> Tmux:
    return Tmux(tmux_socket)


def test_watch_in_tmux_follows_filters_and_quits_leaving_the_job(tmp_path, tmux):
    log = tmp_path / "train.log"
    samples = tmp_path / "gpu.jsonl"
    writer = tmp_path / "writer.py"
    writer.write_text(WRITER)
    log.touch()
    samples.touch()
    # pytest exports COLUMNS/LINES (80x24) and Textual would believe them over the pane.
    env = f"env -u COLUMNS -u LINES PYTHONPATH={ROOT}"
    tmux("new-session", "-d", "-s", "job", "-x", "100", "-y", "20",
         f"{env} {sys.executable} {writer} {log} {samples}")
    tmux("set-option", "-t", "job", "remain-on-exit", "on")
    # tmux 3.3 may report a dead pane with an empty status: the shell
    # records the dashboard's own exit status instead.
    status_file = tmp_path / "watch.status"
    watch = (f"cd {tmp_path} && {env} {sys.executable} -m dflash_watch.cli watch "
             f"--log {log} --gpu-samples {samples} --no-gpu --session job --socket {tmux.socket} --tz UTC; "
             f"echo $? > {status_file}")
    tmux("new-session", "-d", "-s", "ui", "-x", "120", "-y", "40", watch)
    tmux("set-option", "-t", "ui", "remain-on-exit", "on")

    first = tmux.wait_for("ui", lambda s: _step(s) is not None)
    n1 = _step(first)
    # The job's state from tmux, the GPU tiles, and log markup shown as
    # text; all in one capture (Textual paints panels in separate frames).
    shown = ("running", "GPU 0", "GPU 1", "[bold red]hi[/]")
    tmux.wait_for("ui", lambda s: (_step(s) or 0) > n1 + 3 and all(text in s for text in shown))

    tmux("send-keys", "-t", "ui", "/")
    time.sleep(0.3)
    tmux("send-keys", "-t", "ui", "-l", "checkpoint")
    def only_checkpoints(screen: str) -> bool:
        log_lines = [line for line in screen.splitlines() if "[train]" in line]
        return "filter: checkpoint" in screen and bool(log_lines) and all("checkpoint" in line for line in log_lines)

    tmux.wait_for("ui", only_checkpoints)
    tmux("send-keys", "-t", "ui", "Escape")
    tmux.wait_for("ui", lambda s: "| loss" in s)

    tmux("send-keys", "-t", "ui", "q")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not (status_file.exists() and status_file.read_text().strip()):
        time.sleep(0.2)
    assert status_file.read_text().strip() == "0"  # the dashboard exited cleanly
    job = tmux("list-panes", "-t", "job", "-F", "#{pane_dead}").split()
    assert job == ["0"]  # ...and the job's pane lives on
    size = log.stat().st_size
    time.sleep(1.0)
    assert log.stat().st_size > size  # still writing


@pytest.mark.parametrize("how", ["SIGTERM", "close the terminal"])
def test_killing_the_dashboard_leaves_the_job_running(tmp_path, tmux, how):
    """`kill` of the watcher, or its terminal going away (SIGHUP), ends the
    watcher at once (no orphan redrawing into a dead terminal) and never
    touches the job."""
    import signal

    log = tmp_path / "train.log"
    samples = tmp_path / "gpu.jsonl"
    writer = tmp_path / "writer.py"
    writer.write_text(WRITER)
    env = f"env -u COLUMNS -u LINES PYTHONPATH={ROOT}"
    tmux("new-session", "-d", "-s", "job", "-x", "100", "-y", "20", f"{env} {sys.executable} {writer} {log} {samples}")
    watch = (f"{env} {sys.executable} -m dflash_watch.cli watch --log {log} --gpu-samples {samples} "
             f"--no-gpu --session job --socket {tmux.socket}")
    tmux("new-session", "-d", "-s", "ui", "-x", "120", "-y", "40", watch)
    tmux.wait_for("ui", lambda s: _step(s) is not None)
    pid = int(tmux("list-panes", "-t", "ui", "-F", "#{pane_pid}").split()[0])
    if how == "SIGTERM":
        os.kill(pid, signal.SIGTERM)
    else:
        tmux("kill-session", "-t", "ui")  # the pane's terminal goes away: SIGHUP
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}"):
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"
    assert tmux("list-panes", "-t", "job", "-F", "#{pane_dead}").split() == ["0"]
    size = log.stat().st_size
    time.sleep(1.0)
    assert log.stat().st_size > size  # the job still writes


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scrape(url: str) -> str | None:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return reply.read().decode()
    except OSError:
        return None


def _gauge(text: str | None, name: str) -> float | None:
    for line in (text or "").splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_the_dashboard_serves_metrics_while_it_draws_and_stops_serving_when_it_quits(tmp_path, tmux):
    """`watch --metrics-port`: /metrics follows the run the screen shows
    (the step moves on both), the job's state is up, and the port is closed
    once `q` has quit."""
    log, samples, writer = tmp_path / "train.log", tmp_path / "gpu.jsonl", tmp_path / "writer.py"
    writer.write_text(WRITER)
    log.touch()
    samples.touch()
    env = f"env -u COLUMNS -u LINES PYTHONPATH={ROOT}"
    tmux("new-session", "-d", "-s", "job", "-x", "100", "-y", "20", f"{env} {sys.executable} {writer} {log} {samples}")
    port = _free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    status_file = tmp_path / "watch.status"
    watch = (f"cd {tmp_path} && {env} {sys.executable} -m dflash_watch.cli watch --log {log} --gpu-samples {samples} "
             f"--no-gpu --session job --socket {tmux.socket} --tz UTC --metrics-port {port}; echo $? > {status_file}")
    tmux("new-session", "-d", "-s", "ui", "-x", "120", "-y", "40", watch)
    tmux("set-option", "-t", "ui", "remain-on-exit", "on")

    shown = _step(tmux.wait_for("ui", lambda s: _step(s) is not None))
    deadline = time.monotonic() + 20
    text = None
    # The log and the GPU sample file are read by their own polls: wait for
    # both (under load the step can move on before GPU 1's first sample is in).
    gpu1 = 'dflash_gpu_memory_used_bytes{gpu="1"}'
    while time.monotonic() < deadline and not ((_gauge(text, "dflash_step") or 0) > shown
                                               and _gauge(text, "dflash_job_up") == 1.0
                                               and _gauge(text, gpu1) is not None):
        time.sleep(0.3)
        text = _scrape(url)
    assert (_gauge(text, "dflash_step") or 0) > shown, text
    assert _gauge(text, "dflash_job_up") == 1.0
    assert _gauge(text, "dflash_throughput_tokens_per_second") == pytest.approx(21500.0)
    assert _gauge(text, gpu1) == float(70 * 2**30 + 2**20)
    # The screen is still the dashboard's, drawn while it serves.
    tmux.wait_for("ui", lambda s: (_step(s) or 0) > shown and "GPU 1" in s)

    tmux("send-keys", "-t", "ui", "q")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not (status_file.exists() and status_file.read_text().strip()):
        time.sleep(0.2)
    assert status_file.read_text().strip() == "0"
    assert _scrape(url) is None  # the port closed with the dashboard
    assert tmux("list-panes", "-t", "job", "-F", "#{pane_dead}").split() == ["0"]
