"""throughput_drop: the run's rate stays below its baseline by more than a fraction.

The rate is ``rate_of(event)``: the run's own, in its own unit (tok/s,
samples/s, it/s), judged in that unit. A unit change after the run stopped
or went silent (a relaunch with another logger) is a new run to learn;
reports in another unit while the run's own keep coming (an eval bar in
it/s beside tok/s step lines) are another source and are not judged. A given baseline (a baseline
file, the dashboard's ``b`` key via ``set_baseline``) is in tokens/s and
applies only to tok/s rates.

The budget is "fire within 120 s of a sustained drop, never for a dip
shorter than 90 s" at the usual cadence of a report every few seconds. A
rolling median over ``smooth_s`` (20 s, at least three reports) swallows one
odd report; it crosses the threshold about ``smooth_s / 2`` after the drop
starts and crosses back about the same time after it ends, so a dip of D
seconds keeps it low for about D seconds. The detector fires once it has
been low for ``sustain_s`` (90 s): a dip shorter than 90 s never fires, and
a drop fires about 10 + 90 s (+ one report interval) after it starts.

Budgets follow the run's own reporting interval (the median of the recent
ones): a run that reports every 300 s is relaunched only after a silence of
``restart_gap_intervals`` intervals, warms up for fewer reports, learns over
at least 5 reports and smooths over at least 3, so it fires after a few of
its reports instead of never.

The baseline is the given one or learned: the median over ``learn_s`` after
the warm-up (the first reports after each (re)start are compile time and
never count). A learned baseline rises to a faster steady phase (the
smoothed rate stayed ``rise_frac`` above it for ``learn_s``): a slow first
minutes must not become the reference the rest of the run is judged by.
Durations are measured on a ``Timeline``: stamps of eight ranks that jitter
by milliseconds, and clocks set back by NTP or DST, neither restart nor
blind it. Duplicate copies of a step from several ranks are dropped so that
eight ranks do not weigh eight times.

A step going back is a relaunch only within its own series
(``throughput_limits.series_of``): a tqdm bar that counts micro-batches, or
lags, beside stamped optimizer-step lines is another count, not the run
going back, and a rank copy is the same step of the same series (the bar's
micro-batch 10 is no copy of optimizer step 10 logged seconds later). A
relaunch starts every series anew, so both coming back after it restart
once.

Example: 2 it/s for ten minutes, then 0.8 it/s.

>>> det = ThroughputDrop()
>>> out = []
>>> for i in range(200):
...     rate = 2.0 if i < 120 else 0.8
...     out += det.update(Progress(5.0 * i, "log:%d" % i, step=i, rate=rate, rate_unit="it/s"))
>>> [(a.state, a.time, a.evidence["unit"]) for a in out]
[('firing', 700.0, 'it/s')]
>>> out[0].message.split(" since")[0]
'throughput 0.8 it/s is 60% below baseline 2.0 it/s'
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from statistics import median
from typing import Any

from ..parsers.events import TOK_S, Crash, Event, ProcessExit, Progress
from . import throughput_quiet
from .base import Alert, DetectorBase, Episode, Handler, StepCommit
from .config import DetectorConfig, fmt_clock, fmt_duration, fmt_rate
from .steps import SeriesDeduper
from .throughput_limits import (
    INTERVAL_EVERY,
    INTERVALS_KEPT,
    LEARN_MAX,
    SERIES,
    cadence_budgets,
    first_bar_is_new_loop,
    slide,
)
from .timeline import Timeline

__all__ = ["NAME", "ThroughputDrop", "cadence_budgets"]

NAME = "throughput_drop"


class ThroughputDrop(DetectorBase):
    name = NAME
    accepts = (Progress, Crash, ProcessExit)
    timed = False

    def __init__(self, config: DetectorConfig | None = None, baseline_tokens_per_s: float | None = None) -> None:
        self.config = c = config or DetectorConfig()
        self.given_baseline = baseline_tokens_per_s if baseline_tokens_per_s and baseline_tokens_per_s > 0 else None
        self.baseline: float | None = self.given_baseline
        self.unit: str | None = None  # the unit of the rates judged (None: none seen yet)
        self.episode = Episode(NAME)
        self._dedupe = SeriesDeduper(c.duplicate_step_s)  # a copy is within its series
        self._clock = Timeline(c.clock_jitter_s)
        self._intervals: deque[float] = deque(maxlen=INTERVALS_KEPT)
        self._since_interval = 0
        self.interval: float | None = None  # the run's usual report interval
        # What the interval decides, kept until it changes (once per report
        # otherwise): the silence that is a relaunch, the warm-up reports.
        self._gap_limit: float | None = None
        self._warm_n = c.throughput_warmup_events
        self._rise_factor = 1.0 + c.throughput_rise_frac
        self._learn: list[float] = []
        self._learn_start: float | None = None
        self._rise: list[float] = []
        self._rise_since: float | None = None
        self._window: deque[tuple[float, float]] = deque()
        self._sorted: list[float] = []  # the window's values in order, for its median
        self._start: float | None = None  # time of the first report of this (re)start
        self._seen = 0  # reports since then
        self._last_t: float | None = None  # on the Timeline
        # Per step series (``series_of``: step lines, tqdm bars), the last
        # step counted and its bar's total: "back" is within one series.
        self._last_step: list[int | None] = [None] * SERIES
        self._last_total: list[int | None] = [None] * SERIES
        # Whether a tqdm bar was counted in this detector's life (not reset
        # by a relaunch): only the first can be another loop after step
        # lines only (``first_bar_is_new_loop``).
        self._bar_seen = False
        self._stopped = True
        self._low_since: float | None = None
        self._drop_start: float | None = None
        self._high_since: float | None = None
        self._worst: float | None = None
        self._episode_start: float | None = None
        self.smoothed: float | None = None
        self.restarts = 0  # (re)starts seen, the first one included

    def deadline(self) -> float | None:
        return None

    def learned_baseline(self) -> float | None:
        """The tokens/s baseline this run taught, if it did (None for other units)."""
        if self.given_baseline is not None or self.unit not in (None, TOK_S):
            return None
        return self.baseline

    def learned_rate(self) -> tuple[float | None, str]:
        """(baseline, unit) in the run's own unit, given or learned."""
        return self.baseline, self.unit or TOK_S

    def set_baseline(self, tokens_per_s: float | None) -> None:
        """A new reference in tokens/s (the dashboard's ``b`` key), at once.

        The next report is judged against it; None forgets the given one
        and learns again. A run measured in another unit keeps its own
        learned baseline (tokens/s say nothing about it/s).
        """
        v = tokens_per_s if tokens_per_s and tokens_per_s > 0 else None
        self.given_baseline = v
        if self.unit not in (None, TOK_S):
            return
        self.baseline = v
        self._learn = []
        self._learn_start = None
        self._rise = []
        self._rise_since = None
        self._low_since = self._high_since = None

    def fast_routes(self) -> dict[type[Event], Handler]:
        return {Progress: self._progress}

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
        self.restarts += 1
        # Every series starts anew: the relaunched run's step lines and bar
        # both count from the start again, and that is one relaunch.
        self._last_step = [None] * SERIES
        self._last_total = [None] * SERIES
        self._window.clear()
        self._sorted.clear()
        self._low_since = self._drop_start = self._high_since = None
        self._rise = []
        self._rise_since = None

    def _new_loop(self, p: Progress) -> list[Alert]:
        """Another loop's bar (prediction after training, the next stage): its
        rate says nothing of the training's, so what was learned is dropped
        (a given tokens/s baseline stays)."""
        self.baseline = self.given_baseline if self.unit == TOK_S else None
        self._learn = []
        self._learn_start = None
        if self.episode.active:
            return self.episode.resolve(
                p.time, "another loop's progress bar began: learning its rate anew", p.source,
                {"reason": "new loop", "total_steps": p.total_steps},
            )
        return []

    def _new_unit(self, unit: str, p: Progress) -> list[Alert]:
        """Another logger: what was learned in the old unit says nothing."""
        self.unit = unit
        self.baseline = self.given_baseline if unit == TOK_S else None
        self._learn = []
        self._learn_start = None
        self._stopped = True  # restarts at this report
        if self.episode.active:
            return self.episode.resolve(
                p.time,
                f"throughput is now reported in {unit}: learning a new baseline",
                p.source,
                {"reason": "unit changed", "unit": unit},
            )
        return []

    def _progress(self, p: Progress) -> list[Alert]:
        # rate_of(p), inline: this runs once per training step.
        v = p.rate
        if v is None:
            v, unit = p.tokens_per_s, TOK_S
        else:
            unit = p.rate_unit or TOK_S
        if v is None or not math.isfinite(v) or v < 0 or not p.clocked:
            # An unclocked line's time is an earlier line's: a "sustained"
            # drop cannot be timed on it.
            return []
        series = p.elapsed_s is not None  # ``series_of``, inline
        if self._dedupe.of[series].is_copy(p):
            return []
        out: list[Alert] = []
        c = self.config
        interval = self.interval
        gap_limit = self._gap_limit
        last_t = self._last_t
        if unit != self.unit:
            if self.unit is None:
                self.unit = unit
                if unit != TOK_S:
                    self.baseline = None
            else:
                # Another unit while the run's own reports keep coming is
                # another progress source (an eval bar in it/s beside tok/s
                # step lines): not this run's rate. After the run stopped or
                # went silent, it is a relaunch with another logger.
                gap = None if last_t is None else p.time + self._clock.offset - last_t
                running = not self._stopped and gap is not None and (gap_limit is None or gap < gap_limit)
                if running:
                    return []
                out = self._new_unit(unit, p)
        clock = self._clock
        t = p.time + clock.offset
        if clock.last is not None and t < clock.last:
            t = clock.at(p.time, interval or 0.0)  # jitter or a backward jump
        else:
            clock.last = t
        step = p.step
        last_step = self._last_step[series]
        back = step is not None and last_step is not None and step < last_step
        interleaved = False
        new_loop = False
        if back:  # within this series
            last_total = self._last_total[series]
            if last_total and p.total_steps is not None and p.total_steps != last_total:
                new_loop = True  # a bar of another length: another loop (predict after train), learned anew
            elif last_total and last_step + 1 >= last_total and step <= 1:  # type: ignore[operator]
                back = False  # the next epoch's bar (100/100, then 0/100): not a relaunch
            elif last_t is not None and t - last_t <= c.clock_jitter_s:
                # Ranks' lines interleaved by their stamps: a step's first
                # copy came just after the next step's. A relaunch takes seconds.
                back = False
                interleaved = True
        elif series and last_step is None and not self._bar_seen and step is not None:
            self._bar_seen = True
            if first_bar_is_new_loop(step, p.total_steps, self._last_step[0], self._last_total[0]):
                back = new_loop = True  # a loop after the step lines' (predict after train)
        silent = gap_limit is not None and last_t is not None and t - last_t >= gap_limit
        relaunched = self._stopped or back or silent
        if last_t is not None and t > last_t and not relaunched:
            self._add_interval(t - last_t)
        self._last_t = t
        if relaunched:
            self._restart(t)
            if new_loop:
                out += self._new_loop(p)
        if step is not None and not interleaved:
            self._last_step[series] = step
            self._last_total[series] = p.total_steps
        self._seen += 1
        if self._seen <= self._warm_n or t - self._start < c.throughput_warmup_s:  # type: ignore[operator]
            return out
        if self.baseline is None:
            if self._learn_start is None:
                self._learn_start = t
            if len(self._learn) < LEARN_MAX:
                self._learn.append(v)
            if t - self._learn_start >= c.throughput_learn_s and len(self._learn) >= 5:
                self.baseline = float(median(self._learn))
                self._learn = []
            return out

        w = self._window
        med = slide(w, self._sorted, t, v, c.throughput_smooth_s)  # (v is finite: checked above)
        self.smoothed = med
        base = self.baseline
        if self._rise_since is not None or med > self._rise_factor * base:
            self._track_rise(t, v, med, base)
            base = self.baseline
        if med < (1.0 - c.throughput_drop_frac) * base:
            self._high_since = None
            if self._low_since is None:
                self._low_since = t
                thr = (1.0 - c.throughput_drop_frac) * base
                self._drop_start = next((tt for tt, x in w if x < thr), t)
                self._worst = med
            elif med < self._worst:  # type: ignore[operator]
                self._worst = med
            if not self.episode.active and t - self._low_since >= c.throughput_sustain_s:
                return out + self._fire(p, med, t, base)
            return out
        self._low_since = None
        if not self.episode.active:
            return out
        if med >= c.throughput_recover_frac * base:
            if self._high_since is None:
                self._high_since = t
            if t - self._high_since >= c.throughput_recover_s:
                return out + self._resolve(p, med, t, base)
        else:
            self._high_since = None
        return out

    def _add_interval(self, dt: float) -> None:
        """One more report interval; the run's cadence is their median,
        re-read every few reports once it is known (it changes slowly)."""
        w = self._intervals
        w.append(dt)
        self._since_interval += 1
        if self.interval is not None and self._since_interval < INTERVAL_EVERY:
            return
        self._since_interval = 0
        interval = median(w)
        if interval != self.interval:
            self.interval = interval
            self._gap_limit, self._warm_n = cadence_budgets(self.config, interval)

    def quiet_steps(self, steps: Sequence[Progress], /) -> StepCommit | None:
        """Step lines taken in one go where they provably raise nothing
        (``throughput_quiet``); None while a rise is tracked, for a run whose
        smoothed rate could start a drop or a rise, and, with a drop open,
        for a run whose smoothed rate could come back over its threshold."""
        return throughput_quiet.quiet_run(self, steps)

    def _track_rise(self, t: float, v: float, med: float, base: float) -> None:
        """A learned baseline follows the run up to a faster steady phase."""
        if self.given_baseline is not None and self.unit == TOK_S:
            return
        if med <= self._rise_factor * base:
            self._rise_since = None
            self._rise = []
            return
        if self._rise_since is None:
            self._rise_since = t
        if len(self._rise) < LEARN_MAX:
            self._rise.append(v)
        if t - self._rise_since >= self.config.throughput_learn_s and len(self._rise) >= 5:
            self.baseline = float(median(self._rise))
            self._rise = []
            self._rise_since = None

    def _values(self, med: float, base: float, worst: float | None = None) -> dict[str, Any]:
        """Evidence numbers: tok/s keeps its contract keys, other units say theirs."""
        d: dict[str, Any]
        if self.unit in (None, TOK_S):
            d = {"tokens_per_s": med, "baseline_tokens_per_s": base}
            if worst is not None:
                d["worst_tokens_per_s"] = worst
        else:
            d = {"rate": med, "baseline_rate": base}
            if worst is not None:
                d["worst_rate"] = worst
        d["unit"] = self.unit or TOK_S
        return d

    def _fire(self, p: Progress, med: float, t: float, base: float) -> list[Alert]:
        unit = self.unit or TOK_S
        below = 1.0 - med / base
        since_t = self._drop_start if self._drop_start is not None else t
        since = self._clock.raw(since_t)
        source = "given" if self.given_baseline is not None and unit == TOK_S else "learned"
        self._episode_start = since_t
        msg = (
            f"throughput {fmt_rate(med, unit)} is {below:.0%} below baseline {fmt_rate(base, unit)} "
            f"since {fmt_clock(since, self.config.tz)} ({fmt_duration(t - since_t)})"
        )
        if p.step is not None:
            msg += f", at step {p.step}"
        evidence = self._values(med, base)
        evidence.update(
            {
                "baseline_source": source,
                "below_fraction": round(below, 4),
                "threshold_fraction": self.config.throughput_drop_frac,
                "since": since,
                "step": p.step,
                "interval_s": self.interval,
            }
        )
        return self.episode.fire(p.time, "warning", msg, p.source, evidence)

    def _resolve(self, p: Progress, med: float, t: float, base: float) -> list[Alert]:
        unit = self.unit or TOK_S
        started = self._episode_start if self._episode_start is not None else t
        msg = (
            f"throughput recovered to {fmt_rate(med, unit)} ({med / base:.0%} of baseline {fmt_rate(base, unit)}); "
            f"it had been down to {fmt_rate(self._worst or med, unit)} for about {fmt_duration(t - started)}"
        )
        return self.episode.resolve(p.time, msg, p.source, self._values(med, base, self._worst))
