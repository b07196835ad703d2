"""The Monitor's front door for raw inputs: log text, lines still being drawn, side files.

A mixin of ``Monitor`` (it shares its lock and hands every event to its
``feed_events``). Two rules live here and nowhere else, so live and
replay cannot drift apart:

* a log file becomes a parser in one way (``log_stream``: the name alerts
  cite, the year of glog lines), used by the Monitor and by replay alike;
* inputs read live go onto the live clock here: a log's fresh chunks and
  the lines of GPU sample and probe files are moved by one offset rule
  (``alignment``), and a step without a stamp of its own takes the time it
  was read. Replay feeds events on the data's own clock and skips this.
"""

from __future__ import annotations

import math
import os
import threading
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

from dflash_watch.parsers.clock import at_first_reading
from dflash_watch.parsers.events import Event, GpuLost, GpuSample, ProbeSample, Progress, Renumbered
from dflash_watch.parsers.stream import LogStream

from .alignment import Alignment, FileEnd, SideFileClock, date_on_arrival, never_before
from .gc_policy import bulk_read

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from dflash_watch.detectors.base import Alert
    from dflash_watch.detectors.config import DetectorConfig

# The lines of a side file: a GPU sample file (NVML's, or one recorded) or a probe file.
_Side = GpuSample | GpuLost | ProbeSample


@dataclass(slots=True)
class StreamState:
    """Per log file: its parser, and the generation it was built for."""

    stream: LogStream
    generation: int
    lines: int = 0
    # Live: its stamps against the live clock, and how its lines arrive.
    align: Alignment | None = None
    # Part of it was read as a catch-up, on its own clock.
    caught_up: bool = False
    # Live: the latest time this log's fresh events were handed on at
    # (``alignment.never_before``).
    floor: float = -math.inf


def display_name(path: str) -> str:
    """Alerts cite ``train.log:1234``; the full path is in the file list.

    torchrun ``--redirects``/``--tee`` files are all ``stdout.log`` or
    ``stderr.log``, one folder per local rank (``.../attempt_0/3/stdout.log``):
    they keep that folder (``3/stdout.log``), which tells the rank apart.
    """
    base = os.path.basename(path) or path
    if base in ("stdout.log", "stderr.log"):
        folder = os.path.basename(os.path.dirname(path))
        if folder.isdigit():
            return f"{folder}/{base}"
    return base


def log_stream(path: str, *, tz: Any, progress_pattern: Any, at: float, replay: bool = False) -> LogStream:
    """The parser of the log file at ``path``, the one way both the Monitor
    and replay make it: named as alerts cite it (``display_name``), glog
    lines (no year of their own) dated in the year of ``at`` (live: when it
    was first read; replay: the file's modification time)."""
    return LogStream(
        display_name(path), tz=tz, progress_pattern=progress_pattern, default_year=_year(at, tz), replay=replay
    )


def _year(t: float, tz: Any) -> int | None:
    """The year glog lines (no year of their own) are taken to be in."""
    import datetime as _dt

    try:
        return _dt.datetime.fromtimestamp(t, tz).year
    except (OverflowError, OSError, ValueError):
        return None


class Ingest:
    """Raw inputs into events: ``feed_text``, ``feed_partial``, the side files."""

    # The Monitor's (its ``__init__``, its event core and its line rings).
    _lock: threading.RLock
    _tz: Any
    _progress_pattern: Any
    detector_config: DetectorConfig
    probe_samples: int
    last_event_time: float | None
    now: float | None
    quiet_since: float | None
    live_since: float | None
    to_wall: Callable[[float], float] | None
    version: int
    feed_events: Callable[[Iterable[Event]], list[Alert]]
    note: Callable[[str], None]
    _keep_chunk: Callable[[str, str, int, int], None]
    keep_partial: Callable[[str, str, int], None]

    def _init_ingest(self) -> None:
        self._streams: dict[str, StreamState] = {}
        # Per file, the line read so far only as redraws (its source), the
        # last step and elapsed counter they showed, and when (``feed_partial``).
        self._partials: dict[str, tuple[str, int | None, float | None, float]] = {}
        # Live, per GPU sample or probe file: its stamps against the live
        # clock; every probe file shares one (``_probe_clock``, ``_onto_live``).
        self._sides: dict[str, SideFileClock] = {}
        self._probe_clock: SideFileClock | None = None

    def feed_text(
        self, path: str, text: str, first_lineno: int, now: float, generation: int = 0, fresh: bool = False,
        arrived: float | None = None, end: FileEnd | None = None, lines: int | None = None,
    ) -> list[Alert]:
        """A chunk of complete lines of one log file, read at wall time ``now``.

        ``fresh``: live, lines written while the watcher follows the file
        (not the catch-up of what it held): their stamps are put on the live
        clock and the way they arrive is watched (``alignment``); ``arrived``:
        when, on the clock of ``live_since`` (this machine's). A catch-up
        chunk is read as replay reads (``gc_policy.bulk_read``).

        ``end``: how the file ended after a live catch-up chunk was read
        (``file_end``; None: not known), looked at by the caller (the
        tailer) before it takes the Monitor's lock. The look is file I/O
        (open, stat, a read): under the lock, a slow or hung filesystem
        would stall every reader of the Monitor (the dashboard's redraw,
        the GPU sampler, the tick loop), so it is never made here.

        ``lines``: how many lines ``text`` holds, where the reader counted
        them (``Chunk.lines``: the tailer counts the bytes it splits); else
        they are counted here."""
        with self._lock, (nullcontext() if fresh else bulk_read()):
            state = self._streams.get(path)
            before: list[Alert] = []
            # Its lines counted from 1 again: a new file (a new generation),
            # or the same stream gone on in a rotated file's successor.
            renumbered = state is not None and (state.generation != generation or first_lineno <= state.lines)
            if state is not None and state.generation != generation:
                # A new file at this path (truncated, deleted and made anew):
                # what the old one's parser still held (a traceback that
                # ended it) is the old file's last word, not lost with it.
                before = self.feed_events(_flushed(state, now))
            if state is None or state.generation != generation:
                stream = log_stream(path, tz=self._tz, progress_pattern=self._progress_pattern, at=now)
                state = StreamState(stream, generation)
                self._streams[path] = state
            self.quiet_since = None
            stream = state.stream
            delivery = None
            notes: list[str] = []
            if not fresh:
                state.caught_up = True
                opening = stream.last_time is None
                events = stream.feed(text, first_lineno, now)
                if opening and stream.last_time is not None:
                    events = at_first_reading(events, now)
                if arrived is not None:
                    # Live (the catch-up of a file being followed): a
                    # buffered writer's burst read as catch-up (``alignment``).
                    if state.align is None:
                        state.align = Alignment(display_name(path), learn=False)
                    delivery = state.align.caught_up(stream, text, events, arrived, end)
                if path in self._partials:
                    events = self._after_partials(path, events)
            else:
                align = state.align
                if align is None:
                    align = state.align = Alignment(display_name(path), learn=not state.caught_up)
                if arrived is None:
                    arrived = now
                if self.live_since is None:
                    self.live_since = arrived
                live_since = self.live_since
                wall = self.to_wall(now) if self.to_wall is not None else None
                events = align.read(stream, text, first_lineno, now, live_since, notes, wall, arrived)
                if path in self._partials:
                    # Before the delivery is judged: the states of a tqdm bar
                    # read live as they were drawn did not come in a burst
                    # with the newline that ended their line (HF's bar, ended
                    # by a logging dict every ``logging_steps``, was taken
                    # for a block-buffered writer, and a stall waited for
                    # 2.5 of its intervals).
                    events = self._after_partials(path, events)
                # Read before unstamped steps take the arrival time below.
                delivery = align.delivery(events, now, live_since, notes, arrived)
            # Not before any data was seen: ``now`` is then the bare wall
            # clock, and a log being caught up from its start (an old run,
            # another zone) would get steps a year ahead of the stamped
            # lines between them.
            if self.last_event_time is not None or stream.last_time is None:
                date_on_arrival(events, now)
            if fresh:
                state.floor = never_before(events, state.floor)
            for note in notes:
                self.note(note)
            if renumbered and self.now is not None:
                # Before the new lines, after the old ones (``before``).
                events.insert(0, Renumbered(self.now, display_name(path)))
            if delivery is not None:
                events.append(delivery)
            # The chunk's lines counted in C; only the last ``keep_lines``
            # of them are split off for the log view (a catch-up chunk holds
            # thousands).
            if lines is None:
                count = text.count("\n") + (0 if not text or text.endswith("\n") else 1)
            else:
                count = lines
            state.lines = first_lineno - 1 + count
            self._keep_chunk(path, text, first_lineno, count)
            self.version += 1
            if before:
                return before + self.feed_events(events)
            return self.feed_events(events)

    def feed_partial(self, path: str, text: str, lineno: int, now: float, arrived: float | None = None) -> list[Alert]:
        """The states of an unfinished line drawn since the last look (a tqdm
        bar mid-epoch), ``'\\r'``-joined, read at ``now``.

        Only progress is read from them: they are not a line yet (no line
        count, no traceback state), and the complete line is parsed as usual
        when its newline comes. Every state is a reading of the rate, not
        only the newest (a bar redrawn five times between two looks gives
        five), each at its own time (``progress_redraws.redraw_times``: the
        bar's elapsed counter, else spread since the previous look), so the
        throughput and stall detectors judge the bar as it is drawn.
        ``arrived``: when, on this machine's clock (``feed_text``'s).
        """
        from dflash_watch.parsers.progress import progress_from
        from dflash_watch.parsers.progress.redraws import ELAPSED, redraw_times, redraw_values

        self.keep_partial(path, text, lineno)
        found = redraw_values(text.rstrip("\n"), self._progress_pattern)
        if not found:
            return []
        source = f"{display_name(path)}:{lineno}"
        with self._lock:
            seen = self._partials.get(path)
            if seen is None:
                # The first look at this line: what it holds before its newest
                # state was drawn before the watch began (a catch-up of a bar
                # of hours, which replay reads on the log's clock), or within
                # a poll; only the newest state is a reading now.
                found = found[-1:]
            since = seen[3] if seen is not None else None  # the previous look at this line
            times = redraw_times([v[ELAPSED] for v in found], since, now)
            events = [progress_from(t, source, v) for t, v in zip(times, found)]
            last = found[-1]
            self._partials[path] = (source, last[0], last[ELAPSED], now)
            state = self._streams.get(path)
            if state is not None:
                state.stream.hint.progressed()
                if state.align is not None:
                    state.align.drawn(now if arrived is None else arrived)
            return self.feed_events(events)

    def _after_partials(self, path: str, events: list[Event]) -> list[Event]:
        """The complete line whose redraws were read as they came (a tqdm bar):
        the states already seen live are not progress a second time (they
        would arrive at once, at the newline's time, steps gone back). Seen:
        up to the last step shown live, else up to its elapsed counter (a
        bar of tokens counts no steps), else every state of the line."""
        source, step, elapsed, _ = self._partials.pop(path)
        return [
            e for e in events
            if not (type(e) is Progress and e.source == source and _seen_live(e, step, elapsed))
        ]

    def _progress_hints(self, now: float) -> None:
        """Live, as the clock moves: a log whose run's bar never reaches it
        (Lightning's RichProgressBar writes nothing to a file) is said once,
        when no progress followed the framework's banner for ``stall_min_s``
        (``parsers.progress_hints``); a probe reporting the steps retires it."""
        with self._lock:
            for state in self._streams.values():
                hint = state.stream.hint
                if hint.done:
                    continue
                if self.probe_samples:
                    hint.progressed()
                    continue
                message = hint.due(now, self.detector_config.stall_min_s)
                if message:
                    self.note(f"{state.stream.name}: {message}")

    def end_of_text(self, path: str, now: float) -> list[Alert]:
        """No more text will come for ``path``: flush its pending traceback."""
        with self._lock:
            state = self._streams.get(path)
            if state is None:
                return []
            return self.feed_events(_flushed(state, now))

    def flush_logs(self, now: float) -> list[Alert]:
        """Close what every log's parser still holds open (a traceback that
        ended the log waits for a line after it that may never come)."""
        with self._lock:
            events: list[Event] = []
            for state in self._streams.values():
                events.extend(_flushed(state, now))
            if len(events) > 1:
                events.sort(key=_event_time)
            return self.feed_events(events)

    # -- side files ---------------------------------------------------------
    @overload
    def feed_side(self, batch: Iterable[_Side]) -> list[Alert]: ...

    @overload
    def feed_side(
        self, batch: Iterable[_Side], path: str, *, now: float, fresh: bool = False, arrived: float | None = None,
        log_seen: bool = True,
    ) -> list[Alert]: ...

    def feed_side(
        self, batch: Iterable[_Side], path: str | None = None, *, now: float | None = None, fresh: bool = False,
        arrived: float | None = None, log_seen: bool = True,
    ) -> list[Alert]:
        """Lines of a side file, in time order: GPU samples (``feed_samples``)
        or probe lines (``feed_probes``, CONTRACTS section 9).

        Without ``path``: taken as they are (NVML's own samples, on the live
        clock already; replay). With it: live, lines of that file followed as
        it grows, put on the live clock ``now`` (``_onto_live``), which a
        file's lines cannot go without: asked for by the signature, and
        checked before anything is fed."""
        if path is None:
            return self.feed_events(batch)
        if now is None:
            raise TypeError(f"feed_side({path!r}): a side file's lines need now=, the live clock")
        with self._lock:
            return self.feed_events(self._onto_live(path, list(batch), fresh, now, arrived, log_seen))

    # What callers feed, by name; one path (``feed_side``).
    feed_samples = feed_side
    feed_probes = feed_side

    def side_holding(self, path: str) -> bool:
        """Lines of the side file ``path`` wait for the log's first text: a
        feed of no lines each round lets them go once it came, or once they
        waited long enough (``SideFileClock``)."""
        side = self._sides.get(path)
        return side is not None and side.holding

    def _onto_live(
        self, path: str, batch: list[_Side], fresh: bool, now: float, arrived: float | None, log_seen: bool,
    ) -> list[_Side]:
        """``batch`` of the side file ``path`` on the live clock (``now``), or held.

        ``fresh``: read after the first round (written while followed), as
        for ``feed_text``; ``arrived``: this machine's clock (``live_since``'s);
        ``log_seen``: the live clock follows a log's (or there is none)."""
        wall = now if arrived is None else arrived
        side = self._sides.get(path)
        if side is None:
            if not batch:
                return batch  # nothing held for it, nothing to learn
            since = self.live_since if self.live_since is not None else wall
            if type(batch[0]) is ProbeSample:
                # Every rank's probe file is written by one run, on its
                # clock: one offset for all of them. A clock per file
                # learnt each its own from when it happened to be read
                # (a flush seconds after the stamp, a poll later), and
                # moved ranks apart that the straggler compares.
                side = self._probe_clock
                if side is None:
                    side = self._probe_clock = SideFileClock("probe files", since)
            else:
                side = SideFileClock(path, since)
            self._sides[path] = side
        return side.onto_live(batch, fresh, log_seen, now, wall)


def file_end(path: str, text: str) -> FileEnd | None:
    """How the file at ``path`` ends now (``alignment.FileEnd``), None if it
    cannot be read or holds a whole line after ``text`` (the catch-up chunk
    just read): then the writer wrote on since the read, and the file's
    mtime is that later line's, not a buffer's write-out of ``text`` (a
    line-buffered writer caught between the read and this look read as
    buffered, and its stall waited for bursts). Its tail and mtime, one
    ``pread`` of a file the tailer has just read (in the page cache), for
    each chunk of a live catch-up, looked at *outside* the Monitor's lock
    (``Ingest.feed_text``'s ``end``); ``Alignment.caught_up`` uses it only
    for a chunk that could be a buffered writer's burst."""
    last_line = text[text.rfind("\n", 0, len(text) - 1) + 1:].encode("utf-8", "surrogateescape")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        n = min(st.st_size, len(last_line) + _TAIL_AFTER)
        tail = os.pread(fd, n, st.st_size - n) if n else b""
    except OSError:
        return None
    finally:
        os.close(fd)
    at = tail.rfind(last_line) if last_line else -1
    if at < 0:
        return None
    after = tail[at + len(last_line):]
    if b"\n" in after:
        return None
    return FileEnd(bool(after) or not last_line.endswith(b"\n"), st.st_mtime)


# What a file may hold after the last line read, to be told apart from a
# whole line written since (a partial line of C stdio's buffer).
_TAIL_AFTER = 64 * 1024


def _flushed(state: StreamState, now: float) -> list[Event]:
    """What ``state``'s parser still held, on the live clock where its
    fresh lines are (``alignment``), none before the fresh events handed on."""
    if state.align is None:
        return state.stream.flush(now)
    events = state.align.flush(state.stream, now)
    state.floor = never_before(events, state.floor)
    return events


def _event_time(event: Event) -> float:
    return event.time


def _seen_live(e: Progress, step: int | None, elapsed: float | None) -> bool:
    """Whether a state of a complete line was already read as a redraw
    (``Ingest._after_partials``): at or before the last one read. Of a bar
    that shows its elapsed counter, an event without one is no state of it:
    a log record written after its last redraw on the same line
    (``parsers/glued.py``), never read live, whatever step it names."""
    if elapsed is not None and e.elapsed_s is None:
        return False
    if step is not None:
        return e.step is not None and e.step <= step
    if elapsed is not None:
        return e.elapsed_s is not None and e.elapsed_s <= elapsed
    return True
