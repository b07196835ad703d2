"""process_exit: the managed training process exited (a one-shot alert).

``kind`` is the contract's ``crash`` / ``clean`` / ``killed`` / ``aborted``:
critical for a crash and a kill from outside (they stop a run against its
will), info for a clean finish and for a stop the user asked for (``abort``,
``a`` in the dashboard, a relaunch): the control layer sent that Ctrl-C and
says so (``ProcessExit.asked``), so the signal it ended by is no news.

An exit code says little ("exited with code 1"); the log usually said why a
moment before. So the detector also takes the Crash events and names the
last one read (its root cause, not a consequence such as torch elastic's
report) when the process exits soon after it: kind, exception and rank.
"""

from __future__ import annotations

import signal as _signal

from ..parsers.crash.signatures import COLLATERAL_CAUSES, WEAK_CAUSES, short_type
from ..parsers.events import Crash, Event, ProcessExit
from .base import Alert, DetectorBase, Severity
from .config import DetectorConfig

NAME = "process_exit"
# A crash read this long (data time) before the exit is the exit's reason;
# an older one belongs to an earlier incarnation or was survived
# (``DetectorConfig.exit_crash_window_s``).
EXIT_CRASH_WINDOW_S = DetectorConfig().exit_crash_window_s


def signal_name(number: int) -> str:
    try:
        return _signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def ended_by(e: ProcessExit) -> str:
    """How an asked-for stop ended: the signal, else the exit code."""
    if e.signal is not None:
        return signal_name(e.signal)
    return f"exit code {e.code}" if e.code is not None else "an unknown status"


class ProcessExitDetector(DetectorBase):
    name = NAME
    accepts = (ProcessExit, Crash)
    timed = False

    def __init__(self, config: object | None = None) -> None:
        self.config = config
        self._crash: Crash | None = None  # the last root-cause crash read

    def _saw(self, c: Crash) -> None:
        if c.cause in WEAK_CAUSES:
            return  # the agent's own lines name no error
        consequence = c.cause in COLLATERAL_CAUSES or short_type(c.exc_type) == "ChildFailedError"
        last = self._crash
        if consequence and last is not None and c.time - last.time <= 60.0:
            return  # torch elastic's account of the crash already kept
        self._crash = c

    def _reason(self, e: ProcessExit) -> Crash | None:
        c = self._crash
        window = getattr(self.config, "exit_crash_window_s", EXIT_CRASH_WINDOW_S)
        if c is None or e.kind in ("clean", "aborted") or e.time - c.time > window:
            return None
        return c

    def deadline(self) -> float | None:
        return None

    def update(self, event: Event) -> list[Alert]:
        if isinstance(event, Crash):
            self._saw(event)
            return []
        if not isinstance(event, ProcessExit):
            return []
        e = event
        crash = self._reason(e)
        severity: Severity
        if e.kind == "clean":
            severity = "info"
            msg = f"training process exited cleanly (exit code {e.code if e.code is not None else 0})"
        elif e.kind == "aborted":
            severity = "info"
            msg = f"training process stopped as asked ({e.asked or 'abort'}) after {ended_by(e)}"
        elif e.kind == "killed":
            severity = "critical"
            if e.signal is not None:
                msg = f"training process killed by {signal_name(e.signal)} (signal {e.signal})"
            else:
                msg = f"training process killed (exit code {e.code})" if e.code is not None else "training process killed"
        else:
            severity = "critical"
            if e.signal is not None:
                msg = f"training process crashed on {signal_name(e.signal)} (signal {e.signal})"
            else:
                msg = f"training process crashed (exit code {e.code})" if e.code is not None else "training process crashed"
        if crash is not None:
            where = f" on rank {crash.rank}" if crash.rank is not None else ""
            name = crash.exc_type or crash.kind
            if e.kind == "crash" and e.signal is None and e.code is not None:
                msg = f"training process exited with code {e.code}"
            msg += f" after a crash: {name} ({crash.kind}){where}"
        elif e.signature and e.kind not in ("clean", "aborted"):
            msg += f"; last error: {e.signature}"
        evidence: dict[str, object] = {"code": e.code, "signal": e.signal, "signature": e.signature}
        if e.asked:
            evidence["asked"] = e.asked
        if crash is not None:
            evidence["crash"] = {
                "kind": crash.kind, "cause": crash.cause, "exc_type": crash.exc_type, "rank": crash.rank,
                "source": crash.source, "signature": crash.signature, "time": crash.time,
            }
        return [
            Alert(
                time=e.time,
                detector=NAME,
                state="firing",
                severity=severity,
                message=msg,
                source=e.source,
                kind=e.kind,
                evidence=evidence,
            )
        ]
