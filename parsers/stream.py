"""One log stream: complete lines in, progress and crash events out.

This is the ingest hot path (DESIGN, "The ingest hot path"). Most lines of a
training log say nothing a detector needs, so a chunk is never walked line by
line: the candidate literals (progress words and the crash assembler's
triggers) are searched over the whole chunk in C (``parsers.scanner``: one
Hyperscan automaton, or a few anchored regexes), and only the lines found
get per-line work. Line numbers come from counting ``'\\n'`` between them,
and a timestamp is parsed only where an event needs a time, walking back
from that line to the last one that has one. A log prints one progress
line shape thousands of times: such lines are set aside and read together
as columns (``_read_lanes``). benchmarks/bench_stream.py measures it.

While the crash assembler is inside a traceback it must see every line, so
then lines are fed one by one until it closes; the events of that stretch
wait for its crash, which goes among them where its time puts it
(``parsers.clock.placed``). Events leave in the file's order, unstamped
step lines run on by their step times (``parsers.step_clock``), at times
that never step back (``parsers.clock``): what a chunk gives never depends
on where the chunk ended (tests/core/test_stream_chunks.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from copy import copy
from dataclasses import replace
from datetime import tzinfo
from itertools import accumulate, repeat
from typing import Any, Protocol

from .clock import EventClock, placed
from .events import Crash, Event, Overflow, PaddingReport, Progress, Recompile
from .health_lines import LITERALS as HEALTH_LITERALS
from .health_lines import health_line
from .padding import LITERALS as PADDING_LITERALS
from .padding import padding_line
from .progress import (
    CANDIDATES,
    FIELDS,
    ProgressPattern,
    column_plan,
    line_shape,
    progress_possible,
    progress_values,
    value_columns,
)
from .progress_fast import FastPlan
from .progress_hints import SilentBarHint
from .progress_ops import Values
from .progress_redraws import redraw_values
from .ranks import split_rank
from .scanner import Scanner, make_scanner
from .step_clock import StepClock
from .timestamps import TimeParser

# CSI (colours, cursor moves), OSC (titles, hyperlinks) and two-byte escapes.
# None of them may swallow a newline: line numbers must stay true.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b\n]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
# A line that may start with a timestamp (TimeParser decides). Anchored on
# the newline, so ``re`` runs its fast literal-prefix loop over a chunk.
_TIME_HINT = re.compile(
    r"\n[ \t]*(?:\[[a-z0-9,]{1,16}\](?:<std(?:out|err)>)?:[ ]?|\[[A-Z]{3,8}\])*\[?"
    r"(?:[0-9]{4}-|[0-9]{1,2}/[0-9]{1,2}/|[IWEF][0-9]{3,4} |\{)"
)
# A line that may start with a stamp of full date (not glog's yearless one).
_DATED_HINT = re.compile(
    r"\n[ \t]*(?:\[[a-z0-9,]{1,16}\](?:<std(?:out|err)>)?:[ ]?|\[[A-Z]{3,8}\])*\[?"
    r"(?:[0-9]{4}-|[0-9]{1,2}/[0-9]{1,2}/|\{)"
)
# First characters of a line whose stamp is a full date (ISO, US, JSON):
# no glog year to settle, the common case, told without parsing again.
_DATED_FIRST = frozenset("0123456789{")

_PROGRESS = 1
_TRIGGER = 2
_DIGITS = 4  # the line holds literals with digits: test them on the line itself
_PADDING = 8  # the line may state padding efficiency (``parsers.padding``)
_HEALTH = 16  # the line is a health line (``parsers.health_lines``): tested per shape, exactly
_NO_PROGRESS = 32  # ... that repeats a step (a heartbeat): never read as progress
# An overflow line this close after a "Grad overflow on iteration N" of the
# same rank is the same overflow told again (DeepSpeed's verbose scalers).
_OVERFLOW_ECHO_LINES = 3
# Lines walked back one by one before searching for timestamps in C.
_WALK_BACK_LINES = 8
_HINT_WINDOW = 2048
# Per-shape literal flags: lines up to this long, this many shapes at most.
_SHAPE_LINE_MAX = 2048
_SHAPES_MAX = 512
# Events held while a traceback stays open, at most (then they go out).
_OPEN_HELD_MAX = 4096
# Lane lines in a row below this are read one by one: columns cost more
# (benchmarks/bench_replay.py, the quiet shape).
_COLUMNS_MIN = 2
# Characters sampled from a stream's first chunk to tune its scanner.
_SAMPLE_CHARS = 1 << 16

# A shape whose progress lines are read as columns: its fast plan, the
# fraction digits of the stamp its lines start with, and the TimeParser
# method that reads a run of those stamps (``iso_run`` or ``us_run``).
_Lane = tuple[FastPlan, int, Callable[[list[str], int], list[float]]]


class Assembler(Protocol):
    """What the stream needs of ``parsers.tracebacks.CrashAssembler``."""

    @property
    def is_open(self) -> bool: ...

    def feed(self, line: str, lineno: int, time: float) -> list[Crash | Recompile]: ...

    def flush(self, time: float) -> list[Crash | Recompile]: ...


def _default_assembler() -> tuple[Callable[[str], Assembler], tuple[str, ...]]:
    # Imported here so that the stream can be tested with a fake assembler
    # without the real one.
    from .tracebacks import TRIGGERS, CrashAssembler

    return CrashAssembler, tuple(TRIGGERS)


def _has_digit(literal: str) -> bool:
    return any("0" <= c <= "9" for c in literal)


def _look_for_progress(hint: SilentBarHint, events: list[Event]) -> None:
    """Retires ``hint`` once a step or a rate was read (a loss alone, as the
    one line a Rich bar leaves when the run ends, is no progress seen)."""
    for e in events:
        if type(e) is Progress and (e.step is not None or e.rate is not None or e.tokens_per_s is not None):
            hint.progressed()
            return


class LogStream:
    """Parses one log file's lines; keeps the state text demands across feeds.

    ``name`` prefixes every event's ``source`` (``name:lineno``). ``tz`` and
    ``default_year`` go to the TimeParser. ``progress_pattern`` replaces the
    built-in progress formats. ``assembler_factory`` makes the crash
    assembler (default: ``parsers.tracebacks.CrashAssembler``); ``triggers``
    are the literals that open it (default: its module's ``TRIGGERS``, or the
    factory's ``TRIGGERS`` attribute). ``scanner`` picks the literal search
    engine (``parsers.scanner.make_scanner``); every engine finds the same lines.
    ``fast=False`` reads every line on its own, in the chunk's own text:
    the reference that the column reading and the ASCII view are tested
    against. A stream is fed from one thread at a time (the Monitor holds
    its lock); streams of different files may scan at the same time.

    Events leave in the file's order, at times that never step back
    (``parsers.clock``): a rank's steps stay in order, and replay can merge
    files by time. ``replay=True`` is a finished file on its own clock:
    events before the first timestamp wait for it, and a log with none runs
    on tqdm's elapsed counter. Live (False) they carry the fallback (arrival)
    time, which the Monitor replaces.
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
        scanner: str = "auto",
        fast: bool = True,
        replay: bool = False,
    ) -> None:
        if assembler_factory is None:
            assembler_class, default_triggers = _default_assembler()
            assembler_factory = lambda: assembler_class(name)  # noqa: E731
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
        # Lines that state padding on their own (an HF callback's dict): a
        # progress line that states it carries it in its metrics instead.
        self._padding_literals = PADDING_LITERALS
        # Overflows, heartbeats, eval/checkpoint phases, Xid lines (issue 19).
        # The scanner needs only those that hold none of the other literals
        # ("last step" holds "tep"): a line holding one is found already.
        self._health_literals = HEALTH_LITERALS
        others = self._triggers + (progress_literals or ()) + self._padding_literals
        self._literals = others + tuple(h for h in HEALTH_LITERALS if not any(o in h for o in others))
        # (line number, rank) of the last "Grad overflow on iteration" overflow.
        self._overflow_iter: tuple[int, int | None] = (-_OVERFLOW_ECHO_LINES - 1, None)
        self._scanner: Scanner = make_scanner(self._literals, engine=scanner)
        # The ASCII view finds exactly the lines the text would, unless a
        # literal holds the placeholder or a character the view replaces.
        self._view_ok = fast and all(lit.isascii() and "?" not in lit for lit in self._literals)
        self._fast = fast
        # Literals with an ASCII digit cannot be told from a line's shape.
        # line shape -> (flags of its literals, its column reading or None)
        self._flag_cache: dict[bytes, tuple[int, _Lane | None]] = {}
        self._shape_triggers = tuple(t for t in self._triggers if not _has_digit(t))
        self._digit_triggers = tuple(t for t in self._triggers if _has_digit(t))
        self._shape_progress: tuple[str, ...] | None = None
        self._digit_progress: tuple[str, ...] = ()
        if progress_literals is not None:
            self._shape_progress = tuple(t for t in progress_literals if not _has_digit(t))
            self._digit_progress = tuple(t for t in progress_literals if _has_digit(t))
        self._shaped_digit_literals = tuple(
            line_shape(t) for t in (*self._digit_progress, *self._digit_triggers)
        )
        self._clock = EventClock(replay)
        self._steps = StepClock()
        self._tuned = False  # anchors chosen from this log's own text yet?
        self._last_time: float | None = None
        self._own_count = 0  # lines seen with a timestamp of their own
        self._tail: tuple[str, int, int] = ("", 0, 1)
        # Events since a traceback opened that it is still open for: they
        # wait for its crash, which is placed among them by time (``placed``).
        self._open_held: list[Event] = []
        # A run whose bar never reaches this log (Lightning's Rich bar): said
        # once by whoever moves the clock (``progress_hints``).
        self.hint = SilentBarHint()

    @property
    def last_time(self) -> float | None:
        """The clock of the data: the last timestamp seen, else None."""
        return self._last_time

    def peek_stamps(self, text: str, lines: int = 64) -> tuple[float, float] | None:
        """The first and the last timestamp among the first and the last
        ``lines`` lines of ``text``, read by a copy of this stream's clock
        (its own state is untouched: the text is fed after this).

        Live, a chunk's stamps tell where the log's clock sits against the
        watcher's before the chunk is dated (``dflash_watch.alignment``).
        """
        if not text:
            return None
        times = copy(self._times)
        rows = text.split("\n", lines)[:lines]
        tail = text.rsplit("\n", lines + 1)[-lines - 1 :]

        def first_of(candidates: Sequence[str]) -> float | None:
            for line in candidates:
                if "\r" in line:
                    line = line.rsplit("\r", 1)[-1]
                if line[:1] == "[":
                    line = split_rank(line)[1]
                t = times.parse(line)
                if t is not None:
                    return t
            return None

        first = first_of(rows)
        if first is None:
            return None
        last = first_of(tail[::-1])
        return first, (last if last is not None else first)

    @property
    def lines(self) -> int:
        """The number of the last line fed (lines fed, when numbering from 1)."""
        text, pos, number = self._tail
        if not text:
            return number - 1
        return number + text.count("\n", pos) - (1 if text[-1] == "\n" else 0)

    # -- the hot path -------------------------------------------------------

    def feed(self, text: str, first_lineno: int, fallback_time: float) -> list[Event]:
        """Events of ``text``: one or more complete (``'\\n'``-terminated) lines.

        ``first_lineno`` is the 1-based number of the first line;
        ``fallback_time`` dates events before any timestamp was ever seen
        (arrival time live, file mtime in replay).
        """
        if not text:
            return []
        hint = self.hint
        if not hint.done:
            hint.look(text)
        if self._last_time is None:
            self._clock.fallback(fallback_time)
        # One character outside ASCII (a tqdm block bar) makes the whole
        # chunk a wide str, and every search and slice of it slower. Lines
        # are found in an ASCII view instead, with '?' for each such
        # character (same offsets); a line whose view holds a '?' is taken
        # from the text itself, so no event ever sees the placeholder.
        view = self._view(text)
        if "\x1b" in view or "\x00" in view or "\r\n" in view:
            if "\x1b" in view:
                text = _ANSI.sub("", text)
            if "\x00" in text:
                text = text.replace("\x00", "")
            if "\r\n" in text:
                text = text.replace("\r\n", "\n")
            view = self._view(text)
        has_cr = "\r" in view
        n = len(text)
        if not self._tuned and n >= _SAMPLE_CHARS:
            self._scanner.tune(view[:_SAMPLE_CHARS])
            self._tuned = True

        ends = self._scanner.ends(view)
        # Events of an open traceback's stretch come first, held from before.
        events: list[Event] = self._open_held
        self._open_held = []
        open_at = 0 if events else None  # where that stretch starts in ``events``
        append = events.append
        assembler = self._assembler
        pattern = self._pattern
        flag_cache = self._flag_cache
        # Clock state: every line starting before ``covered`` has been
        # accounted for, and ``clock`` is the latest timestamp among them.
        clock = self._last_time
        covered = 0
        # Line-number state: the line starting at ``count_pos`` is ``count_no``.
        count_pos = 0
        count_no = first_lineno
        every_line = self._progress_literals is None
        k = 0
        n_ends = len(ends)
        pos = 0
        find = view.find
        rfind = view.rfind
        wide = view is not text
        # Progress lines of a column shape (``_Lane``) wait here, in order,
        # and are read together before the next line that does anything else.
        run_lines: list[str] = []
        run_starts: list[int] = []
        run_ends: list[int] = []
        run_lanes: list[_Lane | bytes] = []  # bytes: a plain progress line's shape
        # (Declared, not assigned: no work per line.)
        found: Values | None
        event: Event
        segments: tuple[str, ...]
        while pos < n:
            is_open = assembler.is_open
            if is_open:
                if open_at is None:
                    open_at = len(events)
            elif open_at is not None:
                # The stretch a traceback was open for is over: its crash
                # goes where its time puts it among the events of the stretch.
                events[open_at:] = placed(events[open_at:])
                open_at = None
            if every_line or is_open:
                start = pos
                end = find("\n", start)
                if end == -1:
                    end = n
            else:
                while k < n_ends and ends[k] < pos:
                    k += 1
                if k == n_ends:
                    break
                end = ends[k]
                k += 1
                start = rfind("\n", pos, end) + 1 or pos
            pos = end + 1
            line = view[start:end]
            if wide and "?" in line:
                line = text[start:end]
            # A log repeats a few line shapes: which literals a line holds is
            # a dictionary lookup on its shape, not 20-odd substring tests.
            shape = None
            if len(line) <= _SHAPE_LINE_MAX:
                shape = line_shape(line)
                entry = flag_cache.get(shape)
                if entry is None:
                    if len(flag_cache) >= _SHAPES_MAX:
                        flag_cache.clear()
                    flags = self._shape_flags(line, shape)
                    entry = flag_cache[shape] = (flags, self._lane(line, shape, flags))
                flags, lane = entry
                if lane is not None and not is_open:
                    run_lines.append(line)
                    run_starts.append(start)
                    run_ends.append(end)
                    run_lanes.append(lane)
                    continue
                if flags & _DIGITS:  # a shape hides digits: "Signal 9" is tested on the line
                    flags |= self._flags(line, self._digit_progress, self._digit_triggers)
            else:
                flags = self._flags(line, self._progress_literals, self._triggers)
                if any(lit in line for lit in self._padding_literals):
                    flags |= _PADDING
                flags = self._health_flags(line, flags)
            if not flags and not is_open:
                continue  # a candidate that holds nothing after all (an eval bar)
            if flags == _PROGRESS and shape is not None and not is_open and self._fast and line[:1] != "[":
                # A plain progress line (a tqdm bar, redrawn or not, between stamped step
                # lines) waits in the run too, in its place, its shape for a
                # lane: the run is not cut at every such line (``_read_lanes``).
                run_lines.append(line)
                run_starts.append(start)
                run_ends.append(end)
                run_lanes.append(shape)
                continue
            if run_lines:
                clock, covered, count_pos, count_no = self._read_lanes(
                    text, view, run_lines, run_starts, run_ends, run_lanes, events, clock, covered, count_pos, count_no,
                    fallback_time,
                )
                run_lines, run_starts, run_ends, run_lanes = [], [], [], []
            count_no += view.count("\n", count_pos, start)
            count_pos = start
            lineno = count_no

            line_time: float | None = None
            if flags & _PROGRESS:
                if has_cr and "\r" in line:
                    # A tqdm bar redrawn in place: every state it showed is
                    # progress (HF Trainer's one bar spans the whole run).
                    for found in self._redraws(line):
                        event, clock, covered = self._dated(
                            found, text, covered, start, end, clock, line, lineno, fallback_time
                        )
                        append(event)
                        line_time = event.time
                else:
                    if line[:1] == "[":
                        found = self._progress(line, has_cr)
                    else:
                        found = progress_values(line, None, pattern, shape)
                    if found is not None:
                        event, clock, covered = self._dated(
                            found, text, covered, start, end, clock, line, lineno, fallback_time
                        )
                        append(event)
                        line_time = event.time
            if flags & _PADDING and line_time is None:
                efficiency = padding_line(line)
                if efficiency is not None:
                    clock, covered = self._clock_at(text, covered, start, end, clock, line)
                    line_time = fallback_time if clock is None else clock
                    rank = split_rank(line)[0] if line[:1] == "[" else None
                    append(PaddingReport(line_time, efficiency, self._prefix + str(lineno), rank))
            if flags & _HEALTH:
                health = self._health(line, lineno)
                if health is not None:
                    if line_time is None:
                        clock, covered = self._clock_at(text, covered, start, end, clock, line)
                        line_time = fallback_time if clock is None else clock
                    append(replace(health, time=line_time))
            if is_open or flags & _TRIGGER:
                if line_time is None:
                    clock, covered = self._clock_at(text, covered, start, end, clock, line)
                    line_time = fallback_time if clock is None else clock
                segments = (line,)
                if has_cr and "\r" in line:
                    segments = tuple(part for part in line.split("\r") if part) or ("",)
                for segment in segments:
                    for event in assembler.feed(segment, lineno, line_time):
                        append(self._own(event))
        if run_lines:
            clock, covered, count_pos, count_no = self._read_lanes(
                text, view, run_lines, run_starts, run_ends, run_lanes, events, clock, covered, count_pos, count_no,
                fallback_time,
            )

        # Lines are counted only on demand (``lines``): the caller numbers
        # them already, and a full count is a pass over the chunk.
        self._tail = (view, count_pos, count_no)
        # The chunk's last timestamp is the stream's clock from here on.
        if covered < n:
            latest = self._latest(text, covered, n)
            if latest is not None:
                clock = latest
        if open_at is not None:
            if assembler.is_open and len(events) - open_at <= _OPEN_HELD_MAX:
                self._open_held = events[open_at:]
                del events[open_at:]
            else:
                events[open_at:] = placed(events[open_at:])
        if events:
            events = self._ordered(events)
            if not hint.done:
                _look_for_progress(hint, events)
        if clock is not None:
            self._last_time = clock
            if not assembler.is_open:
                self._clock.settle()
        return events

    def flush(self, fallback_time: float) -> list[Event]:
        """End of input: whatever the assembler still holds, and events that
        waited for a clock (replay) at their own time."""
        if self._last_time is None:
            self._clock.fallback(fallback_time)
            time = fallback_time
        else:
            time = self._last_time
        held, self._open_held = self._open_held, []
        events = self._clock.resolve(placed(held + [self._own(e) for e in self._assembler.flush(time)]))
        clock = self._clock
        return clock.hold(clock.on_dated(self._steps.apply, clock.flush() + events))

    def _ordered(self, events: list[Event]) -> list[Event]:
        """A chunk's events as they leave the stream: in the file's order,
        unstamped step lines run on by their step times (``StepClock``), at
        times that never step back (``EventClock``)."""
        clock = self._clock
        return clock.hold(clock.on_dated(self._steps.apply, clock.resolve(events)))

    # -- pieces -------------------------------------------------------------

    def _view(self, text: str) -> str:
        """``text`` where it is ASCII, else its ASCII view ('?' for others)."""
        if text.isascii() or not self._view_ok:
            return text
        return text.encode("ascii", "replace").decode("ascii")

    def _lane(self, line: str, shape: bytes, flags: int) -> _Lane | None:
        """The column reading of ``line``'s shape, if its lines can have one:
        progress in a built-in format and nothing else (no trigger, no rank
        prefix, no '\\r'), dated by a zone-less ISO stamp or a US one
        (``11/29/2026 10:00:00``, Python logging's) at the start."""
        if not self._fast or flags & ~_PADDING != _PROGRESS or self._pattern is not None:
            return None
        if shape[:1] == b"[" or b"\r" in shape:
            return None
        frac_len = TimeParser.iso_layout(shape)
        run = self._times.iso_run
        if frac_len is None:
            frac_len = TimeParser.us_layout(shape)
            run = self._times.us_run
            if frac_len is None:
                return None
        fast = column_plan(line, shape)
        return None if fast is None else (fast, frac_len, run)

    def _read_lanes(
        self,
        text: str,
        view: str,
        lines: list[str],
        starts: list[int],
        ends: list[int],
        lanes: list[_Lane | bytes],
        events: list[Event],
        clock: float | None,
        covered: int,
        count_pos: int,
        count_no: int,
        fallback_time: float,
    ) -> tuple[float | None, int, int, int]:
        """Progress events of deferred run lines, as ``feed`` would make
        them one by one (same values, same order), and the clock and line
        count state after them. ``view`` is ``feed``'s ASCII view of
        ``text`` (or ``text``): newlines are counted there.

        A run holds lane lines (``lanes[i]`` their ``_Lane``) and plain
        progress lines between them (``lanes[i]`` their shape, bytes), read
        on their own in their place. Each lane's numbers are read as columns
        once for the whole run (``map`` in C; entry i is line i's value
        whatever lines sit beside it), and sliced for each stretch of it;
        where any of its lines leaves the fast path, each stretch is read
        as columns on its own. Stamps are read stretch by stretch in the
        file's order (``TimeParser.iso_run`` or ``us_run``: the parser keeps
        a year for glog lines), line numbers by counting newlines between
        the lines. A line the columns cannot take (a value check fails, a
        stamp does not parse) and the rest of its stretch are read one at a
        time, exactly as ``feed`` reads any progress line.
        """
        prefix = self._prefix
        pattern = self._pattern
        total = len(lines)
        found: Values | None
        columns: Sequence[Any] | None
        # The lanes of the run, each with its lines' columns (None: read per
        # stretch) and how many of its lines were taken so far.
        members: dict[int, tuple[_Lane, list[str]]] = {}
        for m, lane in enumerate(lanes):
            if not isinstance(lane, bytes):
                member = members.get(id(lane))
                if member is None:
                    members[id(lane)] = (lane, [lines[m]])
                else:
                    member[1].append(lines[m])
        groups: dict[int, list[Any]] = {
            key: [value_columns(lane[0], group_lines) if len(group_lines) > 1 else None, 0]
            for key, (lane, group_lines) in members.items()
        }
        # Every run line's number at once: newlines counted between them in C.
        numbers = list(accumulate(map(view.count, repeat("\n"), [count_pos, *starts[:-1]], starts), initial=count_no))
        del numbers[0]
        i = 0
        while i < total:
            lane = lanes[i]
            if isinstance(lane, bytes):  # a plain progress line, read on its own
                line = lines[i]
                start = starts[i]
                count_no = numbers[i]
                if "\r" in line:  # a tqdm bar redrawn in place: every state, as ``feed``
                    for found in self._redraws(line):
                        event, clock, covered = self._dated(
                            found, text, covered, start, ends[i], clock, line, count_no, fallback_time
                        )
                        events.append(event)
                else:
                    found = progress_values(line, None, pattern, lane)
                    if found is not None:
                        event, clock, covered = self._dated(
                            found, text, covered, start, ends[i], clock, line, count_no, fallback_time
                        )
                        events.append(event)
                i += 1
                continue
            j = i + 1
            while j < total and lanes[j] is lane:
                j += 1
            fast, frac_len, run = lane
            stretch = lines[i:j] if i or j < total else lines
            group = groups[id(lane)]
            whole, taken = group
            group[1] = taken + j - i
            done = 0
            if j - i < _COLUMNS_MIN:
                columns = None  # a line or two: read on their own, cheaper than columns
            elif whole is None:
                columns = value_columns(fast, stretch)
            else:
                stop = taken + j - i
                columns = [column[taken:stop] if type(column) is list else column for column in whole]
            if columns is not None:
                times = run(stretch, frac_len)
                done = len(times)
            if done:
                # Columns after step_seconds are the fields after ``clocked``.
                steps, totals, tokens, losses, metrics, seconds, *after = columns  # type: ignore[misc]
                sources = [prefix + str(number) for number in numbers[i : i + done]]
                events.extend(
                    map(
                        Progress, times, sources, steps, totals, tokens, losses, repeat(None), metrics, seconds,
                        repeat(True), *after,
                    )
                )
                self._own_count += done
                clock = times[-1]
                covered = ends[i + done - 1] + 1
            for m in range(i + done, j):
                line = lines[m]
                start = starts[m]
                count_no = numbers[m]
                found = progress_values(line)
                if found is not None:
                    event, clock, covered = self._dated(
                        found, text, covered, start, ends[m], clock, line, count_no, fallback_time
                    )
                    events.append(event)
            i = j
        return clock, covered, starts[-1], numbers[-1]

    def _shape_flags(self, line: str, shape: bytes) -> int:
        """What every line of ``line``'s shape holds, as far as its shape tells.

        _DIGITS: the shape holds a literal with a digit in its shaped form
        ("Signal 0"), so the line itself must be tested for those. A shape
        whose every part has an empty progress plan cannot be progress
        whatever its digits (an evaluation bar redrawn six times): its
        _PROGRESS flag is dropped here, once, not tested on every line.
        """
        flags = self._flags(line, self._shape_progress, self._shape_triggers)
        if any(lit in line for lit in self._padding_literals):
            flags |= _PADDING
        flags = self._health_flags(line, flags)
        if any(lit in shape for lit in self._shaped_digit_literals):
            flags |= _DIGITS
        if flags & _PROGRESS and self._pattern is None and not progress_possible(line):
            flags &= ~_PROGRESS
        return flags

    def _health_flags(self, line: str, flags: int) -> int:
        """``flags`` with _HEALTH if ``line`` is a health line, and without
        _PROGRESS if it repeats a step. Lines of one shape differ only in
        digits, which these patterns never look at: for a shape, exact."""
        if any(lit in line for lit in self._health_literals):
            found = health_line(line)
            if found is not None:
                flags |= _HEALTH
                if found[1]:
                    flags = (flags | _NO_PROGRESS) & ~_PROGRESS
        return flags

    def _health(self, line: str, lineno: int) -> Event | None:
        """The health event of a _HEALTH line, cited ``name:line`` (undated);
        None for the echo of an overflow already told."""
        found = health_line(line)
        if found is None:
            return None
        event = found[0]
        if type(event) is Overflow:
            if "overflow on iteration" in line:
                self._overflow_iter = (lineno, event.rank)
            else:
                at, rank = self._overflow_iter
                if lineno - at <= _OVERFLOW_ECHO_LINES and (rank is None or event.rank in (None, rank)):
                    self._overflow_iter = (-_OVERFLOW_ECHO_LINES - 1, None)  # one echo per overflow
                    return None
        return replace(event, source=self._prefix + str(lineno))

    @staticmethod
    def _flags(line: str, progress_literals: tuple[str, ...] | None, triggers: tuple[str, ...]) -> int:
        """_PROGRESS if ``line`` holds any of ``progress_literals`` (None:
        every line may be progress), _TRIGGER if any of ``triggers``."""
        flags = 0
        if progress_literals is None:
            flags = _PROGRESS
        else:
            for literal in progress_literals:
                if literal in line:
                    flags = _PROGRESS
                    break
        for literal in triggers:
            if literal in line:
                return flags | _TRIGGER
        return flags

    def _redraws(self, line: str) -> list[Values]:
        """The Progress values of each state of a line redrawn with '\\r', in
        order (``progress_redraws.redraw_values``: live reads them alike)."""
        return redraw_values(line, self._pattern)

    def _progress(self, line: str, has_cr: bool) -> Values | None:
        """The line's Progress values after time and source (``progress_values``)."""
        rank = None
        if line[:1] == "[":
            rank, line = split_rank(line)
        if has_cr and "\r" in line:
            # tqdm redraws: the last non-empty state wins; a state that
            # parses beats a later one that does not (a bar after a dict).
            for segment in reversed(line.split("\r")):
                if segment.strip():
                    found = progress_values(segment, rank, self._pattern)
                    if found is not None:
                        return found
            return None
        return progress_values(line, rank, self._pattern)

    def _dated(
        self, found: Values, text: str, covered: int, start: int, end: int, clock: float | None, line: str,
        lineno: int, fallback_time: float,
    ) -> tuple[Progress, float | None, int]:
        """The Progress of a line read on its own (``progress_values``'
        ``found``), dated by ``_clock_at``; and the clock state after it."""
        own_before = self._own_count
        clock, covered = self._clock_at(text, covered, start, end, clock, line)
        time = fallback_time if clock is None else clock
        source = self._prefix + str(lineno)
        own = self._own_count > own_before
        # The values after step_seconds are the fields after ``clocked``.
        return Progress(time, source, *found[:FIELDS], own, *found[FIELDS:]), clock, covered

    def _own(self, event: Crash | Recompile) -> Crash | Recompile:
        """The assembler knows line numbers, not the file: cite ``name:line``."""
        source = event.source
        if source.isdigit():
            return replace(event, source=self._prefix + source)
        return event

    def _clock_at(
        self, text: str, covered: int, start: int, end: int, clock: float | None, line: str
    ) -> tuple[float | None, int]:
        """The clock at ``line`` (``text[start:end]``): its own timestamp,
        else the latest one on the uncovered lines before it, else ``clock``."""
        if covered <= start:
            # Most event lines carry a full date of their own, which wins over
            # the lines before it: then those need not be parsed at all.
            own = self._times.parse_dated(line)
            if own is not None:
                self._own_count += 1
                return own, end + 1
        return self._clock_behind(text, covered, start, end, clock, line)

    def _clock_behind(
        self, text: str, covered: int, start: int, end: int, clock: float | None, line: str
    ) -> tuple[float | None, int]:
        """``_clock_at`` once the line is known to have no full date of its own
        (or to be covered already): read the lines before it, then its own
        undated (glog) stamp."""
        if covered < start:
            latest = self._latest(text, covered, start)
            if latest is not None:
                clock = latest
        if covered <= start:
            own = self._times.parse(line)
            if own is not None:
                clock = own
                self._own_count += 1
            covered = end + 1
        return clock, covered

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
        times = self._times
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

