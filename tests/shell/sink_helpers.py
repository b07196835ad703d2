"""Shared bits of the sink tests: alerts, a notice collector, a started dispatcher."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from dflash_watch.detectors.base import Alert
from dflash_watch.sinks.dispatch import Dispatcher
from dflash_watch.sinks.settings import parse_sink


def alert(detector: str = "crash", state: str = "firing", severity: str = "critical", *, gpu: int | None = None,
          kind: str | None = None, message: str = "CUDA out of memory. Tried to allocate 2.00 GiB",
          t: float = 1764410400.25) -> Alert:
    return Alert(time=t, detector=detector, state=state, severity=severity, message=message,
                 source="train.log:1234", gpu=gpu, kind=kind, evidence={"step": 1234})


class Notes:
    """Monitor.note stand-in: collects notices, lets a test wait for one."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self._cond = threading.Condition()

    def __call__(self, message: str) -> None:
        with self._cond:
            self.items.append(message)
            self._cond.notify_all()

    def wait(self, predicate: Callable[[str], bool], timeout: float = 5.0) -> str | None:
        with self._cond:
            self._cond.wait_for(lambda: any(predicate(m) for m in self.items), timeout)
            return next((m for m in self.items if predicate(m)), None)

    def text(self) -> str:
        with self._cond:
            return "\n".join(self.items)


def dispatcher(*tables: dict[str, Any], notes: Notes, senders: dict[str, Any] | None = None) -> Dispatcher:
    """Sinks parsed by the real config parser, numbered per kind as a config would."""
    counts: dict[str, int] = {}
    sinks = [parse_sink(dict(t), counts) for t in tables]
    return Dispatcher(sinks, notes, senders).start()


def until(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()
