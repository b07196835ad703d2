"""Where the reading of one chunk stands (``LogStream.feed``).

A chunk is read in one pass, and three things move along it: the clock
(``clock``: the latest timestamp among the lines before ``covered``), the
line count (the line starting at ``count_pos`` is number ``count_no``) and
the run of progress lines set aside to be read together as columns
(``parsers.lanes``). They live here, in one small object per feed, so that
the pieces of the pass (``LogStream``'s loop, ``read_lanes``, ``LineTimes``)
share them without a dozen parameters and tuples of state handed back.

The inner loops never touch it per line: they keep the run lists in locals
(the lists are cleared in place, never replaced) and the cursor is read
only where a line makes an event.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from .events import Event
from .final_times import FinalTimes
from .progress.fast import FastPlan


class Lane(NamedTuple):
    """A shape whose progress lines are read as columns: its fast plan, the
    fraction digits of the stamp its lines start with, and the TimeParser
    method that reads a run of those stamps (``iso_run`` or ``us_run``)."""

    fast: FastPlan
    frac_len: int
    run: Callable[[list[str], int], list[float]]


class Bare(NamedTuple):
    """A shape of progress lines without a stamp of their own (a tqdm bar
    printed between stamped lines) read as columns by ``fast``: each line
    is dated by the lines before it, as ``LineTimes.time_at`` dates it."""

    fast: FastPlan


class Redrawn(NamedTuple):
    """A shape of tqdm bars drawn again unchanged on one line (``X\\rX``:
    tqdm redraws a bar as it was, issue 20's bars; the shape of one state,
    ``state``, again after each '\\r'): a line whose states are the very
    same text is read as that one state in the ``Bare`` lane ``lane``
    (``lanes.one_state``); any other line of the shape (the digits differ)
    as the plain progress line it is, by ``shape``."""

    lane: Bare
    shape: bytes


class Ranked(NamedTuple):
    """A shape of lines with a rank prefix (``[rank5]:``) whose text after
    it is read as columns by ``lane``: from ``cut`` on, the rank in
    ``line[rank_at:rank_end]``. Ranks of other widths share the one lane
    of their text's shape, so their lines are read together."""

    lane: Lane
    cut: int
    rank_at: int
    rank_end: int


@dataclass(slots=True)
class Cursor:
    """The reading state of one ``feed``: its text, its events, its clock,
    its line count and its run of set-aside progress lines."""

    text: str  # the chunk, cleaned (no ANSI, NUL or CRLF)
    view: str  # ``text``, or its ASCII view: newlines are counted here
    has_cr: bool  # the chunk holds a '\r' (tqdm redraws)
    fallback_time: float  # dates events before any timestamp was seen
    events: list[Event]
    clock: float | None  # the latest timestamp of the lines before ``covered``
    covered: int = 0
    count_pos: int = 0  # the line starting here ...
    count_no: int = 1  # ... is this line number
    # The run: progress lines waiting to be read together, in the file's
    # order; a lane (``Lane``, ``Bare`` or ``Ranked``) or, for a plain
    # progress line, its shape.
    run_lines: list[str] = field(default_factory=list)
    run_starts: list[int] = field(default_factory=list)
    run_ends: list[int] = field(default_factory=list)
    run_lanes: list[Lane | Bare | Ranked | Redrawn | bytes] = field(default_factory=list)
    # The run's redrawn lines read as their one state (``lanes.one_state``):
    # index -> the whole line, read whole where the columns leave it.
    redrawn: dict[int, str] = field(default_factory=dict)
    # The stream's clocks, when the column reader may give the events it
    # builds their final times (``parsers.final_times``); else None.
    final: FinalTimes | None = None

    def clear_run(self) -> None:
        """Empty the run in place: the loop holds its lists in locals."""
        self.run_lines.clear()
        self.run_starts.clear()
        self.run_ends.clear()
        self.run_lanes.clear()
        if self.redrawn:
            self.redrawn.clear()
