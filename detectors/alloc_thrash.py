"""alloc_thrash: the CUDA caching allocator keeps failing and retrying.

``num_alloc_retries`` (``torch.cuda.memory_stats``, in probe lines as
``alloc_retries``) counts the times a cudaMalloc failed, the allocator
freed its cached blocks and tried again. Each retry is a synchronising
flush of the cache: reserved memory falls and climbs back, which is the
swinging memory near the limit that ``memory_volatility`` sees, and steps
slow down. One retry is an event; a rate is a thrash. So the counter's
rise between a rank's probe lines is counted over ``alloc_thrash_window_s``
(``detectors.counters.RankRises``: a counter that goes down is a relaunch,
never a negative rate) and the busiest rank is judged: it fires at
``alloc_thrash_per_hour`` retries per hour and ``alloc_thrash_min_retries``
in the window (and, with a baseline, above ``alloc_thrash_baseline_factor``
times the good run's rate). It resolves once a window passes without a
retry; ``deadline()`` says when, so silence resolves it too.

Example: rank 3 retries on every other step of 10 s from minute 10.

>>> det = AllocThrash()
>>> out = []
>>> for i in range(120):
...     out += det.update(ProbeSample(10.0 * i, rank=3, alloc_retries=max(0, i - 60) // 2))
>>> [(a.state, a.time, a.evidence["rank"]) for a in out]
[('firing', 700.0, 3)]
>>> out[0].message.split(";")[0]
'CUDA allocator retries on rank 3: 5 in 10 min (30/h)'
"""

from __future__ import annotations

from ..parsers.events import Event, ProbeSample, ProcessExit, Tick
from .base import Alert, DetectorBase, Episode
from .config import DetectorConfig, fmt_duration
from .counters import HourlyBaseline, RankRises

NAME = "alloc_thrash"
REMEDY = (
    "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (segments grow in place instead of "
    "flush-and-retry on fragmentation), or lower the per-step token budget / the longest bucket"
)


class AllocThrash(HourlyBaseline, DetectorBase):
    name = NAME
    accepts = (ProbeSample, Tick, ProcessExit)
    timed = True  # deadline() can be set: the set asks it after each event it gets

    def __init__(self, config: DetectorConfig | None = None, baseline_per_hour: float | None = None) -> None:
        self.config = c = config or DetectorConfig()
        self.set_baseline(baseline_per_hour)
        self.episode = Episode(NAME)
        self.rises = RankRises(c.alloc_thrash_window_s)
        self._last_rise: float | None = None
        self.per_hour: float | None = None  # the busiest rank's rate when last judged

    def threshold(self) -> float:
        c = self.config
        return self._threshold(c.alloc_thrash_per_hour, c.alloc_thrash_per_hour, c.alloc_thrash_baseline_factor)

    def deadline(self) -> float | None:
        if self.episode.active and self._last_rise is not None:
            return self._last_rise + self.config.alloc_thrash_window_s
        return None

    def update(self, event: Event) -> list[Alert]:
        t = event.time
        if isinstance(event, ProbeSample):
            if event.alloc_retries is None:
                return []
            if self.rises.value(t, event.rank, event.alloc_retries):
                self._last_rise = t
                if not self.episode.active:
                    return self._judge(t, event.source)
            return self._quiet(t, event.source) if self.episode.active else []
        if isinstance(event, Tick):
            return self._quiet(t, "probe") if self.episode.active else []
        if isinstance(event, ProcessExit):
            # The process whose allocator retried is gone; a relaunch starts
            # with a clean allocator and counters from zero.
            self.rises = RankRises(self.config.alloc_thrash_window_s)
            self._last_rise = None
            if self.episode.active:
                self.per_hour = None
                return self.episode.resolve(t, "the training process exited: its allocator retries ended with it",
                                            event.source, {"window_s": self.config.alloc_thrash_window_s})
        return []

    def _quiet(self, t: float, where: str) -> list[Alert]:
        """Resolved once a whole window passed without a retry."""
        c = self.config
        quiet = t - self._last_rise if self._last_rise is not None else c.alloc_thrash_window_s
        if quiet < c.alloc_thrash_window_s:
            return []
        self.per_hour = 0.0
        msg = f"no CUDA allocator retries for {fmt_duration(quiet)}"
        return self.episode.resolve(t, msg, where, {"per_hour": 0.0, "window_s": c.alloc_thrash_window_s})

    def _judge(self, t: float, where: str) -> list[Alert]:
        """A rank's counter rose: is the busiest rank's rate a thrash now?
        (Between rises a rate only falls: nothing to judge.)"""
        c = self.config
        rank, count, rate = self.rises.busiest(t)
        self.per_hour = rate
        ep = self.episode
        if rate is None or count < c.alloc_thrash_min_retries:
            return []
        line = self.threshold()
        if rate < line:
            return []
        window = fmt_duration(self.rises.span(t, rank))
        where_rank = f" on rank {rank}" if rank is not None else ""
        versus = f", {self.baseline:.0f}/h in the good run" if self.baseline is not None else ""
        msg = (
            f"CUDA allocator retries{where_rank}: {count} in {window} ({rate:.0f}/h{versus}); "
            f"cudaMalloc fails, the cache is flushed and retried, memory swings near the limit; {REMEDY}"
        )
        evidence = {
            "rank": rank,
            "retries_in_window": count,
            "per_hour": round(rate, 2),
            "threshold_per_hour": line,
            "baseline_per_hour": self.baseline,
            "window_s": c.alloc_thrash_window_s,
            "ranks": self.rises.per_rank(t),
            "remedy": REMEDY,
        }
        return ep.fire(t, "warning", msg, where, evidence)

