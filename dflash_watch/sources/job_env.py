"""The running job's environment, read now and then for the live Monitor.

The suspects a slowdown's alert carries compare the job's environment with
the baseline's (packages, torch build, variables, script hashes, compile
cache). Reading it walks ``/proc``, dist-info and the compile cache (up to
~2 s on a big cache), so it runs on its own thread: once the job is up,
then every ``interval_s`` (a relaunch may come with another environment).
It only reads; it never touches the job.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..monitor import Monitor


class JobEnvironment:
    """Keeps ``monitor.fingerprint`` to the job's current environment."""

    def __init__(self, monitor: Monitor, job: Any, interval_s: float = 600.0, retry_s: float = 15.0) -> None:
        self.monitor = monitor
        self.job = job
        self.interval_s = interval_s
        self.retry_s = retry_s
        self.reads = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dfw-job-env", daemon=True)

    def start(self) -> JobEnvironment:
        self._thread.start()
        return self

    def read_once(self) -> dict[str, Any] | None:
        from ..baseline.diagnose import job_fingerprint

        fingerprint = job_fingerprint(self.job)
        if fingerprint is not None:
            with self.monitor.lock:
                self.monitor.fingerprint = fingerprint
            self.reads += 1
        return fingerprint

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                got = self.read_once()
            except Exception:  # noqa: BLE001 - a read that fails is tried again later
                got = None
            if self._stop.wait(self.interval_s if got is not None else self.retry_s):
                return

    def close(self, timeout: float = 1.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
