"""stall: no progress line for far longer than the usual step interval.

"Usual" is the median of the recent intervals between progress lines that
carry a new step (copies of a step from other ranks are not progress), or
the log's own seconds-per-step when it says so, whichever is longer. The
threshold is ``max(stall_min_s, stall_factor x usual)``; ``deadline()`` is
the last progress plus that threshold, so a replay inserts a Tick at that
very time and the alert is stamped with the moment the stall became true.

A dead or finished job is not a stall: after a Crash, a ProcessExit or the
last step (step == total) the detector stops watching (and resolves an open stall, which the crash now explains) until
progress resumes.
"""

from __future__ import annotations

from bisect import insort
from collections import deque

from parsers.events import Crash, Event, GpuLost, GpuSample, ProcessExit, Progress, Recompile, Tick

from .base import Alert, Episode
from .config import DetectorConfig, fmt_clock, fmt_duration
from .throughput import sorted_median

NAME = "stall"
_INTERVALS_KEPT = 32


class Stall:
    name = NAME
    # Every event moves the clock; the Monitor also ticks at deadline().
    accepts = (Progress, Crash, ProcessExit, Tick, GpuSample, GpuLost, Recompile)

    def __init__(self, config: DetectorConfig | None = None) -> None:
        self.config = config or DetectorConfig()
        self.episode = Episode(NAME)
        self._intervals: deque[float] = deque()
        self._sorted: list[float] = []  # the same intervals in order, for their median
        self._last_t: float | None = None
        self._last_step: int | None = None
        self._last_source = ""
        self._rank: int | None = None
        self._step_seconds: float | None = None
        self._watching = False
        self._deadline: float | None = None
        self.threshold = self.config.stall_min_s
        self.usual: float | None = None

    def deadline(self) -> float | None:
        return self._deadline if self._watching and not self.episode.active else None

    def update(self, event: Event) -> list[Alert]:
        t = event.time
        if isinstance(event, Progress):
            return self._progress(event)
        if isinstance(event, (Crash, ProcessExit)):
            self._watching = False
            if self.episode.active:
                what = "crashed" if isinstance(event, Crash) else f"exited ({event.kind})"
                return self.episode.resolve(
                    t,
                    f"the silence ended with the job {what}; no longer a stall",
                    event.source,
                    {"reason": "job stopped"},
                )
            return []
        d = self._deadline
        if d is not None and t >= d and self._watching and not self.episode.active:
            return self._fire(t)
        return []

    def _progress(self, p: Progress) -> list[Alert]:
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
        if p.rank is not None and (self._rank is None or p.rank < self._rank):
            self._rank = p.rank
        if p.step is None:
            if p.rank is not None and p.rank != self._rank:
                return []
        elif self._last_step is not None and p.step == self._last_step and self._watching:
            return []  # another rank's copy of the same step: not progress
        if p.step_seconds is not None and p.step_seconds > 0:
            self._step_seconds = p.step_seconds
        out: list[Alert] = []
        last_t = self._last_t
        if (
            last_t is not None
            and self._watching
            and not self.episode.active
            and t > last_t
            and t - last_t < self.threshold
            and (p.step is None or self._last_step is None or p.step > self._last_step)
        ):
            interval = t - last_t
            if len(self._intervals) == _INTERVALS_KEPT:
                self._sorted.remove(self._intervals.popleft())
            self._intervals.append(interval)
            insort(self._sorted, interval)
        if self.episode.active:
            gap = t - last_t if last_t is not None else 0.0
            step = f" at step {p.step}" if p.step is not None else ""
            out = self.episode.resolve(
                t,
                f"progress resumed{step} after {fmt_duration(gap)} of silence",
                p.source,
                {"silence_s": gap, "step": p.step},
            )
        self._last_t = t
        self._last_step = p.step
        self._last_source = p.source
        self._watching = True
        usual = sorted_median(self._sorted) if self._sorted else 0.0
        if self._step_seconds is not None and self._step_seconds > usual:
            usual = self._step_seconds
        self.usual = usual or None
        self.threshold = max(self.config.stall_min_s, self.config.stall_factor * usual)
        self._deadline = t + self.threshold
        if p.total_steps and p.step is not None and p.step + 1 >= p.total_steps:
            # The last step: what follows (final eval, saving, the next
            # stage of a pipeline) is not a stall of this run.
            self._watching = False
        return out

    def _fire(self, t: float) -> list[Alert]:
        last_t = self._last_t if self._last_t is not None else t
        silence = t - last_t
        step = f"step {self._last_step} " if self._last_step is not None else "progress "
        usual = f"usual interval {self.usual:.3g} s" if self.usual else "no usual interval yet"
        msg = (
            f"no progress for {fmt_duration(silence)} (last {step}at {fmt_clock(last_t, self.config.tz)}); "
            f"{usual}, threshold {fmt_duration(self.threshold)}"
        )
        evidence = {
            "silence_s": silence,
            "last_progress": last_t,
            "last_step": self._last_step,
            "usual_interval_s": self.usual,
            "threshold_s": self.threshold,
        }
        return self.episode.fire(t, "warning", msg, self._last_source or "stall", evidence)
