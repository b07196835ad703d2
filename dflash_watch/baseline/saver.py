"""Saves the live run's profile as a baseline once it has been healthy a while.

The policy (``auto.AutoBaseline``: healthy for 30 minutes, steady
throughput, not worse than the file already there) is asked every
``every_s`` on its own thread, so a profile (a few numpy reductions) never
runs on the tick or the UI thread. The file is the last good profile of
this session, ``<state dir>/baseline-<session>.json``: what `baseline diff
--baseline` and `--baseline` of the next run take after a rebuild.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..monitor import Monitor
    from .auto import AutoBaseline


class AutoBaselineSaver:
    def __init__(self, monitor: Monitor, policy: AutoBaseline, every_s: float = 30.0) -> None:
        self.monitor = monitor
        self.policy = policy
        self.every_s = every_s
        self.saved: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dfw-auto-baseline", daemon=True)

    def start(self) -> AutoBaselineSaver:
        self._thread.start()
        return self

    def look(self) -> str | None:
        """One look now; the path when it saved."""
        now = self.monitor.now
        if now is None:
            return None
        self.policy.fingerprint = self.monitor.fingerprint
        saved = self.policy.consider(self.monitor, now)
        if saved is None:
            return None
        self.saved.append(str(saved))
        self.monitor.note(f"baseline saved automatically after a healthy stretch: {saved}")
        return str(saved)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.look()
            except Exception as exc:  # noqa: BLE001 - a failed save is said, the watch goes on
                self.monitor.note(f"automatic baseline: {type(exc).__name__}: {exc}")

    def close(self, timeout: float = 1.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
