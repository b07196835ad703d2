"""A log file read into events, a chunk at a time (``log_batches``).

Replay's reading of one file: chunk by chunk through the file's
``LogStream`` (``ingest.log_stream``), so memory does not grow with the
log; each batch a chunk's events in time order. Its own home so that
replay and the child that parses ahead of it (``parse_ahead``) read a log
the one same way, neither importing the other.
"""

from __future__ import annotations

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
        fallback = os.stat(path).st_mtime
    except OSError as exc:
        raise ReplayInputError(f"{path}: {exc.strerror or exc}") from None
    stream = log_stream(path, tz=tz, progress_pattern=progress_pattern, at=fallback, replay=True)
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
