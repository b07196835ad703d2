"""The order and times in which one log's events leave its stream.

Detectors and the replay's merge of several files (``heapq.merge`` by time)
need each file's events in non-decreasing time. Sorting them by time does
that, but a log is not sorted: ranks stamp their lines a few milliseconds
apart, so rank 3's step 101 can carry a stamp 2 ms before rank 5's step 100
printed above it, and a sort makes the steps go backwards. So events keep
the file's order (the order their lines were written) and a time that would
step back is held at the latest one so far (``EventClock.hold``). The hold
is tiny for jitter; for a clock stepped back by minutes (NTP) the events of
those minutes all carry the time the clock had reached, and a progress
event held back by more than ``JITTER_S`` says ``clocked=False``: its time
is not its line's, so durations must not be measured on it (the meaning
``clocked`` already has for lines without a stamp of their own). A clock
that jumps forward passes as it is: one log cannot tell it from silence.
The one event that moves is a crash known late (``placed``).

Events dated by the caller's fallback time (no timestamp seen yet in the
file: arrival time live, the file's mtime in replay) are not a clock
(``EventClock.resolve``). Live they pass as they are and hold nothing back
(the Monitor stamps arrival time on unclocked progress). In replay
(``replay=True``) they wait for the file's first clock reading and take it
(a line without a timestamp takes the nearest one there is), so a log whose
first lines carry no stamp stays in time order; a log without any timestamp
runs on tqdm's elapsed counter (``Progress.elapsed_s``) from the fallback
time on, bar after bar. After such a stand-in clock the first real stamp is
believed even if it reads earlier: the one place where time steps back.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import fields, replace
from itertools import islice
from operator import attrgetter, le

from .events import Event, Progress, new_progress

# Backward steps up to this are jitter between ranks or stamps of different
# precision (a glog line's microseconds after a logger's milliseconds): the
# held event keeps ``clocked``. Measured on the real-world corpus: up to 1 s.
JITTER_S = 2.0
# Fallback-dated events (replay) waiting for the first clock reading, at
# most: a long log without any clock releases them with their own time.
PENDING_MAX = 4096

# Fallback times remembered (live brings one per feed until a timestamp).
_FALLBACKS_KEPT = 64

_NEG_INF = -math.inf


# A Progress rebuilt from its fields, positionally: several times cheaper
# than ``dataclasses.replace`` (which goes through keyword arguments), and
# jittered ranks put every other event through here.
_PROGRESS_FIELDS = tuple(f.name for f in fields(Progress))
_progress_values = attrgetter(*_PROGRESS_FIELDS)
_CLOCKED = _PROGRESS_FIELDS.index("clocked")


_time_of = attrgetter("time")


def _in_order(floor: float, events: list[Event]) -> bool:
    """True when ``events``' times never step back, from ``floor`` on: then
    ``EventClock.hold`` has nothing to hold (a loop in C, not in Python).
    NaN times fail ``<=`` and take the slow loop, as there."""
    times = list(map(_time_of, events))
    return floor <= times[0] and all(map(le, times, islice(times, 1, None)))


def at_time(event: Event, time: float, clocked: bool | None = None) -> Event:
    """``event`` at ``time`` (and, for progress, ``clocked`` if given)."""
    if type(event) is Progress:
        values = list(_progress_values(event))
        values[0] = time
        if clocked is not None:
            values[_CLOCKED] = clocked
        return new_progress(*values)
    return replace(event, time=time)


def at_first_reading(events: list[Event], fallback: float) -> list[Event]:
    """``events`` of a log's first chunk read from its start on its own
    clock (a live catch-up), its opening ones (those before the first
    dated by a stamp: at ``fallback``, the wall clock, or run on from it by
    tqdm's elapsed counter) moved to the first clock reading after them,
    unclocked, as replay's ``EventClock.resolve`` dates them.

    Live, fallback-dated events pass as they are: right for lines written
    as the watcher follows, wrong for the opening lines of history (a tqdm
    bar drawn before the first record), which would sit hours or days ahead
    of the stamped lines after them. A detector whose clock is the latest
    event it saw then runs ahead of the data: the crash detector held the
    traceback that ended a log caught up at attach until the data's clock
    reached the wall clock, as long as the log was old. History is older
    than the wall clock, so the opening events are the leading ones at or
    after ``fallback``."""
    n = 0
    for event in events:
        if event.time < fallback:
            break
        n += 1
    if n == 0 or n == len(events):
        return events
    first = events[n].time
    return [at_time(e, first, clocked=False) for e in events[:n]] + events[n:]


def placed(events: list[Event]) -> list[Event]:
    """Events written while a traceback was open, with each crash (and
    recompile) moved back to where its own time puts it.

    The crash assembler knows a traceback is over only lines after its
    exception line, often after other ranks' lines (a SIGTERM the launcher
    sent, another rank's step): left there, the crash would come after
    those later events and the crash detector would see one rank's copy
    seconds late, past its rank-merge hold. Progress events never move
    relative to each other (a rank's steps stay in order); a crash passes
    only events of this stretch whose time is later than its own.
    """
    out: list[Event] = []
    for event in events:
        if type(event) is Progress:
            out.append(event)
            continue
        t = event.time
        i = len(out)
        while i and out[i - 1].time > t:
            i -= 1
        out.insert(i, event)
    return out


def _run_back(events: list[Event], own: list[int], read_at: float) -> float:
    """Live, a chunk read at ``read_at`` as it was written: its events
    dated by that time (``own``: no timestamp yet) and run on from it by
    their step times (``StepClock``) end there instead; in place.

    Nothing read at ``read_at`` was written after it, yet a step clock runs
    a chunk's unstamped steps *on* from the time it starts from: a tqdm
    bar's line of 59 redraws 0.2 s apart, completed by the traceback
    written after it, put its last state and the crash 11 s ahead of the
    watcher's clock, and the jump read as 11 s without a step (a stall at
    the crash). The durations between them are kept; only where they sit
    moves back, by how far the latest ran past the read time (returned; 0:
    none did). Events of an earlier chunk (a traceback stretch held from
    before) are not moved."""
    if not own:
        return 0.0
    over = max(events[i].time for i in own) - read_at
    if not (over > 0 and math.isfinite(over)):
        return 0.0
    for i in own:
        events[i] = at_time(events[i], events[i].time - over)
    return over


class EventClock:
    """Orders and dates one stream's events; state kept across feeds.

    Two steps, with the stream's step-duration clock (``parsers.step_clock``)
    between them: ``resolve`` dates the events the stream dated by a
    fallback time (``fallback(time)`` names those times), ``hold`` keeps
    every event at or after the one before it. ``settle()`` says no event
    dated by a fallback can come any more.
    """

    __slots__ = (
        "_replay", "_floor", "_fallbacks", "_real_seen", "_last_real", "_pending", "_pending_on",
        "_reset_at", "_stand_in", "_released", "_exempt", "_el_start", "_el_now", "_el_base", "_el_last",
        "ran_back",
    )

    def __init__(self, replay: bool = False) -> None:
        self._replay = replay
        self._floor = _NEG_INF  # the latest time handed out by ``hold``
        # Fallback times handed out (insertion-ordered, the last few kept:
        # live, each feed before the first timestamp brings a new one).
        self._fallbacks: dict[float, None] = {}
        self._real_seen = False  # an event dated by a timestamp has passed
        self._last_real = _NEG_INF  # the latest time of those
        self._pending: list[Event] = []
        self._pending_on = replay
        # Where, in the list ``resolve`` returned last, the first event dated
        # by a timestamp after a stretch on tqdm's counter is: ``hold`` (on
        # that list, its length and order kept) lets time step back there.
        self._reset_at: int | None = None
        # Replay ran on a stand-in clock before any timestamp: tqdm's
        # counter, or step times from the fallback time (too many waited).
        self._stand_in = False
        # Where, in the list ``resolve`` returned last, the events are that
        # waited for the first timestamp and took it: they happened before
        # it, so no step clock may run them on past it (``on_dated``).
        self._released: list[int] = []
        # Where, in the list ``on_dated`` handed on last, the events are
        # that a fallback time dated (live): ``hold`` leaves them be.
        self._exempt: list[int] = []
        # tqdm's elapsed counter as the clock (replay, no timestamp yet):
        # where it started (None: not used), how far it has run, and per
        # bar (by its total) the clock at the bar's start and its last counter.
        self._el_start: float | None = None
        self._el_now = 0.0
        self._el_base: dict[int | None, float] = {}
        self._el_last: dict[int | None, float] = {}
        # How far the last ``on_dated`` moved a live chunk back (``_run_back``):
        # the stream moves its step clock back as far.
        self.ran_back = 0.0

    def fallback(self, time: float) -> None:
        """The stream may date events with ``time``: it has no timestamp yet."""
        if not self._real_seen:
            fallbacks = self._fallbacks
            fallbacks[time] = None
            if len(fallbacks) > _FALLBACKS_KEPT:
                del fallbacks[next(iter(fallbacks))]

    def settle(self) -> None:
        """No event dated by a fallback time can come any more (the stream
        has a timestamp and no traceback from before it is open)."""
        if self._real_seen and not self._pending:
            self._fallbacks.clear()

    def flush(self) -> list[Event]:
        """End of input: events still waiting for a clock, at their own time."""
        out, self._pending = self._pending, []
        return out

    # -- step 1: events dated by a fallback time -----------------------------

    def resolve(self, events: list[Event]) -> list[Event]:
        """``events`` (in the file's order) with those dated by a fallback
        time dated as the module says; in replay some wait (``flush``)."""
        fallbacks = self._fallbacks
        self._released = []
        if not fallbacks:
            return events
        out: list[Event] = []
        append = out.append
        for event in events:
            t = event.time
            # A step line with a stamp of its own (``clocked``) was never
            # dated by a fallback, even where its stamp equals one (a log's
            # last line stamped in the second its whole-second mtime names).
            if t in fallbacks and not (type(event) is Progress and event.clocked):
                if self._real_seen:
                    # Dated before the first timestamp, out after it (a
                    # traceback that began before it): as late as the clock.
                    append(at_time(event, self._last_real, False))
                    continue
                if not self._replay:
                    append(event)  # live: arrival time, for the Monitor to judge
                    continue
                elapsed = event.elapsed_s if type(event) is Progress else None
                if elapsed is not None and math.isfinite(elapsed) and elapsed >= 0:
                    t = self._elapsed_time(elapsed, event.total_steps, t)  # type: ignore[union-attr]
                    event = at_time(event, t, True)
                elif self._el_start is not None:
                    # Between tqdm lines: the counter's last reading, as a
                    # line without a stamp takes the last stamp.
                    append(at_time(event, self._el_start + self._el_now, False))
                    continue
                elif self._pending_on:
                    self._pending.append(event)
                    if len(self._pending) > PENDING_MAX:
                        # No clock in sight: stop waiting for one. The step
                        # clock runs them on from the fallback time.
                        out.extend(self._pending)
                        self._pending = []
                        self._pending_on = False
                        self._stand_in = True
                    continue
                else:
                    append(event)
                    continue
            else:
                if not self._real_seen:
                    self._real_seen = True
                    self._pending_on = False
                    if self._el_start is not None or self._stand_in:
                        # The first timestamp after a stretch on a stand-in
                        # clock (tqdm's counter, step times from the
                        # fallback time): the stamps are the clock now, even
                        # if they read earlier.
                        self._reset_at = len(out) + len(self._pending)
                if t > self._last_real:
                    self._last_real = t
            if self._pending:
                self._released.extend(range(len(out), len(out) + len(self._pending)))
                out.extend([at_time(p, t, False) for p in self._pending])
                self._pending = []
            append(event)
        return out

    def _elapsed_time(self, elapsed: float, bar: int | None, fallback: float) -> float:
        """The time of a tqdm line whose counter reads ``elapsed`` seconds.

        A bar's counter runs from its own start; a new bar (or one whose
        counter went back: it restarted) starts where the clock is now, so
        one bar after another runs the clock on. Bars are told apart by
        their total, so an outer epoch bar drawn between inner step bars
        does not restart them."""
        if self._el_start is None:
            self._el_start = fallback
        last = self._el_last.get(bar)
        if last is None or elapsed < last:
            self._el_base[bar] = self._el_now
        self._el_last[bar] = elapsed
        now = self._el_base[bar] + elapsed
        if now > self._el_now:
            self._el_now = now
        return self._el_start + now

    def on_dated(
        self, apply: Callable[[list[Event]], list[Event]], events: list[Event], read_at: float | None = None,
    ) -> list[Event]:
        """``apply`` (in place, same length: ``StepClock.apply``) to
        ``events``, keeping positions, but for those that waited for the
        first timestamp and took it (replay): they happened before it, and
        a step clock run on from it would put them after the stamps that
        follow (holding every one of them back). Live, notes which events a
        fallback time dated, before ``apply`` runs a step clock on from it:
        ``hold`` leaves those be (arrival time is no clock)."""
        fallbacks = self._fallbacks
        released, self._released = self._released, []
        if fallbacks and not self._replay:
            self._exempt = [i for i, event in enumerate(events) if event.time in fallbacks]
            if read_at is not None and not released and read_at in fallbacks:
                own = [i for i in self._exempt if events[i].time == read_at]
                self.ran_back = _run_back(apply(events), own, read_at)
                return events
        if not released:
            return apply(events)
        skip = set(released)
        at = [i for i in range(len(events)) if i not in skip]
        for i, event in zip(at, apply([events[i] for i in at])):
            events[i] = event
        return events

    @property
    def plain(self) -> bool:
        """No event the stream makes now can be dated by a fallback time:
        ``resolve`` and ``on_dated`` pass events as they are, and ``hold``
        takes them one by one, each by the one time before it (the floor).
        Then the column reader may date events as it builds them
        (``parsers.final_times``)."""
        return not self._fallbacks and not self._exempt and self._reset_at is None

    @property
    def floor(self) -> float:
        """The latest time ``hold`` handed out: no event leaves before it."""
        return self._floor

    @floor.setter
    def floor(self, time: float) -> None:
        # Moved by ``parsers.final_times``, which holds events as ``hold``
        # would, one by one, as they are built.
        self._floor = time

    # -- step 2: never back ---------------------------------------------------

    def hold(self, events: list[Event]) -> list[Event]:
        """``events`` in the order given, each at a time no earlier than the
        ones before it; changed in place and returned. Events dated by a
        fallback time (live, before the first timestamp: ``on_dated`` named
        them) neither move nor hold others back."""
        floor = self._floor
        if self._exempt or self._reset_at is not None:
            exempt = set(self._exempt)
            self._exempt = []
            reset, self._reset_at = self._reset_at, None
            for i, event in enumerate(events):
                t = event.time
                if i == reset:
                    floor = _NEG_INF  # the one place where time may step back (resolve)
                if i in exempt:
                    continue
                if t >= floor:
                    floor = t
                else:
                    events[i] = at_time(event, floor, False if floor - t > JITTER_S else None)
        elif events and _in_order(floor, events):
            floor = events[-1].time  # the common case, told in C: nothing held
        else:
            for i, event in enumerate(events):
                t = event.time
                if t >= floor:
                    floor = t
                else:
                    events[i] = at_time(event, floor, False if floor - t > JITTER_S else None)
        self._floor = floor
        return events
