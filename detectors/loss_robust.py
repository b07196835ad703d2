"""The robust statistics the ``loss`` detector judges on, one small class each.

* ``RobustWindow``: the last N losses, their median and MAD (a robust
  sigma): one spike or a few bad batches move neither, so the level a spike
  is judged against is the run's own, not the spike's.
* ``SlidingMin``: the minimum of a series over the last ``span_s`` seconds
  (a monotonic deque: O(1) amortised, bounded by the points in the span).
* ``SkipLedger``: iterations and skipped iterations of fp16 loss scaling
  over the last N iterations, whatever says so (Overflow lines, Megatron's
  per-interval counter, DeepSpeed's cumulative ``skipped=``).

Pure: no clocks, no files; times are the data's.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections import deque

# MAD x 1.4826 estimates the standard deviation of normal noise.
MAD_TO_SIGMA = 1.4826


def median_of(values: list[float]) -> float:
    s = sorted(values)
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else 0.5 * (s[mid - 1] + s[mid])


class RobustWindow:
    """The last ``size`` values; ``median()`` and ``sigma()`` (MAD-based).

    The values are also kept sorted (``bisect``): the median is read on
    every loss report, so it is O(1) here, not a sort per report.

    >>> w = RobustWindow(5)
    >>> for v in (2.0, 2.1, 1.9, 2.0, 9.0):
    ...     w.add(v)
    >>> w.median(), round(w.sigma(), 3)
    (2.0, 0.148)
    >>> w.add(1.0); w.median()
    2.0
    """

    __slots__ = ("values", "_sorted")

    def __init__(self, size: int) -> None:
        self.values: deque[float] = deque(maxlen=max(1, size))
        self._sorted: list[float] = []

    def __len__(self) -> int:
        return len(self.values)

    def add(self, value: float) -> None:
        values = self.values
        if len(values) == values.maxlen:
            s = self._sorted
            del s[bisect_left(s, values[0])]
        values.append(value)
        insort(self._sorted, value)

    def clear(self) -> None:
        self.values.clear()
        self._sorted.clear()

    def median(self) -> float:
        s = self._sorted
        n = len(s)
        mid = n // 2
        return s[mid] if n % 2 else 0.5 * (s[mid - 1] + s[mid])

    def highest(self) -> float:
        return self._sorted[-1]

    def sigma(self) -> float:
        med = self.median()
        return MAD_TO_SIGMA * median_of([abs(v - med) for v in self._sorted])


def within_margin(value: float, ref: float, margin: float) -> bool:
    """``value`` at or under ``ref`` plus ``margin`` of its size: the one
    divergence rule, for the detector's judgement per report and the step
    runs' proofs alike (the 1e-12 keeps a loss equal to its bound quiet
    whatever the rounding of ``margin * |ref|``).

    >>> within_margin(1.2, 1.0, 0.2), within_margin(1.21, 1.0, 0.2)
    (True, False)
    """
    return value <= ref + margin * abs(ref) + 1e-12


class SlidingMin:
    """The minimum of (time, value) points over the last ``span_s`` seconds.

    >>> m = SlidingMin(10.0)
    >>> m.add(0.0, 3.0); m.add(5.0, 1.0); m.add(8.0, 2.0)
    >>> m.min()
    1.0
    >>> m.add(16.0, 4.0); m.min()
    2.0
    """

    __slots__ = ("span_s", "_points")

    def __init__(self, span_s: float) -> None:
        self.span_s = span_s
        self._points: deque[tuple[float, float]] = deque()

    def add(self, time: float, value: float) -> None:
        pts = self._points
        while pts and pts[-1][1] >= value:
            pts.pop()
        pts.append((time, value))
        while pts and pts[0][0] < time - self.span_s:
            pts.popleft()

    def clear(self) -> None:
        self._points.clear()

    def copy(self) -> SlidingMin:
        """An independent copy: a step run walks its adds on one and leaves
        the detector's own minimum untouched unless the run is taken."""
        twin = SlidingMin(self.span_s)
        twin._points = deque(self._points)
        return twin

    def min(self) -> float | None:
        return self._points[0][1] if self._points else None


def skip_ratio(skipped: int, iterations: int) -> float:
    """Skipped / all iterations (0.0 before any)."""
    return skipped / iterations if iterations else 0.0


class SkipLedger:
    """Skipped vs all iterations over (about) the last ``window`` iterations.

    Each progress report adds (iterations since the last report, skipped
    among them). The oldest reports fall out while the rest still cover the
    window, so a Megatron report of 100 iterations is judged on its own and
    a per-step log on its last ``window`` steps.

    >>> led = SkipLedger(10)
    >>> for _ in range(10):
    ...     led.add(1, 1)
    >>> led.full(), led.ratio()
    (True, 1.0)
    >>> for _ in range(10):
    ...     led.add(1, 0)
    >>> led.ratio()
    0.0
    """

    __slots__ = ("window", "_reports", "iterations", "skipped")

    def __init__(self, window: int) -> None:
        self.window = max(1, window)
        self._reports: deque[tuple[int, int]] = deque()
        self.iterations = 0
        self.skipped = 0

    def add(self, iterations: int, skipped: int) -> None:
        # Once per report: plain comparisons and locals (whole numbers here).
        if iterations < 1:
            iterations = 1
        if skipped > iterations:
            skipped = iterations
        if skipped < 0:
            skipped = 0
        reports = self._reports
        reports.append((iterations, skipped))
        total = self.iterations + iterations
        skips = self.skipped + skipped
        window = self.window
        while len(reports) > 1 and total - reports[0][0] >= window:
            old_i, old_s = reports.popleft()
            total -= old_i
            skips -= old_s
        self.iterations = total
        self.skipped = skips

    def clear(self) -> None:
        self._reports.clear()
        self.iterations = 0
        self.skipped = 0

    def full(self) -> bool:
        """The reports cover the whole window: a ratio on fewer iterations
        (the first steps, fp16's warm-up halvings) is not judged."""
        return self.iterations >= self.window

    def ratio(self) -> float:
        return skip_ratio(self.skipped, self.iterations)


class ScaleWatch:
    """fp16 loss scaling as the log tells it: skipped steps over a window of
    iterations, and whether the scale fell to its floor.

    Each skipped step is counted once: Megatron's per-interval ``number of
    skipped iterations`` or DeepSpeed's cumulative ``skipped=`` when a report
    carries one, else the ``Overflow`` lines since the previous report. The
    floor counts only when the scale fell there from above (bf16 runs print a
    constant ``loss scale: 1.0``) and only until a window of clean steps went
    by (DeepSpeed logs no raise of the scale: after that the last overflow's
    scale is old news).
    """

    __slots__ = ("floor", "ledger", "total", "scale", "scale_max", "fell",
                 "_pending", "_clean", "_last_step", "_last_skipped_total")

    def __init__(self, window: int, floor: float) -> None:
        self.floor = floor
        self.ledger = SkipLedger(window)
        self.total = 0  # skipped steps seen in all
        self.scale: float | None = None
        self.scale_max: float | None = None
        self.fell = False
        self._pending = 0
        self._clean = 0  # iterations since the last skipped one
        self._last_step: int | None = None
        self._last_skipped_total: float | None = None

    def _new_scale(self, scale: float) -> None:
        if scale > self.floor:
            self.fell = False
        elif self.scale is not None and self.scale > self.floor:
            self.fell = True
        self.scale = scale
        self.scale_max = scale if self.scale_max is None else max(self.scale_max, scale)

    def overflow(self, scale: float | None, new_scale: float | None) -> None:
        self._pending += 1
        self.total += 1
        self._clean = 0
        for s in (scale, new_scale):
            if s is not None:
                self._new_scale(s)

    def report(self, step: int | None, skipped_iters: float | None, skipped_total: float | None,
               scale: float | None) -> bool:
        """One progress report; False for another copy of the last step."""
        last = self._last_step
        if step is not None and last is not None and step == last:
            return False
        iters = step - last if step is not None and last is not None and step > last else 1
        if step is not None:
            self._last_step = step
        pending, self._pending = self._pending, 0
        # A counter the log wrote as nan or inf says nothing (and int() of it
        # would raise): counted as if absent, from the overflow lines.
        if skipped_iters is not None and not math.isfinite(skipped_iters):
            skipped_iters = None
        if skipped_total is not None and not math.isfinite(skipped_total):
            skipped_total = None
        if skipped_iters is not None:
            skipped = max(0, int(skipped_iters))
        elif skipped_total is not None:
            prev, self._last_skipped_total = self._last_skipped_total, skipped_total
            skipped = int(skipped_total - prev) if prev is not None and skipped_total >= prev else 0
        else:
            skipped = pending
        self.total += skipped - pending
        self.ledger.add(iters, skipped)
        self._clean = 0 if skipped else self._clean + iters
        if scale is not None:
            self._new_scale(scale)
        return True

    def at_floor(self) -> bool:
        if self._clean >= self.ledger.window:
            self.fell = False
        return self.fell

    def storm(self, frac: float) -> bool:
        return self.ledger.full() and self.ledger.ratio() >= frac

    def may_storm(self, frac: float) -> bool:
        """False only where neither ``storm(frac)`` nor ``at_floor()`` can be
        true: nothing skipped in the window (a ratio of 0 is under any
        ``frac`` above 0) and the scale not fallen (``at_floor`` only ever
        clears ``fell``). The cheap test of every report, before the full one."""
        return self.fell or self.ledger.skipped > 0 or frac <= 0.0
