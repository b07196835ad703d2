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
"""

from __future__ import annotations

from collections import deque

from ..parsers.events import Progress


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
