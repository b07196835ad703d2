"""The time of a line in a chunk: its own stamp, else the last one before it.

A timestamp is parsed only where an event needs a time (DESIGN, "The ingest
hot path"): the stream asks for the time at an event line, and the lines
since the last event (``Cursor.covered``) are searched backwards for the
latest stamp, a few lines one by one, then in growing windows in C.
"""

from __future__ import annotations

import re

from .cursor import Cursor
from .events import Progress, new_progress
from .glued import glued_at
from .progress import FIELDS
from .progress.ops import Values
from .timestamps import TimeParser

# A line that may start with a timestamp (TimeParser decides). Anchored on
# the newline, so ``re`` runs its fast literal-prefix loop over a chunk.
_TIME_HINT = re.compile(
    r"\n[ \t]*(?:\[[a-z0-9,]{1,16}\](?:<std(?:out|err)>)?:[ \t]*|\[[A-Z]{3,8}\])*\[?"
    r"(?:[0-9]{4}-|[0-9]{1,2}/[0-9]{1,2}/|[IWEFVC][0-9]{3,4} |\{)"
)
# A line that may start with a stamp of full date (not glog's yearless one).
_DATED_HINT = re.compile(
    r"\n[ \t]*(?:\[[a-z0-9,]{1,16}\](?:<std(?:out|err)>)?:[ \t]*|\[[A-Z]{3,8}\])*\[?"
    r"(?:[0-9]{4}-|[0-9]{1,2}/[0-9]{1,2}/|\{)"
)
# First characters of a line whose stamp is a full date (ISO, US, JSON):
# no glog year to settle, the common case, told without parsing again.
_DATED_FIRST = frozenset("0123456789{")
# Lines walked back one by one before searching for timestamps in C.
_WALK_BACK_LINES = 8
_HINT_WINDOW = 2048


class LineTimes:
    """A stream's TimeParser, how many lines had a stamp of their own
    (``own_count``: a Progress says whether it was ``clocked``), and its
    ``prefix`` (``name:``) for sources."""

    __slots__ = ("times", "own_count", "prefix")

    def __init__(self, times: TimeParser, prefix: str) -> None:
        self.times = times
        self.own_count = 0
        self.prefix = prefix

    def progress(
        self, found: Values, cur: Cursor, start: int, end: int, line: str, lineno: int, body: str | None = None
    ) -> Progress:
        """The Progress of a line read on its own (``progress_values``'
        ``found``), dated by ``time_at``."""
        own_before = self.own_count
        time = self.time_at(cur, start, end, line, body)
        own = self.own_count > own_before
        # The values after step_seconds are the fields after ``clocked``.
        return new_progress(time, self.prefix + str(lineno), *found[:FIELDS], own, *found[FIELDS:])

    def time_at(self, cur: Cursor, start: int, end: int, line: str, body: str | None = None) -> float:
        """The time of ``line`` (``cur.text[start:end]``): its own timestamp,
        else the latest one on the uncovered lines before it, else the
        cursor's clock, else its fallback time. Moves the cursor's clock.
        ``body``: for a line that starts with '[', the text after its rank
        prefixes if the caller split them already (split once)."""
        if cur.covered <= start:
            # Most event lines carry a full date of their own, which wins over
            # the lines before it: then those need not be parsed at all.
            if body is None:
                own = self.times.parse_dated(line)
            else:
                own = self.times.parse_split(body, True)
            if own is not None:
                self.own_count += 1
                cur.clock = own
                cur.covered = end + 1
                return own
        clock = self._behind(cur, start, end, line)
        return cur.fallback_time if clock is None else clock

    def bare_times(self, cur: Cursor, starts: list[int], ends: list[int]) -> list[float]:
        """``time_at`` of each line ``cur.text[start:end]`` in turn, for
        lines whose shape has no stamp (``TimeParser.stampless``): the
        latest stamp on the uncovered lines before each, else the clock,
        else the fallback time; the cursor's clock and ``covered`` moved
        past them. No own stamp to try, no call per line but the gap's."""
        text = cur.text
        covered = cur.covered
        clock = cur.clock
        fallback = cur.fallback_time
        latest = self.latest
        out: list[float] = []
        append = out.append
        for start, end in zip(starts, ends):
            if covered <= start:
                if covered < start:
                    found = latest(text, covered, start)
                    if found is not None:
                        clock = found
                covered = end + 1
            append(fallback if clock is None else clock)
        cur.clock = clock
        cur.covered = covered
        return out

    def _behind(self, cur: Cursor, start: int, end: int, line: str) -> float | None:
        """``time_at`` once the line is known to have no full date of its own
        (or to be covered already): read the lines before it, then its own
        undated (glog) stamp."""
        covered = cur.covered
        if covered < start:
            latest = self.latest(cur.text, covered, start)
            if latest is not None:
                cur.clock = latest
        if covered <= start:
            own = self.times.parse(line)
            if own is not None:
                cur.clock = own
                self.own_count += 1
            cur.covered = end + 1
        return cur.clock

    def _dated_glog(self, text: str, lo: int, start: int, end: int, value: float) -> float:
        """``value`` of the line ``text[start:end]``, its year right when it is a glog stamp.

        A glog stamp takes its year from the last full date before it in the
        file. Lines between events are read lazily (only the last stamp of a
        stretch), so that full date may sit in the stretch unread: read the
        last one there first, or the year would depend on where a chunk
        boundary fell (a full-dated 2025 line, then glog lines, read as 2026
        when the stretch is cut after the 2025 line).
        """
        if start <= lo or text[start] in _DATED_FIRST:
            return value  # nothing before it in the stretch, or a full date of its own
        times = self.times
        if times.parse_dated(text[start:end]) is not None:
            return value
        hits = [m.start() + 1 for m in _DATED_HINT.finditer(text, lo - 1 if lo else 0, start)]
        if lo == 0:
            hits.insert(0, 0)
        for at in reversed(hits):
            stop = text.find("\n", at, start)
            if times.parse_dated(text[at : start if stop == -1 else stop]) is not None:
                again = times.parse(text[start:end])
                return value if again is None else again
        return value

    def latest(self, text: str, lo: int, hi: int) -> float | None:
        """The timestamp of the last line starting in ``[lo, hi)`` that has one."""
        times = self.times
        value = times.last_in_minute(text, lo, hi)  # the common case, in C where built
        if value is not None:
            return value
        parse = times.parse
        end = hi - 1 if hi > lo and text[hi - 1 : hi] == "\n" else hi
        # A few lines back first: timestamped logs have one on most lines.
        for _ in range(_WALK_BACK_LINES):
            if end < lo:
                return None
            start = text.rfind("\n", lo, end) + 1 or lo
            line = text[start:end]
            value = parse(line)
            if value is None and "\r" in line:
                # A log line glued to a tqdm bar's redraws has its own stamp.
                cut = glued_at(line)
                if cut:
                    value = parse(line[cut:])
                    start += cut
            if value is not None:
                if start <= lo or text[start] in _DATED_FIRST:
                    return value  # ``_dated_glog``'s first answer, without its call
                return self._dated_glog(text, lo, start, end, value)
            end = start - 1
        # Then only the lines that could hold one, in growing windows from
        # the end so that a long stretch is searched in C, not line by line.
        window = _HINT_WINDOW
        while end >= lo:
            floor = max(lo, end - window)
            if floor > lo:
                floor = text.rfind("\n", lo, floor) + 1 or lo
            # Each hit is the newline before a line that may start with a
            # timestamp; the line at ``floor`` is reached through its own.
            hits = [m.start() + 1 for m in _TIME_HINT.finditer(text, floor - 1 if floor else 0, end)]
            if floor == 0:
                hits.insert(0, 0)
            for start in reversed(hits):
                line_end = text.find("\n", start, end)
                stop = end if line_end == -1 else line_end
                value = parse(text[start:stop])
                if value is not None:
                    return self._dated_glog(text, lo, start, stop, value)
            end = floor - 1
            window *= 4
        return None
