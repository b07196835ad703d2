"""An exclusive lock that serialises start/relaunch of one job across processes.

Why flock: two dashboards, or a dashboard and the CLI, may press relaunch at
the same moment. ``fcntl.flock`` on a file in the job's state directory is
held per open file description, so it excludes other threads of this
process as well as other processes, and the kernel drops it when a holder
dies: a crashed dashboard never leaves the job locked.

The lock only orders callers; the caller still re-checks the job's state
once it holds the lock (the job may have been relaunched meanwhile).
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from types import TracebackType


class LockTimeout(TimeoutError):
    """Another start/relaunch held the job's lock for too long."""


class JobLock:
    def __init__(self, path: Path, timeout_s: float = 120.0, poll_s: float = 0.05) -> None:
        self.path = Path(path)
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self._fd: int | None = None

    def acquire(self, deadline_clock=time.monotonic) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        deadline = deadline_clock() + self.timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if deadline_clock() >= deadline:
                    os.close(fd)
                    raise LockTimeout(
                        f"another start/relaunch holds {self.path} (waited {self.timeout_s:g} s)"
                    ) from None
                time.sleep(self.poll_s)
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError:
            pass
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> JobLock:
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
