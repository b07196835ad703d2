"""loss: the training signal itself is broken (CONTRACTS section 4).

Four kinds, one episode each (the rank is in the alert when known):

* ``nan`` (critical): a report whose loss or grad norm is NaN/Inf, or
  Megatron's ``number of nan iterations`` above zero, fires at once. HF's
  ``logging_nan_inf_filter`` logs a finite average (0.0 once the weights are
  NaN) while ``grad_norm`` is nan, so the grad norm alone fires. It resolves
  after ``loss_nan_resolve_reports`` clean reports in a row: one finite line
  after a NaN is often the filter's average, not a recovered run.
* ``spike``: a loss far above the recent robust level (median + k x MAD
  sigma over the last reports, at least a share and an amount above the
  median, so a flat loss with MAD ~ 0 does not fire on noise). Resolves once
  it is back under the level for a few reports.
* ``divergence``: the smoothed loss (median of the last few reports) stays
  a set share above its minimum of the last hour for minutes of data time.
  Resolves when it comes back under half that margin.
* ``overflow``: an fp16 loss-scaling storm: skipped steps on most of the
  last iterations (``Overflow`` lines, Megatron's per-interval ``number of
  skipped iterations``, DeepSpeed's cumulative ``skipped=``), or the scale
  fallen to its floor from above. One overflow every few hundred steps and
  the warm-up halvings at the start are normal.

Only the training loss counts: ``eval_loss`` never reaches ``Progress.loss``.
Spike and divergence follow one lane (lines without a rank, or the lowest
rank seen) so that ranks' different losses do not look like noise; NaN is
judged on every rank. A relaunch (``ProcessExit``) or a fatal traceback
(``Crash``: a log that holds a crashed run and its rerun, as HF and
DeepSpeed logs appended by a retry do) starts the levels again. Before
``loss_spike_min_reports`` reports there is no robust level: only a loss
``loss_spike_early_factor`` times the highest so far is a spike then.

Example: a steady loss, then grad_norm nan.

>>> det = LossDetector()
>>> for i in range(5):
...     _ = det.update(Progress(float(i), "log:%d" % i, step=i, loss=2.0, metrics=(("grad_norm", 1.0),)))
>>> [a.message for a in det.update(Progress(5.0, "log:5", step=1234, loss=2.0, metrics=(("grad_norm", float("nan")),)))]
['loss is NaN at step 1234 (grad_norm nan)']
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from math import isfinite
from typing import Any

from ..parsers.events import Crash, Event, Overflow, ProbeSample, ProcessExit, Progress
from .base import Alert, DetectorBase, Episode, Handler, Severity, StepCommit
from .config import DetectorConfig, fmt_duration
from .loss_metrics import figures_of
from .loss_robust import RobustWindow, ScaleWatch, SlidingMin, skip_ratio, within_margin
from .loss_steps import quiet_loss_steps
from .straggler_ranks import rank_of_source

NAME = "loss"


@dataclass(frozen=True, slots=True)
class LossState:
    """What the loss detector knows now, for the dashboard and metrics."""

    loss: float | None = None
    grad_norm: float | None = None
    loss_scale: float | None = None
    time: float | None = None
    nan_total: int = 0
    overflow_total: int = 0
    step: int | None = None
    level: float | None = None  # the robust median the spike is judged on
    smoothed: float | None = None
    recent_min: float | None = None
    skipped_ratio: float | None = None


# What a report's time, source, rank and step are read from.
_Line = Progress | ProbeSample


def _fmt(v: float) -> str:
    return f"{v:.4g}"


@dataclass(frozen=True, slots=True)
class _Above:
    """A spike's first report above its level, not yet confirmed
    (``loss_spike_confirm_reports``): what the alert tells when it is."""

    loss: float
    step: int | None
    source: str
    rank: int | None
    level: float
    median: float


class LossDetector(DetectorBase):
    name = NAME
    accepts = (Progress, ProbeSample, Overflow, ProcessExit, Crash)
    timed = False  # judged on reports; no report is a stall, not a loss alert

    def __init__(self, config: DetectorConfig | None = None) -> None:
        c = self.config = config or DetectorConfig()
        self.episodes = {k: Episode(NAME, kind=k) for k in ("nan", "spike", "divergence", "overflow")}
        self._nan = self.episodes["nan"]
        # The same episodes as fields: each report reads them (no dict lookup).
        self._spike = self.episodes["spike"]
        self._divergence = self.episodes["divergence"]
        self._overflow = self.episodes["overflow"]
        self._window = RobustWindow(c.loss_spike_window)
        self._smooth = RobustWindow(c.loss_smooth_reports)
        self._min = SlidingMin(c.loss_divergence_window_s)
        self._scale = ScaleWatch(c.loss_overflow_window, c.loss_overflow_scale_floor)
        self._lane: int | None = None
        self._clean = 0  # finite reports in a row (nan resolution)
        self._under = 0  # reports in a row under the spike level
        self._stuck = 0  # reports of an open spike above its level
        # A spike seen, not yet confirmed (``loss_spike_confirm_reports``):
        # its first report (loss, step, source, rank, level, median) and
        # how many reports in a row have been above the level.
        self._first_above: _Above | None = None
        self._above_in_row = 0
        self._level: float | None = None  # the spike level while a spike is open
        self._median: float | None = None
        self._smoothed: float | None = None
        self._above_since: float | None = None
        self._above_reports = 0
        self._diverge_ref: float | None = None  # the minimum a divergence is judged from
        self._diverge_critical = False  # the open divergence fired (or escalated to) critical
        # What ``state()`` shows, kept as plain fields: a report updates them
        # on every step, and the dashboard reads them once a second.
        self._loss: float | None = None
        self._grad: float | None = None
        self._loss_scale: float | None = None
        self._time: float | None = None
        self._step: int | None = None
        self._nan_total = 0
        self._recent_min: float | None = None
        self._overflow_total = 0
        # (skipped, iterations) of the skip ledger as the last counted report
        # left it: numbers, not the ledger (which goes on changing, and is
        # replaced on a relaunch); the ratio is worked out when ``state()`` asks.
        self._skips: tuple[int, int] | None = None

    # -- reading -------------------------------------------------------------

    def state(self) -> LossState:
        return LossState(
            loss=self._loss, grad_norm=self._grad, loss_scale=self._loss_scale, time=self._time,
            nan_total=self._nan_total, overflow_total=self._overflow_total, step=self._step,
            level=self._median, smoothed=self._smoothed, recent_min=self._recent_min,
            skipped_ratio=None if self._skips is None else skip_ratio(*self._skips),
        )

    def fast_routes(self) -> dict[type[Event], Handler]:
        return {Progress: self._on_progress}

    def quiet_steps(self, steps: Sequence[Progress], /) -> StepCommit | None:
        """A run of step lines at once where none can fire or resolve
        (``base.StepCommit``; the proof and the commit: ``loss_steps``)."""
        return quiet_loss_steps(self, steps)

    def update(self, event: Event) -> list[Alert]:
        if type(event) is Progress:
            return self._on_progress(event)
        if isinstance(event, ProbeSample):
            if event.loss is None and event.grad_norm is None and event.loss_scale is None:
                return []
            return self._on_report(event, event.loss, event.grad_norm, event.loss_scale, None, None, None)
        if isinstance(event, Overflow):
            return self._on_overflow(event)
        if isinstance(event, ProcessExit):
            return self._restart(event.time, event.source, f"the job exited ({event.kind})")
        if isinstance(event, Crash):
            return self._restart(event.time, event.source, f"the run crashed ({event.exc_type})")
        return []

    def _on_progress(self, event: Progress) -> list[Alert]:
        """A step line: the figures it carries in its metrics, read in place
        (no copy of the event). Once per training step. A run of them read
        at once (``quiet_steps``) is read by ``loss_reports`` with the same
        ``loss_metrics.figures_of``."""
        loss = event.loss
        metrics = event.metrics
        if not metrics:
            if loss is None:
                return []  # a bare rate line (tok/s, it/s): nothing of the loss
            return self._on_report(event, loss, None, None, None, None, None)
        grad, scale, nan_iters, skipped, skipped_total = figures_of(metrics)
        if loss is None and grad is None and nan_iters is None and scale is None and skipped is None \
                and skipped_total is None:
            return []
        return self._on_report(event, loss, grad, scale, nan_iters, skipped, skipped_total)

    # -- events --------------------------------------------------------------

    def _follows(self, t: float, source: str, rank: int | None, out: list[Alert]) -> bool:
        """Spike, divergence and overflow counting follow one lane: lines
        without a rank, or the lowest rank seen. A line with no rank in a
        per-rank file (``torchrun --redirects``) is its file's rank's. A
        lower rank than the one followed starts the levels again
        (``_new_lane``: its alerts go to ``out``)."""
        if rank is None:
            rank = rank_of_source(source)
            if rank is None:
                return True
        if self._lane is not None and rank < self._lane:
            out += self._new_lane(t, source, rank)
        if self._lane is None or rank < self._lane:
            self._lane = rank
        return rank == self._lane

    def _on_report(self, r: _Line, loss: float | None, grad: float | None, scale: float | None,
                   nan_iters: float | None, skipped: float | None, skipped_total: float | None) -> list[Alert]:
        """One loss-bearing report: ``r`` says when, where and which step;
        the figures are the ones it carries (a Progress line's come from its
        metrics)."""
        nan = ((loss is not None and not isfinite(loss)) or (grad is not None and not isfinite(grad))
               or (nan_iters is not None and nan_iters > 0))
        if nan:
            self._nan_total += 1
            out = self._judge_nan(r, loss, grad, nan_iters)
        elif loss is None and grad is None:
            out = []  # a line with only a scale or a counter says nothing about NaN
        else:
            self._clean += 1  # one more clean report in a row
            out = self._nan_resolved(r, loss) if self._nan.active else []
        if loss is not None:
            self._loss = loss
        if grad is not None:
            self._grad = grad
        if scale is not None:
            self._loss_scale = scale
        step = r.step
        if step is not None:
            self._step = step
        self._time = r.time
        if not self._follows(r.time, r.source, r.rank, out):
            return out
        # A NaN report's loss is no level: HF's filter logs 0.0 or an average there.
        if loss is not None and not nan:
            spike = self._judge_spike(r, loss)
            if spike:
                out += spike
            diverge = self._judge_divergence(r, loss)
            if diverge:
                out += diverge
        counted = self._count_iterations(r, skipped, skipped_total, scale)
        if counted:
            out += counted
        return out

    def _fire(self, kind: str, r_time: float, severity: Severity, message: str, source: str,
              rank: int | None, evidence: dict[str, Any]) -> list[Alert]:
        return self.episodes[kind].fire(r_time, severity, message, source, evidence, rank)

    # -- nan -----------------------------------------------------------------

    def _judge_nan(self, r: _Line, loss: float | None, grad: float | None, nan_iters: float | None) -> list[Alert]:
        """A NaN/Inf report: fires unless the episode is open already."""
        ep = self._nan
        self._clean = 0
        if ep.active:
            return []
        what = []
        if grad is not None and not math.isfinite(grad):
            what.append(f"grad_norm {grad}")
        if loss is not None and not math.isfinite(loss):
            what.append(f"loss {loss}")
        if nan_iters:
            what.append(f"{nan_iters:.0f} nan iterations")
        bad = "Inf" if loss is not None and math.isinf(loss) and (grad is None or math.isinf(grad)) else "NaN"
        where = f" at step {r.step}" if r.step is not None else ""
        who = f" on rank {r.rank}" if r.rank is not None else ""
        msg = f"loss is {bad}{where}{who} ({', '.join(what)})"
        return self._fire("nan", r.time, "critical", msg, r.source, r.rank,
                          {"loss": loss, "grad_norm": grad, "step": r.step, "nan_iterations": nan_iters})

    def _nan_resolved(self, r: _Line, loss: float | None) -> list[Alert]:
        """An open NaN episode after a clean report (one with a finite loss
        or grad norm, counted in ``_clean``): resolved once enough came in a row."""
        clean = self._clean
        if clean >= self.config.loss_nan_resolve_reports:
            return self._nan.resolve(r.time, f"loss finite again for {clean} reports (loss {_fmt(loss or 0.0)})",
                                     r.source, {"loss": loss, "reports": clean})
        return []

    # -- spike ---------------------------------------------------------------

    def _spike_floor(self, med: float) -> float:
        """The lowest a spike level can be over a median ``med``: at least a
        share and an amount above it (a flat loss with MAD ~ 0 does not fire
        on noise). The MAD can only raise the level above this."""
        c = self.config
        return med + max(c.loss_spike_min_rel * abs(med), c.loss_spike_min_abs)

    def _spike_level(self, loss: float) -> float | None:
        """The level ``loss`` is judged against. The MAD is a pass over the
        window: it is worked out only for a loss above the level's floor
        (below it, the loss is under any level the MAD could make)."""
        c = self.config
        window = self._window
        if len(window) < c.loss_spike_min_reports:
            # Too few reports for a robust level: only a jump far above
            # everything seen so far counts (a loss that starts at 0.0, as
            # HF's NaN filter logs it, gives no level at all).
            highest = window.highest() if len(window) else 0.0
            if highest <= 0.0:
                return None
            return max(c.loss_spike_early_factor * highest, highest + c.loss_spike_min_abs)
        med = window.median()
        self._median = med
        floor = self._spike_floor(med)
        if loss <= floor:
            return floor
        return max(floor, med + c.loss_spike_k * self._window.sigma())

    def _judge_spike(self, r: _Line, loss: float) -> list[Alert]:
        ep = self._spike
        if not ep.active:
            # The usual report: at or under the level's floor (which the
            # MAD can only raise), so no spike whatever the MAD says; it
            # joins the window. Anything else takes the full judgement.
            window = self._window
            # ``len(window.values)``, not ``len(window)``: no Python-level
            # ``__len__`` on the path of every report.
            c = self.config
            if len(window.values) >= c.loss_spike_min_reports:
                med = self._median = window.median()
                # ``_spike_floor(med)``, inline: once per report.
                # (the operands in ``max``'s order: the same value, NaN included)
                rise, least = c.loss_spike_min_rel * abs(med), c.loss_spike_min_abs
                if loss <= med + (least if least > rise else rise):
                    if self._above_in_row:
                        told = self._back_under(r, loss)
                        if told:
                            return told
                    window.add(loss)
                    return []
        level = self._level if ep.active else self._spike_level(loss)
        out: list[Alert] = []
        if ep.active and level is not None:
            if loss < level:
                self._under += 1
                if self._under >= self.config.loss_spike_resolve_reports:
                    out = self._spike_over(r, loss, level)
            else:
                self._under = 0
                self._stuck += 1
                if self._stuck >= self.config.loss_spike_window:
                    # Not a spike any more: a new level (divergence judges a
                    # sustained rise). Learn the level again from here.
                    self._level = None
                    self._window.clear()
                    out = ep.resolve(r.time, f"loss stayed up at {_fmt(loss)} for {self._stuck} reports: "
                                     "a new level, no longer a spike", r.source, {"loss": loss, "level": level})
        elif level is not None and loss > level:
            med = self._median if self._median is not None else self._window.median()
            first = self._first_above
            if first is None:
                first = self._first_above = _Above(loss, r.step, r.source, r.rank, level, med)
            self._above_in_row += 1
            if self._above_in_row >= self.config.loss_spike_confirm_reports or loss - med >= 3 * (level - med):
                out = self._fire_spike(r.time, first)
        elif self._above_in_row:
            out = self._back_under(r, loss)
        # A spike's own values stay out of the level it is judged against.
        if not self._spike.active and (level is None or loss <= level):
            self._window.add(loss)
        return out

    def _back_under(self, r: _Line, loss: float) -> list[Alert]:
        """The report after one above the level, back under it. Where that
        one was a single step's loss (the next step's report follows it) it
        was an outlier, no spike. Where it was a report of many steps
        (Megatron's every 10 iterations, HF's averages) or of no known
        step, so far up is a spike, fired now, told from it; this report is
        the first back under its level."""
        first = self._first_above
        self._first_above, self._above_in_row = None, 0
        if first is None or (first.step is not None and r.step is not None and r.step - first.step == 1):
            return []
        out = self._fire_spike(r.time, first)
        self._under = 1
        if self._under >= self.config.loss_spike_resolve_reports:
            out += self._spike_over(r, loss, first.level)
        return out

    def _spike_over(self, r: _Line, loss: float, level: float) -> list[Alert]:
        """The open spike resolved: ``loss_spike_resolve_reports`` reports back under ``level``."""
        self._level = None
        return self._spike.resolve(r.time, f"loss back under its level: {_fmt(loss)} < {_fmt(level)}", r.source,
                                   {"loss": loss, "level": level})

    def _fire_spike(self, t: float, first: _Above) -> list[Alert]:
        """The spike confirmed at ``t``, told by its first report (where it began)."""
        loss, step, source, rank, level, med = first.loss, first.step, first.source, first.rank, first.level, first.median
        self._first_above, self._above_in_row = None, 0
        self._level, self._under, self._stuck = level, 0, 0
        where = f" at step {step}" if step is not None else ""
        return self._fire("spike", t, "warning",
                          f"loss spiked to {_fmt(loss)}{where}, {loss / med:.1f}x its recent median {_fmt(med)}"
                          if med > 0 else f"loss spiked to {_fmt(loss)}{where} (recent median {_fmt(med)})",
                          source, rank, {"loss": loss, "median": med, "level": level, "step": step})

    # -- divergence ----------------------------------------------------------

    def _judge_divergence(self, r: _Line, loss: float) -> list[Alert]:
        c = self.config
        smooth = self._smooth
        smooth.add(loss)
        if len(smooth.values) < c.loss_smooth_reports:
            return []
        smoothed = smooth.median()
        self._smoothed = smoothed
        ep = self._divergence
        if ep.active and self._diverge_ref is not None:
            ref = self._diverge_ref
            self._recent_min = ref
            if smoothed <= ref + 0.5 * c.loss_divergence_margin * abs(ref):
                self._diverge_ref = None
                self._min.add(r.time, smoothed)
                return ep.resolve(r.time, f"smoothed loss came back down to {_fmt(smoothed)} (minimum {_fmt(ref)})",
                                  r.source, {"smoothed": smoothed, "minimum": ref})
            if self._diverge_critical or not self._lost(smoothed, ref):
                return []
            lasted = r.time - (self._above_since if self._above_since is not None else r.time)
            out = ep.resolve(r.time, f"escalated: smoothed loss {_fmt(smoothed)} is {smoothed / ref:.0f}x its "
                             f"minimum {_fmt(ref)}", r.source, {"smoothed": smoothed, "minimum": ref})
            return out + self._fire_divergence(r, smoothed, ref, lasted)
        ref_min = self._min.min()
        self._min.add(r.time, smoothed)
        self._recent_min = ref_min
        if ref_min is None or within_margin(smoothed, ref_min, c.loss_divergence_margin):
            self._above_since, self._above_reports = None, 0
            return []
        if self._above_since is None:
            self._above_since = r.time
        self._above_reports += 1
        lasted = r.time - self._above_since
        if lasted < c.loss_divergence_s or self._above_reports < c.loss_divergence_min_reports:
            return []
        self._diverge_ref = ref_min
        return self._fire_divergence(r, smoothed, ref_min, lasted)

    def _lost(self, smoothed: float, ref: float) -> bool:
        """Far enough above its minimum to be critical (``loss_divergence_critical_factor``)."""
        return ref > 0 and smoothed >= self.config.loss_divergence_critical_factor * ref

    def _fire_divergence(self, r: _Line, smoothed: float, ref: float, lasted: float) -> list[Alert]:
        """The divergence episode fired: a warning, or critical when the loss is that far up."""
        rise = (smoothed / ref - 1.0) * 100 if ref > 0 else float("nan")
        pct = f" (+{rise:.0f}%)" if math.isfinite(rise) else ""
        lost = self._diverge_critical = self._lost(smoothed, ref)
        what = (f"loss diverged: smoothed {_fmt(smoothed)} is {smoothed / ref:.0f}x its recent minimum {_fmt(ref)}"
                if lost else f"loss diverging: smoothed {_fmt(smoothed)} vs recent minimum {_fmt(ref)}{pct}")
        return self._fire("divergence", r.time, "critical" if lost else "warning",
                          f"{what} for {fmt_duration(lasted)}", r.source, r.rank,
                          {"smoothed": smoothed, "minimum": ref, "seconds": lasted, "step": r.step})

    # -- overflow ------------------------------------------------------------

    def _on_overflow(self, o: Overflow) -> list[Alert]:
        out: list[Alert] = []
        if not self._follows(o.time, o.source, o.rank, out):
            return out
        self._scale.overflow(o.scale, o.new_scale)
        self._overflow_total = self._scale.total
        if self._scale.scale is not None:
            self._loss_scale = self._scale.scale
        return out + self._judge_overflow(o.time, o.source, o.rank)

    def _count_iterations(self, r: _Line, skipped: float | None, skipped_total: float | None,
                          scale: float | None) -> list[Alert]:
        sw = self._scale
        if not sw.report(r.step, skipped, skipped_total, scale):
            return []  # another copy of the same step
        self._overflow_total = sw.total
        led = sw.ledger
        self._skips = (led.skipped, led.iterations)
        if not sw.may_storm(self.config.loss_overflow_frac) and not self._overflow.active:
            return []  # no storm can start (``ScaleWatch.may_storm``) and none is open
        return self._judge_overflow(r.time, r.source, r.rank)

    def _judge_overflow(self, t: float, source: str, rank: int | None) -> list[Alert]:
        """A storm: most of the window skipped, or the scale fallen to its floor."""
        c = self.config
        ep = self.episodes["overflow"]
        sw = self._scale
        led = sw.ledger
        at_floor = sw.at_floor()
        storm = sw.storm(c.loss_overflow_frac)
        if not ep.active and not (storm or at_floor):
            return []
        evidence = {"skipped": led.skipped, "iterations": led.iterations, "loss_scale": sw.scale,
                    "scale_max": sw.scale_max}
        if not ep.active and (storm or at_floor):
            why = (f"{led.skipped} of the last {led.iterations} steps skipped" if storm
                   else f"loss scale fell to {_fmt(sw.scale or 0.0)} (from {_fmt(sw.scale_max or 0.0)})")
            return self._fire("overflow", t, "warning", f"fp16 overflow storm: {why}", source, rank, evidence)
        if ep.active and not at_floor and led.full() and led.ratio() < 0.5 * c.loss_overflow_frac:
            return ep.resolve(t, f"overflows rare again: {led.skipped} of the last {led.iterations} steps skipped",
                              source, evidence)
        return []

    # -- relaunch ------------------------------------------------------------

    def _new_lane(self, t: float, source: str, rank: int) -> list[Alert]:
        """A lower rank than the one followed reports (its file read after
        another rank's, its first line late): its loss is followed from
        here, from no level. Another rank's losses are no history of its
        own (ranks' losses differ: a false spike or divergence)."""
        return self._restart(t, source, f"rank {rank} reports: its loss is followed from here")

    def _restart(self, t: float, source: str, why: str) -> list[Alert]:
        """The run's levels end with it: a relaunch starts its loss again."""
        out: list[Alert] = []
        for kind in ("spike", "divergence", "overflow"):
            out += self.episodes[kind].resolve(t, f"{why}; loss levels start again", source)
        self._window.clear()
        self._smooth.clear()
        self._min.clear()
        self._scale = ScaleWatch(self.config.loss_overflow_window, self.config.loss_overflow_scale_floor)
        self._level = self._median = self._smoothed = self._diverge_ref = self._above_since = None
        self._above_reports = self._under = self._stuck = self._above_in_row = 0
        self._first_above = None
        return out
