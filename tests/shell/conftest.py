"""Fixtures of the shell tests (the private tmux server is in ``tests/conftest.py``)."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator

import pytest
from tmux_job_helpers import marked_pids


@pytest.fixture
def marker() -> Iterator[str]:
    """A unique word in the trainers' argv; the finalizer ends leftovers we started."""
    word = f"dfwmark{uuid.uuid4().hex[:10]}"
    yield word
    for pid in marked_pids(word):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
