"""One log stream: complete lines in, progress and crash events out.

This is the ingest hot path (DESIGN, "The ingest hot path"). Most lines of a
training log say nothing a detector needs, so a chunk is never walked line by
line: each candidate literal (progress words and the crash assembler's
triggers) is searched over the whole chunk with ``str.find``, hits are mapped
to their lines, and only those lines get per-line work. Line numbers come from
counting ``'\\n'`` between hits, and a timestamp is parsed only where an event
needs a time, walking back from that line to the last one that has one.

While the crash assembler is inside a traceback it must see every line, so
then lines are fed one by one until it closes.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import tzinfo
from typing import Callable, Protocol, Sequence

from parsers.events import Crash, Event, Recompile
from parsers.progress import CANDIDATES, ProgressPattern, parse_progress
from parsers.ranks import split_rank
from parsers.timestamps import TimeParser

# CSI (colours, cursor moves), OSC (titles, hyperlinks) and two-byte escapes.
# None of them may swallow a newline: line numbers must stay true.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b\n]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
# Where a line timestamp may be: every text style has hh:mm:ss, JSON a "time
# key. Used only to skip long stretches of lines without one.
_TIME_HINT = re.compile(r'[0-9]:[0-9]{2}:[0-9]{2}|"time')

_PROGRESS = 1
_TRIGGER = 2
_WALK_BACK_LINES = 4
_HINT_WINDOW = 16384


class Assembler(Protocol):
    """What the stream needs of ``parsers.tracebacks.CrashAssembler``."""

    @property
    def is_open(self) -> bool: ...

    def feed(self, line: str, lineno: int, time: float) -> list[Crash | Recompile]: ...

    def flush(self, time: float) -> list[Crash | Recompile]: ...


def _default_assembler() -> tuple[Callable[[], Assembler], tuple[str, ...]]:
    from parsers.tracebacks import TRIGGERS, CrashAssembler

    return CrashAssembler, tuple(TRIGGERS)


def _time_key(event: Event) -> float:
    return event.time


class LogStream:
    """Parses one log file's lines; keeps the state text demands across feeds.

    ``name`` prefixes every event's ``source`` (``name:lineno``). ``tz`` and
    ``default_year`` go to the TimeParser. ``progress_pattern`` replaces the
    built-in progress formats. ``assembler_factory`` makes the crash
    assembler (default: ``parsers.tracebacks.CrashAssembler``); ``triggers``
    are the literals that open it (default: its module's ``TRIGGERS``, or the
    factory's ``TRIGGERS`` attribute).
    """

    def __init__(
        self,
        name: str,
        *,
        tz: tzinfo | None = None,
        default_year: int | None = None,
        progress_pattern: ProgressPattern | None = None,
        assembler_factory: Callable[[], Assembler] | None = None,
        triggers: Sequence[str] | None = None,
    ) -> None:
        if assembler_factory is None:
            assembler_factory, default_triggers = _default_assembler()
            if triggers is None:
                triggers = default_triggers
        elif triggers is None:
            triggers = tuple(getattr(assembler_factory, "TRIGGERS", ()))
        self.name = name
        self._prefix = name + ":"
        self._times = TimeParser(tz=tz, default_year=default_year)
        self._pattern = progress_pattern
        self._assembler = assembler_factory()
        self._triggers = tuple(t for t in triggers if t)
        if progress_pattern is None:
            progress_literals: tuple[str, ...] | None = CANDIDATES
        else:
            progress_literals = progress_pattern.literals or None  # None: every line
        self._progress_literals = progress_literals
        self._last_time: float | None = None
        self._lines = 0

    @property
    def last_time(self) -> float | None:
        """The clock of the data: the last timestamp seen, else None."""
        return self._last_time

    @property
    def lines(self) -> int:
        """Lines fed so far."""
        return self._lines

    # -- the hot path -------------------------------------------------------

    def feed(self, text: str, first_lineno: int, fallback_time: float) -> list[Event]:
        """Events of ``text``: one or more complete (``'\\n'``-terminated) lines.

        ``first_lineno`` is the 1-based number of the first line;
        ``fallback_time`` dates events before any timestamp was ever seen
        (arrival time live, file mtime in replay).
        """
        if not text:
            return []
        if "\x1b" in text:
            text = _ANSI.sub("", text)
        if "\x00" in text:
            text = text.replace("\x00", "")
        has_cr = "\r" in text
        if has_cr:
            text = text.replace("\r\n", "\n")
            has_cr = "\r" in text
        n = len(text)
        self._lines += text.count("\n") + (0 if text.endswith("\n") else 1)

        marks = self._scan(text)
        events: list[Event] = []
        assembler = self._assembler
        times = self._times
        # Clock state: every line starting before ``covered`` has been
        # accounted for, and ``clock`` is the latest timestamp among them.
        clock = self._last_time
        covered = 0
        # Line-number state: the line starting at ``count_pos`` is ``count_no``.
        count_pos = 0
        count_no = first_lineno
        starts = sorted(marks)
        every_line = self._progress_literals is None
        k = 0
        pos = 0
        while pos < n:
            if every_line or assembler.is_open:
                start = pos
            else:
                while k < len(starts) and starts[k] < pos:
                    k += 1
                if k == len(starts):
                    break
                start = starts[k]
                k += 1
            end = text.find("\n", start)
            if end == -1:
                end = n
            pos = end + 1
            line = text[start:end]
            count_no += text.count("\n", count_pos, start)
            count_pos = start
            lineno = count_no
            flags = marks.get(start, 0)
            if every_line:
                flags |= _PROGRESS

            line_time: float | None = None
            if flags & _PROGRESS:
                found = self._progress(line, lineno, has_cr)
                if found is not None:
                    clock, covered = self._clock_at(text, covered, start, end, clock)
                    line_time = fallback_time if clock is None else clock
                    events.append(replace(found, time=line_time))
            if assembler.is_open or flags & _TRIGGER:
                if line_time is None:
                    clock, covered = self._clock_at(text, covered, start, end, clock)
                    line_time = fallback_time if clock is None else clock
                segments = line.split("\r") if has_cr and "\r" in line else (line,)
                for segment in segments:
                    for event in assembler.feed(segment, lineno, line_time):
                        events.append(self._own(event))

        # The chunk's last timestamp is the stream's clock from here on.
        if covered < n:
            latest = self._latest(text, covered, n)
            if latest is not None:
                clock = latest
        if clock is not None:
            self._last_time = clock
        if len(events) > 1:
            events.sort(key=_time_key)
        return events

    def flush(self, fallback_time: float) -> list[Event]:
        """End of input: whatever the assembler still holds."""
        time = self._last_time if self._last_time is not None else fallback_time
        events = [self._own(e) for e in self._assembler.flush(time)]
        events.sort(key=_time_key)
        return events

    # -- pieces -------------------------------------------------------------

    def _scan(self, text: str) -> dict[int, int]:
        """Line starts of candidate lines -> which kind of candidate."""
        marks: dict[int, int] = {}
        find = text.find
        rfind = text.rfind
        groups: list[tuple[tuple[str, ...], int]] = [(self._triggers, _TRIGGER)]
        if self._progress_literals is not None:
            groups.append((self._progress_literals, _PROGRESS))
        for literals, bit in groups:
            for literal in literals:
                i = find(literal)
                while i != -1:
                    start = rfind("\n", 0, i) + 1
                    end = find("\n", i)
                    marks[start] = marks.get(start, 0) | bit
                    if end == -1:
                        break
                    i = find(literal, end)
        return marks

    def _progress(self, line: str, lineno: int, has_cr: bool):  # -> Progress | None
        rank = None
        if line[:1] == "[":
            rank, line = split_rank(line)
        if has_cr and "\r" in line:
            # tqdm redraws: the last non-empty state wins; a state that
            # parses beats a later one that does not (a bar after a dict).
            for segment in reversed(line.split("\r")):
                if segment.strip():
                    found = parse_progress(segment, 0.0, self._prefix + str(lineno), rank, self._pattern)
                    if found is not None:
                        return found
            return None
        return parse_progress(line, 0.0, self._prefix + str(lineno), rank, self._pattern)

    def _own(self, event: Event) -> Event:
        """The assembler knows line numbers, not the file: cite ``name:line``."""
        source = getattr(event, "source", None)
        if isinstance(source, str) and source.isdigit():
            return replace(event, source=self._prefix + source)  # type: ignore[type-var]
        return event

    def _clock_at(
        self, text: str, covered: int, start: int, end: int, clock: float | None
    ) -> tuple[float | None, int]:
        """The clock at the line ``text[start:end]``: its own timestamp, else
        the latest one on the uncovered lines before it, else ``clock``."""
        if covered < start:
            latest = self._latest(text, covered, start)
            if latest is not None:
                clock = latest
        if covered <= start:
            own = self._times.parse(text[start:end])
            if own is not None:
                clock = own
            covered = end + 1
        return clock, covered

    def _latest(self, text: str, lo: int, hi: int) -> float | None:
        """The timestamp of the last line starting in ``[lo, hi)`` that has one."""
        parse = self._times.parse
        end = hi - 1 if hi > lo and text[hi - 1 : hi] == "\n" else hi
        # A few lines back first: timestamped logs have one on most lines.
        for _ in range(_WALK_BACK_LINES):
            if end < lo:
                return None
            start = text.rfind("\n", lo, end) + 1 or lo
            value = parse(text[start:end])
            if value is not None:
                return value
            end = start - 1
        # Then only the lines that could hold one, in growing windows from
        # the end so that a long stretch is searched in C, not line by line.
        window = _HINT_WINDOW
        while end >= lo:
            floor = max(lo, end - window)
            if floor > lo:
                floor = text.rfind("\n", lo, floor) + 1 or lo
            tried = -1
            for i in reversed([m.start() for m in _TIME_HINT.finditer(text, floor, end)]):
                start = text.rfind("\n", floor, i) + 1 or floor
                if start == tried:
                    continue
                tried = start
                line_end = text.find("\n", start, end)
                value = parse(text[start : end if line_end == -1 else line_end])
                if value is not None:
                    return value
            end = floor - 1
            window *= 4
        return None

