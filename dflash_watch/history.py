"""Bounded history of scalar series (GPU memory, throughput) for charts and detectors.

A run lasts days, so the watcher cannot keep every sample, but the thing it
watches for (memory that stops being flat) can be a single-sample spike: a
plain average would erase it. So each tier keeps, per bucket, the min, the
max and the mean. Recent data stays at full rate; older data lives in
coarser tiers. Every tier is a preallocated ring buffer: memory is fixed at
construction and an append costs the same on day five as on second one.

Pure: no clock, no threads, no I/O. Times are whatever the caller's data
clock says.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from functools import reduce
from operator import add
from typing import TYPE_CHECKING, TypeAlias

from dflash_watch.parsers.events import GpuLost, GpuSample
from dflash_watch.parsers.native import KERNELS

if TYPE_CHECKING:
    import numpy as np

# (bucket seconds, buckets). Width 0 keeps every sample. At 1 Hz: one hour
# at full rate, 12 hours of 10 s buckets, 5 days of 1 min buckets.
DEFAULT_TIERS: tuple[tuple[float, int], ...] = ((0.0, 3600), (10.0, 4320), (60.0, 7200))
# No tiers: a series nobody draws (headless's throughput and loss), whose
# count and latest sample are still read (the unit the rate is shown in,
# the exported gauge). Why: filling the tiers was a fifth of a catch-up's
# judging on a many-rank log (0.18 s of 0.75 s on 1.2M lines), for charts
# only the dashboard has.
LATEST_ONLY: tuple[tuple[float, int], ...] = ()

_FIELDS = 4  # t, min, max, mean: interleaved in one array per tier

# numpy is imported where a view reads a window, not at import: a replay to
# JSON never draws a chart and should not pay numpy's ~0.1 s start-up.
Window: TypeAlias = "tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]"


class _Tier:
    """One ring buffer plus the bucket being filled (not yet in the ring)."""

    __slots__ = ("width", "cap", "data", "head", "size", "key", "o_t", "o_min", "o_max", "o_sum", "o_n")

    def __init__(self, width: float, cap: int) -> None:
        self.width = width
        self.cap = cap
        self.data = array("d", bytes(8 * _FIELDS * cap))
        self.head = 0  # next slot to write
        self.size = 0
        self.key = -math.inf  # bucket number of the open bucket
        self.o_t = self.o_min = self.o_max = self.o_sum = 0.0
        self.o_n = 0

    def push(self, t: float, lo: float, hi: float, mean: float) -> None:
        i = self.head * _FIELDS
        d = self.data
        d[i] = t
        d[i + 1] = lo
        d[i + 2] = hi
        d[i + 3] = mean
        self.head = self.head + 1 if self.head + 1 < self.cap else 0
        if self.size < self.cap:
            self.size += 1

    def oldest(self) -> float:
        return self.data[(self.head if self.size == self.cap else 0) * _FIELDS]

    def rows(self) -> np.ndarray:
        """Committed buckets, oldest first, plus the open one: shape (n, 4)."""
        import numpy as np

        flat = np.frombuffer(self.data, dtype=np.float64).reshape(self.cap, _FIELDS)
        if self.size < self.cap:
            parts = [flat[: self.size]]
        else:
            parts = [flat[self.head :], flat[: self.head]]
        if self.o_n:
            parts.append(np.array([[self.o_t, self.o_min, self.o_max, self.o_sum / self.o_n]]))
        return np.concatenate(parts) if len(parts) > 1 else parts[0].copy()


class SeriesHistory:
    """One scalar series in tiers of (t, min, max, mean) ring buffers.

    ``tiers`` go from finest to coarsest. Each sample updates every tier
    directly (no cascade), so each tier's min/max/mean are exact for its
    buckets. A bucket's time is its start (``floor(t / width) * width``).
    """

    def __init__(self, tiers: Sequence[tuple[float, int]] = DEFAULT_TIERS) -> None:
        """``tiers=()`` keeps only the count and the latest sample (``LATEST_ONLY``)."""
        widths = [w for w, _ in tiers]
        if widths != sorted(widths) or any(w < 0 for w in widths) or any(c < 1 for _, c in tiers):
            raise ValueError(f"tiers must go from finest to coarsest with positive sizes: {tiers!r}")
        self._tiers = [_Tier(float(w), int(c)) for w, c in tiers]
        self.count = 0
        self.last_time: float | None = None
        self.last_value: float | None = None

    def append(self, t: float, value: float) -> None:
        """Add one sample; non-finite values are "not available" and skipped.

        A clock that steps back (NTP) is clamped to the last time so every
        tier stays sorted for ``window``.
        """
        if value is None or not math.isfinite(value):
            return
        value = float(value)
        last = self.last_time
        if last is not None and t < last:
            t = last
        self.last_time = t
        self.last_value = value
        self.count += 1
        for tier in self._tiers:
            width = tier.width
            if width == 0.0:
                tier.push(t, value, value, value)
                continue
            key = t // width
            if key != tier.key:
                if tier.o_n:
                    tier.push(tier.o_t, tier.o_min, tier.o_max, tier.o_sum / tier.o_n)
                tier.key = key
                tier.o_t = key * width
                tier.o_min = tier.o_max = tier.o_sum = value
                tier.o_n = 1
            else:
                if value < tier.o_min:
                    tier.o_min = value
                elif value > tier.o_max:
                    tier.o_max = value
                tier.o_sum += value
                tier.o_n += 1

    def extend(self, flat: Sequence[float]) -> None:
        """``append(t, v)`` for each pair of ``flat`` (t0, v0, t1, v1, ...), with the same result.

        Why: a watcher attaching to days of log appends one sample per
        logged step; one call per step cost the dashboard's catch-up a
        tenth of its time. Here each tier takes the batch in one loop, and
        the full-rate tier writes only the samples its ring will keep.
        """
        last = self.last_time
        isfinite = math.isfinite
        n = len(flat) // 2
        if not self._tiers and n:
            values = flat[1 : 2 * n : 2]
            try:
                plain = isfinite(sum(values)) and isfinite(sum(times := flat[0 : 2 * n : 2]))
            except TypeError:
                plain = False
            if plain:  # the usual batch: its last sample, its latest time (``append``'s clamp)
                top = max(times)
                self.last_time = top if last is None or top > last else last
                self.last_value = float(values[-1])
                self.count += n
                return
        times = list(flat[0 : 2 * n : 2])
        values = list(flat[1 : 2 * n : 2])
        try:
            # The usual batch, checked in C: every value and time finite
            # (their sums are finite, or one is not, or a sum overflowed:
            # then the loop below decides), times in order from ``last``.
            plain = (
                isfinite(sum(values))
                and isfinite(sum(times))
                and (last is None or not times or times[0] >= last)
                and times == sorted(times)
            )
        except TypeError:
            plain = False
        if plain:
            if n:
                self._take(times, list(map(float, values)))
            return
        times = []
        values = []
        for i in range(0, len(flat) - 1, 2):
            value = flat[i + 1]
            if value is None or not isfinite(value):
                continue
            t = flat[i]
            if last is not None and t < last:
                t = last
            last = t
            times.append(t)
            values.append(float(value))
        if times:
            self._take(times, values)

    def _take(self, times: list[float], values: list[float]) -> None:
        """Finite samples, times in order from ``last_time``, into every tier."""
        self.last_time = times[-1]
        self.last_value = values[-1]
        self.count += len(times)
        for tier in self._tiers:
            if tier.width == 0.0:
                self._extend_full(tier, times, values)
            else:
                self._extend_buckets(tier, times, values)

    @staticmethod
    def _extend_full(tier: _Tier, times: list[float], values: list[float]) -> None:
        n, cap, d = len(times), tier.cap, tier.data
        skip = max(0, n - cap)  # overwritten within this batch: never written
        head = (tier.head + skip) % cap
        m = n - skip
        # Each field's column written into the ring's rows in C (a strided
        # slice of the array), in at most two parts (the ring wraps).
        kept_t = array("d", times[skip:] if skip else times)
        kept_v = array("d", values[skip:] if skip else values)
        first = min(m, cap - head)
        for lo, a, b in ((head, 0, first), (0, first, m)):
            if a == b:
                continue
            at, stop = lo * _FIELDS, (lo + b - a) * _FIELDS
            col = kept_v[a:b]
            d[at:stop:_FIELDS] = kept_t[a:b]
            d[at + 1:stop:_FIELDS] = col
            d[at + 2:stop:_FIELDS] = col
            d[at + 3:stop:_FIELDS] = col
        tier.head = (head + m) % cap
        tier.size = min(cap, tier.size + n)

    @staticmethod
    def _extend_buckets(tier: _Tier, times: list[float], values: list[float]) -> None:
        width = tier.width
        if KERNELS is not None:
            folded = KERNELS.fold_buckets(
                times, values, width, tier.key, tier.o_t, tier.o_min, tier.o_max, tier.o_sum, tier.o_n
            )
            if folded is not None:
                closed, tier.key, tier.o_t, tier.o_min, tier.o_max, tier.o_sum, tier.o_n = folded
                push = tier.push
                for i in range(0, len(closed), _FIELDS):
                    push(closed[i], closed[i + 1], closed[i + 2], closed[i + 3])
                return
        n = len(times)
        if n >= 64:
            # Whole buckets found in C (the times are in order, so their
            # keys ``t // width`` are): their ends by bisection, their min,
            # max and sum over a slice, added in the loop's order
            # (``reduce``, not ``sum``, which compensates from Python 3.12 on).
            i = 0
            if times[0] // width == tier.key:  # the open bucket goes on
                i = _bucket_end(times, 0, tier.key, width)
                seg = values[:i]
                tier.o_min = min(tier.o_min, min(seg))
                tier.o_max = max(tier.o_max, max(seg))
                tier.o_sum = reduce(add, seg, tier.o_sum)
                tier.o_n += i
                if i == n:
                    return
            if tier.o_n:
                tier.push(tier.o_t, tier.o_min, tier.o_max, tier.o_sum / tier.o_n)
            push = tier.push
            while True:
                k = times[i] // width
                j = _bucket_end(times, i, k, width)
                seg = values[i:j]
                if j == n:
                    tier.key = k
                    tier.o_t = k * width
                    tier.o_min, tier.o_max, tier.o_sum, tier.o_n = min(seg), max(seg), reduce(add, seg), j - i
                    return
                push(k * width, min(seg), max(seg), reduce(add, seg) / (j - i))
                i = j
        key = tier.key
        o_t, o_min, o_max, o_sum, o_n = tier.o_t, tier.o_min, tier.o_max, tier.o_sum, tier.o_n
        for t, value in zip(times, values):
            k = t // width
            if k != key:
                if o_n:
                    tier.push(o_t, o_min, o_max, o_sum / o_n)
                key = k
                o_t = k * width
                o_min = o_max = o_sum = value
                o_n = 1
            else:
                if value < o_min:
                    o_min = value
                elif value > o_max:
                    o_max = value
                o_sum += value
                o_n += 1
        tier.key = key
        tier.o_t, tier.o_min, tier.o_max, tier.o_sum, tier.o_n = o_t, o_min, o_max, o_sum, o_n

    def window(self, seconds: float, end: float | None = None) -> Window:
        """(times, mins, maxs, means) of the last ``seconds`` up to ``end``.

        Picks the finest tier that still holds the window's start (one that
        has never wrapped holds everything); failing that, the coarsest. A
        bucket is included when any part of it lies in the window.
        """
        import numpy as np

        if self.last_time is None or not self._tiers:
            empty = np.empty(0)
            return empty, empty.copy(), empty.copy(), empty.copy()
        end = self.last_time if end is None else end
        start = end - seconds
        chosen = self._tiers[-1]
        for tier in self._tiers:
            if tier.size < tier.cap or tier.oldest() <= start:
                chosen = tier
                break
        rows = chosen.rows()
        times = rows[:, 0]
        lo = np.searchsorted(times, start - chosen.width, side="right" if chosen.width else "left")
        hi = np.searchsorted(times, end, side="right")
        rows = rows[lo:hi]
        return rows[:, 0].copy(), rows[:, 1].copy(), rows[:, 2].copy(), rows[:, 3].copy()

    def tier_of(self, seconds: float) -> float:
        """The bucket width ``window(seconds)`` would use (for chart labels)."""
        if not self._tiers:
            return 0.0
        if self.last_time is None:
            return self._tiers[0].width
        start = self.last_time - seconds
        for tier in self._tiers:
            if tier.size < tier.cap or tier.oldest() <= start:
                return tier.width
        return self._tiers[-1].width

    @property
    def nbytes(self) -> int:
        """Bytes of the ring buffers: fixed at construction."""
        return sum(t.data.itemsize * len(t.data) for t in self._tiers)


def _bucket_end(times: list[float], i: int, key: float, width: float) -> int:
    """The end of the bucket ``key`` whose first sample is ``times[i]``
    (times in order): the first index past it whose ``t // width`` is
    another. Found by bisecting the times for the bucket's end, then checked
    on the two samples at the cut, which settles it (the keys only grow); a
    time whose division lands across a float's rounding there (at or past
    ``(key + 1) * width`` rounded, yet still of ``key``) is bisected by its
    key instead. (The check of the last sample before the cut guards the
    other way round, which no search here has found: ``q * width <= t``
    held for every ``q = t // width`` tried.) Two divisions a bucket, not
    one a sample."""
    j = bisect_left(times, (key + 1) * width, i)
    if j > i and times[j - 1] // width == key and (j == len(times) or times[j] // width != key):
        return j
    return bisect_right(times, key, i, key=lambda t: t // width)


class GpuHistory:
    """Per-GPU used-memory history plus each GPU's latest sample.

    ``max_gpus`` bounds memory against a corrupt sample file naming
    thousands of GPU indices; samples beyond it are counted in ``dropped``.
    """

    def __init__(self, tiers: Sequence[tuple[float, int]] = DEFAULT_TIERS, max_gpus: int = 64) -> None:
        self._tiers = tuple(tiers)
        self._max_gpus = max_gpus
        self._used: dict[int, SeriesHistory] = {}
        self._last: dict[int, GpuSample] = {}
        self._total: dict[int, int] = {}
        self._lost: dict[int, GpuLost] = {}
        self.dropped = 0

    def add(self, event: GpuSample | GpuLost) -> None:
        gpu = event.gpu
        if gpu not in self._used:
            if len(self._used) >= self._max_gpus:
                self.dropped += 1
                return
            self._used[gpu] = SeriesHistory(self._tiers)
        if isinstance(event, GpuLost):
            self._lost[gpu] = event
            return
        self._last[gpu] = event
        if event.total_bytes is not None:
            self._total[gpu] = event.total_bytes
        if event.used_bytes is not None:
            self._used[gpu].append(event.time, event.used_bytes)

    @property
    def gpus(self) -> list[int]:
        return sorted(self._used)

    def used(self, gpu: int) -> SeriesHistory | None:
        return self._used.get(gpu)

    def last(self, gpu: int) -> GpuSample | None:
        """The newest sample (its util and processes may be None: not available)."""
        return self._last.get(gpu)

    def total_bytes(self, gpu: int) -> int | None:
        """The last known total, kept across samples that could not say."""
        return self._total.get(gpu)

    def lost(self, gpu: int) -> GpuLost | None:
        return self._lost.get(gpu)

    @property
    def nbytes(self) -> int:
        return sum(s.nbytes for s in self._used.values())
