"""The clock of step lines that carry no timestamp but say how long a step took.

nanochat and nanoGPT print a timestamp once in a while (a checkpoint saved,
every 500 steps) and thousands of step lines without one, each with its own
duration (``dt: 13789.96ms``, ``step_avg:...ms``, tqdm's s/it). Such a line
takes the last timestamp seen (``clocked=False``): hours behind the truth,
so a stall or a rate cannot be measured on it. Yet the line tells its own
time: the stamp it runs on from plus the steps run since, each as long as
the log says. That clock is the data's, so replay and the live path,
whatever the chunks or bursts the text came in, read the same times from
the same bytes.

It runs on across a later stamp rather than jump to it: the steps' own
durations leave out evaluation and checkpoint time, so each stamp would be
a few minutes ahead of the estimate, and a jump there would look like a
silence (a stall) that never was. It re-anchors when a stamp falls behind
the estimate (steps said longer than they took), when it is ahead by more
than drift can explain (``DRIFT_SHARE`` of the time run on, at least
``DRIFT_MIN_S``: a relaunch or a real pause, with stamped lines between),
or when the steps go back (a relaunch from a checkpoint). Other events that carry
the stale stamp (a traceback after the last step) take the clock's time,
so events stay in the order the log wrote them.

>>> from dflash_watch.parsers.events import Progress
>>> clock = StepClock()
>>> lines = [Progress(1000.0, "l:1", step=s, step_seconds=10.0, clocked=False) for s in (1, 2, 4)]
>>> [e.time for e in clock.apply(lines)]
[1010.0, 1020.0, 1040.0]
>>> later = Progress(1045.0, "l:9", step=5, step_seconds=10.0, clocked=False)  # a stamp 5 s ahead: drift
>>> clock.apply([later])[0].time
1050.0
>>> relaunch = Progress(1300.0, "l:99", step=1, step_seconds=10.0, clocked=False)  # far ahead, steps back
>>> clock.apply([relaunch])[0].time
1310.0
"""

from __future__ import annotations

from itertools import repeat

from .clock import at_time
from .events import Event, Progress

# A stamp ahead of the step clock by more than this share of the time run on
# (and at least DRIFT_MIN_S) is a real gap, not the drift of evaluations and
# checkpoints the step times leave out (nanochat: ~5 min per 2 h of steps).
DRIFT_SHARE = 0.15
DRIFT_MIN_S = 60.0


class StepClock:
    """Per log stream: dates unstamped step lines by their own step durations."""

    __slots__ = ("_stamp", "_base", "_elapsed", "_step")

    def __init__(self) -> None:
        self._stamp: float | None = None  # the stale stamp the unstamped lines carry
        self._base = 0.0  # the time the clock runs on from
        self._elapsed = 0.0  # seconds of steps since ``_base``
        self._step: int | None = None  # the last step counted

    @property
    def _now(self) -> float:
        return self._base + self._elapsed

    def apply(self, events: list[Event]) -> list[Event]:
        """``events`` of one chunk, in log order; retimed in place and returned."""
        # The common case: every progress line has its own stamp. Each
        # event's ``clocked`` in C (True for an event without one: another
        # kind that says False only sends it to the loop below, which is exact).
        if self._stamp is None and all(map(getattr, events, repeat("clocked"), repeat(True))):
            return events
        for i, e in enumerate(events):
            if type(e) is Progress:
                if e.clocked:
                    self._stamp = None
                    continue
                events[i] = self._progress(e)
            elif self._stamp is not None and e.time == self._stamp:
                if self._elapsed:
                    events[i] = at_time(e, self._now)
            elif self._stamp is not None and e.time > self._now:
                self._stamp = None  # stamped text ahead of the clock: it is over
        return events

    def stamped(self) -> None:
        """A progress line with a stamp of its own passed (``apply`` on a
        clocked ``Progress``): unstamped lines after it run on from theirs."""
        self._stamp = None

    def unstamped(self, time: float, step: int | None, seconds: float | None) -> tuple[float, bool]:
        """The time and ``clocked`` of an unstamped step line (``Progress``
        of ``time``, ``step``, ``step_seconds`` ``seconds``, not clocked),
        the clock moved past it: what ``apply`` gives it, before it is
        built (``parsers.final_times`` dates lines so as they are read)."""
        if self._stamp is None:
            self._start(time)
        elif time != self._stamp:
            self._stamp = time
            ahead = time - self._now
            if ahead < 0 or ahead > max(DRIFT_MIN_S, DRIFT_SHARE * self._elapsed) or (
                step is not None and self._step is not None and step < self._step
            ):
                self._start(time)
        if seconds is None or seconds <= 0 or step is None:
            return (self._now if self._elapsed else time), False
        last = self._step
        if last is None or step > last:
            self._elapsed += seconds * (1 if last is None else step - last)
        elif step < last:
            # Steps went back (a relaunch from a checkpoint): they count on
            # from here as a new run.
            self._elapsed += seconds
        self._step = step
        return self._base + self._elapsed, True

    def move_back(self, seconds: float) -> None:
        """The steps just dated were moved ``seconds`` earlier (live: they
        ran past the time their chunk was read, ``clock._run_back``): the
        clock runs on from where they now end."""
        self._base -= seconds

    def _progress(self, e: Progress) -> Event:
        time, clocked = self.unstamped(e.time, e.step, e.step_seconds)
        if clocked or time != e.time:
            # ``at_time``: positional rebuild, several times cheaper than
            # ``replace`` (this runs once per unstamped step line).
            return at_time(e, time, clocked)
        return e

    def _start(self, stamp: float) -> None:
        self._stamp = stamp
        self._base = stamp
        self._elapsed = 0.0
        self._step = None
