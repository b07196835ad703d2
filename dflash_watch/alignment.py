"""Live: put one log's stamps on the watcher's clock, and notice buffering.

Live, silence is judged on the watcher's clock: the time lines *arrive*.
A log's own stamps may disagree with it by minutes or hours (a skewed
host; naive stamps written in UTC inside a container and read on a host
two hours off), and a crash whose stamps lag the clock would wait for the
clock to reach them before its alert left; a lag the other way makes every
pause a stall. So the lines a run writes while the watcher follows it
(``fresh`` chunks, after the catch-up of what the file held at the start)
are moved by a constant ``offset``: the newest stamp of the first such
chunk is read as written when it arrived. A constant keeps every duration
between the log's own lines exactly as the stamps say; only where the log
sits against the clock changes. It moves only when several chunks in a
row agree on another one (a relaunch under another clock); chunks whose
stamps span more than the time they took to come (history appended at
once) teach nothing. A log whose clock runs on faster than this one (two
crashes minutes apart on its clock, written a second apart) keeps its own
durations: the live clock follows it forward, as it follows a catch-up.
A steady offset of a minute or more is said once.

Bursts: a block-buffered writer (``python train.py > log``, ``| tee``
without ``-u``) delivers minutes of lines at once, then nothing for
minutes. A chunk that holds many steps whose stamps span far more than a
read (or, without stamps, steps that arrive together after a long lull,
or as the log's first lines) is a burst. A buffered writer's first burst holds lines written before
the watcher began (``python train.py > log &``, then the watcher): its
stamps span more than the watch, like history appended at once, but it
ends as it is read, which history does not (``_written_live``). Once
seen, the interval between bursts is sent to the detectors as a
``Delivery`` event, so a stall waits for a few bursts (``detectors.stall``),
and it is said once how to get lines as they are written.

A buffered writer met by a watcher started after it (``python train.py >
log &``, the watcher minutes later) has its latest burst read as catch-up,
on the data's own clock, before any fresh chunk could show a burst: the
silence until the next one would be a stall. Its file tells: a buffer is
written out when the next line no longer fits in it, so the file was last
written a step after its last line was stamped (a log written line by
line, as it was stamped), or ends mid-line (C's stdio fills the buffer to
its last byte); and it was written just now (``caught_up``). The stall
then waits for bursts of the interval its last buffer-full of text took to
write, by its own stamps, until the bursts that follow tell the real one.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from dflash_watch.detectors.config import fmt_duration
from dflash_watch.detectors.stall import BURSTS_ALLOWED
from dflash_watch.parsers.clock import at_time
from dflash_watch.parsers.events import Delivery, Event, GpuLost, GpuSample, ProbeSample, Progress

if TYPE_CHECKING:
    from dflash_watch.parsers.stream import LogStream

# Stamps within this much of the arrival time are on the clock already.
_ON_CLOCK_S = 1.0
# Another offset is taken after this many chunks in a row agree on it
# (within ``_AGREE_S`` of each other) and differ from the kept one by more
# than ``_MOVE_S``.
_AGREE_CHUNKS = 3
_AGREE_S = 2.0
_MOVE_S = 5.0
# An offset this large is worth saying (once per file).
_SAY_OFFSET_S = 60.0
# A chunk whose steps' stamps span this long, or that brings steps after a
# lull this long, arrived in a burst (a log read as it is written brings
# one poll's worth, under half a second).
_BURST_SPAN_S = 1.5
# A line stamped this close to this machine's clock when it is read was
# written just now (a poll, and a loaded machine's scheduling, later).
_RECENT_S = 5.0
# Bursts seen before the buffering is said (one could be the watcher's own
# pause; the stall allowance follows the first one at once).
_SAY_BURSTS = 2
_BURST_STEPS = 3
# Lines arriving one by one this many times in a row end the burst mode.
_SMOOTH_CHUNKS = 5
# Before a log without stamps has shown a second burst its interval is
# unknown: this much is allowed meanwhile (x ``stall.BURSTS_ALLOWED``).
_UNKNOWN_BURST_S = 240.0
# A block-buffered writer writes its buffer out when this much text is in
# it (Python's stdout to a file or a pipe: 8 KiB; C's stdio, 4 KiB, bursts
# half as far apart, allowed for twice over).
_BUFFER_CHARS = 8192


@dataclass(frozen=True, slots=True)
class FileEnd:
    """How a log file ends on disk when its catch-up is read (``Alignment.caught_up``)."""

    # Its last byte is no newline: a line is written in part.
    mid_line: bool
    # When it was last written (its mtime), on this machine's clock.
    modified: float


@dataclass(slots=True)
class Alignment:
    """One log file's offset to the live clock and its delivery pattern."""

    name: str
    # False for a log caught up on its own clock: the live clock follows
    # that clock already (``live.FollowClock``), so there is nothing to move.
    learn: bool = True
    offset: float | None = None
    # The stream's last stamp after the previous fresh chunk: a chunk that
    # brought no new stamp says nothing about the offset.
    last_stamp: float | None = None
    # The chunk being read: how long before it arrived its newest stamp was
    # written, on this machine's clock (None: it brought no new stamp).
    _stamp_lag: float | None = None
    _candidates: deque[float] = field(default_factory=lambda: deque(maxlen=_AGREE_CHUNKS))
    said_offset: bool = False
    _skews: deque[float] = field(default_factory=lambda: deque(maxlen=2))
    # Bursts.
    burst_s: float = 0.0
    _last_arrival: float | None = None
    _intervals: deque[float] = field(default_factory=lambda: deque(maxlen=5))
    _smooth: int = 0
    said_buffered: bool = False
    # The catch-up's last ``_BUFFER_CHARS`` of text (``caught_up``).
    _window: str = field(default="", repr=False)

    def prepare(
        self, stamps: tuple[float, float] | None, now: float, since: float, notes: list[str],
        wall: float | None = None, arrived: float | None = None,
    ) -> float:
        """The seconds to add to the times of a fresh chunk, before it is
        read: ``stamps`` are its first and last timestamps (None: it has
        none), ``now`` its arrival on the live clock, ``wall`` on this
        machine's (they differ where the live clock follows a log caught up
        on its own clock), ``arrived`` on the clock that ``since`` (when the
        watcher began following) is on: the one real time passes on, which
        tells a log written as it goes from history appended at once.

        The caller dates the chunk's lines before any stamp at ``now``
        minus the offset, then adds the offset to every event, so lines
        dated by the arrival, by a stamp or by step durations counted from
        either all land on the live clock alike.
        """
        self._stamp_lag = None
        if stamps is not None and stamps[1] != self.last_stamp:
            first, stamp = stamps
            self.last_stamp = stamp
            # Only a chunk written in real time tells the offset: its stamps
            # span no more than the time since the last one came. Hours of
            # stamps appended at once are history arriving (on the data's
            # own clock, as replay reads it), not a log running ahead.
            at = now if arrived is None else arrived
            waited = at - (self._last_arrival if self._last_arrival is not None else since)
            self._stamp_lag = at - stamp
            if _written_live(stamp - first, waited, self._stamp_lag):
                if self.learn:
                    self._learn(now - stamp)
                self._skew((now if wall is None else wall) - stamp, notes)
        return self.offset or 0.0

    def read(
        self, stream: LogStream, text: str, first_lineno: int, now: float, since: float, notes: list[str],
        wall: float | None = None, arrived: float | None = None,
    ) -> list[Event]:
        """A fresh chunk parsed by ``stream`` with its events on the live
        clock: ``prepare`` on its stamps, the lines before any stamp dated
        ``now`` minus the offset, every event moved by the offset."""
        shift = self.prepare(stream.peek_stamps(text), now, since, notes, wall, arrived)
        return shifted(stream.feed(text, first_lineno, now - shift, read_live=True), shift)

    def flush(self, stream: LogStream, now: float) -> list[Event]:
        """What ``stream`` still held (a traceback that ended it), on the
        live clock where its fresh lines are."""
        shift = self.offset or 0.0
        return shifted(stream.flush(now - shift), shift)

    def _learn(self, lag: float) -> None:
        if abs(lag) <= _ON_CLOCK_S:
            lag = 0.0
        if self.offset is None:
            self.offset = lag
            return
        candidates = self._candidates
        if abs(lag - self.offset) <= _MOVE_S:
            candidates.clear()
            return
        candidates.append(lag)
        if len(candidates) == _AGREE_CHUNKS and max(candidates) - min(candidates) <= _AGREE_S:
            self.offset = statistics.median(candidates)
            candidates.clear()

    def _skew(self, lag: float, notes: list[str]) -> None:
        """How far the stamps of lines written in real time are from this
        machine's clock: said once when two such chunks agree on a minute
        or more (with a log caught up on its own clock the live clock is
        the log's, and only the wall clock shows the skew)."""
        seen = self._skews
        seen.append(lag)
        if self.said_offset or len(seen) < 2 or abs(seen[-1] - seen[-2]) > _MOVE_S:
            return
        offset = (seen[-1] + seen[-2]) / 2.0
        if abs(offset) < _SAY_OFFSET_S:
            return
        self.said_offset = True
        way = "behind" if offset > 0 else "ahead of"
        hours = abs(offset) / 3600.0
        hint = " (naive stamps in another zone? --tz)" if hours >= 0.9 and abs(hours - round(hours)) < 0.05 else ""
        # Said to the minute: whole-second stamps read a moment after they
        # were written put stamps 3 h ahead at 2 h 59 min 59.4 s ("2 h 59 min").
        said = round(abs(offset) / 60.0) * 60.0
        notes.append(
            f"{self.name}: log stamps run {fmt_duration(said)} {way} this machine's clock{hint}; "
            "live, its lines are timed as they arrive"
        )

    def delivery(
        self, events: list[Event], now: float, since: float, notes: list[str], arrived: float | None = None
    ) -> Delivery | None:
        """A ``Delivery`` when the way this log arrives changed, else None.

        ``since``: when the watcher began following (a first burst can hold
        no more than the time since then)."""
        steps: set[int | None] = set()
        clocked: list[float] = []
        for e in events:
            if type(e) is Progress:
                steps.add(e.step)
                if e.clocked:
                    clocked.append(e.time)
        if not steps:
            return None
        at = now if arrived is None else arrived
        gap = None if self._last_arrival is None else at - self._last_arrival
        self._last_arrival = at
        span = max(clocked) - min(clocked) if len(clocked) > 1 else 0.0
        many = len(steps) >= _BURST_STEPS
        before = self.burst_s
        # A buffered writer's burst holds the lines of the time since the
        # last one: its stamps span about the wall time that passed. Hours
        # of stamps appended in a second are history arriving, not a buffer.
        waited = gap if gap is not None else at - since
        lag = self._stamp_lag  # its newest stamp's (``prepare``): a step dated on arrival is none
        if many and span >= _BURST_SPAN_S and _written_live(span, waited, lag, span / (len(clocked) - 1)):
            self._burst(max(span, gap or 0.0))
        elif many and gap is not None and gap >= _BURST_SPAN_S:
            self._burst(gap)
        elif many and gap is None and not clocked and not self.burst_s:
            # The first lines of a log without stamps, several steps at once:
            # maybe a burst (however soon after the watch began: a buffer
            # holds lines from before it); its interval shows with the next
            # one, and lines that then come one by one end the allowance.
            self.burst_s = _UNKNOWN_BURST_S
        elif gap is not None and gap < _BURST_SPAN_S:
            self._smooth += 1
            if self._smooth >= (1 if not self._intervals else _SMOOTH_CHUNKS):
                self.burst_s = 0.0
                self._intervals.clear()
        changed = (before == 0.0) != (self.burst_s == 0.0) or (
            before and abs(self.burst_s - before) > 0.25 * before
        )
        say = len(self._intervals) >= _SAY_BURSTS and not self.said_buffered
        if not changed and not say:
            return None
        if len(self._intervals) >= _SAY_BURSTS and not self.said_buffered:
            self.said_buffered = True
            notes.append(
                f"{self.name}: lines arrive in bursts about {fmt_duration(self.burst_s)} apart: the writer's "
                "output is block-buffered (`python train.py > log`, or `| tee` without -u). Run `python -u` or "
                "set PYTHONUNBUFFERED=1 to see lines as they are written; until then a stall is called only "
                "after a few bursts fail to come"
            )
        # Dated with the chunk's last line, not ``now``: the live clock
        # may not be on the log's yet (its first chunk, history on its own
        # clock), and an event dated ahead of the data runs every
        # detector's clock there (ticks at their deadlines on the way). Nor
        # its latest time: steps before a log's first stamp are dated on the
        # wall clock, maybe days ahead of the stamped lines after them.
        return Delivery(events[-1].time, self.name, self.burst_s)

    def drawn(self, arrived: float) -> None:
        """A tqdm bar's redraws were read at ``arrived`` (``Ingest.feed_partial``):
        the log arrives as it is drawn, so the newline that ends the bar's
        line (a logging dict every ``logging_steps``) comes a poll after the
        last look, not after a lull of its own."""
        self._last_arrival = arrived

    def caught_up(
        self, stream: LogStream, text: str, events: list[Event], wall: float, end: FileEnd | None
    ) -> Delivery | None:
        """A ``Delivery`` for a chunk of the catch-up (``text``, parsed by
        ``stream`` into ``events``, read at ``wall`` on this machine's clock)
        when it shows a block-buffered writer still writing, else None.

        Buffered (``_buffered``): the file (``end``, how it ended when the
        chunk was read; judged only when the rest could hold) was written
        out a step after its last line was stamped, or ends mid-line; and
        within the few bursts a stall allows (a writer silent longer is
        judged as any: at the usual time). Its
        mtime, not its stamps, says how recent: a log that ended long ago
        (history) is not. The interval: the time the last ``_BUFFER_CHARS``
        of text took to write, by its stamps (under ``_BURST_SPAN_S``:
        bursts too close to matter), at least as long as the file has been
        silent (a running writer's next burst is still to come); without
        stamps, unknown (``_UNKNOWN_BURST_S``). Only the interval is set:
        the fresh chunks that follow go on from it as from a burst seen live
        (``delivery``), and a line-buffered writer's lines coming one by one
        end it.
        """
        window = text[-_BUFFER_CHARS:] if len(text) >= _BUFFER_CHARS else (self._window + text)[-_BUFFER_CHARS:]
        self._window = window
        if len(window) == _BUFFER_CHARS:
            window = window[window.find("\n") + 1:]  # from its first whole line
        stamps = stream.peek_stamps(window) if window else None
        estimate = _UNKNOWN_BURST_S
        if stamps is not None:
            estimate = (stamps[1] - stamps[0]) * _BUFFER_CHARS / len(window)
        interval = 0.0
        if estimate < _BURST_SPAN_S:
            end = None
        if end is not None and -_RECENT_S <= wall - end.modified <= BURSTS_ALLOWED * estimate + _RECENT_S:
            last_line = window[window.rfind("\n", 0, len(window) - 1) + 1:]
            last = stream.peek_stamps(last_line, 1)
            if _buffered(end, stamps, None if last is None else last[1], window.count("\n")):
                interval = max(estimate, wall - end.modified)
        before = self.burst_s
        # Dated with the chunk's last line, as ``delivery``'s.
        at = events[-1].time if events else stream.last_time
        if at is None or interval == before or (before and interval and abs(interval - before) <= 0.25 * before):
            return None
        self.burst_s = interval
        return Delivery(at, self.name, interval)

    def _burst(self, interval: float) -> None:
        self._smooth = 0
        self._intervals.append(interval)
        self.burst_s = statistics.median(self._intervals)


def _buffered(end: FileEnd, stamps: tuple[float, float] | None, last: float | None, lines: int) -> bool:
    """Whether a file that ends as ``end`` says, of the text it held when
    caught up (``stamps``: its first and last; ``last``: its last line's,
    None if unstamped; ``lines``: how many), that a buffer wrote it out.

    A line written as it goes reaches the file as it is stamped. A buffer
    is written out when the line after its last no longer fits (Python's
    ``print``: so its file ends with a whole line) or as that line fills it
    (C's stdio: mid-line): a step after its last line was stamped. The
    stamps' own resolution is allowed for (whole seconds: a second), and a
    log stamped on another clock (hours off) says nothing."""
    if end.mid_line:
        return True
    if stamps is None or last is None or lines < 2:
        return False
    step = (stamps[1] - stamps[0]) / (lines - 1)
    coarse = 1.0 if stamps[0] % 1.0 == 0.0 and last % 1.0 == 0.0 else 0.0
    late = end.modified - last
    return coarse + 0.5 * step <= late <= coarse + 2.0 * step + _ON_CLOCK_S


def _written_live(span: float, waited: float, lag: float | None, step: float = 0.0) -> bool:
    """Whether a chunk whose stamps span ``span`` seconds, its newest stamp
    ``lag`` seconds before it arrived on this machine's clock, was written
    while the watcher followed, rather than appended at once (history).

    Written live: its stamps span no more than the time since the last
    chunk came (``waited``; since the watch began, for the first), or its
    newest line was written just now. The second is a buffered writer's
    first burst: it holds lines from before the watcher began, so it spans
    more than the watch, but it ends as it is read (history appended now
    ends hours ago): the buffer is written out when the line after its
    newest comes, up to one ``step`` (the chunk's own interval between
    lines; ``prepare``, which sees only its first and last stamp, asks
    for no more than ``_RECENT_S``) before it is read. Only this machine's
    clock tells "just now": the live clock follows the log's own (history
    streaming in is always recent on it), and a log stamped on another
    clock is never recent, so it has the first rule alone. ``prepare``
    (the offset) and ``delivery`` (a burst) both ask this; ``lag`` None:
    no stamp in the chunk tells."""
    if span <= 1.5 * max(waited, 0.0) + _BURST_SPAN_S:
        return True
    return lag is not None and -_RECENT_S <= lag <= _RECENT_S + step


_Shiftable = TypeVar("_Shiftable", bound=Event)


def shifted(events: list[_Shiftable], shift: float) -> list[_Shiftable]:
    """``events`` moved ``shift`` seconds (onto the live clock); the list itself when 0.

    Rebuilt by ``parsers.clock.at_time`` (a step positionally, 1.8 us against
    ``dataclasses.replace``'s 3.0): with a log whose stamps are off this
    machine's clock, every event of every chunk comes through here."""
    if events and shift:
        return cast("list[_Shiftable]", [at_time(e, e.time + shift) for e in events])  # each of its own type
    return events


def date_on_arrival(events: list[Event], now: float) -> None:
    """Live: a progress line without a timestamp of its own happened when it
    was read (``now``), not when the last logger line was stamped; in place.

    Within the chunk, a step that tells its own time (a stamp, or its step
    durations) moves that clock: the unstamped lines after it are read at
    its time, not at the clock the chunk began on (a burst that holds a
    log's first stamp, days behind the wall clock the lines before it were
    read on, would else date the lines after the stamp back on that wall
    clock, and each such line would open a silence of days). The caller
    decides when this holds (``Ingest.feed_text``: not before any data was
    seen, for a log caught up from its start).

    Most steps of a log with tqdm bars come through here, one rebuild each
    (``parsers.clock.at_time``, positional: ``dataclasses.replace`` per step was
    the largest cost that following adds to replay's, issue 20)."""
    at = now
    for i, e in enumerate(events):
        if type(e) is Progress:
            if e.clocked:
                at = e.time
            else:
                events[i] = at_time(e, max(e.time, at), True)


def never_before(events: list[Event], floor: float) -> float:
    """Live: ``events`` of one log, in its order, none but a step dated
    before ``floor`` or the events before it; in place. Returns the new floor.

    A line with no stamp of its own takes the log's last stamp, and live a
    step line without one is dated when it arrives (``date_on_arrival``).
    A traceback after such steps kept the last stamp: torchrun's banner is
    stamped once (``W1205 ...``), its ranks' prints are not, so the crash a
    day into the run was dated at the banner, a day before it was read
    (its alert's time, a webhook's ``startsAt``). Written after the events
    before it, it is dated no earlier. Steps are left as they are: a rank's
    stamp a few ms behind another's is the log's own clock."""
    for i, e in enumerate(events):
        t = e.time
        if t >= floor:
            floor = t
        elif type(e) is not Progress:
            events[i] = at_time(e, floor)
    return floor


# The lines of a side file (``SideFileClock``).
_Stamped = TypeVar("_Stamped", bound=GpuSample | GpuLost | ProbeSample)
# Lines are held back at most this long, and this many, for the log's first text.
SIDE_HOLD_S = 10.0
SIDE_HOLD_MAX = 4096


@dataclass(slots=True)
class SideFileClock:
    """Lines of a GPU sample or probe file, moved onto the live clock (the
    same offset rule as a log's, ``Alignment``).

    Their writer stamps them on its own clock (the training process's
    ``time.time()``, another watcher's data clock), and the live clock may
    be another: a log caught up on its own clock, hours from this
    machine's, runs it. A sample stamped 10 min ahead of the log's steps
    would run the stall's clock past them and open a stall that is not
    there. The offset is learnt once the live clock follows the log (its
    first text read); until then, for at most ``SIDE_HOLD_S``, lines wait.

    One per GPU sample file; one for all of a run's probe files (its ranks
    stamp them on one clock: ``Ingest._onto_live``), so that ranks whose
    files happen to be read later are not moved apart.
    """

    name: str
    # When the watcher began following (``Monitor.live_since``; this file's
    # first batch if that is not set yet), on this machine's clock: lines
    # wait for the log's first text at most ``SIDE_HOLD_S`` after it, and it is
    # the ``since`` of the offset rule (``Alignment.prepare``).
    since: float
    align: Alignment = field(init=False)
    _held: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.align = Alignment(self.name)

    @property
    def holding(self) -> bool:
        """Lines wait for the log's first text (``onto_live([], ...)`` each
        round lets them go once it came, or once they waited long enough)."""
        return bool(self._held)

    def onto_live(
        self, batch: list[_Stamped], fresh: bool, log_seen: bool, now: float, wall: float,
    ) -> list[_Stamped]:
        """``batch`` with its times on the live clock (``now``), or held.

        ``fresh``: read after the first round (written while followed);
        ``log_seen``: the live clock follows the log (or there is none);
        ``wall``: this machine's clock now.
        """
        if not log_seen and wall - self.since < SIDE_HOLD_S:
            self._held.extend(batch)
            del self._held[:-SIDE_HOLD_MAX]
            return []
        if self._held:
            held: list[_Stamped] = self._held
            batch = held + batch
            self._held = []
        if not batch:
            return batch
        times = [s.time for s in batch]
        newest = max(times)
        # A line stamped within ``_RECENT_S`` of this machine's clock was
        # written just now, even when read in the first round (the history's).
        if not log_seen or not (fresh or abs(wall - newest) <= _RECENT_S):
            # History on its own clock (or no log to follow yet): moved only
            # by an offset already learnt.
            shift = self.align.offset or 0.0
        else:
            shift = self.align.prepare((min(times), newest), now, self.since, [], None, wall)
        return shifted(batch, shift)
