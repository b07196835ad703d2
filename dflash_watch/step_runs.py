"""The Monitor's runs of step lines: issue 20's batching contract, the shell's side.

``feed_events`` hands a list of events here (``_feed_runs``) when the set's
detectors can take runs: runs of consecutive step lines are offered to
``DetectorSet.take_steps`` at once, which commits them where every detector
of their route proves them quiet (``detectors.base.StepCommit``); a refused
run is cut where the detector that refused it says it turns (the step
there fed on its own), else halved, and the parts offered again; a short
one and every other event go one at a time, through the Monitor's own
per-event handlers. What the Monitor
keeps of each step (its clock, counters, charts) is the same either way:
``tests/shell/test_step_runs.py`` holds it to the per-event path.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice, repeat
from operator import is_
from typing import cast

from dflash_watch.detectors.base import Alert
from dflash_watch.detectors.registry import DetectorSet
from dflash_watch.parsers.events import Event, Progress
from dflash_watch.parsers.step_columns import TIMES, read

# Runs of consecutive step lines offered to the detectors at once (issue
# 20's batching contract): shorter ones are not worth the asking; longer
# ones are cut, so that one step near a threshold refuses only its part.
MIN_RUN = 8
_MAX_RUN = 256
# The parts of a refused run cut where it turns (``DetectorSet.refused_at``)
# are offered again from this length: a step fed on its own costs the
# detectors some ten times what a step of a run costs them.
_PART_MIN = 2


class StepRuns:
    """Runs of step lines for the Monitor (a mixin: its fields and handlers)."""

    # Offer runs of step lines to the detectors at once (``_feed_runs``);
    # False: one at a time, the per-event path the differential tests and
    # ``benchmarks/bench_replay.py --per-event`` compare against.
    step_runs = True

    # The Monitor's (its ``__init__`` and its event core).
    _detectors: DetectorSet
    _convert: bool
    now: float | None
    last_event_time: float | None
    progress_events: int
    last_progress: Progress | None
    keep_history: bool
    version: int
    _handle: Callable[[Event], list[Alert]]
    _handle_progress: Callable[[Progress], list[Alert]]
    _step: Callable[[Progress, list[Alert]], list[Alert]]
    _arrive: Callable[[float], list[Alert]]
    _in_tokens: Callable[[Progress], Progress]
    _remember_steps: Callable[[list[Progress]], None]

    def _feed_runs(self, events: list[Event]) -> list[Alert]:
        """``feed_events`` of a list: runs of consecutive step lines are
        offered to the detectors at once (``DetectorSet.take_steps``, the
        batching contract of ``detectors.base.StepCommit``); a refused run
        and every other event go one at a time, as before."""
        out: list[Alert] = []
        handle = self._handle
        progress = self._handle_progress
        i, n = 0, len(events)
        while i < n:
            event = events[i]
            if type(event) is not Progress:
                alerts = handle(event)
                if alerts:
                    out.extend(alerts)
                i += 1
                continue
            end = min(n, i + _MAX_RUN)
            # The run's end: the first event after it that is no step line, found in C.
            steps_next = list(map(is_, map(type, islice(events, i + 1, end)), repeat(Progress)))
            j = end if all(steps_next) else i + 1 + steps_next.index(False)
            if j - i < MIN_RUN:
                for k in range(i, j):
                    alerts = progress(cast(Progress, events[k]))
                    if alerts:
                        out.extend(alerts)
            else:
                alerts = self._run(cast("list[Progress]", events[i:j]))
                if alerts:
                    out.extend(alerts)
            i = j
        return out

    def _run(self, steps: list[Progress]) -> list[Alert]:
        """A run of step lines: taken at once where the detectors prove it
        quiet, else one at a time."""
        if self._convert:
            steps = [self._in_tokens(e) for e in steps]
        return self._offer(steps, self._arrive(steps[0].time))

    def _offer(self, steps: list[Progress], out: list[Alert]) -> list[Alert]:
        """``_run`` after the clock came to its first step (``out``: the
        alerts of the ticks on the way). A refused run is cut where the
        detector that refused it says it turns (``DetectorSet.refused_at``:
        a crash held until a time inside it), else halved, and the parts
        offered again, so one step near a threshold costs the per-step path
        only around it; a short one goes one at a time."""
        if self._detectors.take_steps(steps):
            # What ``_arrive`` and ``_keep_step`` do step by step, for the run.
            latest = max(read(steps, TIMES)[0])  # (the times' column, in C)
            if self.now is None or latest > self.now:
                self.now = latest
            last = steps[-1]
            self.last_event_time = last.time
            self.progress_events += len(steps)
            self.last_progress = last
            if self.keep_history:
                self._remember_steps(steps)
            self.version += len(steps)
            return out
        n = len(steps)
        if n >= 2 * MIN_RUN:
            turn = self._detectors.refused_at(steps)
            if turn is not None and 0 <= turn < n:
                # Where the run turns for the detector that refused it: the
                # steps before offered again (or fed, if few), that step fed
                # on its own, the rest offered again.
                if turn >= _PART_MIN:
                    out = self._offer(steps[:turn], out)
                    out.extend(self._handle_progress(steps[turn]))
                else:
                    out = self._feed(steps[:turn + 1], out)
                rest = steps[turn + 1:]
                if len(rest) >= _PART_MIN:
                    out.extend(self._offer(rest, self._arrive(rest[0].time)))
                elif rest:
                    out.extend(self._feed(rest, self._arrive(rest[0].time)))
                return out
            half = n // 2
            out = self._offer(steps[:half], out)
            out.extend(self._offer(steps[half:], self._arrive(steps[half].time)))
            return out
        return self._feed(steps, out)

    def _feed(self, steps: list[Progress], out: list[Alert]) -> list[Alert]:
        """Steps one at a time (the first after the clock came to it)."""
        out = self._step(steps[0], out)
        progress = self._handle_progress  # (converting again changes nothing)
        for event in steps[1:]:
            alerts = progress(event)
            if alerts:
                out.extend(alerts)
        return out
