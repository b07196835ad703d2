"""Which progress lines are new steps: shared by throughput_drop and stall.

Eight ranks print the same step within milliseconds of each other, in any
order and with stamps that go back and forth; counting each copy would
weigh a step eight times and measure "intervals" of a few ms between
copies. ``StepDeduper`` keeps the last steps seen, and ``sorted_median``
is the median of the sorted windows both detectors keep.

>>> d = StepDeduper(30.0)
>>> from dflash_watch.parsers.events import Progress
>>> [d.is_copy(Progress(t, "log:1", step=s, rank=r)) for t, s, r in
...  [(10.003, 5, 0), (9.998, 5, 3), (15.0, 6, 3), (14.999, 5, 7), (15.002, 6, 0)]]
[False, True, False, True, True]

A run of step lines is answered at once, the same way, without changing
anything until ``take`` (the batching contract, ``base.StepCommit``):

>>> e = StepDeduper(30.0)
>>> seen = e.peek([5, 5, 6, 5, 6], [10.003, 9.998, 15.0, 14.999, 15.002], [0, 3, 3, 7, 0])
>>> (list(seen.new), seen.rank, e._times)
([0, 2], 0, {})
>>> e.take(seen)
>>> e._times == d._times
True

A log may keep two step counts (``throughput_limits.series_of``: a tqdm
bar counting micro-batches beside lines counting optimizer steps): a copy
is the same step of the same count, so ``SeriesDeduper`` keeps one
``StepDeduper`` per count. The bar's micro-batch 5 is no copy of the
lines' step 5 that comes seconds later:

>>> s = SeriesDeduper(30.0)
>>> [s.of[k].is_copy(Progress(t, "log:1", step=5)) for t, k in [(10.0, 1), (12.0, 0), (12.5, 0)]]
[False, False, True]
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import compress

from ..parsers.events import Progress
from ..parsers.native import KERNELS


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

    ``peek`` and ``take`` answer a run of step lines at once (the batching
    contract of issue 20, ``base.StepCommit``): the answers and the state
    ``is_copy`` one line at a time would give.
    """

    __slots__ = ("_recent", "_times", "_window", "_rank")

    _KEEP = 64  # steps remembered

    def __init__(self, window_s: float) -> None:
        # The last steps in arrival order, and the times of each step among
        # them (never empty): one dict lookup per report instead of a scan
        # of all 64.
        self._recent: deque[int] = deque()
        self._times: dict[int, list[float]] = {}
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
            times.append(p.time)
        else:
            self._times[step] = [p.time]
        recent = self._recent
        recent.append(step)
        if len(recent) > self._KEEP:
            self._forget(recent.popleft())
        return False

    def _forget(self, step: int) -> None:
        """The oldest entry leaves: it is also the oldest time of its step."""
        old_times = self._times[step]
        if len(old_times) == 1:
            del self._times[step]
        else:
            del old_times[0]

    def peek(self, steps: list[int | None], times: list[float], ranks: list[int | None]) -> SeenSteps:
        """What ``is_copy`` would answer for each step line (given as its
        ``step``, ``time`` and ``rank`` columns) fed in order, and the lowest
        rank after them, changing nothing (the batching contract's ask:
        ``take`` then records them as ``is_copy`` would).

        The steps ``is_copy`` would record in between are held aside, with
        their places in the arrival order, so that an entry forgotten
        mid-run (the 64 kept slide on) stops counting exactly when it would.
        Two shapes are read without a look per line: steps all new (one
        rank's step lines), and a step's further copies all within the
        window of the time that made the first one new or a copy (many
        ranks' lines of one step).
        """
        n = len(steps)
        rank_min = self._rank
        times_of = self._times
        numbers = set(steps)
        stepless = None in numbers
        ordered = False  # step numbers never go down: a step's lines are one stretch
        if not stepless:
            try:
                low = min(ranks)  # type: ignore[type-var]
            except TypeError:  # some have no rank (most logs: none has, counted in C)
                low = None if ranks.count(None) == n else min([r for r in ranks if r is not None])
            if low is not None and (rank_min is None or low < rank_min):
                rank_min = low
            if len(numbers) == n and times_of.keys().isdisjoint(steps):
                return SeenSteps(steps, times, range(n), rank_min, True)
            ordered = sorted(steps) == steps  # type: ignore[type-var]
        finite = math.isfinite(sum(times))
        latest = max(times) if finite else math.nan  # no step's later line is after it
        recent = self._recent
        window = self._window
        held = len(recent)
        over = held - self._KEEP  # entries forgotten = over + recorded, when > 0
        recorded_at: dict[int, list[tuple[int, float]]] = {}  # step -> (place, time) recorded in the run
        recorded = 0
        fresh: list[int] = []  # the lines that are not copies
        i = 0
        while i < n:
            step = steps[i]
            if stepless:
                rank = ranks[i]
                if rank is not None and (rank_min is None or rank < rank_min):
                    rank_min = rank
                if step is None:
                    if rank is None or rank == rank_min:
                        fresh.append(i)
                    i += 1
                    continue
            assert step is not None
            pt = times[i]
            gone = over + recorded  # the first ``gone`` places are forgotten
            witness: float | None = None  # a kept time within the window of pt
            old = times_of.get(step)
            if old is not None:
                skip = _forgotten(recent, step, gone) if gone > 0 else 0
                for k, t in enumerate(old):
                    if k >= skip and pt - t <= window:
                        witness = t
                        break
            mine = recorded_at.get(step)
            if witness is None and mine is not None:
                for place, t in mine:
                    if place >= gone and pt - t <= window:
                        witness = t
                        break
            if witness is None:
                fresh.append(i)
                if mine is None:
                    mine = recorded_at[step] = []
                mine.append((held + recorded, pt))
                recorded += 1
                witness = pt
            i += 1
            if stepless or not finite:
                continue
            # The same step's next lines: copies while within the window of
            # the witness (kept until a line is recorded, and none is).
            if ordered:
                j = bisect_right(steps, step, i)  # type: ignore[type-var]
            else:
                j = i
                while j < n and steps[j] == step:
                    j += 1
            if j > i and (latest - witness <= window or max(times[i:j]) - witness <= window):
                i = j
        return SeenSteps(steps, times, fresh, rank_min, False)

    def take(self, seen: SeenSteps) -> None:
        """Record the steps ``peek`` saw, as ``is_copy`` fed them in order would."""
        self._rank = seen.rank
        times_of = self._times
        recent = self._recent
        if not seen.fresh:
            keep = self._KEEP
            steps_seen, times_seen = seen.steps, seen.times
            for i in seen.new:
                step = steps_seen[i]
                if step is None:
                    continue
                t = times_seen[i]
                times = times_of.get(step)
                if times is None:
                    times_of[step] = [t]
                else:
                    times.append(t)
                recent.append(step)
                if len(recent) > keep:
                    self._forget(recent.popleft())
            return
        # All new and distinct: recorded at once, then the oldest forgotten
        # in order (no step is both forgotten and recorded again, so the
        # dict keeps the one-at-a-time order).
        steps: list[int] = seen.steps  # type: ignore[assignment]
        held = len(recent)
        extra = held + len(steps) - self._KEEP
        if extra >= held:
            # Every entry kept now is forgotten, and the run's first ones
            # too: what stays is the run's last 64.
            first = extra - held
            times_of.clear()
            times_of.update(zip(steps[first:], [[t] for t in seen.times[first:]]))
            recent.clear()
            recent.extend(steps[first:])
            return
        times_of.update(zip(steps, [[t] for t in seen.times]))
        if extra <= 0:
            recent.extend(steps)
            return
        both = list(recent)
        both += steps
        self._recent = deque(both[extra:])
        gone = both[:extra]
        # Each entry is one of its step's times and no list is empty, so the
        # sum is ``extra`` only when each is its step's only time (and no
        # step comes twice).
        if sum(map(len, map(times_of.__getitem__, gone))) == extra:
            deque(map(times_of.pop, gone), maxlen=0)
        else:
            for step in gone:
                self._forget(step)


@dataclass(slots=True)
class SeenSteps:
    """``StepDeduper.peek``'s answer, for ``take``: the steps' numbers and
    stamps, which are new (not copies), the lowest rank after them, and
    whether they are all new and distinct (recorded in one go)."""

    steps: list[int | None]
    times: list[float]
    new: Sequence[int]  # the places of the lines that are not copies, in order
    rank: int | None
    fresh: bool


_FLIP = bytes([1, 0]) + bytes(254)  # ``bytes.translate``'s table: 0 <-> 1


class SeriesDeduper:
    """One ``StepDeduper`` per step series (``throughput_limits.series_of``:
    ``of[0]`` the step lines', ``of[1]`` the tqdm bars'): a rank copy is the
    same step of the same series; two counts that pass the same numbers (a
    bar of micro-batches, lines of optimizer steps) never drop each other's
    lines.

    ``peek`` and ``take`` answer a run of step lines of both series at once,
    as each series' own deduper fed its lines in order would (the batching
    contract, ``base.StepCommit``): the series are independent, so each
    one's lines are peeked on their own (columns picked in C, no look per
    line) and the answers merged in place.
    """

    __slots__ = ("of",)

    def __init__(self, window_s: float) -> None:
        self.of = (StepDeduper(window_s), StepDeduper(window_s))

    def peek(self, steps: list[int | None], times: list[float], ranks: list[int | None],
             bars: list[bool]) -> SeenSeries:
        """What the series' dedupers would answer for each step line (given
        as its columns and whether it is a bar's), changing nothing."""
        if KERNELS is not None:
            # Steady training of one rank (every step new, each series going
            # up past what its deduper remembers) picked per series in one
            # pass in C (``parsers.native``); None: read below.
            split = KERNELS.fresh_series(steps, times, ranks, bars, self.of[0]._times, self.of[1]._times)
            if split is not None:
                return self._all_new(len(bars), split)
        if True not in bars:
            seen = self.of[0].peek(steps, times, ranks)
            return SeenSeries(seen.new, ((0, seen),))
        if False not in bars:
            seen = self.of[1].peek(steps, times, ranks)
            return SeenSeries(seen.new, ((1, seen),))
        picks = (bytes(bars).translate(_FLIP), bars)  # the lines': each bar's flag flipped, in C
        parts = tuple(
            (k, self.of[k].peek(list(compress(steps, pick)), list(compress(times, pick)), list(compress(ranks, pick))))
            for k, pick in enumerate(picks)
        )
        n = len(bars)
        if sum(len(seen.new) for _, seen in parts) == n:
            return SeenSeries(range(n), parts)  # no copy: every line, in order
        new: list[int] = []
        for (_, seen), pick in zip(parts, picks):
            places = list(compress(range(n), pick))
            new += map(places.__getitem__, seen.new)
        new.sort()
        return SeenSeries(new, parts)

    def _all_new(self, n: int, split: tuple[list[int], list[float], list[int], list[float]]) -> SeenSeries:
        """``peek``'s answer where every line is new, from each series'
        steps and times (``fresh_series``): the same as each deduper's
        ``peek`` answers then (no rank, so the lowest rank is unchanged)."""
        steps0, times0, steps1, times1 = split
        parts = tuple(
            (k, SeenSteps(part_steps, part_times, range(len(part_steps)), self.of[k]._rank, True))  # type: ignore[arg-type]
            for k, part_steps, part_times in ((0, steps0, times0), (1, steps1, times1))
            if part_steps
        )
        return SeenSeries(range(n), parts)

    def take(self, seen: SeenSeries) -> None:
        """Record what ``peek`` saw, in each series' deduper."""
        of = self.of
        for k, part in seen.parts:
            of[k].take(part)


@dataclass(slots=True)
class SeenSeries:
    """``SeriesDeduper.peek``'s answer: the places of the lines that are not
    copies (in order, over the whole run), and each series' own answer."""

    new: Sequence[int]
    parts: tuple[tuple[int, SeenSteps], ...]


def _forgotten(recent: deque[int], step: int, gone: int) -> int:
    """How many of ``step``'s kept times are among the first ``gone`` entries
    (its oldest: a step's times are kept in arrival order)."""
    n = 0
    start = 0
    end = min(gone, len(recent))
    while start < end:
        try:
            start = recent.index(step, start, end) + 1
        except ValueError:
            break
        n += 1
    return n
