"""Reading a real `headless` subprocess's stderr as it runs (shared by the live tests)."""

from __future__ import annotations

import select
import subprocess
import time


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
