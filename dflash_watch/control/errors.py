"""The ways a job action can fail, each a type the CLI maps to an exit code.

Kept apart from the Job so that the dashboard and the CLI can catch them
without importing tmux or /proc code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .state import JobState


class ControlUnavailable(RuntimeError):
    """Job control is off (tmux missing); monitoring is unaffected."""


class JobError(RuntimeError):
    """A start/abort/relaunch could not be done; the message says why in one line."""


class AlreadyRunning(JobError):
    def __init__(self, state: JobState) -> None:
        super().__init__(f"already running in {state.session} (pid {state.pid}); use relaunch to restart it")
        self.state = state


class RelaunchRefused(JobError):
    """Processes of the old run still hold the job's GPUs (or are still alive)."""

    def __init__(self, message: str, pids: tuple[int, ...]) -> None:
        super().__init__(message)
        self.pids = pids


class SurvivorsAlive(JobError):
    """The last run's processes outlived their pane (a killed tmux server): starting now would
    make two trainings. ``run_alive``: the training itself lives on, not only leftovers."""

    def __init__(self, action: str, pids: tuple[int, ...], run_alive: bool) -> None:
        what = ("the last run still runs outside tmux" if run_alive
                else "processes of the last run are still alive")
        super().__init__(f"refusing to {action}: {what} (pids {', '.join(map(str, pids))}); "
                         "dflash-watch abort ends them")
        self.pids = pids
        self.run_alive = run_alive


class HandStarted(JobError):
    """The job's pane runs a training the user started by hand: a relaunch
    would stop it and then find the pane alive (dflash-watch respawns only
    dead panes), so nothing would run. Refused before anything is touched;
    a takeover (the dashboard's ``r``, ``relaunch --take-over``) is the way."""

    def __init__(self, state: JobState) -> None:
        super().__init__(
            f"the run in pane {state.pane} of {state.session} was started by hand (pid {state.pid}): nothing was "
            "touched; relaunch --take-over stops it (your shell is spared) and runs the command in that pane")
        self.state = state
