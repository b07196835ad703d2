"""What the Monitor remembers of alerts: what fires now, and a bounded past.

Kept apart from the Monitor so that the TUI's alert panel, `check` and the
history file all read the same notion of "firing" and "acknowledged".
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from dflash_watch.detectors.base import Alert

SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}

# One-shot alerts (crashes, exits) never resolve; they stay "firing" in the
# panel until acknowledged or until the job is relaunched.
ONE_SHOT = frozenset({"crash", "fx_tracing", "process_exit"})


class AlertBook:
    __slots__ = ("_firing", "history", "_acked", "total")

    def __init__(self, history: int = 2000) -> None:
        self._firing: dict[tuple, Alert] = {}
        self.history: deque[Alert] = deque(maxlen=history)
        self._acked: set[tuple] = set()
        self.total = 0

    @staticmethod
    def _key(alert: Alert) -> tuple:
        if alert.detector in ONE_SHOT:
            # Each crash is its own entry: two different crashes both show.
            return (alert.detector, alert.gpu, alert.kind, alert.time, alert.source)
        return alert.key

    def add(self, alert: Alert) -> None:
        self.total += 1
        self.history.append(alert)
        key = self._key(alert)
        if alert.state == "firing":
            self._firing[key] = alert
            self._acked.discard(key)
        else:
            self._firing.pop(key, None)
            self._acked.discard(key)

    def amend(self, alert: Alert, amended: Alert) -> bool:
        """Replace ``alert`` (the very object handed out) by ``amended`` where it is
        kept, without counting or sending it again: evidence that came later
        (the stacks of a stalled job). False when it is no longer firing."""
        key = self._key(alert)
        if self._firing.get(key) is not alert:
            return False
        self._firing[key] = amended
        for i in range(len(self.history) - 1, -1, -1):
            if self.history[i] is alert:
                self.history[i] = amended
                break
        return True

    def extend(self, alerts: Iterable[Alert]) -> None:
        for alert in alerts:
            self.add(alert)

    def firing(self) -> list[Alert]:
        """Firing alerts, most severe first, newest first within a severity."""
        return sorted(self._firing.values(), key=lambda a: (SEVERITY_RANK.get(a.severity, 3), -a.time))

    def is_acked(self, alert: Alert) -> bool:
        return self._key(alert) in self._acked

    def acknowledge(self, alert: Alert | None = None) -> int:
        """Acknowledge one alert, or all firing ones; returns how many."""
        keys = [self._key(alert)] if alert is not None else list(self._firing)
        n = 0
        for key in keys:
            if key in self._firing and key not in self._acked:
                self._acked.add(key)
                n += 1
        return n

    def unacked(self) -> list[Alert]:
        return [a for a in self.firing() if self._key(a) not in self._acked]

    def clear_one_shots(self) -> None:
        """A relaunch starts a new run: the old run's crashes are history."""
        for key in [k for k in self._firing if k[0] in ONE_SHOT]:
            del self._firing[key]
            self._acked.discard(key)
