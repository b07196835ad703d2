"""Waiting in tests on something another thread or process does: the one
home of the plain poll (a condition, a timeout, its last answer).

A test that waits on a live session, a sampler's thread or a file another
process writes asks again every ``every`` seconds rather than sleeping a
fixed time: it goes on as soon as the thing happened, and a slow machine
only costs time, never a false failure. (``tmux_job_helpers.wait_for``
returns the condition's value and fails itself: a different contract for
the job tests.)
"""

from __future__ import annotations

import time
from collections.abc import Callable


def polled(condition: Callable[[], object], timeout: float = 10.0, every: float = 0.01) -> bool:
    """True as soon as ``condition()`` is true, polled every ``every``
    seconds; once ``timeout`` seconds have passed, its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(every)
    return bool(condition())
