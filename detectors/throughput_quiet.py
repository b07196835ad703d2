"""throughput_drop's batching (issue 20): a run of step lines proved quiet.

``ThroughputDrop.quiet_steps`` answers here (``base.StepCommit``). The run
is read with the detector's own rules on local copies of what a step
changes (each step series' deduper's answer, the timeline, the cadence,
each step series' last step and whether a bar was seen, the warm-up
count, the learning list, a relaunch's fresh start), and refused where it
could alert or where copying the rule would cost more than feeding it:
a rise being tracked, another unit, a backward clock jump, a relaunch
after steps judged in the same run. With the rate low (a drop open, or
one being sustained), a run is taken only where it stays down and fires
nothing (``_stays_low``): every smoothed rate under the drop threshold,
before the sustain time if none is open, the window slid step by step on
copies for the worst rate.

A step judged against the baseline is quiet when its smoothed rate can be
neither low nor a rise. Rather than take a median per step, every value
the window can hold during the run (the ones it holds now and the run's)
must lie in [low threshold, rise threshold]: a median of values in a
range is in that range (the mean of the middle two included: float
addition and halving are monotone, and twice the largest value is
finite), so no step of the run can start a drop or a rise. Values must be
positive (a 0.0 and a -0.0 compare equal but print differently), and the
window must not reach its cap during the run.

Steady training of one source (stamps in order, gaps under the relaunch
silence, past the warm-up's reports; step lines, a tqdm bar or both, each
series going up on its own; a run that ends the warm-up's seconds too) is
read in columns, without a look per line
(``_steady``); anything else is walked line by line (``_walk``), with the
same answer. The commit then writes the end state at
once (``_Run.commit``): the window's new front is where the per-step
eviction would have left it (times only grow, so the last cutoff decides),
and its sorted copy is rebuilt.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from itertools import islice, repeat
from operator import add, is_not, itemgetter, lt, sub
from statistics import median
from typing import TYPE_CHECKING

from ..parsers.events import TOK_S, Progress, rate_of
from ..parsers.native import KERNELS
from ..parsers.step_columns import columns_of, read
from . import throughput_limits as _tp
from .base import StepCommit
from .steps import SeenSeries, sorted_median

if TYPE_CHECKING:
    from .throughput import ThroughputDrop

__all__ = ["quiet_run"]

_TIME = itemgetter(0)
# What a run is read in (``quiet_run``): one pass over its lines.
_COLUMNS = columns_of("clocked", "rate_unit", "rate", "step", "time", "elapsed_s", "rank", "total_steps")


def _unchanged() -> None:
    """The commit of a run with no step the detector counts."""


@dataclass(slots=True)
class _Run:
    """What a quiet run leaves behind: ``commit`` writes it into the detector."""

    det: ThroughputDrop
    seen: SeenSeries
    clock_last: float | None
    dts: list[float]  # report intervals added, in order
    since_interval: int
    interval: float | None
    gap_limit: float | None
    warm_n: int
    last_t: float | None
    last_step: list[int | None]  # per step series (``series_of``)
    last_total: list[int | None]
    bar_seen: bool
    count: int  # ``_seen``
    learn_start: float | None
    baseline: float | None
    learn_replaced: bool  # the list was learned or dropped: ``learn_new`` is it (else more of it)
    learn_new: list[float]
    restarts: int  # relaunches during the run (the window starts anew at the last one)
    start: float | None
    judged_t: list[float]  # the times and values of the steps judged against the baseline
    judged_v: Sequence[float]

    def commit(self) -> None:
        det = self.det
        det._dedupe.take(self.seen)
        det._clock.last = self.clock_last
        det._intervals.extend(self.dts)
        det._since_interval = self.since_interval
        det.interval = self.interval
        det._gap_limit = self.gap_limit
        det._warm_n = self.warm_n
        det._last_t = self.last_t
        det._last_step = self.last_step
        det._last_total = self.last_total
        det._bar_seen = self.bar_seen
        det._seen = self.count
        det._learn_start = self.learn_start
        if self.learn_replaced:
            det.baseline = self.baseline
            det._learn = self.learn_new
        elif self.learn_new:
            det._learn.extend(self.learn_new)
        if self.restarts:  # ``_restart``
            det._stopped = False
            det._start = self.start
            det.restarts += self.restarts
            det._window.clear()
            det._sorted.clear()
            det._low_since = det._drop_start = det._high_since = None
            det._rise = []
            det._rise_since = None
        judged_t = self.judged_t
        if not judged_t:
            return
        # The per-step eviction leaves the front at the first report within
        # the last cutoff, or three reports from the end, whichever is first,
        # and never goes back (times and lengths only grow).
        window = det._window
        ordered = det._sorted
        n_old = len(window)
        window.extend(zip(judged_t, self.judged_v))
        cutoff = judged_t[-1] - det.config.throughput_smooth_s
        front = max(0, min(bisect_left(window, cutoff, key=_TIME), len(window) - 3))
        if (len(judged_t) + front) * 4 < n_old:  # a few changes to a long window
            for v in self.judged_v:
                insort(ordered, v)
            for _ in range(front):
                del ordered[bisect_left(ordered, window.popleft()[1])]
        else:
            judged_v = self.judged_v
            if front >= n_old:
                values = list(judged_v[front - n_old:])
            else:
                values = [v for _, v in islice(window, front, n_old)]
                values += judged_v
            if front:
                det._window = deque(islice(window, front, None))
            values.sort()
            ordered[:] = values
        det.smoothed = sorted_median(ordered)
        det._low_since = None


def quiet_run(det: ThroughputDrop, steps: Sequence[Progress]) -> StepCommit | None:
    """A commit that leaves ``det`` as ``steps`` fed one at a time would, or
    None (nothing changed) when the run may do more than steady training,
    or, with a drop open, more than stay down (``_stays_low``)."""
    unit0 = det.unit
    if det._rise_since is not None:
        return None
    # The steps the detector counts and their rates (``_progress``'s first
    # lines): all of them, as a rule (checked in columns: every line
    # clocked, in the unit, at a finite rate not below 0; a NaN or an
    # infinity makes the sum one, and a sum too large to tell only costs
    # the shortcut).
    clocked, units, values, step_col, time_col, elapsed, ranks, totals = read(steps, _COLUMNS)
    try:
        common = (all(clocked) and units.count(unit0) == len(units) and math.isfinite(sum(values))
                  and min(values, default=0.0) >= 0.0)
    except (TypeError, OverflowError):  # a rate is None (or no number)
        common = False
    if not common:
        valid: list[Progress] = []
        values = []
        for p in steps:
            v, unit = rate_of(p)  # (as ``ThroughputDrop._progress`` reads it inline)
            if v is None or not math.isfinite(v) or v < 0 or not p.clocked:
                continue
            if unit != unit0:
                return None  # the first rate, another source, or a relaunch with another logger
            valid.append(p)
            values.append(v)
        if not valid:
            return _unchanged  # no line with a rate: nothing counts
        _, _, _, step_col, time_col, elapsed, ranks, totals = read(valid, _COLUMNS)
    if det._start is None:
        return None  # the first rate sets the unit and starts the run (no unit before)
    series_col = list(map(is_not, elapsed, repeat(None)))  # ``series_of``, in C
    seen = det._dedupe.peek(step_col, time_col, ranks, series_col)
    kept = seen.new
    if len(kept) < len(step_col):
        if not kept:
            return _Run(det, seen, det._clock.last, [], det._since_interval, det.interval, det._gap_limit,
                        det._warm_n, det._last_t, list(det._last_step), list(det._last_total), det._bar_seen,
                        det._seen, det._learn_start, det.baseline, False, [], 0, det._start, [], []).commit
        values = [values[i] for i in kept]
        step_col = [step_col[i] for i in kept]
        time_col = [time_col[i] for i in kept]
        series_col = [series_col[i] for i in kept]
        totals = [totals[i] for i in kept]
    run = _steady(det, seen, values, step_col, time_col, totals, series_col)
    if run is None:
        run = _walk(det, seen, values, step_col, time_col, totals, series_col)
    if run is None:
        return None
    if det._low_since is not None:  # low: a drop open, or one sustained towards firing
        slid = _stays_low(det, run)
        if slid is not None:
            return partial(_commit_low, run, *slid)
    if det.episode.active or not _judged_quietly(det, run):
        return None
    return run.commit


def _steady(det: ThroughputDrop, seen: SeenSeries, values: Sequence[float], step_col: Sequence[int | None],
            time_col: Sequence[float], totals: Sequence[int | None], series_col: Sequence[bool]) -> _Run | None:
    """The new steps of steady training read in columns, or None when they
    are not that (``_walk`` then reads them line by line)."""
    c = det.config
    baseline = det.baseline
    last_t = det._last_t
    last_total = det._last_total
    clock = det._clock
    if det._stopped or last_t is None or det.interval is None or det._seen < c.throughput_warmup_events:
        return None
    # Every series in the run has a step to go on from, and every line's
    # total is its series' last one (no other loop's bar).
    last_step = list(det._last_step)
    kinds = set(series_col)
    if any(last_step[series] is None for series in kinds):
        return None
    wanted = {last_total[series] for series in kinds}
    if len(wanted) == 1:
        if len(set(totals)) != 1 or totals[0] not in wanted:
            return None
    elif any(map(lambda series, n: n != last_total[series], series_col, totals)):
        return None
    offset = clock.offset
    # x + offset of each, in C; with no offset, the times themselves, no
    # float made (x + 0.0 is x for every float above 0, and a NaN stays a
    # NaN; a time at or below 0, -0.0 among them, makes the least one not
    # above 0).
    ts = list(time_col) if offset == 0.0 and min(time_col) > 0.0 else list(map(add, time_col, repeat(offset)))
    # The warm-up's last seconds: its steps are counted, not learned nor
    # judged. Past ``throughput_warmup_events`` (above) only its time is
    # left, and times are in order (checked below): a first part of the run.
    start0: float = det._start  # type: ignore[assignment]
    warmup_s = c.throughput_warmup_s
    warm = 0
    if ts[0] - start0 < warmup_s:
        warm = bisect_left(ts, True, key=lambda t: not t - start0 < warmup_s)
    # The timeline's last time is the last step's (both are set by each
    # step counted): gaps from it that never go back move no offset.
    gaps = [ts[0] - last_t]
    gaps += map(sub, ts[1:], ts[:-1])
    # In order (no jitter to absorb, no jump), no silence that restarts, and
    # a step below the highest so far is another rank's just behind (within
    # the jitter), not a relaunch; nor the next epoch's bar (checked after).
    silence = c.throughput_restart_gap_s
    jitter = c.clock_jitter_s
    # The walk below in C where it takes the run (``parsers.native``): 1
    # steady, ``last_step`` moved; 0 not steady; -1 the loops below decide.
    walked = -1
    if KERNELS is not None and type(step_col) is list and type(series_col) is list:
        walked = KERNELS.series_tops(step_col, gaps, series_col, last_step, silence, jitter)
        if not walked:
            return None
    if walked < 0 and len(kinds) > 1:
        for s, g, series in zip(step_col, gaps, series_col):
            if not 0.0 <= g < silence or s is None:
                return None
            if s >= last_step[series]:  # type: ignore[operator]
                last_step[series] = s
            elif g > jitter:
                return None  # a relaunch
    elif walked < 0:
        one = series_col[0]
        top = last_step[one]
        for s, g in zip(step_col, gaps):
            if not 0.0 <= g < silence or s is None:
                return None
            if s >= top:  # type: ignore[operator]
                top = s
            elif g > jitter:
                return None  # a relaunch
        last_step[one] = top
    for series in kinds:
        total = last_total[series]
        if total and last_step[series] + 1 >= total:  # type: ignore[operator]
            return None
    # The cadence: only the last re-read counts (the relaunch silence is
    # above the gaps whatever it is, and the warm-up is over).
    dts = list(filter(partial(lt, 0.0), gaps))  # [g for g in gaps if g > 0], in C
    interval, gap_limit, warm_n = det.interval, det._gap_limit, det._warm_n
    since = det._since_interval + len(dts)
    if since >= _tp.INTERVAL_EVERY:
        last_read = len(dts) - since % _tp.INTERVAL_EVERY
        m = sorted_median(sorted((list(det._intervals) + dts[:last_read])[-_tp.INTERVALS_KEPT:]))  # = median()
        if m != interval:
            interval = m
            gap_limit, warm_n = _tp.cadence_budgets(c, m)
    # Learning: the values go to the list until the first step both late
    # enough and fifth at least; the ones after it are judged.
    learn_start = det._learn_start
    learned = False
    learn_new: list[float] = []
    judged_t, judged_v = ts, values
    if warm:
        judged_t, judged_v = ts[warm:], values[warm:]
    if baseline is None and judged_t:
        learn_old = det._learn
        if len(learn_old) + len(judged_t) > _tp.LEARN_MAX:
            return None
        start = judged_t[0] if learn_start is None else learn_start
        learn_s = c.throughput_learn_s
        k = max(bisect_left(judged_t, True, key=lambda t: t - start >= learn_s), 4 - len(learn_old))
        learn_start = start
        if k >= len(judged_t):
            learn_new = list(judged_v)
            judged_t, judged_v = [], []
        else:
            baseline = float(median(learn_old + list(judged_v[:k + 1])))
            learned = True
            judged_t, judged_v = judged_t[k + 1:], judged_v[k + 1:]
    return _Run(det, seen, ts[-1], dts, since % _tp.INTERVAL_EVERY, interval, gap_limit, warm_n, ts[-1], last_step,
                list(last_total), det._bar_seen, det._seen + len(ts), learn_start, baseline, learned, learn_new, 0,
                det._start, judged_t, judged_v)


def _walk(det: ThroughputDrop, seen: SeenSeries, values: Sequence[float], step_col: Sequence[int | None],
          time_col: Sequence[float], totals: Sequence[int | None], series_col: Sequence[bool]) -> _Run | None:
    """The new steps fed line by line to local copies of what they change
    (``_progress`` without alerts: no episode is open), or None at a
    backward clock jump. A relaunch (after a stop, a silence, a step going
    back in its series, another loop's bar) starts the window, the warm-up
    and every step series anew, as ``_restart`` does."""
    c = det.config
    clock = det._clock
    offset = clock.offset
    jitter = clock.jitter_s
    clock_last = clock.last
    interval = det.interval
    gap_limit = det._gap_limit
    warm_n = det._warm_n
    since_interval = det._since_interval
    last_t = det._last_t
    last_steps = list(det._last_step)
    last_totals = list(det._last_total)
    bar_seen = det._bar_seen
    count = det._seen
    start: float = det._start  # type: ignore[assignment]
    stopped = det._stopped
    restarts = 0
    step_jitter = c.clock_jitter_s
    warmup_s = c.throughput_warmup_s
    baseline = det.baseline
    learn_start = det._learn_start
    learn_old = det._learn
    learn_new: list[float] = []
    learn_replaced = False
    dts: list[float] = []
    judged_t: list[float] = []
    judged_v: list[float] = []
    for v, step, pt, total, k in zip(values, step_col, time_col, totals, series_col):
        t = pt + offset
        if clock_last is not None and t < clock_last:
            if clock_last - t > jitter:
                return None  # a backward jump moves the timeline's offset
            t = clock_last
        elif t != t:
            return None  # no stamp: the window's times would not be in order
        else:
            clock_last = t
        last_step = last_steps[k]
        back = step is not None and last_step is not None and step < last_step
        interleaved = False
        new_loop = False
        if back:  # within its series
            last_total = last_totals[k]
            if last_total and total is not None and total != last_total:
                new_loop = True  # another loop's bar
            elif last_total and last_step + 1 >= last_total and step <= 1:  # type: ignore[operator]
                back = False
            elif last_t is not None and t - last_t <= step_jitter:
                back = False
                interleaved = True
        elif k and last_step is None and not bar_seen and step is not None:
            bar_seen = True
            if _tp.first_bar_is_new_loop(step, total, last_steps[0], last_totals[0]):
                back = new_loop = True  # another loop's bar after step lines only
        relaunched = (stopped or back
                      or (gap_limit is not None and last_t is not None and t - last_t >= gap_limit))
        if last_t is not None and t > last_t and not relaunched:
            dts.append(t - last_t)
            since_interval += 1
            if interval is None or since_interval >= _tp.INTERVAL_EVERY:
                since_interval = 0
                new_interval = median((list(det._intervals) + dts)[-_tp.INTERVALS_KEPT:])
                if new_interval != interval:
                    interval = new_interval
                    gap_limit, warm_n = _tp.cadence_budgets(c, new_interval)
        last_t = t
        if relaunched:
            if judged_t:
                return None  # ``smoothed`` keeps the median of the window it empties
            stopped = False
            start = t
            count = 0
            restarts += 1
            last_steps = [None] * _tp.SERIES
            last_totals = [None] * _tp.SERIES
            if new_loop:  # ``_new_loop``: what was learned is dropped
                baseline = det.given_baseline if det.unit == TOK_S else None
                learn_old, learn_new = [], []
                learn_start = None
                learn_replaced = True
        if step is not None and not interleaved:
            last_steps[k] = step
            last_totals[k] = total
        count += 1
        if count <= warm_n or t - start < warmup_s:
            continue
        if baseline is None:
            if learn_start is None:
                learn_start = t
            if len(learn_old) + len(learn_new) < _tp.LEARN_MAX:
                learn_new.append(v)
            if t - learn_start >= c.throughput_learn_s and len(learn_old) + len(learn_new) >= 5:
                baseline = float(median(learn_old + learn_new))
                learn_replaced = True
                learn_old, learn_new = [], []
            continue
        judged_t.append(t)
        judged_v.append(v)
    return _Run(det, seen, clock_last, dts, since_interval, interval, gap_limit, warm_n, last_t, last_steps,
                last_totals, bar_seen, count, learn_start, baseline, learn_replaced, learn_new, restarts, start,
                judged_t, judged_v)


def _stays_low(det: ThroughputDrop, run: _Run) -> tuple[float, deque[tuple[float, float]], list[float]] | None:
    """With the rate low (a drop open, or one being sustained towards
    firing, ``_low_since`` set): the worst smoothed rate after the run and
    the window (and its sorted values) the run leaves, when every judged
    step keeps the smoothed rate under the drop threshold and, with no drop
    open yet, the last comes before the sustain time (``_progress``'s low
    branch: no alert, only the worst moves); else None. A run that could
    fire, resolve, relaunch or learn again is fed one step at a time.

    The worst is the least median of the window step by step, so the
    window is slid here on copies (``throughput_limits.slide``, as
    ``_progress`` slides it; no alert path): a run that slowed and stayed
    slow (the case this tool is for) is replayed in runs, not a step at a
    time for the rest of the log. A median under the drop threshold is
    under the rise one too (``throughput_drop_frac`` is a fraction,
    ``throughput_rise_frac`` positive): no rise is tracked."""
    worst = det._worst
    low_since = det._low_since
    if worst is None or low_since is None or run.restarts or run.learn_replaced or run.baseline is None:
        return None
    judged_t, judged_v = run.judged_t, run.judged_v
    if not judged_t:
        return worst, det._window, det._sorted  # (the commit leaves the window as it is)
    c = det.config
    if not det.episode.active and judged_t[-1] - low_since >= c.throughput_sustain_s:
        return None  # low long enough to fire within the run: one step at a time
    lo = (1.0 - c.throughput_drop_frac) * run.baseline
    smooth_s = c.throughput_smooth_s
    window = deque(det._window)
    ordered = list(det._sorted)
    for t, v in zip(judged_t, judged_v):
        med = _tp.slide(window, ordered, t, v, smooth_s)
        if not med < lo:
            return None  # back over the threshold: the recovery is judged step by step
        if med < worst:
            worst = med
    return worst, window, ordered


def _commit_low(run: _Run, worst: float, window: deque[tuple[float, float]], ordered: list[float]) -> None:
    """The commit of a run that stayed down (``_stays_low``): the clock,
    counts and series as ``_Run.commit`` writes them, the window as
    ``_stays_low`` slid it; the drop's start kept, the worst moved, no
    recovery under way (each judged step says so)."""
    det = run.det
    judged = bool(run.judged_t)
    replace(run, judged_t=[], judged_v=[]).commit()  # all but the window
    if not judged:
        return
    det._window = window
    det._sorted = ordered
    det.smoothed = sorted_median(ordered)
    det._high_since = None
    det._worst = worst


def _judged_quietly(det: ThroughputDrop, run: _Run) -> bool:
    """No judged step of the run can start a drop or track a rise (see the
    module's docstring), and the window stays under its cap."""
    values = run.judged_v
    if not values:
        return True
    base = run.baseline
    assert base is not None
    lo = (1.0 - det.config.throughput_drop_frac) * base
    # A given baseline does not rise.
    hi = math.inf if det.given_baseline is not None and det.unit == TOK_S else det._rise_factor * base
    ordered = [] if run.restarts else det._sorted  # a relaunch emptied the window
    low = min(values)
    top = max(values)
    if ordered:
        low = min(low, ordered[0])
        top = max(top, ordered[-1])
    return (0.0 < lo <= low and top <= hi and math.isfinite(top + top)
            and len(ordered) + len(values) <= _tp.WINDOW_MAX)
