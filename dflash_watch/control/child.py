"""A job run as a plain child process, for machines without tmux.

It offers the same surface as :class:`Job` (status, start, abort,
relaunch, poll_exit) so the dashboard needs no special case, but it is
*limited*: the process is the watcher's child, so it cannot outlive the
watcher and cannot be attached to. Only the demo uses it; a real training
run belongs in tmux.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence

from dflash_watch.parsers.events import ProcessExit

from .exits import SignatureSource, signature_now
from .job import AlreadyRunning, JobState, classify_exit

StepFn = Callable[[str], None]


class ChildJob:
    limited = True
    available = True

    def __init__(self, argv: Sequence[str], *, cwd: str | None = None, env: dict[str, str] | None = None, grace_s: float = 30.0) -> None:
        self.argv = list(argv)
        self.cwd = cwd
        self.env = {**os.environ, **(env or {})}
        self.grace_s = grace_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at: float | None = None
        self._reported: int | None = None
        self._asked: tuple[int, str] | None = None  # (pid, action) whose end was asked for

    def status(self) -> JobState:
        p = self.proc
        if p is None:
            return JobState("absent", "child", message="not started")
        code = p.poll()
        if code is None:
            up = time.time() - self.started_at if self.started_at else None
            return JobState("running", "child", pid=p.pid, pids=(p.pid,), started_at=self.started_at, uptime_s=up,
                            message="child process (no tmux: control limited)")
        if code < 0:
            return JobState("killed", "child", signal=-code, pid=p.pid)
        return JobState("exited", "child", code=code, pid=p.pid)

    def start(self, on_step: StepFn | None = None) -> JobState:
        state = self.status()
        if state.running:
            raise AlreadyRunning(state)
        self.proc = subprocess.Popen(
            self.argv, cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        self.started_at = time.time()
        if on_step:
            on_step(f"started child process {self.proc.pid}")
        return self.status()

    def abort(self, grace_s: float | None = None, on_step: StepFn | None = None,
              asked: str = "abort") -> JobState:
        p = self.proc
        if p is None or p.poll() is not None:
            return self.status()
        self._asked = (p.pid, asked)
        grace = self.grace_s if grace_s is None else grace_s
        for sig, wait in ((signal.SIGINT, grace), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            if on_step:
                on_step(f"sending {sig.name} to process group {p.pid}")
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                break
            try:
                p.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        return self.status()

    def relaunch(self, grace_s: float | None = None, on_step: StepFn | None = None) -> JobState:
        self.abort(grace_s, on_step, asked="relaunch")
        return self.start(on_step)

    def poll_exit(self, now: float, signature: SignatureSource = None) -> ProcessExit | None:
        p = self.proc
        if p is None or p.poll() is None or self._reported == p.pid:
            return None
        self._reported = p.pid
        signature = signature_now(signature)
        code, sig = (None, -p.returncode) if p.returncode < 0 else (p.returncode, None)
        kind, _ = classify_exit(code, sig, signature)
        asked = self._asked[1] if self._asked and self._asked[0] == p.pid else None
        if asked:
            kind = "aborted"
        return ProcessExit(now, kind, code=code, signal=sig, signature=signature, source="child", asked=asked)
