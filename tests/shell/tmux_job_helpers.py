"""What the tests of the tmux-managed job share (not a test module).

The private tmux server itself is the ``tmux`` fixture of ``tests/conftest.py``
and the ``marker`` fixture (a word of the test's own in its trainers' argv)
is in ``tests/shell/conftest.py``; here is the job's side: a ``JobSpec`` on
that server, the long-running fake trainer, the trainers a marker names
(only those: each records its pid under the word) and bounded waits.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from dflash_watch.control.job import Job, JobSpec, JobState, proc_alive
from dflash_watch.control.tmux import Tmux

TRAINERS = Path(__file__).resolve().parent / "fake_trainers"
PY = shlex.quote(sys.executable)

T = TypeVar("T")


def marked_pids(word: str) -> list[int]:
    """Live trainers started with ``--marker word`` (not bash or the wrapper).

    Each such trainer records its pid under the word; only those pids are
    looked at (and their argv checked, so a recycled pid never counts):
    no scan of the machine's process table, whose other jobs are not ours."""
    path = Path(tempfile.gettempdir()) / "dfw-test-markers" / f"{word}.pids"
    try:
        pids = [int(x) for x in path.read_text().split()]
    except (OSError, ValueError):
        return []
    found = []
    for pid in dict.fromkeys(pids):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a.endswith(b"long_trainer.py") for a in argv) and word.encode() in argv and proc_alive(pid):
            found.append(pid)
    return found


def spec(tmux: Tmux, tmp_path: Path, command: str, **kw: Any) -> JobSpec:
    kw.setdefault("session", "job")
    kw.setdefault("grace_s", 1.0)
    kw.setdefault("preflight_timeout_s", 5.0)
    return JobSpec(command=command, socket=tmux.socket, state_dir=tmp_path / "state", **kw)


def long_cmd(tmp_path: Path, marker: str = "", ignore: str = "") -> str:
    cmd = f"{PY} {shlex.quote(str(TRAINERS / 'long_trainer.py'))} --pid-file {shlex.quote(str(tmp_path / 'pids'))}"
    if marker:
        cmd += f" --marker {marker}"
    if ignore:
        cmd += f" --ignore {ignore}"
    return cmd


def wait_for(pred: Callable[[], T], timeout: float = 10.0, every: float = 0.02) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"condition not met within {timeout} s")


def wait_ended(job: Job, timeout: float = 10.0) -> JobState:
    return wait_for(lambda: (lambda st: st if not st.running else None)(job.status()), timeout)


def trainer_pids(tmp_path: Path, n: int = 1) -> list[int]:
    """Pids the long trainers wrote once they reached their loop (signals set up)."""
    path = tmp_path / "pids"
    return wait_for(lambda: path.exists() and len(path.read_text().split()) >= n and
                    [int(x) for x in path.read_text().split()])


def ns(**kw: Any) -> argparse.Namespace:
    base: dict[str, Any] = dict(config=None, session=None, cmd=None, socket=None, cwd=None, grace=None)
    base.update(kw)
    return argparse.Namespace(**base)
