"""The stall alert that leaves the process carries the hung job's stacks.

`headless` prints a line and the sinks POST a body the moment an alert
fires; the stacks come ~0.15 s later. ``StallStacks.hold`` keeps the stall
alert (only it) back until they are in, at most ``HOLD_S``. Real tmux job,
real py-spy, real `headless`, a real loopback webhook; the fake py-spy on
PATH stands in only for a dump that hangs (a real one cannot be made to).
"""

from __future__ import annotations

import json
import os
import select
import shlex
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from loopback_http import LoopbackServer
from test_stall_stacks import HANG, PYSPY, _fake_pyspy

from dflash_watch.control.state import JobState
from dflash_watch.control.tmux import Tmux
from dflash_watch.detectors.base import Alert
from dflash_watch.monitor import Monitor
from dflash_watch.stacks import StallStacks


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)
    return env


class _Running:
    """A job that is running (this test process): the hook dumps it."""

    def status(self) -> JobState:
        return JobState("running", "job", pid=os.getpid(), pids=(os.getpid(),), pane="%0")


def _stall(t: float, state: str = "firing") -> Alert:
    return Alert(t, "stall", state, "warning", "no progress", "log:1")


def test_a_stall_waits_for_a_hung_dump_at_most_hold_s_and_nothing_else_waits(tmp_path: Path) -> None:
    slow = _fake_pyspy(tmp_path, "import time; time.sleep(60)\n")
    monitor = Monitor(keep_lines=0)
    hook = StallStacks(monitor, _Running(), tmp_path, pyspy=lambda: slow, timeout_s=5.0)
    hook.hold_s = 1.0
    monitor.subscribe(hook)
    got: list[tuple[float, Alert]] = []
    under_lock: list[bool] = []  # each delivery: the Monitor's lock held, as for any alert
    lock = threading.Lock()

    def monitor_lock_held_here() -> bool:
        free: list[bool] = []

        def probe() -> None:
            if monitor.lock.acquire(blocking=False):
                free.append(True)
                monitor.lock.release()

        other = threading.Thread(target=probe)
        other.start()
        other.join()
        return not free

    def out(alert: Alert) -> None:
        with lock:
            got.append((time.monotonic(), alert))
            under_lock.append(monitor_lock_held_here())

    monitor.subscribe(hook.hold(out))
    t0 = time.monotonic()
    monitor.raise_alert(_stall(100.0))
    monitor.raise_alert(Alert(101.0, "crash", "firing", "critical", "Traceback", "log:2"))
    monitor.raise_alert(_stall(102.0, "resolved"))
    assert [a.detector for _, a in got] == ["crash"]  # at once, while the stall is held
    hook.flush(5.0)
    assert [(a.detector, a.state) for _, a in got] == [("crash", "firing"), ("stall", "firing"), ("stall", "resolved")]
    held = got[1][0] - t0
    assert 0.9 <= held < 4.0, held  # hold_s, not the dump's 5 s timeout
    assert under_lock == [True, True, True]  # the held ones too (the sinks' rate limit has one caller)
    assert "stacks_status" not in got[1][1].evidence  # sent without them, as before
    assert hook.thread is not None
    hook.thread.join(10.0)


def test_without_py_spy_the_stall_goes_at_once(tmp_path: Path) -> None:
    monitor = Monitor(keep_lines=0)
    hook = StallStacks(monitor, _Running(), tmp_path, pyspy=lambda: None)
    monitor.subscribe(hook)
    got: list[Alert] = []
    monitor.subscribe(hook.hold(got.append))
    monitor.raise_alert(_stall(100.0))
    assert [a.detector for a in got] == ["stall"]
    assert hook.thread is not None
    hook.thread.join(5.0)


def _lines(proc: subprocess.Popen[str], until, timeout: float) -> list[tuple[float, dict]]:
    """(arrival on the wall clock, alert) lines of ``proc`` until ``until(alerts)`` holds or ``timeout`` passes."""
    assert proc.stdout is not None
    out: list[tuple[float, dict]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not until([a for _, a in out]):
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            line = proc.stdout.readline()
            if not line:
                break
            out.append((time.time(), json.loads(line)))
    return out


def _captured(evidence: dict, state_dir: Path) -> None:
    assert evidence.get("stacks_status") == "captured", evidence
    mains = [s["frames"][0] for s in evidence["stacks"] if s["frames"]]
    assert any(f.startswith("wait_in_all_reduce (train.py:") for f in mains), evidence["stacks"]
    path = Path(evidence["stacks_file"])
    assert path.parent == state_dir and "wait_in_all_reduce" in path.read_text(encoding="utf-8")


@pytest.mark.skipif(PYSPY is None, reason="py-spy not installed (pip install py-spy)")
@pytest.mark.skipif(not Tmux().available, reason="tmux not installed")
def test_headless_line_and_webhook_body_carry_the_stacks_of_a_real_hung_tmux_job(
        tmp_path: Path, tmux_socket: str) -> None:
    script, log, state = tmp_path / "train.py", tmp_path / "train.log", tmp_path / "state"
    script.write_text(HANG, encoding="utf-8")
    log.touch()
    command = " ".join(shlex.quote(str(a)) for a in (sys.executable, script, log, 10))
    cli = [sys.executable, "-m", "dflash_watch.cli"]
    proc = None
    with LoopbackServer() as hook:
        config = tmp_path / "dfw.toml"
        config.write_text(textwrap.dedent(f"""\
            logs = [{json.dumps(str(log))}]
            [run]
            command = {json.dumps(command)}
            session = "job"
            socket = {json.dumps(tmux_socket)}
            state_dir = {json.dumps(str(state))}
            grace_s = 1.0
            preflight_timeout_s = 5.0
            [detectors]
            stall_min_s = 1.0
            stall_factor = 2.0
            stall_first_s = 2.0
            [[alerts.sink]]
            kind = "webhook"
            url = {json.dumps(hook.url)}
        """), encoding="utf-8")
        try:
            started = subprocess.run([*cli, "start", "--config", str(config)], capture_output=True, text=True,
                                     timeout=30, env=_env(), cwd=tmp_path)
            assert started.returncode == 0, started.stderr
            proc = subprocess.Popen([*cli, "headless", "--no-gpu", "--config", str(config)], cwd=tmp_path,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
                                    env=_env())
            alerts = _lines(proc, lambda got: any(a["detector"] == "stall" for a in got), 30.0)
            stalls = [(at, a) for at, a in alerts if a["detector"] == "stall"]
            assert stalls, alerts
            bodies = [json.loads(r.body) for r in hook.wait_for(len(alerts), timeout=10.0)]
        finally:
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
                _rest, err = proc.communicate(timeout=20)
    (at, line), = stalls
    assert line["state"] == "firing"
    # Live, an alert's time is the wall clock when it fired: the line came
    # that long after (the tick, the dump, the hold), within the hold's bound.
    print(f"stall line {at - line['time']:.2f} s after the stall fired, stacks in it")
    assert at - line["time"] < 5.0, at - line["time"]
    _captured(line["evidence"], state)
    (body,) = [b for b in bodies if b["detector"] == "stall"]
    _captured(body["evidence"], state)
    assert body["evidence"] == line["evidence"] and body["time"] == line["time"]
    assert "stacks of 1 process written to" in err, err[-2000:]
