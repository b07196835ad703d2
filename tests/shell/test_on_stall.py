"""``[run] on_stall = "relaunch"``: a real tmux job that hangs, a real `headless`.

The job logs a few steps and hangs (blocked in a sleep, as a rank waiting
in a collective that never completes). With a short stall limit and grace,
`headless` relaunches it once; the relaunch hangs the same way inside the
crash-loop window, and the guard stops relaunching with the crash-loop
alert (``crash_loop_count = 2``: the second hang). The launches are counted
by the job itself, in a file.
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
import time
from pathlib import Path

import pytest

from dflash_watch.control.autorelaunch import AutoRelaunchConfig, AutoRelaunchPolicy
from dflash_watch.control.on_stall import OnStall, OnStallConfig
from dflash_watch.control.state import JobState
from dflash_watch.control.tmux import Tmux
from dflash_watch.detectors.base import Alert
from dflash_watch.monitor import Monitor

pytestmark = pytest.mark.skipif(not Tmux().available, reason="tmux not installed")

HANG = textwrap.dedent("""\
    import logging, sys, time
    with open(sys.argv[2], "a") as fh:
        fh.write("launch\\n")
    logging.basicConfig(filename=sys.argv[1], level=logging.INFO,
                        format="%(asctime)s - %(levelname)s - %(name)s - %(message)s")
    log = logging.getLogger("train")

    def wait_in_all_reduce():
        time.sleep(600)

    for step in range(8):
        log.info("step %d/1000 | loss %.3f | 21500 tok/s", step, 2.0 / (step + 1))
        time.sleep(0.1)
    wait_in_all_reduce()
""")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)
    return env


def _lines(proc: subprocess.Popen[str], until, timeout: float) -> list[dict]:
    """Alert lines of ``proc`` until ``until(alerts)`` holds or ``timeout`` passes."""
    assert proc.stdout is not None
    out: list[dict] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not until(out):
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            line = proc.stdout.readline()
            if not line:
                break
            out.append(json.loads(line))
    return out


def test_policy_counts_stall_relaunches_toward_the_crash_loop() -> None:
    policy = AutoRelaunchPolicy(AutoRelaunchConfig(enabled=False, crash_loop_count=2, crash_loop_window_s=600.0))
    first = policy.on_stall(1000.0)
    assert first.relaunch and first.delay_s == 0.0 and policy.restarts == 1
    second = policy.on_stall(1300.0)
    assert not second.relaunch and second.crash_loop and "stall" in second.reason
    # Outside the window, a second hang is a new incident.
    policy = AutoRelaunchPolicy(AutoRelaunchConfig(crash_loop_count=2, crash_loop_window_s=600.0))
    assert policy.on_stall(1000.0).relaunch and policy.on_stall(1700.0).relaunch


def test_a_hung_job_is_relaunched_once_then_the_crash_loop_guard_stops(tmp_path: Path, tmux_socket: str) -> None:
    script, log, launches = tmp_path / "train.py", tmp_path / "train.log", tmp_path / "launches"
    script.write_text(HANG, encoding="utf-8")
    log.touch()
    command = " ".join(shlex.quote(str(a)) for a in (sys.executable, script, log, launches))
    config = tmp_path / "dfw.toml"
    config.write_text(textwrap.dedent(f"""\
        logs = [{json.dumps(str(log))}]
        [run]
        command = {json.dumps(command)}
        session = "job"
        socket = {json.dumps(tmux_socket)}
        state_dir = {json.dumps(str(tmp_path / "state"))}
        grace_s = 1.0
        preflight_timeout_s = 5.0
        on_stall = "relaunch"
        on_stall_grace_s = 1.0
        crash_loop_count = 2
        [detectors]
        stall_min_s = 1.0
        stall_factor = 2.0
        stall_first_s = 2.0
    """), encoding="utf-8")
    cli = [sys.executable, "-m", "dflash_watch.cli"]
    proc = None
    try:
        started = subprocess.run([*cli, "start", "--config", str(config)], capture_output=True, text=True,
                                 timeout=30, env=_env(), cwd=tmp_path)
        assert started.returncode == 0, started.stderr
        proc = subprocess.Popen([*cli, "headless", "--no-gpu", "--config", str(config)], cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1, env=_env())

        def looped(alerts: list[dict]) -> bool:
            return any(a["evidence"].get("crash_loop") for a in alerts)

        alerts = _lines(proc, looped, 40.0)
        time.sleep(1.0)  # no third launch comes
        launched = launches.read_text().split()
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            rest, err = proc.communicate(timeout=20)
    alerts += [json.loads(line) for line in rest.splitlines()]
    stalls = [a["state"] for a in alerts if a["detector"] == "stall"]
    assert stalls[:3] == ["firing", "resolved", "firing"], (alerts, err[-3000:])
    loop = [a for a in alerts if a["evidence"].get("crash_loop")]
    assert len(loop) == 1 and loop[0]["severity"] == "critical", (alerts, err[-3000:])
    assert "on_stall relaunch stopped" in loop[0]["message"] and "stall" in loop[0]["message"]
    assert launched == ["launch", "launch"], err[-3000:]  # the start and one relaunch
    assert "on_stall: the job made no progress" in err


class _Job:
    """A job whose state the test sets: counts what was asked of it."""

    def __init__(self, state: JobState) -> None:
        self.state = state
        self.asked: list[str] = []

    def status(self) -> JobState:
        return self.state

    def abort(self, grace_s=None, on_step=None, asked="abort"):  # noqa: ANN001, ANN201
        self.asked.append(asked)

    def relaunch(self, grace_s=None, on_step=None):  # noqa: ANN001, ANN201
        self.asked.append("start")


@pytest.mark.parametrize("later, acts", [
    (JobState("running", "job", pid=10, pane="%0"), True),  # the same run, still hung
    (JobState("running", "job", pid=11, pane="%0"), False),  # relaunched since (by someone)
    (JobState("exited", "job", code=1, pid=10, pane="%0"), False),  # the same run, no longer alive
])
def test_on_stall_acts_only_on_the_run_that_hung_while_it_lives(later: JobState, acts: bool) -> None:
    monitor = Monitor(keep_lines=0)
    job = _Job(JobState("running", "job", pid=10, pane="%0"))
    on_stall = OnStall(monitor, job, OnStallConfig("abort", grace_s=0.2))
    on_stall.step(100.0)  # nothing firing: nothing done
    monitor.raise_alert(Alert(100.0, "stall", "firing", "warning", "no progress for 5 min", "log:1"))
    on_stall.step(100.0)  # sees the episode and the run it hangs in...
    job.state = later
    time.sleep(0.25)
    on_stall.step(101.0)  # ...then, after the grace, acts or not
    if on_stall.thread is not None:
        on_stall.thread.join(5.0)
    assert job.asked == (["abort"] if acts else [])
    on_stall.step(102.0)  # one action per episode
    assert len(job.asked) <= 1


def test_an_unknown_on_stall_action_is_one_line_and_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "dfw.toml"
    config.write_text('[run]\non_stall = "reboot"\n', encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "dflash_watch.cli", "headless", "--no-gpu", "--config", str(config)],
                          capture_output=True, text=True, timeout=60, env=_env(), cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == 'dflash-watch: [run] on_stall = "reboot": must be one of "alert", "abort", "relaunch"\n'
