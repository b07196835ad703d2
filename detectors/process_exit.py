"""process_exit: the managed training process exited (a one-shot alert).

``kind`` is the contract's ``crash`` / ``clean`` / ``killed``: critical for
the first two that stop a run against its will, info for a clean finish.
"""

from __future__ import annotations

import signal as _signal

from parsers.events import Event, ProcessExit

from .base import Alert

NAME = "process_exit"


def signal_name(number: int) -> str:
    try:
        return _signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class ProcessExitDetector:
    name = NAME
    accepts = (ProcessExit,)
    timed = False

    def __init__(self, config: object | None = None) -> None:
        self.config = config

    def deadline(self) -> float | None:
        return None

    def update(self, event: Event) -> list[Alert]:
        if not isinstance(event, ProcessExit):
            return []
        e = event
        if e.kind == "clean":
            severity = "info"
            msg = f"training process exited cleanly (exit code {e.code if e.code is not None else 0})"
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
        if e.signature and e.kind != "clean":
            msg += f"; last error: {e.signature}"
        evidence = {"code": e.code, "signal": e.signal, "signature": e.signature}
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
