"""One look at the job (``JobState``) and the words used to say it.

A frozen value that the CLI prints, the Monitor keeps and the dashboard
shows: every line about a job's state is made here, so ``status`` and the
header say the same thing.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Literal

# What the job is doing now: ``running`` in its pane, ``exited`` with a code,
# ``killed`` by a signal, ``absent`` (no session, or never started).
JobStatus = Literal["running", "exited", "killed", "absent"]


@dataclass(frozen=True, slots=True)
class JobState:
    """One look at the job. ``pids`` is the pane's process tree while running,
    else any processes of the last run still alive (verified: ``survivors.py``).
    ``asked``: the run ended because dflash-watch was asked to end it
    (``abort``, ``relaunch``), so its signal is no failure."""

    state: JobStatus
    session: str
    code: int | None = None
    signal: int | None = None
    pid: int | None = None
    pids: tuple[int, ...] = ()
    started_at: float | None = None
    uptime_s: float | None = None
    message: str = ""
    pane: str | None = None
    run_id: str | None = None
    asked: str | None = None

    @property
    def running(self) -> bool:
        return self.state == "running"

    @property
    def managed(self) -> bool:
        """Started by dflash-watch's wrapper (a run id it made, not a pane it found)."""
        return bool(self.run_id) and not str(self.run_id).startswith("pane:")

    def line(self) -> str:
        """One line for the CLI and the TUI status bar."""
        if self.state == "running":
            up = f", up {duration_text(self.uptime_s)}" if self.uptime_s is not None else ""
            text = f"running in {self.session} (pid {self.pid}, {len(self.pids)} processes{up})"
        elif self.asked and self.state in ("killed", "exited"):
            how = signame(self.signal) if self.signal else f"exit code {self.code}"
            text = f"stopped as asked ({self.asked}) after {how} in {self.session}"
        elif self.state == "killed":
            text = f"killed by {signame(self.signal)} in {self.session}"
        elif self.state == "exited":
            code = "unknown" if self.code is None else str(self.code)
            text = f"exited with code {code} in {self.session}"
        else:
            text = f"absent: {self.session}"
        return f"{text}: {self.message}" if self.message else text


def incarnation(st: JobState) -> str | None:
    """What identifies one run across callers: the pane and its process (stable from launch on)."""
    return f"{st.pane}:{st.pid}" if st.pane else st.run_id


def int_or_none(value: object) -> int | None:
    if value is None or value == "" or value is False:
        return None
    try:
        return int(value)  # type: ignore[call-overload]  # any JSON value: what int() refuses is caught below
    except (TypeError, ValueError):
        return None


def signame(sig: int | None) -> str:
    try:
        return signal.Signals(sig).name if sig else "unknown signal"
    except ValueError:
        return f"signal {sig}"


def pids_text(pids: tuple[int, ...]) -> str:
    return "pids " + ", ".join(map(str, pids)) if pids else "no pids"


def duration_text(seconds: float | None) -> str:
    s = int(seconds or 0)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"
