"""``[run] on_stall``: what to do with a job that stays hung.

``alert`` (the default) only alerts. ``abort`` ends the job, ``relaunch``
ends it and starts it again, once the ``stall`` alert has stayed firing for
``grace_s`` (a hang that a slow collective or a long save ends by itself
is left alone). A relaunch is one more restart under the very guard that
auto-relaunch on crash uses (``AutoRelaunchPolicy.on_stall``): a run that
hangs again inside the crash-loop window stops being relaunched, with the
crash-loop alert.

It never acts on a job that is not alive (a crash or an exit already
explains the silence), nor on one that was relaunched since the stall
fired (by a user, a script or auto-relaunch): each stall episode is acted
on at most once, and only on the incarnation that hung. The action runs on
its own thread: an abort waits out the job's grace period (Ctrl-C, then
SIGTERM, then SIGKILL), which must not hold up the tick loop.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .autorelaunch import STALL_SIGNATURE, AutoRelaunchConfig, AutoRelaunchPolicy
from .state import incarnation

if TYPE_CHECKING:
    from ..monitor import Monitor

ACTIONS = ("alert", "abort", "relaunch")
# How long a relaunch waits for the tick loop to report the aborted run's exit.
EXIT_WAIT_S = 5.0


@dataclass(frozen=True, slots=True)
class OnStallConfig:
    """``action``: one of ``ACTIONS``; ``grace_s``: how long the stall must stay
    firing first; ``guard``: the crash-loop guard when auto-relaunch has none to share."""

    action: str = "alert"
    grace_s: float = 300.0
    guard: AutoRelaunchConfig = field(default_factory=AutoRelaunchConfig)


class OnStall:
    """Call :meth:`step` on every tick (after ``Monitor.tick``), from one thread."""

    def __init__(self, monitor: Monitor, job: Any, config: OnStallConfig,
                 policy: AutoRelaunchPolicy | None = None) -> None:
        self.monitor = monitor
        self.job = job
        self.config = config
        self.policy = policy or AutoRelaunchPolicy(config.guard)
        # The stall episode being watched: its alert, when it was first seen
        # (monotonic), the job incarnation then, and whether it was handled.
        self._alert: Any = None
        self._seen = 0.0
        self._incarnation: str | None = None
        self._done = False
        self._looped = False
        self.thread: threading.Thread | None = None
        self.actions = 0  # aborts and relaunches done (tests, status)

    def step(self, now: float) -> None:
        if self.config.action == "alert" or (self.thread is not None and self.thread.is_alive()):
            return
        with self.monitor.lock:
            alert = next((a for a in self.monitor.alerts.firing() if a.detector == "stall"), None)
        if alert is None:
            self._alert = None
            return
        if alert is not self._alert and not (self._alert is not None and alert.time == self._alert.time):
            # A new episode (an amended alert of the same episode keeps its time).
            self._alert, self._seen, self._done = alert, time.monotonic(), False
            self._incarnation = self._look()
        if self._done or time.monotonic() - self._seen < self.config.grace_s:
            return
        self._done = True
        st = self._status()
        if st is None or not st.running:
            self.monitor.note(f"on_stall {self.config.action}: the job is not running; nothing done")
            return
        if self._incarnation is None or incarnation(st) != self._incarnation:
            self.monitor.note(f"on_stall {self.config.action}: the job was relaunched since the stall; nothing done")
            return
        if self.config.action == "relaunch":
            decision = self.policy.on_stall(now)
            if decision.crash_loop and not self._looped:
                self._looped = True  # one alert for the loop; later hangs get their stall alert only
                self.monitor.raise_alert(stall_loop_alert(now, decision.reason))
                return
            if not decision.relaunch:
                self.monitor.note(f"on_stall relaunch: not relaunched ({decision.reason})")
                return
            self.monitor.note(f"on_stall: the job made no progress for {self.config.grace_s:g} s after the stall "
                              f"alert; {decision.reason}")
        else:
            self.monitor.note(f"on_stall: the job made no progress for {self.config.grace_s:g} s after the stall "
                              "alert; aborting it")
        self.thread = threading.Thread(target=self._act, args=(now,), name="on-stall", daemon=True)
        self.thread.start()

    def _status_running(self) -> bool:
        st = self._status()
        return st is not None and st.running

    def _look(self) -> str | None:
        st = self._status()
        return incarnation(st) if st is not None and st.running else None

    def _status(self) -> Any:
        try:
            return self.job.status()
        except Exception as exc:  # noqa: BLE001 - tmux gone: no action, said
            self.monitor.note(f"on_stall: job status failed: {exc}")
            return None

    def _act(self, now: float) -> None:
        step = self.monitor.note
        try:
            seen = self.monitor.last_exit
            self.job.abort(on_step=step, asked=self.config.action)
            if self.config.action == "relaunch":
                # The tick loop reports the hung run's exit (it ends the stall
                # episode; the new run's step 0 would otherwise read as an old
                # rank's copy): wait for it, briefly, before starting again.
                deadline = time.monotonic() + EXIT_WAIT_S
                while self.monitor.last_exit is seen and time.monotonic() < deadline:
                    time.sleep(0.05)
                if self._status_running():
                    step("on_stall relaunch: the job was started again by someone else; nothing done")
                    return
                state = self.job.relaunch(on_step=step)
                self.monitor.job_relaunched(now, state if hasattr(state, "running") else None)
            self.actions += 1
        except Exception as exc:  # noqa: BLE001 - reported, never raised into the live session
            self.monitor.note(f"on_stall {self.config.action} failed: {exc}")


def stall_loop_alert(now: float, reason: str) -> Any:
    """The relaunched job hung again inside the crash-loop window: stop, say so (as a crash loop does)."""
    from .autorelaunch import crash_loop_alert

    return crash_loop_alert(now, "on_stall relaunch", reason, "tmux", {"signature": STALL_SIGNATURE})
