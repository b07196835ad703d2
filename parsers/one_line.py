"""A progress line read on its own: the reference reading of one line.

The stream reads most progress lines together as columns (``parsers.lanes``).
A line that cannot be: one among other event lines, a plain tqdm bar in a
run of lane lines, a lane line whose values fail the columns' checks, is
read here, the one way every such line is read, so that columns and lines
always give the same events (tests/core/test_stream_columns.py).

The caller hands the line's one split of its rank prefix (``parsers.ranks``):
``body`` the text after the prefixes, or None when the line has none split.
"""

from __future__ import annotations

from .cursor import Cursor
from .events import PaddingReport
from .line_times import LineTimes
from .padding import padding_line
from .progress import ProgressPattern, progress_values
from .progress.redraws import redraw_states


def body_shape(line: str, body: str, shape: bytes | None) -> bytes | None:
    """The shape of ``body`` (``line`` after its rank prefixes) cut from the
    line's ``shape`` (``progress.line_shape``): its tail when the prefix is
    ASCII (one byte a character), else None (the reader shapes it itself)."""
    cut = len(line) - len(body)
    return shape[cut:] if shape is not None and line[:cut].isascii() else None


def read_progress(
    cur: Cursor, dating: LineTimes, pattern: ProgressPattern | None, line: str, start: int, end: int,
    lineno: int, rank: int | None, body: str | None, shape: bytes | None,
) -> float | None:
    """The progress of ``line`` (``cur.text[start:end]``, number ``lineno``)
    onto ``cur.events``; the time of its last event, or None when it has
    none. ``shape``: the shape of the text read (``body``, else ``line``),
    or None. A tqdm bar redrawn in place with '\\r' gives every state it
    showed (HF Trainer's one bar spans the whole run)."""
    text = line if body is None else body
    if cur.has_cr and "\r" in line:
        time = None
        for found in redraw_states(text, rank, pattern):
            event = dating.progress(found, cur, start, end, line, lineno, body)
            cur.events.append(event)
            time = event.time
        return time
    one = progress_values(text, rank, pattern, shape)
    if one is None:
        return None
    event = dating.progress(one, cur, start, end, line, lineno, body)
    cur.events.append(event)
    return event.time


def read_padding(
    cur: Cursor, dating: LineTimes, line: str, start: int, end: int, lineno: int, rank: int | None,
    body: str | None,
) -> float | None:
    """The padding efficiency ``line`` states on its own onto ``cur.events``
    (a progress line that states it carries it in its metrics instead);
    its time, or None when it states none."""
    efficiency = padding_line(line)
    if efficiency is None:
        return None
    time = dating.time_at(cur, start, end, line, body)
    cur.events.append(PaddingReport(time, efficiency, dating.prefix + str(lineno), rank))
    return time
