"""What the dashboard needs from job control, as a Protocol.

The real ``dflash_watch.control.Job`` satisfies it; tests pass a fake that
records calls. Keeping the surface this small means the TUI cannot grow a
dependency on tmux details: it asks for a state, or for an action with a
callback that reports each step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

StepFn = Callable[[str], None]


@runtime_checkable
class JobSpecLike(Protocol):
    """The parts of a job spec the dashboard shows: what would be started, where."""

    command: str
    session: str
    gpus: tuple[int, ...] | None
    grace_s: float


@runtime_checkable
class JobController(Protocol):
    """Start/abort/relaunch a job and report its state.

    All methods may block (tmux calls, grace periods): the dashboard calls
    them on thread workers only. ``relaunch`` raises an error carrying
    ``pids`` (``RelaunchRefused``) when the old run still holds the GPUs.
    """

    spec: JobSpecLike

    @property
    def available(self) -> bool: ...

    def status(self) -> Any: ...

    def start(self, on_step: StepFn | None = None) -> Any: ...

    def abort(self, grace_s: float | None = None, on_step: StepFn | None = None) -> Any: ...

    def relaunch(self, grace_s: float | None = None, on_step: StepFn | None = None) -> Any: ...


@runtime_checkable
class PaneAdopter(Protocol):
    """Optional: a controller that can take over a pane the user started by hand.

    ``adoption(state)`` says what a takeover would run (None: nothing to
    take over, a plain relaunch does); ``take_over`` does it, only after the
    user confirmed. The dashboard asks for these with ``getattr``: a
    controller without them (the demo's child job) just relaunches.
    """

    def adoption(self, state: Any = None) -> Any: ...

    def take_over(self, adoption: Any, grace_s: float | None = None, command: str | None = None,
                  on_step: StepFn | None = None) -> Any: ...
