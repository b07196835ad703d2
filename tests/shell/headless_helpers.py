"""Reading a real `headless` subprocess's stderr and stdout as it runs (shared by the live tests)."""

from __future__ import annotations

import json
import select
import subprocess
import time
from collections.abc import Callable


def wait_for_notice(proc: subprocess.Popen[str], text: str, timeout: float = 30.0) -> str:
    """stderr up to and with the first line holding ``text``.

    Tests that must act once headless follows a name ("waiting for ... to
    appear") wait for it to say so: a fixed sleep is too short on a loaded
    machine. What was read is returned, so the caller keeps every notice.
    """
    assert proc.stderr is not None
    seen = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], 0.2)
        if ready:
            line = proc.stderr.readline()
            seen += line
            if not line or text in line:
                return seen
    raise AssertionError(f"no {text!r} on stderr within {timeout} s: {seen!r}")


def alert_lines(
    proc: subprocess.Popen[str], timeout: float, stop: Callable[[dict], bool] | None = None,
    clock: Callable[[], float] = time.time,
) -> list[dict]:
    """Alert lines from stdout as they come, up to and with the first that
    ``stop`` accepts, or all of them by ``timeout`` (or stdout's end). Each
    carries ``_seen``: the ``clock`` time it was read (a test of latency
    measures it on the clock its start was taken on: wall by default,
    ``time.monotonic`` where the test times the writer so)."""
    assert proc.stdout is not None
    got: list[dict] = []
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if not ready:
            break
        line = proc.stdout.readline()
        if not line:
            break
        alert = json.loads(line)
        alert["_seen"] = clock()
        got.append(alert)
        if stop is not None and stop(alert):
            break
    return got
