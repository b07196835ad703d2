"""Stacks of a hung job, taken when ``stall`` fires: real processes, real py-spy.

The trainer blocks in ``time.sleep`` inside a function named after what a
hung rank waits in (``wait_in_all_reduce``); ``py-spy dump`` must name it.
Tests that need py-spy skip (with the reason) where it is not installed;
the fakes on PATH stand in only for what a real py-spy cannot be made to
do on purpose (hang, flood its output).
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dflash_watch.control.job import Job, JobSpec
from dflash_watch.control.tmux import Tmux
from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.live import LiveSession
from dflash_watch.monitor import Monitor
from dflash_watch.stacks import NO_PYSPY, capture, main_thread

PYSPY = shutil.which("py-spy")
needs_pyspy = pytest.mark.skipif(PYSPY is None, reason="py-spy not installed (pip install py-spy)")

HANG = textwrap.dedent("""\
    import logging, sys, threading, time
    logging.basicConfig(filename=sys.argv[1], level=logging.INFO,
                        format="%(asctime)s - %(levelname)s - %(name)s - %(message)s")
    log = logging.getLogger("train")

    def loader():
        time.sleep(600)

    def wait_in_all_reduce():
        time.sleep(600)  # a collective that never completes

    threading.Thread(target=loader, name="loader", daemon=True).start()
    for step in range(int(sys.argv[2])):
        log.info("step %d/1000 | loss %.3f | 21500 tok/s", step, 2.0 / (step + 1))
        time.sleep(0.1)
    print("ready", flush=True)
    wait_in_all_reduce()
""")

DUMP = textwrap.dedent("""\
    Process 4242: python train.py
    Python v3.11.7 (/usr/bin/python3.11)

    Thread 4250 (idle): "loader"
        loader (train.py:7)
        Thread.run (threading.py:982)
    Thread 4242 (idle): "MainThread"
        wait_in_all_reduce (train.py:10)
            Arguments:
                x: 1
        <module> (train.py:15)
""")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)
    return env


@pytest.fixture
def hung(tmp_path: Path):
    """A real Python process blocked in ``wait_in_all_reduce`` (ended after the test)."""
    script = tmp_path / "train.py"
    script.write_text(HANG, encoding="utf-8")
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "train.log"), "0"],
                            stdout=subprocess.PIPE, text=True, env=_env())
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    yield proc
    proc.kill()
    proc.wait(timeout=5)


def _fake_pyspy(folder: Path, body: str) -> str:
    path = folder / "py-spy"
    path.write_text(f"#!{sys.executable}\n{body}", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_the_main_thread_and_its_innermost_frames_are_found() -> None:
    thread, frames = main_thread(DUMP, 4242)
    assert '"MainThread"' in thread
    assert frames == ("wait_in_all_reduce (train.py:10)", "<module> (train.py:15)")  # no locals, no other thread
    # Without thread names (threading never imported): the thread whose id is the pid.
    thread, frames = main_thread(DUMP.replace(': "MainThread"', "").replace(': "loader"', ""), 4242)
    assert thread.startswith("Thread 4242") and frames[0].startswith("wait_in_all_reduce")


@needs_pyspy
def test_a_real_hung_process_is_dumped_to_evidence_and_a_file(tmp_path: Path, hung) -> None:
    cap = capture([hung.pid], tmp_path / "state", time.time(), key="job")
    assert cap.status == "captured", cap
    (d,) = cap.dumps
    assert d.frames[0].startswith("wait_in_all_reduce (train.py:"), d.text
    ev = cap.evidence()
    assert ev["stacks"][0]["pid"] == hung.pid and ev["stacks"][0]["frames"] == list(d.frames)
    text = Path(ev["stacks_file"]).read_text(encoding="utf-8")
    assert Path(ev["stacks_file"]).name.startswith("stacks-") and "loader (train.py:" in text


def test_without_py_spy_the_evidence_says_so(tmp_path: Path, hung, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no py-spy on it
    cap = capture([hung.pid], tmp_path, time.time())
    assert cap.evidence() == {"stacks_status": NO_PYSPY}


def test_time_and_output_are_bounded_and_pids_dumped_in_parallel(tmp_path: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(3)]
    try:
        slow = _fake_pyspy(tmp_path, "import time; time.sleep(60)\n")
        t0 = time.monotonic()
        cap = capture([p.pid for p in procs], tmp_path, time.time(), pyspy=slow, timeout_s=1.0)
        took = time.monotonic() - t0
        assert took < 2.5, took  # three pids, 1 s each, in parallel
        assert [d.error for d in cap.dumps] == ["py-spy timed out after 1 s"] * 3
        assert cap.status.startswith("failed: py-spy timed out")
        flood = _fake_pyspy(tmp_path, "import sys\nsys.stdout.write('Thread 1 (idle)\\n' + '    f (x.py:1)\\n' * 200000)\n")
        cap = capture([procs[0].pid], tmp_path, time.time(), pyspy=flood, max_bytes=4096)
        (d,) = cap.dumps
        assert d.truncated and len(d.text.encode()) <= 4096 and len(d.frames) == 5
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=5)


@needs_pyspy
@pytest.mark.skipif(not Tmux().available, reason="tmux not installed")
def test_a_stall_of_a_tmux_job_gets_its_stacks_in_the_alert(tmp_path: Path, tmux: Tmux) -> None:
    """Live: a real tmux job logs steps, then hangs; the stall alert is amended with its stacks."""
    script, log = tmp_path / "train.py", tmp_path / "train.log"
    script.write_text(HANG, encoding="utf-8")
    log.touch()
    spec = JobSpec(command=f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} {shlex.quote(str(log))} 10",
                   session="job", socket=tmux.socket, state_dir=tmp_path / "state", grace_s=1.0)
    job = Job(spec)
    monitor = Monitor(detector_config=DetectorConfig(stall_min_s=1.0, stall_factor=2.0, stall_first_s=2.0),
                      keep_lines=0)
    session = LiveSession(monitor, logs=(str(log),), use_nvml=False, job=job)
    job.start()
    with session:
        deadline = time.monotonic() + 20.0
        stall = None
        while time.monotonic() < deadline:
            with monitor.lock:
                stall = next((a for a in monitor.alerts.firing() if a.detector == "stall"), None)
            if stall is not None and "stacks_status" in stall.evidence:
                break
            time.sleep(0.1)
    assert stall is not None, list(monitor.notices)
    assert stall.evidence["stacks_status"] == "captured", stall.evidence
    mains = [s["frames"][0] for s in stall.evidence["stacks"] if s["frames"]]
    assert any(f.startswith("wait_in_all_reduce (train.py:") for f in mains), stall.evidence["stacks"]
    path = Path(stall.evidence["stacks_file"])
    assert path.parent == tmp_path / "state" and "wait_in_all_reduce" in path.read_text(encoding="utf-8")
    assert [a.state for a in monitor.alerts.history if a.detector == "stall"] == ["firing"]  # amended, not sent twice
    assert monitor.alerts.history[-1].evidence.get("stacks_file") == str(path) or any(
        a.evidence.get("stacks_file") == str(path) for a in monitor.alerts.history)
    assert any(str(path) in n for n in monitor.notices)


def test_without_py_spy_the_live_hook_says_so_once_and_in_the_alert() -> None:
    from dflash_watch.control.state import JobState
    from dflash_watch.detectors.base import Alert
    from dflash_watch.stacks import StallStacks

    class Running:
        def status(self) -> JobState:
            return JobState("running", "job", pid=os.getpid(), pids=(os.getpid(),), pane="%0")

    monitor = Monitor(keep_lines=0)
    hook = StallStacks(monitor, Running(), "/nonexistent", pyspy=lambda: None)
    monitor.subscribe(hook)
    for t in (100.0, 200.0):  # two stall episodes
        monitor.raise_alert(Alert(t, "stall", "firing", "warning", "no progress", "log:1"))
        assert hook.thread is not None
        hook.thread.join(5.0)
        (firing,) = [a for a in monitor.alerts.firing() if a.detector == "stall"]
        assert firing.evidence == {"stacks_status": NO_PYSPY} and firing.time == t
        monitor.raise_alert(Alert(t + 1, "stall", "resolved", "warning", "progress resumed", "log:2"))
    assert [n for n in monitor.notices if "py-spy" in n] == [
        "stall: py-spy not installed, no stacks of the hung job (pip install py-spy)"]
