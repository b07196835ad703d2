"""stall: no progress line for far longer than the usual step interval.

"Usual" is the median of the recent intervals between progress lines that
carry a new step (copies of a step from other ranks are not progress), or
the log's own seconds-per-step when it says so, whichever is longer. The
threshold is ``max(stall_min_s, stall_factor x usual)``, so it follows the
run's own cadence (a run logging every 300 s waits 25 min, not 2); before
the run has shown one interval its cadence is unknown and the threshold is
``stall_first_s``. ``deadline()`` is the last progress plus that threshold,
so a replay inserts a Tick at that very time and the alert is stamped with
the moment the stall became true.

A Tick exactly at the deadline is the replay asking "did time pass?": the
answer is the next input. A progress line that continues the run at once
after a forward clock jump (NTP, DST spring-forward: tqdm's own elapsed
counter moved on by much less than the stamps, or the stamps jumped by
whole hours) is no stall; anything else (another tick, a GPU sample, a
crash, a later progress line) fires it, stamped at the deadline. So does
any new progress right after a bar's last step (the next epoch's bar, the
next stage's lines): the
pause between bars is an eval, a save or the next stage's start-up.

Heartbeats are not progress: a watchdog line that repeats the last step
("no step for 60 s (last step 537), waiting in all_reduce", a ``Heartbeat``)
never resets or delays the stall; it is kept, per rank, as evidence of
where each rank waits, and the stall alert says so ("rank 3 waits in
all_reduce at step 537"; a rank whose last step is behind the others' is
named as behind). Nor is any other event progress (overflows, Xid errors,
GPU samples): they only move the clock.

An evaluation or a checkpoint save (``Phase``) prints no training step:
while one runs, the silence allowed grows by ``stall_eval_allowance_s`` or
``stall_checkpoint_allowance_s``, and a stall that fires inside it says so
("no progress for 25 min during checkpoint save (allowance 20 min)"). The
phase ends with its end marker (the silence is then measured from there)
or with the next training progress.

A dead job is not a stall: after a Crash or a ProcessExit the detector
stops watching (and resolves an open stall, which the crash now explains)
until progress resumes. Nor is a finished one: the first bar that reaches
its total (``10/10``) ends the watch until progress resumes. But once a
bar's end was followed by more progress (``100/100``, then ``1/100``: the
run has epochs), the end of a bar is not the end of the run: the silence
after it is watched too, with the longer ``stall_first_s`` limit (an eval
or a save comes there; a loader hang too).

Example: reports every 10 s, then silence.

>>> det = Stall()
>>> for i in range(10):
...     _ = det.update(Progress(10.0 * i, "log:%d" % i, step=i))
>>> det.deadline()
210.0
>>> det.update(Tick(210.0)), [a.state for a in det.update(Tick(211.0))]
([], ['firing'])
"""

from __future__ import annotations

from bisect import insort
from collections import deque
from collections.abc import Sequence
from typing import Any

from ..parsers.events import (
    Crash,
    Delivery,
    Event,
    GpuLost,
    GpuSample,
    Heartbeat,
    Overflow,
    Phase,
    ProcessExit,
    Progress,
    Recompile,
    Tick,
    XidError,
)
from ..parsers.native import KERNELS
from ..parsers.step_columns import columns_of
from .base import Alert, DetectorBase, Episode, Handler, StepCommit
from .config import DetectorConfig, fmt_clock, fmt_duration
from .steps import sorted_median
from .waiting import waiting_text

NAME = "stall"
_INTERVALS_KEPT = 32
# A log that arrives in bursts (``Delivery``) stalls only after this many
# burst intervals without a line: a late burst is no stall, and a run hung
# right after its last burst is still caught within three intervals.
BURSTS_ALLOWED = 2.5
# Ranks whose latest heartbeat is kept (bounded state), and named in evidence.
_WAITING_KEPT = 1024
_WAITING_SHOWN = 64
_PHASE_WORDS = {"eval": "evaluation", "checkpoint": "checkpoint save"}
_INF = float("inf")
# The fields ``walk_steps`` reads, by their places in ``Progress``'s fields
# (the kernel reads them at their slots, as ``step_columns`` does).
_FIELDS = columns_of("time", "step", "clocked", "rank", "step_seconds", "total_steps").at
_WALK = KERNELS.stall_walk if KERNELS is not None else None

Walked = tuple[list[float], "Progress | None", "int | None", "float | None", "int | None", "int | None",
               "float | None", int, bool]


def walk_steps(steps: Sequence[Progress], bound: float, floor: float, dup_s: float, watching: bool,
               last_step: int | None, last_t: float | None, last_total: int | None, rank0: int | None,
               step_seconds: float | None, bars: int) -> Walked | None:
    """``Stall.quiet_steps``' walk over a run with ``_progress``'s rules of
    what is progress, in locals (changing nothing): None where a line comes
    after the deadline the line before it leaves (``bound``, then each
    line's time plus ``floor``), else what the run leaves (the intervals
    between steps taken, the last line taken, its step, time and total, the
    lowest rank, the step seconds, the bars after an end, whether a stall
    is watched). ``stall_walk`` in ``_native.c`` is this loop in C."""
    intervals: list[float] = []
    taken: Progress | None = None  # the last clocked line taken as progress
    first = True
    for p in steps:
        t = p.time
        if first:
            first = False
        elif not t <= bound:  # (NaN too)
            return None
        step = p.step
        if not p.clocked:
            last_step, watching, bound = step, False, _INF
            continue
        if step is None:
            rank = p.rank
            if rank is not None:
                if rank0 is None or rank < rank0:
                    rank0 = rank
                elif rank != rank0:
                    continue
        elif last_step is not None and watching:
            if step == last_step:
                continue
            if (step < last_step and last_t is not None and t - last_t <= dup_s
                    and not (last_total and last_step + 1 >= last_total)):
                continue
        if p.step_seconds is not None and p.step_seconds > 0:
            step_seconds = p.step_seconds
        if last_t is not None and watching and t > last_t:
            intervals.append(t - last_t)
        if (last_total and last_step is not None and last_step + 1 >= last_total and step is not None
                and (step < last_step or p.total_steps != last_total)):
            bars += 1
        last_t, last_step, last_total, taken = t, step, p.total_steps, p
        total = p.total_steps
        watching = not (total and step is not None and step + 1 >= total and not bars)
        bound = t + floor if watching else _INF
    return intervals, taken, last_step, last_t, last_total, rank0, step_seconds, bars, watching


class Stall(DetectorBase):
    name = NAME
    # Every event moves the clock; the Monitor also ticks at deadline().
    # Heartbeats, overflows and Xid errors are no progress: they move the clock only.
    accepts = (Progress, Crash, ProcessExit, Tick, GpuSample, GpuLost, Recompile, Delivery,
               Heartbeat, Phase, Overflow, XidError)
    timed = True  # deadline() can be set: the set asks it after each event it gets

    def __init__(self, config: DetectorConfig | None = None) -> None:
        self.config = config or DetectorConfig()
        self.episode = Episode(NAME)
        self._intervals: deque[float] = deque()
        self._sorted: list[float] = []  # the same intervals in order, for their median
        self._last_t: float | None = None
        # Silence is measured from here: the last progress, or the end of a
        # phase (eval, checkpoint) that came after it.
        self._since: float | None = None
        # The phase running now (its begin marker), and each rank's latest
        # heartbeat since the last progress (where it waits).
        self._phase: Phase | None = None
        self._waiting: dict[int | None, Heartbeat] = {}
        self._last_step: int | None = None
        self._last_source = ""
        self._rank: int | None = None
        self._step_seconds: float | None = None
        self._last_elapsed: float | None = None
        self._last_total: int | None = None
        self._bars_after_end = 0  # bars that ended and were followed by more progress
        self._watching = False
        self._deadline: float | None = None
        # A Tick came exactly at the deadline: fire unless the next input is
        # progress that shows the silence was a clock jump.
        self._pending: float | None = None
        # Live: the log's lines come in bursts this far apart (0: as written).
        self.burst_s = 0.0
        self.threshold = self.config.stall_first_s
        self.usual: float | None = None
        self.clock_jumps = 0  # forward jumps of the stamps stepped over

    def deadline(self) -> float | None:
        if self._watching and not self.episode.active and self._pending is None:
            return self._deadline
        return None

    def fast_routes(self) -> dict[type[Event], Handler]:
        return {Progress: self._on_progress}

    def _on_progress(self, p: Progress) -> list[Alert]:
        """``update`` of a step line, without the type tests."""
        if self._pending is None:
            return self._progress(p)
        return self.update(p)

    def quiet_steps(self, steps: Sequence[Progress], /) -> StepCommit | None:
        """A run of step lines at once (``base.StepCommit``), when provably quiet.

        Step lines alone never fire a stall (only a later event or Tick
        past the deadline does); they can only resolve one. So the run is
        quiet when no stall is open or pending and the deadline after each
        line is at or after the next line's time. After a line that is
        taken as progress that deadline is at least its time plus
        ``max(stall_min_s, BURSTS_ALLOWED x burst_s)`` (the threshold never
        goes under ``stall_min_s``): a floor cheap enough to check without
        the median, and a gap longer than it makes the run not quiet (it
        goes one line at a time and ticks where it must). The lines are
        walked once with ``_progress``'s rules of what is progress, in
        locals (asking changes nothing); the commit sets the state of the
        last line taken and lets ``_retune`` derive the threshold and the
        deadline from it as ``_progress`` does.
        """
        if self._pending is not None or self.episode.active:
            return None  # a line would fire the pending stall or resolve the open one
        floor = self._limit_floor()
        watching = self._watching
        d = self._deadline
        bound = d if watching and d is not None else _INF
        state = (bound, floor, self.config.duplicate_step_s, watching, self._last_step, self._last_t,
                 self._last_total, self._rank, self._step_seconds, self._bars_after_end)
        walked: Walked | None = NotImplemented
        if _WALK is not None and type(steps) is list:
            walked = _WALK(steps, _FIELDS, *state)  # in C where built; odd values: NotImplemented
        if walked is NotImplemented:
            walked = walk_steps(steps, *state)
        if walked is None:
            return None
        intervals, taken, last_step, _, _, rank0, step_seconds, bars, watching = walked

        def commit() -> None:
            if taken is not None:
                kept = self._intervals
                kept.extend(intervals)
                while len(kept) > _INTERVALS_KEPT:
                    kept.popleft()
                if intervals:
                    self._sorted[:] = sorted(kept)
                self._step_seconds = step_seconds
                self._bars_after_end = bars
                self._last_t = self._since = taken.time
                self._phase = None
                self._waiting.clear()
                self._last_total = taken.total_steps
                self._last_elapsed = taken.elapsed_s
                self._last_source = taken.source
                self._retune(taken)
            self._rank = rank0
            self._last_step = last_step
            self._watching = watching

        return commit

    def update(self, event: Event) -> list[Alert]:
        t = event.time
        out: list[Alert] = []
        jumped = False
        if self._pending is not None:
            if isinstance(event, Progress) and self._is_clock_jump(event):
                jumped = True
                self.clock_jumps += 1
            elif isinstance(event, Progress) and self._next_bar(event):
                jumped = True  # the pause between two bars: no step interval either
            else:
                out = self._fire(self._pending)
            self._pending = None
        if isinstance(event, Progress):
            return out + self._progress(event, jumped)
        if isinstance(event, Delivery):
            self.burst_s = event.burst_s
            if self._watching:
                self._set_deadline()
            return out
        if isinstance(event, Heartbeat):
            self._heard(event)  # then on to the clock check: time passed, no step did
        elif isinstance(event, Phase):
            self._enter(event)
        if isinstance(event, (Crash, ProcessExit)):
            self._watching = False
            if self.episode.active:
                what = "crashed" if isinstance(event, Crash) else f"exited ({event.kind})"
                return out + self.episode.resolve(
                    t,
                    f"the silence ended with the job {what}; no longer a stall",
                    event.source,
                    {"reason": "job stopped"},
                )
            return out
        d = self._deadline
        if d is not None and t >= d and self._watching and not self.episode.active:
            if t == d and type(event) is Tick:
                self._pending = d
                return out
            return out + self._fire(t)
        return out

    def _next_bar(self, p: Progress) -> bool:
        """A new bar right after the last one ended: the pause between them
        (an eval, a save, the next stage's start-up) is no stall. Live, ticks
        confirm a silence there after ``stall_first_s``; in a replay the
        stamps around a bar dated by its own durations say too little."""
        return (
            self._last_total is not None
            and self._last_step is not None
            and self._last_step + 1 >= self._last_total
            # Any progress but a copy of that last step: a bar starting again,
            # another bar (a redrawn bar may show only its newest state), the
            # next stage's lines (with or without stamps of their own).
            and not (p.step == self._last_step and p.total_steps == self._last_total)
        )

    def _is_clock_jump(self, p: Progress) -> bool:
        """Progress right after the deadline: did the stamps jump rather than time pass?"""
        last_t = self._last_t
        if last_t is None or not p.clocked or (p.step is not None and p.step == self._last_step):
            return False
        gap = p.time - last_t
        if p.elapsed_s is not None and self._last_elapsed is not None:
            # tqdm's own counter: the truth about how long the step took.
            return 0.0 <= p.elapsed_s - self._last_elapsed < 0.5 * gap
        usual = self.usual or 0.0
        hours = round((gap - usual) / 3600.0)
        return hours >= 1 and abs(gap - usual - 3600.0 * hours) <= max(2.0 * usual, 5.0)

    def _progress(self, p: Progress, jumped: bool = False) -> list[Alert]:
        t = p.time
        if not p.clocked:
            # Its time is an earlier line's: silence cannot be measured on
            # it. Progress it is, though: stop watching until a line with a
            # clock of its own comes (live, the Monitor stamps arrival time).
            self._last_step = p.step
            self._watching = False
            if self.episode.active:
                return self.episode.resolve(t, "progress resumed (lines without timestamps)", p.source, {"step": p.step})
            return []
        step = p.step
        last_step = self._last_step
        if step is None:
            rank = p.rank
            if rank is not None:
                if self._rank is None or rank < self._rank:
                    self._rank = rank
                elif rank != self._rank:
                    return []  # without steps, only the lowest rank is followed
        elif last_step is not None and self._watching:
            if step == last_step:
                return []  # another rank's copy of the same step: not progress
            if (
                step < last_step
                and self._last_t is not None
                and t - self._last_t <= self.config.duplicate_step_s
                and not (self._last_total and last_step + 1 >= self._last_total)
            ):
                # An older step's copy from a lagging rank, or ranks' lines
                # interleaved by stamps that jitter: not progress either.
                return []
        if p.step_seconds is not None and p.step_seconds > 0:
            self._step_seconds = p.step_seconds
        out: list[Alert] = []
        last_t = self._last_t
        if last_t is not None and self._watching and t > last_t and not jumped:
            # Every interval counts, long ones too (the median of 32 shrugs
            # off a real stall): a run that slows its cadence must be able
            # to teach the new one instead of stalling at every line.
            interval = t - last_t
            if len(self._intervals) == _INTERVALS_KEPT:
                self._sorted.remove(self._intervals.popleft())
            self._intervals.append(interval)
            insort(self._sorted, interval)
        if self.episode.active:
            gap = t - last_t if last_t is not None else 0.0
            at_step = f" at step {p.step}" if p.step is not None else ""
            fired = self.episode.since
            if fired is not None and last_t is not None and t < fired:
                # Lines stamped inside the silence arrived after the alert:
                # the run went on, its lines were late (a buffered log). Say
                # so rather than a silence shorter than the one that fired.
                message = (
                    f"progress resumed{at_step}: lines written during the silence arrived late "
                    f"(the log's own stamps show {fmt_duration(gap)} between steps; buffered output?)"
                )
            else:
                message = f"progress resumed{at_step} after {fmt_duration(gap)} of silence"
            out = self.episode.resolve(t, message, p.source, {"silence_s": gap, "step": p.step})
        if (
            self._last_total
            and self._last_step is not None
            and self._last_step + 1 >= self._last_total
            and p.step is not None
            and (p.step < self._last_step or p.total_steps != self._last_total)
        ):
            self._bars_after_end += 1  # a bar ended and a new one began: epochs
        self._last_t = self._since = t
        self._phase = None  # training progress ends an eval or a save
        self._waiting.clear()
        self._last_step = p.step
        self._last_total = p.total_steps
        self._last_elapsed = p.elapsed_s
        self._last_source = p.source
        self._watching = True
        self._retune(p)
        return out

    def _retune(self, p: Progress) -> None:
        """After progress ``p`` was taken: the usual interval, the threshold
        and the deadline it sets (one home for ``_progress`` and the commit
        of ``quiet_steps``)."""
        usual = sorted_median(self._sorted) if self._sorted else 0.0
        if self._step_seconds is not None and self._step_seconds > usual:
            usual = self._step_seconds
        self.usual = usual or None
        if usual:
            self.threshold = max(self.config.stall_min_s, self.config.stall_factor * usual)
        else:
            self.threshold = max(self.config.stall_min_s, self.config.stall_first_s)
        if p.total_steps and p.step is not None and p.step + 1 >= p.total_steps:
            if self._bars_after_end:
                # The run has shown bars that ended and went on (epochs): this
                # end is most likely one more epoch's. An eval, a save or the
                # next epoch's loader follows and takes longer than a step;
                # still watched (a hang between epochs is a hang), with the
                # first-line limit.
                self.threshold = max(self.threshold, self.config.stall_first_s)
            else:
                # The first bar to end: the run finished, as far as anyone
                # can tell (however long ago). Progress after it re-arms.
                self._watching = False
        self._set_deadline()

    def _heard(self, hb: Heartbeat) -> None:
        """Keep the rank's latest word on where it waits (never progress)."""
        if self._last_t is not None and hb.time < self._last_t:
            return  # from before the last progress: stale
        self._waiting.pop(hb.rank, None)
        self._waiting[hb.rank] = hb
        if len(self._waiting) > _WAITING_KEPT:
            del self._waiting[next(iter(self._waiting))]

    def _enter(self, ph: Phase) -> None:
        """A phase begins (more silence allowed) or ends (silence counts from its end)."""
        if ph.begin:
            self._phase = ph
        elif self._phase is not None:
            self._phase = None
            if self._since is not None and ph.time > self._since:
                self._since = ph.time
        if self._watching:
            self._set_deadline()

    def _allowance(self) -> float:
        if self._phase is None:
            return 0.0
        if self._phase.phase == "checkpoint":
            return self.config.stall_checkpoint_allowance_s
        return self.config.stall_eval_allowance_s

    def _set_deadline(self) -> None:
        if self._since is not None:
            self._deadline = self._since + self._limit() + self._allowance()

    def _limit(self) -> float:
        """The silence allowed after the last progress: the threshold, or a
        few burst intervals of a log that arrives in bursts."""
        return max(self.threshold, BURSTS_ALLOWED * self.burst_s)

    def _limit_floor(self) -> float:
        """The least ``_limit()`` can be after any progress (the threshold
        never goes under ``stall_min_s``): the bound ``quiet_steps`` proves
        a run quiet with. A change to ``_limit`` must keep it a floor."""
        return max(self.config.stall_min_s, BURSTS_ALLOWED * self.burst_s)

    def flush(self) -> list[Alert]:
        """The data ended right after a deadline tick: the silence was real."""
        if self._pending is None:
            return []
        t, self._pending = self._pending, None
        return self._fire(t)

    def _fire(self, t: float) -> list[Alert]:
        last_t = self._last_t if self._last_t is not None else t
        silence = t - last_t
        step = f"step {self._last_step} " if self._last_step is not None else "progress "
        usual = f"usual interval {self.usual:.3g} s" if self.usual else "no usual interval yet"
        phase = self._phase
        during = ""
        if phase is not None:
            during = (f" during {_PHASE_WORDS.get(phase.phase, phase.phase)}"
                      f" (allowance {fmt_duration(self._allowance())})")
        msg = (
            f"no progress for {fmt_duration(silence)}{during} (last {step}at {fmt_clock(last_t, self.config.tz)}); "
            f"{usual}, threshold {fmt_duration(self.threshold)}"
        )
        if self.burst_s:
            msg += f"; the log arrives in bursts about {fmt_duration(self.burst_s)} apart"
        evidence: dict[str, Any] = {
            "silence_s": silence,
            "last_progress": last_t,
            "last_step": self._last_step,
            "usual_interval_s": self.usual,
            "threshold_s": self.threshold,
        }
        if phase is not None:
            evidence.update(phase=phase.phase, phase_since=phase.time, allowance_s=self._allowance())
        if self._waiting:
            beats = sorted(self._waiting.values(), key=lambda h: -1 if h.rank is None else h.rank)
            text, behind = waiting_text(beats)
            msg += f"; {text}"
            evidence["waiting"] = [
                {"rank": h.rank, "last_step": h.last_step, "waiting_in": h.waiting_in, "time": h.time, "source": h.source}
                for h in beats[:_WAITING_SHOWN]
            ]
            if behind:
                evidence["behind_ranks"] = behind
        return self.episode.fire(t, "warning", msg, self._last_source or "stall", evidence)

