"""A crash in a log whose lines are counted from 1 again is fatal, not survived.

A relaunch truncates the log (``> train.log``) or makes it anew, and a
RotatingFileHandler's rollover can fall on the very record that logs the
traceback: the new file's crash then stands on line 5 while the run before
left its steps on lines 20-40 of the same name. The crash detector tells
"training went on after the traceback" by step lines *later in the file*,
so those old steps read as proof and the crash came out "caught and
survived (training went on)", a warning, while the process had died. The
Monitor now says where a file's numbering begins again (``Renumbered``) and
the detector no longer compares the old lines with the new.

The first tests drive the Monitor as the tailer does; the last runs a
real ``headless`` beside real writers (Python logging with a
RotatingFileHandler, a shell-style truncation, a deleted and re-created
file), with PYTHONUNBUFFERED unset as users run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest
from headless_helpers import alert_lines, wait_for_notice

from dflash_watch.detectors.base import Alert
from dflash_watch.monitor import Monitor

T0 = 1_780_000_000.0
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/train.py", line 11, in <module>\n'
    "    loss.backward()\n"
    "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity)\n"
)


def _steps(first: int, n: int, t0: float, dt: float = 1.0) -> str:
    out = []
    for i in range(n):
        stamp = datetime.fromtimestamp(t0 + i * dt, UTC).strftime("%m/%d/%Y %H:%M:%S")
        out.append(f"{stamp} - INFO - train - step {first + i}/100000 | loss 1.90 | 21.5 Ktok/s\n")
    return "".join(out)


def _crashes(alerts: list[Alert]) -> list[tuple[str, str, str]]:
    return [(a.kind, a.state, a.severity) for a in alerts if a.detector == "crash"]


def _fed(new_generation: bool, *, partial_first: bool = False) -> list[Alert]:
    """30 steps of one run on lines 1-30, then (its lines counted from 1
    again) 3 steps of the next and its traceback, as the live tailer hands
    them over (fresh: written while followed); then the log goes quiet."""
    m = Monitor(keep_lines=0, tz=UTC)
    alerts: list[Alert] = []
    m.subscribe(alerts.append)
    path = "/runs/train.log"
    old = _steps(1, 30, T0)
    m.feed_text(path, old, 1, T0 + 30, 0, fresh=True, arrived=T0 + 30)
    new = _steps(1, 3, T0 + 60) + TRACEBACK
    generation = 1 if new_generation else 0  # a rename rotation goes on in one stream
    if partial_first:
        # Line 1 of the new file drawn before its newline (a tqdm bar).
        m.feed_partial(path, "step 1/100000 | 21.5 Ktok/s", 1, T0 + 59)
    m.feed_text(path, new, 1, T0 + 64, generation, fresh=True, arrived=T0 + 64)
    m.quiet(T0 + 70, T0 + 64)
    m.tick(T0 + 90)
    m.finish()
    return alerts


@pytest.mark.parametrize("new_generation", [True, False], ids=["truncated-or-made-anew", "rotated"])
def test_a_crash_on_line_7_of_a_file_counted_again_is_not_proved_survived_by_the_old_lines(new_generation: bool) -> None:
    assert _crashes(_fed(new_generation)) == [("cuda_oom", "firing", "critical")]


def test_a_new_file_whose_first_line_was_drawn_before_its_newline_is_counted_again_too() -> None:
    assert _crashes(_fed(True, partial_first=True)) == [("cuda_oom", "firing", "critical")]


def test_steps_after_the_traceback_in_the_new_file_still_prove_it_survived() -> None:
    """The new numbering is no blanket verdict: a caught traceback the run
    goes on after, in the same new file (steps stamped in the same second
    as the line before it), is still caught."""
    m = Monitor(keep_lines=0, tz=UTC)
    alerts: list[Alert] = []
    m.subscribe(alerts.append)
    path = "/runs/train.log"
    m.feed_text(path, _steps(1, 30, T0), 1, T0 + 30, 0, fresh=True, arrived=T0 + 30)
    new = _steps(31, 3, T0 + 60) + TRACEBACK + _steps(34, 3, T0 + 62, dt=0.0)
    m.feed_text(path, new, 1, T0 + 66, 0, fresh=True, arrived=T0 + 66)
    m.quiet(T0 + 70, T0 + 66)
    m.tick(T0 + 90)
    m.finish()
    assert _crashes(alerts) == [("cuda_oom", "firing", "warning")]


# ---- real writers, a real headless ---------------------------------------------

WRITER = textwrap.dedent('''
    import logging, logging.handlers, os, sys, time
    mode, path = sys.argv[1], sys.argv[2]

    def logger(handler):
        log = logging.getLogger("train")
        for old in list(log.handlers):
            log.removeHandler(old)
            old.close()
        log.setLevel(logging.INFO)
        handler.setFormatter(logging.Formatter("%(asctime)s - %(levelname)s - %(name)s - %(message)s",
                                               datefmt="%m/%d/%Y %H:%M:%S"))
        log.addHandler(handler)
        return log, handler

    def run(log, first, n):
        for i in range(first, first + n):
            log.info("step %d/100000 | loss 1.90 | 21.5 Ktok/s", i)
            time.sleep(0.05)

    def crash(log):
        try:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity)")
        except RuntimeError:
            log.exception("training failed")

    if mode == "rollover":
        # The record of the traceback is the one the handler rolls over on:
        # the old run's steps end train.log.1, the traceback opens train.log.
        log, handler = logger(logging.handlers.RotatingFileHandler(path, maxBytes=1 << 20, backupCount=3))
        run(log, 1, 30)
        time.sleep(1.5)  # the watcher has read them
        handler.doRollover()
        crash(log)
    else:
        log, _ = logger(logging.FileHandler(path))
        run(log, 1, 30)
        time.sleep(1.5)
        if mode == "truncate":  # the relaunch's ``python train.py > train.log``
            log, _ = logger(logging.FileHandler(path, mode="w"))
        else:  # ``rm train.log`` and the relaunch makes it anew
            os.unlink(path)
            time.sleep(1.0)
            log, _ = logger(logging.FileHandler(path))
        run(log, 1, 3)
        crash(log)
    time.sleep(0.5)
''')


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["rollover", "truncate", "recreate"])
def test_headless_calls_the_crash_of_a_log_counted_again_fatal(tmp_path: Path, mode: str) -> None:
    log = tmp_path / "train.log"
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)  # users do not set it
    watcher = subprocess.Popen(
        [sys.executable, "-m", "dflash_watch.cli", "headless", "--no-gpu", "--log", str(log)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
    )
    try:
        early = wait_for_notice(watcher, "to appear")
        script = tmp_path / "writer.py"
        script.write_text(WRITER)
        writer = subprocess.run([sys.executable, str(script), mode, str(log)], env=env, timeout=60,
                                capture_output=True, text=True)
        assert writer.returncode == 0, writer.stderr
        alerts = alert_lines(watcher, 20.0, lambda a: a["detector"] == "crash")
    finally:
        watcher.send_signal(signal.SIGTERM)
        out, err = watcher.communicate(timeout=15)
    assert watcher.returncode == 0, early + err
    if mode == "rollover":
        assert "step 30/100000" in (tmp_path / "train.log.1").read_text()
        assert log.read_text().splitlines()[1].startswith("Traceback")
    crashes = [(a["kind"], a["state"], a["severity"]) for a in alerts if a["detector"] == "crash"]
    assert crashes == [("cuda_oom", "firing", "critical")], (crashes, early + err)


def test_the_log_views_lines_begin_again_with_the_file() -> None:
    """The lines kept for the log view: the old file's lines 1-30 and the
    new file's 1-7 under the same numbers put an alert's jump to line 7 on
    the old line 7 (and its colour on the new one)."""
    m = Monitor(tz=UTC)
    path = "/runs/train.log"
    m.feed_text(path, _steps(1, 30, T0), 1, T0 + 30, 0, fresh=True, arrived=T0 + 30)
    new = _steps(1, 3, T0 + 60) + TRACEBACK
    m.feed_text(path, new, 1, T0 + 64, 1, fresh=True, arrived=T0 + 64)
    assert list(m.lines[path]) == list(enumerate(new.splitlines(), 1))
    # A catch-up chunk that alone fills the ring is split when a view reads.
    m.feed_text(path, _steps(1, 3000, T0 + 100), 1, T0 + 4000, 2, fresh=False)
    m.feed_text(path, new, 1, T0 + 4064, 3, fresh=True, arrived=T0 + 4064)
    assert list(m.lines[path]) == list(enumerate(new.splitlines(), 1))
