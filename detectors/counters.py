"""Rises of per-rank cumulative counters over a time window, as a rate.

Probe lines carry counters that only grow within one process (the CUDA
allocator's ``num_alloc_retries``, dynamo's recompiles): what tells is
their rise between lines, per rank, counted over a window. A counter that
goes *down* is a new process (a relaunch): its first value is the new
reference, never a negative rise. Log events that are each one occurrence
(a ``Recompile`` line) are counted with ``add``.

The window is kept in ``buckets`` time buckets per rank, so the state is
bounded however often a rank reports; ranks past ``max_ranks`` drop the
least recently seen.

>>> r = RankRises(600.0)
>>> r.value(0.0, 0, 7)       # the first value is the reference
0
>>> r.value(60.0, 0, 10), r.value(120.0, 0, 4)   # +3, then a relaunch
(3, 0)
>>> r.resets
1
>>> r.busiest(120.0)         # 3 retries over 120 s on rank 0: 90 per hour
(0, 3, 90.0)
"""

from __future__ import annotations

from collections import OrderedDict, deque


class _RankState:
    __slots__ = ("last", "first", "rises", "total")

    def __init__(self, first: float) -> None:
        self.last: int | None = None
        self.first = first  # the time from which this rank's rate may be claimed
        self.rises: deque[list[float]] = deque()  # [bucket start, count], oldest first
        self.total = 0  # sum of the counts in ``rises``


class RankRises:
    """Per rank: how much a counter rose within the last ``window_s``."""

    __slots__ = ("window_s", "_bucket_s", "_max_ranks", "_ranks", "resets")

    def __init__(self, window_s: float, *, buckets: int = 60, max_ranks: int = 1024) -> None:
        self.window_s = window_s
        self._bucket_s = window_s / max(1, buckets)
        self._max_ranks = max_ranks
        self._ranks: OrderedDict[int | None, _RankState] = OrderedDict()
        self.resets = 0  # counters seen going down (relaunches)

    def _state(self, t: float, rank: int | None) -> _RankState:
        state = self._ranks.get(rank)
        if state is None:
            state = self._ranks[rank] = _RankState(t)
            if len(self._ranks) > self._max_ranks:
                self._ranks.popitem(last=False)
        else:
            self._ranks.move_to_end(rank)
        return state

    def value(self, t: float, rank: int | None, value: int) -> int:
        """A reading of the cumulative counter; returns its rise (0 for the
        first reading and after a reset)."""
        state = self._state(t, rank)
        last = state.last
        state.last = value
        if last is None:
            return 0
        if value < last:
            # A new process: its counter starts again. What the old one
            # counted stays in the window (it happened), the rate's span
            # is not cut: the relaunch is the caller's to judge.
            self.resets += 1
            return 0
        rise = value - last
        if rise:
            self._add(state, t, rise)
        return rise

    def add(self, t: float, rank: int | None, n: int = 1) -> None:
        """``n`` occurrences at ``t`` (a log line that is one recompile)."""
        self._add(self._state(t, rank), t, n)

    def _add(self, state: _RankState, t: float, n: int) -> None:
        rises = state.rises
        if rises and t - rises[-1][0] < self._bucket_s:
            rises[-1][1] += n
        else:
            rises.append([t, n])
        state.total += n

    def _expire(self, state: _RankState, t: float) -> None:
        rises = state.rises
        horizon = t - self.window_s
        while rises and rises[0][0] < horizon:
            state.total -= int(rises.popleft()[1])

    def total(self, t: float) -> int:
        """Rises of every rank within the window ending at ``t``."""
        out = 0
        for state in self._ranks.values():
            self._expire(state, t)
            out += state.total
        return out

    def busiest(self, t: float, since: float | None = None) -> tuple[int | None, int, float | None]:
        """(rank, count in the window, per hour) of the rank that rose most.

        The rate's span is the window, or less where the rank (or ``since``:
        the end of a warm-up) is younger; under a tenth of the window the
        rate is None (too short to claim one).
        """
        best: tuple[int | None, int, float | None] = (None, 0, None)
        best_key = (0, False)
        for rank, state in self._ranks.items():
            self._expire(state, t)
            start = state.first if since is None else max(state.first, since)
            span = min(self.window_s, t - start)
            rate = state.total * 3600.0 / span if span >= self.window_s / 10 else None
            key = (state.total, rate is not None)
            if key > best_key:
                best, best_key = (rank, state.total, rate), key
        return best

    def span(self, t: float, rank: int | None) -> float:
        """The seconds a rank's count in the window covers (its age, at most the window)."""
        state = self._ranks.get(rank)
        return 0.0 if state is None else min(self.window_s, t - state.first)

    def per_rank(self, t: float, limit: int = 16) -> dict[str, int]:
        """Counts in the window per rank that rose (evidence), at most ``limit``."""
        out: dict[str, int] = {}
        for rank, state in self._ranks.items():
            self._expire(state, t)
            if state.total:
                out[str(rank)] = state.total
        return dict(sorted(out.items(), key=lambda kv: -kv[1])[:limit])

    def empty(self) -> bool:
        """Nothing counted in any rank's window (``busiest`` counts 0)."""
        return not any(state.total or state.rises for state in self._ranks.values())

    def forget_history(self, t: float) -> None:
        """Drop what was counted (a new run starts): spans restart at ``t``."""
        for state in self._ranks.values():
            state.rises.clear()
            state.total = 0
            state.first = t


def hourly_rate(value: object) -> float | None:
    """A rate per hour from a baseline file (any JSON value): a finite
    number >= 0, else None (the detector then uses its absolute threshold)."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    v = float(value)
    return v if 0.0 <= v < float("inf") else None


class HourlyBaseline:
    """A detector (or part of one) judged on a count per hour against the
    good run's: ``set_baseline`` and the threshold, in one place.

    Without a baseline the threshold is the absolute one; with it, the good
    run's rate times a factor, but never under a minimum.
    """

    baseline: float | None

    def set_baseline(self, per_hour: float | None, /) -> None:
        """Judge from now on against the good run's rate (None: the absolute threshold)."""
        self.baseline = hourly_rate(per_hour)

    def _threshold(self, absolute: float, minimum: float, factor: float) -> float:
        if self.baseline is None:
            return absolute
        return max(minimum, self.baseline * factor)
