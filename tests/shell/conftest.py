"""Fixtures of the shell tests (the private tmux server is in ``tests/conftest.py``)."""

from __future__ import annotations

import os
import signal
import sys
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


@pytest.fixture(autouse=True)
def _unload_fake_nvml() -> Iterator[None]:
    """Fake NVMLs a test installed are unloaded when it ends, so Xid threads
    of samplers it did not close end too (``FakeNvml.unload``)."""
    yield
    fake_nvml = sys.modules.get("fake_nvml")
    if fake_nvml is not None:
        for fake in fake_nvml.FakeNvml.installed:
            fake.unload()
        fake_nvml.FakeNvml.installed.clear()
