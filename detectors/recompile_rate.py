"""recompile, kind ``rate``: torch.compile recompiles per hour, after warm-up.

The limit and storm alerts (``detectors/recompile.py``, kind null) look at
one function at a time; this looks at the run: recompiles per hour on the
busiest rank over ``recompile_rate_window_s``, counted from the rise of the
probe's cumulative ``recompiles`` (dynamo's own counter: every recompile)
or, without probe figures, from the ``Recompile`` lines of the log (only
those ``TORCH_LOGS=recompiles`` prints). The first
``recompile_rate_warmup_s`` of the run and of each relaunch (a job exit, a
probe counter going down) compile by design and are not counted.

Without a baseline it fires at ``recompile_rate_per_hour``; with the good
run's ``recompiles_per_hour`` at ``recompile_rate_factor`` times that (at
least ``recompile_rate_min_per_hour``), on at least
``recompile_rate_min_count`` recompiles in the window. It resolves once
the rate is below ``recompile_rate_resolve_frac`` of the threshold.

Example: a probe whose counter rises every 2 minutes from minute 22 (warm-up
ends at minute 15): 15 recompiles in the 30-minute window is 30 per hour.

>>> rate = RecompileRate()
>>> out = []
>>> for i in range(360):
...     n = max(0, i - 120) // 12
...     out += rate.update(ProbeSample(10.0 * i, rank=0, recompiles=n))
>>> [(a.state, a.kind, a.time) for a in out]
[('firing', 'rate', 3000.0)]
>>> out[0].message.split(";")[0]
'torch.compile recompiled 15 times in 30 min after warm-up (30/h) on rank 0'
"""

from __future__ import annotations

from ..parsers.events import Event, ProbeSample, ProcessExit, Progress, Recompile, Tick
from .base import Alert, Episode
from .config import DetectorConfig, fmt_duration
from .counters import HourlyBaseline, RankRises

NAME = "recompile"
KIND = "rate"
_CHECK_EVERY_S = 60.0  # data seconds between looks on progress lines alone
REMEDY = (
    "run with TORCH_LOGS=recompiles to see which guard fails (shapes that change every batch: "
    "pad to bucket sizes or mark them dynamic with torch._dynamo.mark_dynamic)"
)


class RecompileRate(HourlyBaseline):
    """One part of the ``recompile`` detector, with an episode of its own."""

    def __init__(self, config: DetectorConfig | None = None, baseline_per_hour: float | None = None) -> None:
        self.config = c = config or DetectorConfig()
        self.set_baseline(baseline_per_hour)
        self.episode = Episode(NAME, kind=KIND)
        self._probe = RankRises(c.recompile_rate_window_s)
        self._log = RankRises(c.recompile_rate_window_s)
        self._probe_seen = False
        self._start: float | None = None  # first event of this (re)start
        self._counting = False  # warm-up over: rises count
        self._resets = 0
        # No look before this data time on step lines alone (the recompile
        # detector skips the call on the hot path).
        self.next_check = float("-inf")

    def threshold(self) -> float:
        c = self.config
        return self._threshold(c.recompile_rate_per_hour, c.recompile_rate_min_per_hour, c.recompile_rate_factor)

    def per_hour(self, t: float) -> float | None:
        """Recompiles per hour on the busiest rank at ``t``, once it can be told."""
        if not self._counting:
            return None
        return self._rises().busiest(t, self._warm_end())[2]

    def _rises(self) -> RankRises:
        return self._probe if self._probe_seen else self._log

    def _warm_end(self) -> float:
        return (self._start or 0.0) + self.config.recompile_rate_warmup_s

    def update(self, event: Event) -> list[Alert]:
        t = event.time
        if type(event) is Progress or isinstance(event, Tick):
            if self._start is None and type(event) is Progress:
                self._start = t
            if t < self.next_check:
                return []
            return self._judge(t, getattr(event, "source", "recompile"))
        if isinstance(event, ProbeSample):
            if event.recompiles is None:
                return []
            self._probe_seen = True
            self._begin(t)
            rise = self._probe.value(t, event.rank, event.recompiles)
            if self._probe.resets != self._resets:  # a new process: it compiles anew
                self._resets = self._probe.resets
                self._start, self._counting = t, False
            # A rate rises only with a rise; it falls with time, looked at
            # once a minute (eight ranks report every step).
            if rise or t >= self.next_check:
                return self._judge(t, event.source)
            return []
        if isinstance(event, Recompile):
            self._begin(t)
            if self._probe_seen:
                return []
            self._counting_now(t)
            if self._counting:
                self._log.add(t, event.rank)
            return self._judge(t, event.source)
        if isinstance(event, ProcessExit):
            self._start, self._counting = None, False
            self.next_check = float("-inf")  # the next step line starts the warm-up
        return []

    def _begin(self, t: float) -> None:
        if self._start is None:
            self._start = t

    def _counting_now(self, t: float) -> None:
        """Past the warm-up: start counting (what came before is forgotten)."""
        if not self._counting and self._start is not None and t >= self._warm_end():
            self._counting = True
            self._probe.forget_history(self._warm_end())
            self._log.forget_history(self._warm_end())

    def silent(self) -> bool:
        """No look can fire while nothing is counted: a count under
        ``recompile_rate_min_count`` (at least 1) never does. Looks still
        move ``next_check`` and end the warm-up (``quiet_steps`` replays them)."""
        return self.config.recompile_rate_min_count >= 1 and self._rises().empty()

    def _judge(self, t: float, where: str) -> list[Alert]:
        self.next_check = t + _CHECK_EVERY_S
        self._counting_now(t)
        if not self._counting:
            return []
        c = self.config
        rank, count, rate = self._rises().busiest(t, self._warm_end())
        line = self.threshold()
        ep = self.episode
        if ep.active:
            if rate is not None and rate < line * c.recompile_rate_resolve_frac:
                msg = f"torch.compile recompiles down to {rate:.1f}/h"
                return ep.resolve(t, msg, where, {"per_hour": round(rate, 2), "threshold_per_hour": line})
            return []
        if rate is None or count < c.recompile_rate_min_count or rate < line:
            return []
        span = fmt_duration(self._rises().span(t, rank))
        on = f" on rank {rank}" if rank is not None else ""
        versus = f", {self.baseline:.1f}/h in the good run" if self.baseline is not None else ""
        msg = (
            f"torch.compile recompiled {count} times in {span} after warm-up ({rate:.0f}/h{versus}){on}; "
            f"each recompile stalls the step; {REMEDY}"
        )
        evidence = {
            "what": KIND,
            "rank": rank,
            "recompiles_in_window": count,
            "per_hour": round(rate, 2),
            "threshold_per_hour": line,
            "baseline_per_hour": self.baseline,
            "window_s": c.recompile_rate_window_s,
            "source": "probe" if self._probe_seen else "log",
            "remedy": REMEDY,
        }
        return ep.fire(t, "warning", msg, where, evidence)

