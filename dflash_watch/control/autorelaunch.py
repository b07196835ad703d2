"""When to bring a crashed run back by itself, and when to stop trying.

Why not torchrun's ``--max-restarts``: restarting blindly burns hours on a
deterministic crash (a bad batch, an FX-tracing collision) and hides it.
The policy counts restarts, backs off exponentially, and stops with a
"crash loop" verdict when the same crash signature comes back N times in M
minutes. It is a pure decision object (no clock, no I/O, no dflash_watch
imports: times come in as arguments), so it can move to the core and is
tested without tmux. :class:`AutoRelauncher` is the thin driver that ties
it to a Job; it takes ``now`` too and never sleeps.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from dflash_watch.detectors.base import Alert
from dflash_watch.parsers.events import ProcessExit

from .exits import SignatureSource

# What "the same crash" is for a run relaunched because it hung (``on_stall``).
STALL_SIGNATURE = "stall (no progress)"


@dataclass(frozen=True, slots=True)
class AutoRelaunchConfig:
    """``enabled`` is off by default: relaunching is the user's call unless they opt in.

    ``relaunch_on``: exit kinds that may be relaunched (a clean exit is a
    finished run; a kill is usually someone's decision). ``healthy_after_s``:
    a run that lasted this long resets the backoff.
    """

    enabled: bool = False
    max_restarts: int = 5
    backoff_s: float = 30.0
    backoff_factor: float = 2.0
    backoff_max_s: float = 600.0
    crash_loop_count: int = 3
    crash_loop_window_s: float = 600.0
    relaunch_on: tuple[str, ...] = ("crash",)
    healthy_after_s: float = 3600.0


@dataclass(frozen=True, slots=True)
class Decision:
    relaunch: bool
    delay_s: float
    reason: str
    crash_loop: bool = False


def exit_signature(exit: ProcessExit) -> str:
    """The crash signature, else the exit status: what "the same crash" means."""
    if exit.signature:
        return exit.signature
    if exit.signal is not None:
        return f"signal:{exit.signal}"
    return f"code:{exit.code}"


class AutoRelaunchPolicy:
    """Bounded state: the restart count and the recent crash times per signature."""

    def __init__(self, config: AutoRelaunchConfig) -> None:
        self.config = config
        self.restarts = 0
        self.stopped: str | None = None
        self._streak = 0
        self._recent: dict[str, deque[float]] = {}

    def reset(self) -> None:
        """A manual start/relaunch by the user: forget the past, re-arm."""
        self.restarts = 0
        self.stopped = None
        self._streak = 0
        self._recent.clear()

    def on_exit(self, time: float, exit: ProcessExit, run_started: float | None = None) -> Decision:
        cfg = self.config
        if not cfg.enabled:
            return Decision(False, 0.0, "auto-relaunch is off")
        if self.stopped:
            return Decision(False, 0.0, f"auto-relaunch stopped: {self.stopped}", self.stopped.startswith("crash loop"))
        if exit.kind not in cfg.relaunch_on:
            return Decision(False, 0.0, f"{exit.kind} exit is not relaunched")

        return self._count(time, exit_signature(exit), run_started)

    def on_stall(self, time: float, run_started: float | None = None) -> Decision:
        """A hung run that ``[run] on_stall = "relaunch"`` wants brought back.

        The same guard as a crash: it counts toward ``max_restarts`` and the
        crash loop (signature ``STALL_SIGNATURE``: a run that hangs again
        right after its relaunch hangs for a reason), whether or not
        auto-relaunch on crash is on (that is ``enabled``'s business, not
        this). No backoff delay: the stall limit and ``on_stall_grace_s``
        were already waited.
        """
        if self.stopped:
            return Decision(False, 0.0, f"auto-relaunch stopped: {self.stopped}", self.stopped.startswith("crash loop"))
        decision = self._count(time, STALL_SIGNATURE, run_started)
        if not decision.relaunch:
            return decision
        return replace(decision, delay_s=0.0,
                       reason=f"relaunch {self.restarts}/{self.config.max_restarts} after {STALL_SIGNATURE}")

    def _count(self, time: float, sig: str, run_started: float | None) -> Decision:
        """Count one more restart for ``sig``: a relaunch, or the verdict that stops them."""
        cfg = self.config
        times = self._recent.setdefault(sig, deque())
        times.append(time)
        while times and time - times[0] > cfg.crash_loop_window_s:
            times.popleft()
        if len(self._recent) > 64:  # keep the state bounded
            for key in [k for k, v in self._recent.items() if not v or time - v[-1] > cfg.crash_loop_window_s]:
                del self._recent[key]
        if len(times) >= cfg.crash_loop_count:
            self.stopped = (f"crash loop: {sig} repeated {len(times)} times in "
                            f"{cfg.crash_loop_window_s / 60:g} min")
            return Decision(False, 0.0, self.stopped, crash_loop=True)
        if self.restarts >= cfg.max_restarts:
            self.stopped = f"max restarts ({cfg.max_restarts}) reached"
            return Decision(False, 0.0, self.stopped)

        if run_started is not None and time - run_started >= cfg.healthy_after_s:
            self._streak = 0
        delay = min(cfg.backoff_max_s, cfg.backoff_s * cfg.backoff_factor ** self._streak)
        self._streak += 1
        self.restarts += 1
        return Decision(True, delay, f"relaunch {self.restarts}/{cfg.max_restarts} in {delay:g} s after {sig}")


class _JobLike(Protocol):
    def poll_exit(self, now: float, signature: SignatureSource = None) -> ProcessExit | None: ...
    def relaunch(self, grace_s: float | None = None, on_step: Callable[[str], None] | None = None) -> object: ...


@dataclass(frozen=True, slots=True)
class AutoStep:
    """What one :meth:`AutoRelauncher.step` saw or did, for the Monitor to publish."""

    exit: ProcessExit | None = None
    decision: Decision | None = None
    relaunched: bool = False
    error: str | None = None


class AutoRelauncher:
    """Drives a Job with a policy. Call :meth:`step` on every Monitor tick."""

    def __init__(self, job: _JobLike, policy: AutoRelaunchPolicy) -> None:
        self.job = job
        self.policy = policy
        self.due: float | None = None
        self._run_started: float | None = None

    def _started_by_another(self) -> bool:
        """The job runs again though this watcher has not relaunched it yet."""
        status = getattr(self.job, "status", None)
        return callable(status) and bool(getattr(status(), "running", False))

    def step(self, now: float, signature: SignatureSource = None, run_started: float | None = None) -> AutoStep:
        if self.due is not None:
            if now < self.due:
                return AutoStep()
            self.due = None
            try:
                if self._started_by_another():
                    # Another watcher's auto-relaunch (both read the same
                    # exit) or a relaunch from a shell came first: a second
                    # one would stop that fresh run and start it again.
                    return AutoStep(error="auto-relaunch: the job was started again by someone else; nothing done")
                self.job.relaunch()
            except Exception as exc:  # reported, never raised into the Monitor
                return AutoStep(relaunched=False, error=f"auto-relaunch failed: {exc}")
            self._run_started = now
            return AutoStep(relaunched=True)
        exit = self.job.poll_exit(now, signature)
        if exit is None:
            return AutoStep()
        decision = self.policy.on_exit(exit.time, exit, run_started if run_started is not None else self._run_started)
        if decision.relaunch:
            self.due = now + decision.delay_s
        return AutoStep(exit=exit, decision=decision)


def crash_loop_alert(now: float, relaunch: str, reason: str, source: str, evidence: dict[str, Any]) -> Alert:
    """The guard stopped a relaunch (``relaunch``: "auto-relaunch" after a
    crash, "on_stall relaunch" after a hang): one critical alert, the same
    shape whichever stopped, so sinks and rules route both alike."""
    return Alert(
        time=now,
        detector="process_exit",
        state="firing",
        severity="critical",
        kind="crash",
        message=f"crash loop: {relaunch} stopped ({reason})",
        source=source,
        evidence={"crash_loop": True, **evidence},
    )
