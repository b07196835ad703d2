"""How a caught-up log file ends is looked at outside the Monitor's lock (``ingest.file_end``).

The look is file I/O (open, stat, a read of the tail): under the lock, a
slow or hung filesystem (NFS, a FUSE mount) stalls every reader of the
Monitor, the dashboard's redraw, the GPU sampler and the tick loop, for as
long as the filesystem takes. These tests hold the look inside it (a
stand-in that blocks until told) and ask another thread to take the lock
meanwhile: liveness only, with generous deadlines, no timing of speed.
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dflash_watch import ingest
from dflash_watch.alignment import FileEnd
from dflash_watch.live import LiveSession
from dflash_watch.monitor import Monitor

_DEADLINE_S = 20.0  # generous: a loaded CI machine still answers well inside it


def _steps(count: int, t0: float, every: float) -> str:
    """Stamped step lines ``every`` seconds apart from ``t0`` (UTC)."""
    out = []
    for i in range(count):
        stamp = datetime.datetime.fromtimestamp(t0 + i * every, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
        out.append(f"{stamp} - INFO - train - step {i + 1}/100000 | loss 2.31 | 20.0 Ktok/s\n")
    return "".join(out)


class _HeldLook:
    """A stand-in for ``ingest.file_end`` that blocks until released, then
    answers ``answer`` (else the real look); records each call."""

    def __init__(self, answer: FileEnd | None = None) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls: list[str] = []
        self.answer = answer
        self._real = ingest.file_end

    def __call__(self, path: str, text: str) -> FileEnd | None:
        self.calls.append(path)
        self.entered.set()
        self.release.wait(_DEADLINE_S * 3)
        return self.answer if self.answer is not None else self._real(path, text)


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[_HeldLook]:
    look = _HeldLook()
    monkeypatch.setattr(ingest, "file_end", look)
    yield look
    look.release.set()  # never leave a thread blocked in it


def _lock_taken_while_held(monitor: Monitor, held: _HeldLook) -> bool:
    """Whether this thread takes the Monitor's lock while the look is held."""
    assert held.entered.wait(_DEADLINE_S), "the catch-up never looked at the file's end"
    taken = monitor.lock.acquire(timeout=_DEADLINE_S)
    if taken:
        monitor.lock.release()
    held.release.set()
    return taken


def test_the_tailer_looks_before_it_takes_the_lock_and_reads_every_line_once(tmp_path: Path, held: _HeldLook) -> None:
    """While the tailer's look at the file's end hangs, the lock is free
    (the dashboard redraws, the sampler feeds); once it returns, every line
    of the catch-up is read, once."""
    log = tmp_path / "train.log"
    count = 500
    log.write_text(_steps(count, time.time() - 3600.0, 1.0))
    monitor = Monitor(tz=datetime.UTC)
    session = LiveSession(monitor, logs=(str(log),), use_nvml=False, probes=[str(tmp_path / "none-*.jsonl")],
                          clock=None, speed=0.0)
    with session:
        assert _lock_taken_while_held(monitor, held), "the Monitor's lock was held across the file I/O"
        deadline = time.monotonic() + _DEADLINE_S
        while time.monotonic() < deadline:
            with monitor.lock:
                state = monitor._streams.get(str(log))
                if state is not None and state.lines >= count:
                    break
            time.sleep(0.01)
    assert state is not None and state.lines == count
    assert monitor.progress_events == count  # none lost, none read twice
    assert held.calls == [str(log)]  # one look for the one catch-up chunk


def test_feed_text_never_looks_at_the_file_itself(tmp_path: Path, held: _HeldLook) -> None:
    """``feed_text`` holds the lock for all it does: the file's end is its
    caller's look (``end``), never one of its own. A caller that gives none
    (a catch-up chunk, live) is read without it, at once."""
    log = tmp_path / "train.log"
    text = _steps(50, time.time() - 600.0, 1.0)
    log.write_text(text)
    monitor = Monitor(tz=datetime.UTC)
    wall = time.time()
    feeder = threading.Thread(
        target=monitor.feed_text, args=(str(log), text, 1, wall), kwargs={"fresh": False, "arrived": wall}, daemon=True
    )
    feeder.start()
    feeder.join(_DEADLINE_S)
    held.release.set()
    assert not feeder.is_alive(), "feed_text looked at the file's end (and hung with it)"
    assert held.calls == []
    assert monitor._streams[str(log)].lines == 50


def test_the_end_the_tailer_looked_at_is_the_one_alignment_judges(tmp_path: Path, held: _HeldLook) -> None:
    """The look taken before the lock is what ``Alignment.caught_up`` reads:
    a file that ends mid-line, written just now, after steps 3 s apart, is a
    buffered writer's burst (its interval set), as when it was looked at
    under the lock."""
    log = tmp_path / "train.log"
    now = time.time()
    log.write_text(_steps(200, now - 13.0 - 199 * 3.0, 3.0))
    held.answer = FileEnd(mid_line=True, modified=now)
    held.release.set()
    monitor = Monitor(tz=datetime.UTC)
    session = LiveSession(monitor, logs=(str(log),), use_nvml=False, probes=[str(tmp_path / "none-*.jsonl")],
                          clock=None, speed=0.0)
    with session:
        deadline = time.monotonic() + _DEADLINE_S
        state = None
        while time.monotonic() < deadline:
            with monitor.lock:
                state = monitor._streams.get(str(log))
                if state is not None and state.lines >= 200:
                    break
            time.sleep(0.01)
        assert state is not None and state.align is not None
        assert state.align.burst_s > 0.0, "the look's mid-line end was not the one judged"
    assert held.calls == [str(log)]
