"""Step lines the ``loss`` detector takes in one go (issue 20, ``base.StepCommit``).

A run of step lines is quiet for ``loss`` when, fed one at a time, none of
them would fire or resolve: no NaN/Inf figure (``loss_reports``), no
episode open, every loss of the followed lane at or under its spike
level's floor, the smoothed loss never above its divergence margin, nothing
skipped and the loss scale above its floor. The detector is never timed
(``deadline()`` is always None): only alerts and state are at stake.

The proof is a few bounds, each a look at the highest figure of the run
(``_under_spike_floor``, ``_under_margin``), not a judgement per report;
where the margin's bound cannot clear a noisy loss, its smoothed values
are judged one by one on a copy of the sliding minimum (``_walk_margin``:
a rise above the margin that cannot fire yet is quiet too).
The commit then leaves the state exactly as the reports one at a time:

* a few reports of the lane among many (a multi-rank log, one lane) go
  through the detector's own judges (``_Replay``), as they would have;
* many (a one-rank log) are taken in bulk (``_Plan``): the spike window
  sorted once, the smoothed losses worked out in one loop, the sliding
  minimum and the skip ledger from what stays in them (``_slide``,
  ``_Plan._commit_counted``).

Nothing changes on the ask: the commit writes it all.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, repeat
from math import isfinite
from operator import sub
from typing import TYPE_CHECKING

from ..parsers.events import Progress
from ..parsers.native import KERNELS
from ..parsers.step_columns import columns_of, read
from .base import StepCommit
from .loss_reports import Extra, Reports, follow_lane, read_nan_reports, read_reports
from .loss_robust import within_margin
from .straggler_ranks import ranks_with_sources

if TYPE_CHECKING:
    from .loss import LossDetector

# Up to this many reports of the lane in a run go through the detector's
# own judges at the commit (fewer passes than the bulk); more, in bulk.
REPLAYED = 4
_STEPS = columns_of("step")  # ``_count``'s column


def quiet_loss_steps(det: LossDetector, steps: Sequence[Progress]) -> StepCommit | None:
    """``LossDetector.quiet_steps``: the commit of a provably quiet run, or None."""
    if det._nan.active:
        return _still_nan(det, steps)
    if det._spike.active or det._divergence.active or det._overflow.active or det._above_in_row:
        return None  # (a spike open or one seen, not yet confirmed: report by report)
    reports = read_reports(steps)
    if reports is None:
        return None
    if not reports.events:
        return _unchanged
    lane_of = _lane_of(det, reports)
    if lane_of is None:
        return None
    lane, lane_events, lane_losses, lane_extras = lane_of
    if not lane_events:
        return _Replay(det, reports, lane, [], [], None).commit
    # The losses spike and divergence judge (none on a line with only a
    # grad norm, a scale or a counter) and their times.
    judged: list[float] = []
    times: list[float] = []
    if reports.full:
        judged = lane_losses  # type: ignore[assignment]
    else:
        for e, loss in zip(lane_events, lane_losses):
            if loss is not None:
                judged.append(loss)
                times.append(e.time)
    if (judged and not _under_spike_floor(det, judged)) or not _may_count(det):
        return None
    if judged and reports.full:
        times = reports.times if lane_events is reports.events and reports.times is not None else [
            e.time for e in lane_events]
    if len(lane_events) <= REPLAYED:
        if judged:
            s, smoothed, first = _smoothed(det, judged)
            if not _under_margin(det, smoothed) and _walk_margin(det, s, smoothed, times[first:]) is None:
                return None
        if lane_extras is not None and _count(det, lane_events, lane_extras) is None:
            return None
        return _Replay(det, reports, lane, lane_events, lane_losses, lane_extras).commit
    divergence = None
    if judged:
        s, smoothed, first = _smoothed(det, judged)
        if not smoothed or (KERNELS is None and _under_margin(det, smoothed)):
            divergence = _slide(det, s, smoothed, times[first:])  # (none: the window still filling)
        else:
            # Some may be above: judged one by one (refused only where one
            # fires). Where the walk is in C (``margin_walk``) it is also the
            # cheaper way to the sliding minimum of a run all under it: the
            # same state as ``_slide``'s, add by add.
            divergence = _walk_margin(det, s, smoothed, times[first:])
        if divergence is None:
            return None
    counted = _count(det, lane_events, lane_extras)
    if counted is None:
        return None
    return _Plan(det, reports, lane, judged, divergence, counted).commit


def _still_nan(det: LossDetector, steps: Sequence[Progress]) -> StepCommit | None:
    """A run with the NaN episode open in which every report is NaN/Inf
    again (a run that goes on for hours after its weights went bad): none
    can fire (the episode is open) nor resolve it (no clean report), nor
    judge a spike or a divergence (a NaN report's loss is no level). Each
    only counts and, on the followed lane, counts its iterations, which
    must not judge an overflow (``_may_count``, none open)."""
    if det._overflow.active or not _may_count(det):
        return None
    reports = read_nan_reports(steps)
    if reports is None:
        return None
    if not reports.events:
        return _unchanged
    lane_of = _lane_of(det, reports)
    if lane_of is None:
        return None
    lane, lane_events, _, lane_extras = lane_of
    counted = _count(det, lane_events, lane_extras) if lane_events else _Counted([], None, None, [])
    if counted is None:
        return None
    return _NanRun(det, reports, lane, counted).commit


_SOURCES = columns_of("source")  # (``_lane_of``: the files of lines without a rank)

def _lane_of(
    det: LossDetector, reports: Reports
) -> tuple[int | None, Sequence[Progress], list[float | None], list[Extra] | None] | None:
    """The lane after the run's reports, and the reports that follow it
    (``LossDetector._follows``): their events, losses and extras. None
    where the lane moves to a lower rank once followed: its levels start
    again there (``LossDetector._new_lane``), one report at a time."""
    events = reports.events
    ranks = reports.ranks
    if ranks is None:
        ranks = [e.rank for e in events]
    if None in ranks:  # lines without a rank: their file's, where it names one (``_on_report``)
        ranks = ranks_with_sources(ranks, read(events, _SOURCES)[0])
    lane, follow = follow_lane(det._lane, ranks)
    first = det._lane
    if first is None and lane is not None:  # (the lane the run's first ranked report sets)
        first = next(r for r in ranks if r is not None)
    if lane != first:
        return None
    losses, extras = reports.losses, reports.extras
    if follow is None:
        return lane, events, losses, extras
    return (lane, [events[i] for i in follow], [losses[i] for i in follow],
            None if extras is None else [extras[i] for i in follow])


def _unchanged() -> None:
    """The commit of a run with no report in it (bare rate lines)."""


# -- the proof ---------------------------------------------------------------

def _under_spike_floor(det: LossDetector, losses: list[float]) -> bool:
    """Every loss at or under the spike level it would be judged against
    (``_judge_spike``'s quiet branch), so each joins the window.

    While the window has fewer than ``loss_spike_min_reports`` values, a
    loss is judged against ``highest``, the window's highest (nothing leaves
    it then, so that only rises: after the first loss it is at least
    ``max(highest of now, first loss)``). After, against the floor over the
    window's median: each window is then a part of the window of now with
    the run's losses, of at least ``need`` values, so its median is at least
    ``low``, the ``k``-th smallest of both together (``k`` the lower middle
    of the smallest window judged). Both levels rise with a positive
    figure, each float step rounding monotonically: one look at the highest
    loss of each part settles every report. The first look is at the level
    over the least value of both, which ``low`` is at least: most runs are
    under it, with no sort of the window and the run for ``low``."""
    c = det.config
    window = det._window
    s = window._sorted
    n = len(s)
    least_loss = min(losses)
    if not (least_loss > 0.0 and (n == 0 or s[0] > 0.0)):
        return False  # signed zeros (order in the sorted window) and medians not positive
    need = c.loss_spike_min_reports
    early = need - n
    if early > 0:
        if need > (window.values.maxlen or 1):
            return False  # the window drops values before it is judged on its median
        factor, least = c.loss_spike_early_factor, c.loss_spike_min_abs
        first = losses[0]
        if n:
            highest = s[-1]
            if first > max(factor * highest, highest + least):
                return False
            highest = highest if highest > first else first
        else:
            highest = first  # no level for the first loss of an empty window
        rest = losses[1:early]
        if rest and max(rest) > max(factor * highest, highest + least):
            return False
        judged = losses[early:]
        if not judged:
            return True
    else:
        judged = losses
    top = max(judged)
    least = c.loss_spike_min_abs
    # ``low`` (below) is one of the values, so at least the least of them:
    # a top within the level over that is within the level over ``low``
    # (the level rises with its base, each float step rounding monotonically).
    lowest = s[0] if n and s[0] < least_loss else least_loss
    rise = c.loss_spike_min_rel * abs(lowest)
    if top <= lowest + (least if least > rise else rise):
        return True
    k = (max(n, need) - 1) // 2
    m = len(losses)
    if n > k and least_loss >= s[k]:
        low = s[k]
    elif n > k >= m:
        # A few losses, one under it: at most ``m`` of them come before
        # the ``k``-th, and it is no lower than the least of them.
        low = max(least_loss, s[k - m])
    else:
        low = sorted([*s[:k + 1], *losses])[k]
    rise = c.loss_spike_min_rel * abs(low)
    return top <= low + (least if least > rise else rise)


def _under_margin(det: LossDetector, smoothed: list[float]) -> bool:
    """Every smoothed loss at or under its margin over the minimum it is
    judged against (``_judge_divergence``'s quiet branch). Each minimum is
    one of the deque's values of now (its front the least) or a smoothed
    loss of the run, so at least ``low``, the least of them; the margin
    rises with a positive minimum: one look at the highest settles it."""
    if not smoothed:
        return True
    low = min(smoothed)
    points = det._min._points
    if points and points[0][1] < low:
        low = points[0][1]
    return low > 0.0 and within_margin(max(smoothed), low, det.config.loss_divergence_margin)


def _may_count(det: LossDetector) -> bool:
    """No overflow judgement can run on the run's reports (``may_storm``):
    nothing skipped in the window nor pending, the scale not fallen. A run
    has no ``Overflow`` line, so its reports add nothing pending."""
    sw = det._scale
    return not (sw.fell or sw.ledger.skipped > 0 or sw._pending or det.config.loss_overflow_frac <= 0.0)


# -- smoothing and the sliding minimum --------------------------------------------

@dataclass(slots=True)
class _DivergenceRun:
    """The smoothed losses of the run, worked out exactly, and the sliding
    minimum as they leave it: the deque's kept part ``[lo, hi)`` and the new
    points after it."""

    smooth_sorted: list[float]
    smoothed: float | None  # None: the window still filling, nothing judged
    recent_min: float | None
    lo: int
    hi: int
    new: list[tuple[float, float]]
    above_since: float | None = None  # what the run leaves of a rise above the margin
    above_reports: int = 0


def _smoothed(det: LossDetector, losses: list[float]) -> tuple[list[float], list[float], int]:
    """The smooth window's sorted values after ``losses``, the smoothed
    losses (the window's median after each) and the index of the first
    loss that has one: the ones before only fill the window."""
    window = det._smooth
    held = window.values
    size = held.maxlen or 1
    s = window._sorted.copy()
    out: list[float] = []
    first = size - 1 - len(held)  # the loss that fills the window: nothing leaves
    mid = size // 2
    if first >= 0:
        for loss in losses[:first + 1]:
            insort(s, loss)
        if first >= len(losses):
            return s, out, first
        out.append(s[mid] if size % 2 else 0.5 * (s[mid - 1] + s[mid]))
        gone = 0  # ``held[0]`` leaves at the next loss
        start = first + 1
    else:
        gone = start = 0
    leaving = [*held, *losses][gone:]
    if KERNELS is not None and len(s) == size:
        # The loop below in C (``parsers.native``); it refuses (ValueError,
        # ``s`` untouched) a value that is not a finite float.
        try:
            out += KERNELS.slide_median(s, leaving, losses[start:], size % 2 == 1)
            return s, out, max(first, 0)
        except ValueError:
            pass
    add = out.append
    # ``remove`` drops the first value equal to the one leaving: the one
    # ``RobustWindow.add`` drops (``bisect_left``), signed zeros alike.
    remove = s.remove
    if size % 2:
        for old, loss in zip(leaving, losses[start:]):
            remove(old)
            insort(s, loss)
            add(s[mid])
    else:
        below = mid - 1
        for old, loss in zip(leaving, losses[start:]):
            remove(old)
            insort(s, loss)
            add(0.5 * (s[below] + s[mid]))
    return s, out, max(first, 0)


def _slide(det: LossDetector, s: list[float], smoothed: list[float], times: list[float]) -> _DivergenceRun | None:
    """The sliding minimum after adding ``(times[j], smoothed[j])`` in turn.

    Before the last add, the deque is what a monotonic deque keeps of all
    its points: those under every later value (the old ones under the least
    new one, and the new ones under every later new one), less the front
    ones older than the span before the latest add. This holds when that
    add is the latest of the run (each earlier add dropped only points
    older than the span before it, so before this one); else None. The
    minimum it had (``_recent_min``) is its front, then the last add is
    made as ``SlidingMin.add`` makes it, on the deque in place
    (``points[lo:hi] + new[gone:]``)."""
    points = det._min._points
    span = det._min.span_s
    n = len(smoothed)
    lo, hi = 0, len(points)
    if not n:
        return _DivergenceRun(s, None, None, lo, hi, [])  # the window still filling
    new: list[tuple[float, float]] = []
    gone = 0
    if n > 1:
        latest = times[n - 2]
        if max(times[:n - 1]) > latest:
            return None  # out of order: the drops depend on when each add came
        keep: list[int] = []
        least = float("inf")
        for j in range(n - 2, -1, -1):
            v = smoothed[j]
            if v < least:
                keep.append(j)
                least = v
        while hi and points[hi - 1][1] >= least:
            hi -= 1
        new = [(times[j], smoothed[j]) for j in reversed(keep)]
        cut = latest - span
        while lo < hi and points[lo][0] < cut:
            lo += 1
        if lo >= hi:
            while gone < len(new) and new[gone][0] < cut:
                gone += 1
    if hi > lo:
        ref: float | None = points[lo][1]
    elif len(new) > gone:
        ref = new[gone][1]
    else:
        ref = None
    t, value = times[-1], smoothed[-1]
    while len(new) > gone and new[-1][1] >= value:
        new.pop()
    if len(new) == gone:
        while hi > lo and points[hi - 1][1] >= value:
            hi -= 1
    new.append((t, value))
    cut = t - span
    while hi > lo and points[lo][0] < cut:
        lo += 1
    if hi <= lo:
        while new[gone][0] < cut:
            gone += 1
    return _DivergenceRun(s, value, ref, lo, hi, new[gone:])


def _walk_margin(det: LossDetector, s: list[float], smoothed: list[float],
                 times: list[float]) -> _DivergenceRun | None:
    """The run's smoothed losses judged one by one (``_judge_divergence``
    with no episode open) on a copy of the sliding minimum, where the one
    look of ``_under_margin`` cannot clear them all: a noisy loss whose
    smoothed value now and then goes above the margin for less than it
    takes to fire (a few reports, seconds) only starts and resets a rise.
    None where one would fire."""
    c = det.config
    margin = c.loss_divergence_margin
    lasts, least = c.loss_divergence_s, c.loss_divergence_min_reports
    if KERNELS is not None:
        # The walk below in C (``parsers.native``) where every time and
        # value is a float; the same answer.
        walked = KERNELS.margin_walk(list(det._min._points), times, smoothed, det._min.span_s, margin, lasts, least,
                                     det._above_since, det._above_reports)
        if walked is None:
            return None  # it fires
        if walked is not NotImplemented:
            ref_c, points_c, since_c, count_c = walked
            return _DivergenceRun(s, smoothed[-1], ref_c, 0, 0, points_c, since_c, count_c)
    # A copy of the minimum's deque, each add made as ``SlidingMin.add``
    # makes it, on the deque itself (no call per report).
    span = det._min.span_s
    points = det._min.copy()._points
    pop, popleft, append = points.pop, points.popleft, points.append
    since, count = det._above_since, det._above_reports
    ref: float | None = None
    for t, v in zip(times, smoothed):
        ref = points[0][1] if points else None  # ``SlidingMin.min``
        while points and points[-1][1] >= v:
            pop()
        append((t, v))
        cut = t - span
        while points and points[0][0] < cut:
            popleft()
        if ref is None or within_margin(v, ref, margin):
            since, count = None, 0
            continue
        if since is None:
            since = t
        count += 1
        if not (t - since < lasts or count < least):
            return None  # it fires
    return _DivergenceRun(s, smoothed[-1], ref, 0, 0, list(points), since, count)


# -- the skip ledger -----------------------------------------------------------

@dataclass(slots=True)
class _Counted:
    """The skip ledger's iterations of the run (nothing skipped in it) and
    what the scale watch keeps of it."""

    iterations: list[int]
    last_step: int | None
    last_skipped_total: float | None
    scales: list[float]


def _count(det: LossDetector, events: Sequence[Progress], extras: list[Extra] | None) -> _Counted | None:
    """``ScaleWatch.report`` of each report of the lane (``_may_count``
    holds), None where one skips a step or the scale falls to its floor."""
    sw = det._scale
    last = sw._last_step
    if extras is None and last is not None:
        # Each step against the one before: a copy of it is not counted
        # (one at a time below), a step back counts one iteration.
        steps = read(events, _STEPS)[0]
        try:
            diffs: list[int] = list(map(sub, steps, [last, *steps[:-1]]))
        except TypeError:
            diffs = [0]  # a line without a step: one at a time below
        if 0 not in diffs:
            if min(diffs) < 0:  # (most runs only go up: no new list)
                diffs = [d if d > 0 else 1 for d in diffs]
            return _Counted(diffs, steps[-1], sw._last_skipped_total, [])
    iterations: list[int] = []
    total = sw._last_skipped_total
    scales: list[float] = []
    floor = sw.floor
    for i, e in enumerate(events):
        step = e.step
        if step is not None and last is not None and step == last:
            continue  # another copy of the same step: not counted
        iterations.append(step - last if step is not None and last is not None and step > last else 1)
        if step is not None:
            last = step
        if extras is None:
            continue
        scale, skipped, skipped_total = extras[i]
        if skipped is not None:
            if not isfinite(skipped) or int(skipped):
                return None
        elif skipped_total is not None:
            if not isfinite(skipped_total):
                return None
            prev, total = total, skipped_total
            if prev is not None and skipped_total >= prev and int(skipped_total - prev):
                return None
        if scale is not None:
            if not scale > floor:
                return None  # at the floor (or NaN): judged report by report
            scales.append(scale)
    return _Counted(iterations, last, total, scales)


# -- the commit ----------------------------------------------------------------

def _commit_reports(det: LossDetector, reports: Reports, lane: int | None) -> None:
    """What every report sets, as the last of the run left it."""
    det._clean += reports.clean
    losses = reports.losses
    loss = losses[-1] if reports.full else _last(losses)
    if loss is not None:
        det._loss = loss
    if reports.grad is not None:
        det._grad = reports.grad
    extras = reports.extras
    if extras is not None:
        scale = _last([x[0] for x in extras])
        if scale is not None:
            det._loss_scale = scale
    events = reports.events
    for e in reversed(events):
        if e.step is not None:
            det._step = e.step
            break
    det._time = events[-1].time
    det._lane = lane


def _last(values: Sequence[float | None]) -> float | None:
    """The last figure that is not None (the one the per-report path keeps)."""
    for v in reversed(values):
        if v is not None:
            return v
    return None


@dataclass(slots=True)
class _Replay:
    """A few reports of the lane: judged by the detector's own code, in
    order (it reads and writes only the lane's state, so the other reports
    between them need not be)."""

    det: LossDetector
    reports: Reports
    lane: int | None
    events: list[Progress] | Sequence[Progress]
    losses: list[float | None]
    extras: list[Extra] | None

    def commit(self) -> None:
        det, losses, extras = self.det, self.losses, self.extras
        _commit_reports(det, self.reports, self.lane)
        for i, e in enumerate(self.events):
            loss = losses[i]
            if loss is not None:
                det._judge_spike(e, loss)
                det._judge_divergence(e, loss)
            if extras is None:
                det._count_iterations(e, None, None, None)
            else:
                scale, skipped, skipped_total = extras[i]
                det._count_iterations(e, skipped, skipped_total, scale)


@dataclass(slots=True)
class _Plan:
    """Many reports of the lane, taken in bulk."""

    det: LossDetector
    reports: Reports
    lane: int | None
    lane_losses: list[float]
    divergence: _DivergenceRun | None
    counted: _Counted

    def commit(self) -> None:
        _commit_reports(self.det, self.reports, self.lane)
        if self.lane_losses:
            self._commit_spike()
        if self.divergence is not None:
            self._commit_divergence(self.divergence)
        if self.counted.iterations:
            self._commit_counted(self.counted)

    def _commit_spike(self) -> None:
        """The spike window after the lane's losses, each added in turn; the
        median kept is the one the last loss was judged on."""
        losses = self.lane_losses
        window = self.det._window
        held = window.values
        size = held.maxlen or 1
        if len(losses) > 8:  # sorted once, not kept sorted through each
            before = [*held, *losses[:-1]][-size:]
            window._sorted = s = sorted(before)
            held.clear()
            held.extend(before)
        else:
            s = window._sorted
            for loss in losses[:-1]:
                if len(held) == size:
                    del s[bisect_left(s, held[0])]
                held.append(loss)
                insort(s, loss)
        n = len(s)
        if n >= self.det.config.loss_spike_min_reports:  # judged on its median (else: the early test)
            mid = n // 2
            self.det._median = s[mid] if n % 2 else 0.5 * (s[mid - 1] + s[mid])
        if n == size:
            del s[bisect_left(s, held[0])]
        held.append(losses[-1])
        insort(s, losses[-1])

    def _commit_divergence(self, run: _DivergenceRun) -> None:
        det = self.det
        det._smooth.values.extend(self.lane_losses)
        det._smooth._sorted = run.smooth_sorted
        if run.smoothed is None:
            return  # nothing judged: the minimum and the margin untouched
        det._smoothed = run.smoothed
        det._recent_min = run.recent_min
        det._above_since, det._above_reports = run.above_since, run.above_reports
        points = det._min._points
        for _ in range(len(points) - run.hi):
            points.pop()
        for _ in range(run.lo):
            points.popleft()
        points.extend(run.new)

    def _commit_counted(self, counted: _Counted) -> None:
        _commit_counted(self.det, counted)


@dataclass(slots=True)
class _NanRun:
    """A run of NaN reports with the episode open (``_still_nan``)."""

    det: LossDetector
    reports: Reports
    lane: int | None
    counted: _Counted

    def commit(self) -> None:
        det = self.det
        _commit_reports(det, self.reports, self.lane)
        det._clean = 0  # (``_judge_nan`` of each)
        det._nan_total += len(self.reports.events)
        if self.counted.iterations:
            _commit_counted(det, self.counted)


def _commit_counted(det: LossDetector, counted: _Counted) -> None:
    """The skip ledger and the scale watch after the run's counted reports."""
    sw = det._scale
    iterations = counted.iterations
    sw._last_step = counted.last_step
    sw._last_skipped_total = counted.last_skipped_total
    sw._clean += sum(iterations)
    for scale in counted.scales:
        sw._new_scale(scale)
    led = sw.ledger
    reports = led._reports
    window = led.window
    # ``SkipLedger.add`` of each: the oldest reports leave while the
    # newer ones still cover the window. Taken after the last add, the
    # same leave (a report's newer ones only grow). Where the run's
    # own reports cover it, the ledger keeps the fewest newest of them
    # that do (``covered[k]``: the newest ``k + 1`` reports' iterations).
    covered = list(accumulate(reversed(iterations)))
    k = bisect_left(covered, window)
    if k < len(iterations):
        reports.clear()
        reports.extend(zip(iterations[len(iterations) - 1 - k:], repeat(0)))
        total = covered[k]
    else:
        reports.extend(zip(iterations, repeat(0)))
        total = led.iterations + covered[-1]
        while len(reports) > 1 and total - reports[0][0] >= window:
            total -= reports.popleft()[0]
    led.iterations = total
    det._overflow_total = sw.total
    det._skips = (led.skipped, total)
