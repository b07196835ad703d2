"""A log file read into events, a chunk at a time (``log_batches``).

Replay's reading of one file: chunk by chunk through the file's
``LogStream`` (``ingest.log_stream``), so memory does not grow with the
log; each batch a chunk's events in time order. Its own home so that
replay and the child that parses ahead of it (``parse_ahead``) read a log
the one same way, neither importing the other.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from typing import Any

from dflash_watch.parsers.events import Event
from dflash_watch.parsers.progress.hints import LIGHTNING_HINT

from .ingest import log_stream
from .sources.chunks import emit
from .sources.lines import LineSplitter, MiB, decoded
from .sources.logtail import Chunk, TailNotice


class ReplayInputError(ValueError):
    """An input that cannot be replayed; one line for stderr."""


def log_events(
    path: str,
    *,
    tz: Any = None,
    progress_pattern: Any = None,
    notices: list[str] | None = None,
    ends: list[float] | None = None,
) -> Iterator[Event]:
    for batch in log_batches(path, tz=tz, progress_pattern=progress_pattern, notices=notices, ends=ends):
        yield from batch


def log_batches(
    path: str,
    *,
    tz: Any = None,
    progress_pattern: Any = None,
    notices: list[str] | None = None,
    ends: list[float] | None = None,
) -> Iterator[list[Event]]:
    """``log_events`` a chunk at a time: each list is time-ordered, and
    together they are ``log_events``' sequence. ``ends`` gets the file's
    last timestamp once it is read (lines that carry no event still move
    the data's clock: silence at the end is judged up to there)."""
    try:
        mtime = os.stat(path).st_mtime
    except OSError as exc:
        raise ReplayInputError(f"{path}: {exc.strerror or exc}") from None
    fallback = mtime - _stand_in_span(path, tz, progress_pattern, mtime)
    stream = log_stream(path, tz=tz, progress_pattern=progress_pattern, at=mtime, replay=True)
    for item in _log_chunks(path):
        if isinstance(item, Chunk):
            events = stream.feed(item.text, item.first_lineno, fallback)
            if events:
                yield events
        elif notices is not None:
            notices.append(item.message)
    events = stream.flush(fallback)
    if ends is not None and stream.last_time is not None:
        ends.append(stream.last_time)
    if notices is not None and stream.hint.framework is not None and not stream.hint.done:
        # A finished run: its whole log showed no progress after the banner.
        notices.append(f"{stream.name}: {LIGHTNING_HINT}")
    if events:
        yield events


def _stand_in_span(path: str, tz: Any, progress_pattern: Any, mtime: float) -> float:
    """How far past ``mtime`` a log without any timestamp runs: 0 for one with.

    Such a log (an HF Trainer or Lightning run's stdout: tqdm bars and dict
    lines) runs on a stand-in clock, tqdm's elapsed counter or its steps'
    durations (``parsers.clock``), from the time it starts at. Started at
    the file's mtime, every event came after the file's last write, by as
    long as the run took: its alerts were dated after it ended, and the
    probe lines written beside it (stamped on the wall clock) fell a run's
    length before its steps, so ``baseline diff`` found no padding in the
    log's window. The file was last written when its last line was, so the
    clock ends there: the log is read once to learn how long it runs, then
    read from ``mtime`` minus that. Only where its first lines hold no
    timestamp (a stamped log is read once, as before) and none comes later.
    """
    probe = log_stream(path, tz=tz, progress_pattern=progress_pattern, at=mtime, replay=True)
    latest = mtime
    for item in _log_chunks(path):
        if not isinstance(item, Chunk):
            continue
        if item.first_lineno == 1 and probe.peek_stamps(item.text) is not None:
            return 0.0  # stamped from its first lines (most logs): no need to read it
        events = probe.feed(item.text, item.first_lineno, mtime)
        if probe.last_time is not None:
            return 0.0  # a timestamp: the log's own clock, not a stand-in
        if events:
            latest = max(latest, max(e.time for e in events))
    events = probe.flush(mtime)
    if probe.last_time is not None:
        return 0.0
    if events:
        latest = max(latest, max(e.time for e in events))
    return latest - mtime if math.isfinite(latest) else 0.0


def _log_chunks(path: str) -> Iterator[Chunk | TailNotice]:
    """``read_chunks``, but a line redrawn with '\\r' is read whole, state by state.

    A tqdm bar that spans an epoch (HF Trainer's spans the run) is one line
    of many MiB; cut at 1 MiB like any over-long line, a drop after its
    first MiB would be lost. Its states come as chunks of their own, each
    numbered as the line (``LineSplitter.take_states``), before the line's
    end comes as usual; the 1 MiB cut holds for text without '\\r'.
    """
    splitter = LineSplitter(MiB, keep_states=True)
    with open(path, "rb", buffering=0) as fh:
        while data := fh.read(MiB):
            yield from emit(path, 0, splitter.feed(data), MiB)
            for states in splitter.take_states():
                yield Chunk(path, decoded(states) + "\n", splitter.lineno, 0)
        yield from emit(path, 0, splitter.finish(), MiB)
