"""A data clock that only runs forward, for durations measured on log stamps.

Log stamps are not a monotonic clock: eight ranks' lines interleave with
times going back and forth by milliseconds, and NTP or a DST fall-back sets
the stamps back by seconds to an hour. A detector that measures "low for
90 s" or "learned over 5 min" on raw stamps reads a backward step as a
relaunch or waits an hour for its window to empty. ``Timeline`` maps each
stamp to a time that never goes back: a step back within ``jitter_s`` is
no time passed; a larger one is a jump, stepped over by an offset so that
the durations around it stay true (the first stamp after the jump counts
as one usual interval later).

>>> line = Timeline(jitter_s=2.0)
>>> [line.at(t) for t in (100.0, 99.997, 105.0)]
[100.0, 100.0, 105.0]
>>> line.at(1905.0 - 3600.0, step_s=5.0)  # DST fall-back: one interval on
110.0
>>> (line.at(1910.0 - 3600.0), line.jumps)
(115.0, 1)
"""

from __future__ import annotations


class Timeline:
    __slots__ = ("jitter_s", "offset", "last", "jumps")

    def __init__(self, jitter_s: float = 2.0) -> None:
        self.jitter_s = jitter_s
        self.offset = 0.0
        self.last: float | None = None
        self.jumps = 0  # backward jumps stepped over

    def at(self, t: float, step_s: float = 0.0) -> float:
        """The monotone time of stamp ``t``; ``step_s`` is the usual
        interval, counted across a backward jump."""
        e = t + self.offset
        last = self.last
        if last is not None and e < last:
            if last - e <= self.jitter_s:
                e = last
            else:
                self.offset += last + step_s - e
                e = last + step_s
                self.jumps += 1
        self.last = e
        return e

    def raw(self, e: float) -> float:
        """The stamp of a monotone time (on the current offset)."""
        return e - self.offset
