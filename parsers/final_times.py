"""Events given their final time as they are built, not built and dated again.

A chunk's events leave the stream through two clocks, in the file's order
(``LogStream._ordered``): the step clock (``parsers.step_clock``) runs
unstamped step lines on by their step times, and the hold
(``EventClock.hold``) keeps each event at or after the one before it.
Each gives an event a new time by building it again: on issue 20's
progress shape a tqdm bar between stamped step lines is run on past the
next step line's stamp, and that line is held at the bar's time (per 300k
lines, 90k events: 36k run on, 43k held, each built again).

Both clocks take events one at a time, each by the state the ones before
it left, whenever ``EventClock.plain`` (no event of the chunk can be dated
by a fallback time: the stream has seen a stamp). Then the column reader's
one pass (``parsers.lanes._read_in_order``) gives each event it builds its
final time and ``clocked`` from the same state, and moves the state past
it: 8% fewer instructions in the parse stage of that log. Events made
elsewhere (a line read on its own, a crash, a health line) go through the
two clocks as before, in their place: each time the reader is about to
date one of its own, those before it are dated first (``catch_up``), and
the rest when the chunk is done. The same state meets the same events in
the same order: the same events, field by field
(tests/core/test_parse_dating.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from .clock import JITTER_S, EventClock, at_time
from .events import Event, Progress
from .step_clock import StepClock

# A tail of events this short is dated one by one (a tqdm bar redrawn with
# '\r' between step lines: one event, each time): one rebuild at most, and
# no list for the clocks to walk. Longer ones go through them whole.
_ONE_BY_ONE = 8


@dataclass(slots=True)
class FinalTimes:
    """One chunk's dating at build: the stream's two clocks, and how many of
    the chunk's events (``Cursor.events``) are final already."""

    steps: StepClock
    clock: EventClock
    done: int = 0  # ``events[:done]`` have their final time

    def catch_up(self, events: list[Event]) -> list[Event]:
        """The chunk's events not final yet dated, in place, as
        ``LogStream._ordered`` dates them: the step clock, then the hold.
        Returns ``events``."""
        done = self.done
        count = len(events)
        if count - done > _ONE_BY_ONE:
            if done:
                events[done:] = self.clock.hold(self.steps.apply(events[done:]))
            else:
                self.clock.hold(self.steps.apply(events))
        else:
            for k in range(done, count):
                events[k] = self._one(events[k])
        self.done = count
        return events

    def _one(self, event: Event) -> Event:
        """``event`` as the step clock then the hold date it, both moved
        past it; a progress event built again once at most."""
        if type(event) is not Progress:
            return self.clock.hold(self.steps.apply([event]))[0]
        steps = self.steps
        time = event.time
        clocked = event.clocked
        if clocked:
            steps.stamped()
        else:
            time, clocked = steps.unstamped(time, event.step, event.step_seconds)
        clock = self.clock
        floor = clock.floor
        if time >= floor:
            clock.floor = time
        else:
            if floor - time > JITTER_S:
                clocked = False
            time = floor
        if time != event.time or clocked != event.clocked:
            return at_time(event, time, clocked)
        return event
