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
as columns (``parsers.lanes``). benchmarks/bench_stream.py measures it.

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
from typing import Protocol

from .clock import EventClock, placed
from .crlf import has_crlf
from .cursor import Bare, Cursor, Lane, Ranked, Redrawn
from .events import Crash, Event, Overflow, Progress, Recompile
from .final_times import FinalTimes
from .glued import glued_at
from .health_lines import LITERALS as HEALTH_LITERALS
from .health_lines import health_line
from .lanes import lane_of, read_lanes, redrawn_lane
from .line_times import LineTimes
from .native import KERNELS
from .one_line import body_shape, read_padding, read_progress
from .padding import LITERALS as PADDING_LITERALS
from .progress import CANDIDATES, ProgressPattern, line_shape, progress_possible
from .progress.hints import SilentBarHint
from .ranks import split_line
from .scanner import Scanner, make_scanner
from .step_clock import StepClock
from .timestamps import TimeParser

# CSI (colours, cursor moves), OSC (titles, hyperlinks) and two-byte escapes.
# None of them may swallow a newline: line numbers must stay true.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b\n]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_PROGRESS = 1
_TRIGGER = 2
_DIGITS = 4  # the line holds literals with digits: test them on the line itself
_PADDING = 8  # the line may state padding efficiency (``parsers.padding``)
_HEALTH = 16  # the line is a health line (``parsers.health_lines``): tested per shape, exactly
_NO_PROGRESS = 32  # ... that repeats a step (a heartbeat): never read as progress
_RANKED = 64  # progress with a rank prefix after blanks: read on its own, split (``split_line``)
# An overflow line this close after a "Grad overflow on iteration N" of the
# same rank is the same overflow told again (DeepSpeed's verbose scalers).
_OVERFLOW_ECHO_LINES = 3
# Per-shape literal flags: lines up to this long, this many shapes at most.
_SHAPE_LINE_MAX = 2048
_SHAPES_MAX = 512
# Events held while a traceback stays open, at most (then they go out).
_OPEN_HELD_MAX = 4096
# Characters sampled from a stream's first chunk to tune its scanner.
_SAMPLE_CHARS = 1 << 16

class Assembler(Protocol):
    """What the stream needs of ``parsers.crash.tracebacks.CrashAssembler``."""

    @property
    def is_open(self) -> bool: ...

    def feed(self, line: str, lineno: int, time: float) -> list[Crash | Recompile]: ...

    def flush(self, time: float) -> list[Crash | Recompile]: ...


Feed = Callable[[str, "int | None", str, int, float], "list[Crash | Recompile]"]  # (line, rank, text, lineno, time)


def _feeder(assembler: Assembler) -> Feed:
    """The real assembler takes the stream's split (``feed_split``); one
    that takes whole lines (a test's fake) gets the line."""
    feed_split = getattr(assembler, "feed_split", None)
    if feed_split is not None:
        return lambda line, rank, text, lineno, time: feed_split(rank, text, lineno, time)
    feed = assembler.feed
    return lambda line, rank, text, lineno, time: feed(line, lineno, time)


def _default_assembler() -> tuple[Callable[[str], Assembler], tuple[str, ...]]:
    # Imported here so that the stream can be tested with a fake assembler
    # without the real one.
    from .crash.tracebacks import TRIGGERS, CrashAssembler

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
    assembler (default: ``parsers.crash.tracebacks.CrashAssembler``); ``triggers``
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
        # The TimeParser, the count of stamped lines and the prefix, shared
        # by the pieces of a feed (``line_times``, ``lanes``).
        self._dating = LineTimes(self._times, self._prefix)
        self._pattern = progress_pattern
        self._assembler = assembler_factory()
        self._feed = _feeder(self._assembler)
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
        self._flag_cache: dict[bytes, tuple[int, Lane | Bare | Ranked | Redrawn | None]] = {}
        # Lanes of ranked lines' texts by shape (``lanes.lane_of``).
        self._body_lanes: dict[bytes, Lane | None] = {}
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
        self._tail: tuple[str, int, int] = ("", 0, 1)
        # Events since a traceback opened that it is still open for: they
        # wait for its crash, which is placed among them by time (``placed``).
        self._open_held: list[Event] = []
        # A run whose bar never reaches this log (Lightning's Rich bar): said
        # once by whoever moves the clock (``progress.hints``).
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
                    # Its last redraw, or a log line glued to the redraws.
                    cut = glued_at(line)
                    line = line[cut:] if cut else line.rsplit("\r", 1)[-1]
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

    def feed(self, text: str, first_lineno: int, fallback_time: float, read_live: bool = False) -> list[Event]:
        """Events of ``text``: one or more complete (``'\\n'``-terminated) lines.

        ``first_lineno`` is the 1-based number of the first line;
        ``fallback_time`` dates events before any timestamp was ever seen
        (arrival time live, file mtime in replay). ``read_live``: the chunk
        was read as it was written, at ``fallback_time``, so none of it is
        later (``clock._run_back``).
        """
        if not text:
            return []
        hint = self.hint
        if not hint.done:
            hint.look(text)
        if self._last_time is None:
            self._clock.fallback(fallback_time)
        text, view = self._cleaned(text)
        if not self._tuned and len(text) >= _SAMPLE_CHARS:
            self._scanner.tune(view[:_SAMPLE_CHARS])
            self._tuned = True
        # Events of an open traceback's stretch come first, held from before.
        cur = Cursor(text, view, "\r" in view, fallback_time, self._open_held, self._last_time, count_no=first_lineno)
        self._open_held = []
        if self._fast and self._clock.plain:  # events dated as they are built (``parsers.final_times``)
            cur.final = FinalTimes(self._steps, self._clock)
        open_at = self._scan(cur, self._scanner.ends(view))
        return self._chunk_done(cur, open_at, fallback_time if read_live else None)

    def _cleaned(self, text: str) -> tuple[str, str]:
        """``text`` without ANSI escapes, NULs and CRLFs, and its view.

        One character outside ASCII (a tqdm block bar) makes the whole chunk
        a wide str, and every search and slice of it slower. Lines are found
        in an ASCII view instead, with '?' for each such character (same
        offsets); a line whose view holds a '?' is taken from the text
        itself, so no event ever sees the placeholder.
        """
        view = self._view(text)
        if "\x1b" in view or "\x00" in view or has_crlf(view):
            if "\x1b" in view:
                text = _ANSI.sub("", text)
            if "\x00" in text:
                text = text.replace("\x00", "")
            if "\r\n" in text:
                text = text.replace("\r\n", "\n")
            view = self._view(text)
        return text, view

    def _scan(self, cur: Cursor, ends: list[int]) -> int | None:
        """Walk the chunk's candidate lines (``ends``: where each found line
        ends), every line while a traceback is open; events onto the
        cursor. Returns where the still open traceback's stretch starts in
        ``cur.events``, or None."""
        text, view, events = cur.text, cur.view, cur.events
        open_at = 0 if events else None  # where an open traceback's stretch starts in ``events``
        assembler = self._assembler
        flag_cache = self._flag_cache
        every_line = self._progress_literals is None
        fast = self._fast
        k = pos = 0
        n_ends, n = len(ends), len(text)
        find, rfind = view.find, view.rfind
        wide = view is not text
        has_cr = cur.has_cr
        # Progress lines of a column shape (``Lane``) wait in the cursor's
        # run, in order, and are read together before the next line that
        # does anything else. Held in locals: the hot loop appends to them.
        run_lines, run_starts, run_ends, run_lanes = cur.run_lines, cur.run_starts, cur.run_ends, cur.run_lanes
        is_open = assembler.is_open  # it opens and closes only as it is fed: asked after each feed
        # The compiled walk (``parsers.native``), for an ASCII view only: a
        # line of it is its own UTF-8, so the kernel makes its shape.
        take_run = KERNELS.take_run if KERNELS is not None and view.isascii() else None
        while pos < n:
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
                if take_run is not None:
                    # The lines it only sets aside, walked in C (``parsers.native``);
                    # it stops before the first it would do more with.
                    k, pos = take_run(view, text, ends, k, pos, flag_cache, run_lines, run_starts, run_ends, run_lanes,
                                      wide, has_cr, fast, _SHAPE_LINE_MAX, _PROGRESS, glued_at)
                    if pos >= n:
                        break
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
            if has_cr and "\r" in line:
                cut = glued_at(line)
                if cut:
                    # A log line glued to a tqdm bar's redraws (``parsers.glued``):
                    # the redraws are read up to it, then it as a line of its
                    # own (same number). ``end + 1`` is where each line's
                    # reading stops (``LineTimes``: its own stamp is read).
                    line = line[:cut]
                    pos = start + cut
                    end = pos - 1
                    if not (every_line or is_open):
                        k -= 1  # its end is the glued line's too
            # A log repeats a few line shapes: which literals a line holds is
            # a dictionary lookup on its shape, not 20-odd substring tests.
            shape = None
            if len(line) <= _SHAPE_LINE_MAX:
                shape = line_shape(line)
                entry = flag_cache.get(shape)
                if entry is None:
                    if len(flag_cache) >= _SHAPES_MAX:
                        flag_cache.clear()
                        self._body_lanes.clear()
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
                flags = self._line_flags(line)
            if not flags and not is_open:
                continue  # a candidate that holds nothing after all (an eval bar)
            if flags == _PROGRESS and shape is not None and not is_open and fast and line[:1] != "[":
                # A plain progress line (a tqdm bar, redrawn or not, between stamped step
                # lines) waits in the run too, in its place, its shape for a
                # lane: the run is not cut at every such line (``read_lanes``).
                run_lines.append(line)
                run_starts.append(start)
                run_ends.append(end)
                run_lanes.append(shape)
                continue
            if run_lines:
                read_lanes(cur, self._dating, self._pattern)
            self._line_events(cur, line, start, end, flags, shape, is_open)
            is_open = assembler.is_open
        if run_lines:
            read_lanes(cur, self._dating, self._pattern)
        return open_at

    def _line_events(
        self, cur: Cursor, line: str, start: int, end: int, flags: int, shape: bytes | None, is_open: bool
    ) -> None:
        """The events of one line read on its own (``text[start:end]``,
        ``flags`` what it holds), onto ``cur.events``: progress, padding,
        health, and the line fed to the crash assembler while it is open
        or the line holds a trigger."""
        # The line's number: newlines counted since the last one numbered.
        lineno = cur.count_no = cur.count_no + cur.view.count("\n", cur.count_pos, start)
        cur.count_pos = start
        dating = self._dating
        line_time: float | None = None
        # The line's one rank split: every reader below takes its rank and
        # the text after the prefix (``split``; None: the line has none).
        rank, body = split_line(line)
        split = body if body is not line else None
        if flags & _PROGRESS:
            if split is not None and shape is not None:
                shape = body_shape(line, body, shape)
            line_time = read_progress(cur, dating, self._pattern, line, start, end, lineno, rank, split, shape)
        if flags & _PADDING and line_time is None:
            line_time = read_padding(cur, dating, line, start, end, lineno, rank, split)
        if flags & _HEALTH:
            health = self._health(body, rank, lineno)
            if health is not None:
                if line_time is None:
                    line_time = dating.time_at(cur, start, end, line, split)
                cur.events.append(replace(health, time=line_time))
        if is_open or flags & _TRIGGER:
            if line_time is None:
                line_time = dating.time_at(cur, start, end, line, split)
            own = self._own
            feed = self._feed
            append = cur.events.append
            if cur.has_cr and "\r" in body:
                # Each state of a line redrawn in place, said by the line's rank.
                for segment in [part for part in body.split("\r") if part] or [""]:
                    for crash in feed(segment, rank, segment, lineno, line_time):
                        append(own(crash))
            else:
                for crash in feed(line, rank, body, lineno, line_time):
                    append(own(crash))

    def _chunk_done(self, cur: Cursor, open_at: int | None, read_at: float | None = None) -> list[Event]:
        """The chunk's events as they leave the stream; the stream's clock,
        line count and held traceback stretch moved past the chunk."""
        text, events, clock = cur.text, cur.events, cur.clock
        assembler = self._assembler
        # Lines are counted only on demand (``lines``): the caller numbers
        # them already, and a full count is a pass over the chunk.
        self._tail = (cur.view, cur.count_pos, cur.count_no)
        # The chunk's last timestamp is the stream's clock from here on.
        if cur.covered < len(text):
            latest = self._dating.latest(text, cur.covered, len(text))
            if latest is not None:
                clock = latest
        if open_at is not None:
            if assembler.is_open and len(events) - open_at <= _OPEN_HELD_MAX:
                self._open_held = events[open_at:]
                del events[open_at:]
            else:
                events[open_at:] = placed(events[open_at:])
        if events:
            events = self._ordered(events, read_at) if cur.final is None else cur.final.catch_up(events)
            if not self.hint.done:
                _look_for_progress(self.hint, events)
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

    def _ordered(self, events: list[Event], read_at: float | None = None) -> list[Event]:
        """A chunk's events as they leave the stream: in the file's order,
        unstamped step lines run on by their step times (``StepClock``), at
        times that never step back (``EventClock``); read live at
        ``read_at``, none after it."""
        clock = self._clock
        events = clock.on_dated(self._steps.apply, clock.resolve(events), read_at)
        if read_at is not None and clock.ran_back:
            # Lines after these that carry the same stale time (the traceback
            # that ended the bar) take the step clock's: where the steps now end.
            self._steps.move_back(clock.ran_back)
            clock.ran_back = 0.0
        return clock.hold(events)

    # -- pieces -------------------------------------------------------------

    def _view(self, text: str) -> str:
        """``text`` where it is ASCII, else its ASCII view ('?' for others)."""
        if text.isascii() or not self._view_ok:
            return text
        if KERNELS is not None:
            return KERNELS.ascii_view(text)  # (one pass in C, the same string)
        return text.encode("ascii", "replace").decode("ascii")

    def _lane(self, line: str, shape: bytes, flags: int) -> Lane | Bare | Ranked | Redrawn | None:
        """The column reading of ``line``'s shape, if its lines can have one:
        progress in a built-in format and nothing else (``lanes.lane_of``);
        for a tqdm bar drawn again unchanged, only where it would otherwise
        wait in the run as a plain progress line (``lanes.redrawn_lane``)."""
        if not self._fast or flags & ~(_PADDING | _RANKED) != _PROGRESS or self._pattern is not None:
            return None
        if b"\r" in shape:
            # A bar drawn again unchanged (``X\\rX``) can join its plain bars'
            # lane, where it would otherwise wait in the run as a plain line.
            parts = shape.split(b"\r")
            one = parts[0]
            if flags != _PROGRESS or line[:1] == "[" or not one or parts.count(one) != len(parts):
                return None
            state = self._flag_cache.get(one)
            if state is None:  # its one state's shape, cached as a line of it would be
                last = line[line.rfind("\r") + 1 :]
                state_flags = self._shape_flags(last, one)
                state = self._flag_cache[one] = (state_flags, self._lane(last, one, state_flags))
            return redrawn_lane(shape, state[1]) if state[0] == _PROGRESS else None
        return lane_of(line, shape, self._times, self._body_lanes)

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
        rank, body = split_line(line)
        flags = self._health_flags(body, rank, flags)
        if any(lit in shape for lit in self._shaped_digit_literals):
            flags |= _DIGITS
        if flags & _PROGRESS and self._pattern is None and not progress_possible(body):
            flags &= ~_PROGRESS
        if flags & _PROGRESS and rank is not None and line[:1] != "[":
            flags |= _RANKED  # not a plain line (those wait in the run unsplit)
        return flags

    def _line_flags(self, line: str) -> int:
        """``_shape_flags`` of a line too long to cache by shape: every test on it."""
        flags = self._flags(line, self._progress_literals, self._triggers)
        if any(lit in line for lit in self._padding_literals):
            flags |= _PADDING
        rank, body = split_line(line)
        return self._health_flags(body, rank, flags)

    def _health_flags(self, body: str, rank: int | None, flags: int) -> int:
        """``flags`` with _HEALTH if ``body`` (said by ``rank``) is a health
        line, and without _PROGRESS if it repeats a step. Lines of one shape
        differ only in digits, which these patterns never look at: exact."""
        if any(lit in body for lit in self._health_literals):
            found = health_line(body, rank)
            if found is not None:
                flags |= _HEALTH
                if found[1]:
                    flags = (flags | _NO_PROGRESS) & ~_PROGRESS
        return flags

    def _health(self, line: str, rank: int | None, lineno: int) -> Event | None:
        """The health event of a _HEALTH line's text (said by ``rank``), cited
        ``name:line`` (undated); None for the echo of an overflow told."""
        found = health_line(line, rank)
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

    def _own(self, event: Crash | Recompile) -> Crash | Recompile:
        """The assembler knows line numbers, not the file: cite ``name:line``."""
        source = event.source
        if source.isdigit():
            return replace(event, source=self._prefix + source)
        return event
