"""throughput_drop: tokens/s stays below the baseline by more than a fraction.

The budget is "fire within 120 s of a sustained drop, never for a dip
shorter than 90 s". A rolling median over ``smooth_s`` (20 s, at least three
reports) swallows one odd report; it crosses the threshold about
``smooth_s / 2`` after the drop starts and crosses back about the same time
after it ends, so a dip of D seconds keeps it low for about D seconds. The
detector fires once it has been low for ``sustain_s`` (90 s): a dip shorter
than 90 s never fires, and a drop fires about 10 + 90 s (+ one report
interval) after it starts, inside the 120 s budget.

The baseline is the given one (a baseline file) or learned: the median over
``learn_s`` after the warm-up (the first reports after each (re)start are
compile time and never count). Duplicate copies of a step from several
ranks are dropped so that eight ranks do not weigh eight times.
"""

from __future__ import annotations

import math
from bisect import insort
from collections import deque
from statistics import median

from parsers.events import Crash, Event, ProcessExit, Progress

from .base import Alert, Episode
from .config import DetectorConfig, fmt_clock, fmt_duration, fmt_rate

NAME = "throughput_drop"
_WINDOW_MAX = 1024  # reports in the smoothing window at most


def sorted_median(values: list[float]) -> float:
    """statistics.median of an already sorted, non-empty list (same result).

    Windows here keep their values sorted as they slide (``bisect.insort``),
    so the median of every report is an index, not a sort.
    """
    n = len(values)
    i = n // 2
    if n % 2:
        return values[i]
    return (values[i - 1] + values[i]) / 2


class StepDeduper:
    """Drops the copies of a step that other ranks print within seconds.

    A step seen again much later is a relaunch replaying it from a
    checkpoint: a real new measurement, so it passes. Without step numbers
    only the lowest rank seen is followed.
    """

    __slots__ = ("_recent", "_times", "_window", "_rank")

    _KEEP = 64  # steps remembered

    def __init__(self, window_s: float) -> None:
        # The last steps in arrival order, and the times of each step among
        # them: one dict lookup per report instead of a scan of all 64.
        self._recent: deque[int] = deque()
        self._times: dict[int, deque[float]] = {}
        self._window = window_s
        self._rank: int | None = None

    def is_copy(self, p: Progress) -> bool:
        rank = p.rank
        if rank is not None and (self._rank is None or rank < self._rank):
            self._rank = rank
        step = p.step
        if step is None:
            return rank is not None and rank != self._rank
        times = self._times.get(step)
        if times is not None:
            for t in times:
                if p.time - t <= self._window:
                    return True
        else:
            times = self._times[step] = deque()
        times.append(p.time)
        self._recent.append(step)
        if len(self._recent) > self._KEEP:
            # Forget the oldest entry, which is also the oldest time of its step.
            old = self._recent.popleft()
            old_times = self._times[old]
            old_times.popleft()
            if not old_times:
                del self._times[old]
        return False


class ThroughputDrop:
    name = NAME
    accepts = (Progress, Crash, ProcessExit)
    timed = False

    def __init__(self, config: DetectorConfig | None = None, baseline_tokens_per_s: float | None = None) -> None:
        self.config = c = config or DetectorConfig()
        self.given_baseline = baseline_tokens_per_s if baseline_tokens_per_s and baseline_tokens_per_s > 0 else None
        self.baseline: float | None = self.given_baseline
        self.episode = Episode(NAME)
        self._dedupe = StepDeduper(c.duplicate_step_s)
        self._learn: list[float] = []
        self._learn_start: float | None = None
        self._window: deque[tuple[float, float]] = deque()
        self._sorted: list[float] = []  # the window's values in order, for its median
        self._start: float | None = None  # time of the first report of this (re)start
        self._seen = 0  # reports since then
        self._last_t: float | None = None
        self._last_step: int | None = None
        self._stopped = True
        self._low_since: float | None = None
        self._drop_start: float | None = None
        self._high_since: float | None = None
        self._worst: float | None = None
        self._episode_start: float | None = None
        self.smoothed: float | None = None

    def deadline(self) -> float | None:
        return None

    def learned_baseline(self) -> float | None:
        return None if self.given_baseline is not None else self.baseline

    def update(self, event: Event) -> list[Alert]:
        if isinstance(event, Progress):
            return self._progress(event)
        if isinstance(event, (Crash, ProcessExit)):
            self._stopped = True
            if self.episode.active:
                return self.episode.resolve(
                    event.time,
                    "throughput no longer measured: the training process stopped",
                    event.source,
                    {"reason": "job stopped"},
                )
        return []

    # -- internals ------------------------------------------------------------
    def _restart(self, t: float) -> None:
        self._stopped = False
        self._start = t
        self._seen = 0
        self._window.clear()
        self._sorted.clear()
        self._low_since = self._drop_start = self._high_since = None

    def _progress(self, p: Progress) -> list[Alert]:
        v = p.tokens_per_s
        if v is None or not math.isfinite(v) or v < 0 or not p.clocked:
            # An unclocked line's time is an earlier line's: a "sustained"
            # drop cannot be timed on it.
            return []
        if self._dedupe.is_copy(p):
            return []
        t = p.time
        c = self.config
        relaunched = (
            self._stopped
            or (self._last_t is not None and t - self._last_t >= c.throughput_restart_gap_s)
            or (p.step is not None and self._last_step is not None and p.step < self._last_step)
        )
        self._last_t = t
        if p.step is not None:
            self._last_step = p.step
        if relaunched:
            self._restart(t)
        self._seen += 1
        if self._seen <= c.throughput_warmup_events or t - self._start < c.throughput_warmup_s:
            return []
        if self.baseline is None:
            if self._learn_start is None:
                self._learn_start = t
            if len(self._learn) < 4096:
                self._learn.append(v)
            if t - self._learn_start >= c.throughput_learn_s and len(self._learn) >= 5:
                self.baseline = float(median(self._learn))
                self._learn = []
            return []

        w = self._window
        ordered = self._sorted
        if len(w) == _WINDOW_MAX:
            ordered.remove(w.popleft()[1])
        w.append((t, v))
        insort(ordered, v)
        cutoff = t - c.throughput_smooth_s
        while len(w) > 3 and w[0][0] < cutoff:
            ordered.remove(w.popleft()[1])
        med = sorted_median(ordered)
        self.smoothed = med
        base = self.baseline
        if med < (1.0 - c.throughput_drop_frac) * base:
            self._high_since = None
            if self._low_since is None:
                self._low_since = t
                thr = (1.0 - c.throughput_drop_frac) * base
                self._drop_start = next((tt for tt, x in w if x < thr), t)
                self._worst = med
            elif med < self._worst:
                self._worst = med
            if not self.episode.active and t - self._low_since >= c.throughput_sustain_s:
                return self._fire(p, med)
            return []
        self._low_since = None
        if not self.episode.active:
            return []
        if med >= c.throughput_recover_frac * base:
            if self._high_since is None:
                self._high_since = t
            if t - self._high_since >= c.throughput_recover_s:
                return self._resolve(p, med)
        else:
            self._high_since = None
        return []

    def _fire(self, p: Progress, med: float) -> list[Alert]:
        base = self.baseline
        below = 1.0 - med / base
        since = self._drop_start if self._drop_start is not None else p.time
        source = "given" if self.given_baseline is not None else "learned"
        self._episode_start = since
        msg = (
            f"throughput {fmt_rate(med)} is {below:.0%} below baseline {fmt_rate(base)} "
            f"since {fmt_clock(since, self.config.tz)} ({fmt_duration(p.time - since)})"
        )
        if p.step is not None:
            msg += f", at step {p.step}"
        evidence = {
            "tokens_per_s": med,
            "baseline_tokens_per_s": base,
            "baseline_source": source,
            "below_fraction": round(below, 4),
            "threshold_fraction": self.config.throughput_drop_frac,
            "since": since,
            "step": p.step,
        }
        return self.episode.fire(p.time, "warning", msg, p.source, evidence)

    def _resolve(self, p: Progress, med: float) -> list[Alert]:
        base = self.baseline
        started = self._episode_start if self._episode_start is not None else p.time
        msg = (
            f"throughput recovered to {fmt_rate(med)} ({med / base:.0%} of baseline {fmt_rate(base)}); "
            f"it had been down to {fmt_rate(self._worst or med)} for about {fmt_duration(p.time - started)}"
        )
        evidence = {"tokens_per_s": med, "baseline_tokens_per_s": base, "worst_tokens_per_s": self._worst}
        return self.episode.resolve(p.time, msg, p.source, evidence)
