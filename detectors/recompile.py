"""recompile: torch.compile recompiles a function too often, or hits its limit.

Counting is per function: a limit hit, or ``storm_count`` non-limit
recompiles of one function within ``storm_window_s``, opens an episode.
The alert key of CONTRACTS (detector, gpu, kind) has no room for a function
name, so there is one episode for the whole run: the functions that join a
firing episode are recorded (``functions()``) rather than fired again. A
fatal limit hit (``fail_on_recompile_limit_hit``) escalates: a warning
episode is resolved and a critical one fires. The episode resolves after
``quiet_s`` without any recompile; ``deadline()`` gives that time.

Those alerts keep ``kind`` null (as they always had). Beside them, with
an episode of its own, ``kind`` ``rate``: recompiles per hour of the run
after warm-up against the good run's (``detectors/recompile_rate.py``).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence
from itertools import islice, repeat
from operator import lt
from typing import Any

from ..parsers.events import Event, ProbeSample, ProcessExit, Progress, Recompile, Tick
from ..parsers.step_columns import TIMES, read
from .base import Alert, DetectorBase, Episode, StepCommit
from .config import DetectorConfig, fmt_duration
from .recompile_rate import RecompileRate

NAME = "recompile"


def _unchanged() -> None:
    """The commit of step lines that change nothing (``quiet_steps``)."""


class RecompileDetector(DetectorBase):
    name = NAME
    accepts = (Recompile, Tick, Progress, ProcessExit, ProbeSample)
    timed = True  # deadline() can be set: the set asks it after each event it gets

    def __init__(self, config: DetectorConfig | None = None, baseline_per_hour: float | None = None) -> None:
        self.config = config or DetectorConfig()
        self.episode = Episode(NAME)
        self.rate = RecompileRate(self.config, baseline_per_hour)
        self._times: OrderedDict[str, deque[float]] = OrderedDict()
        self._last: float | None = None
        self._involved: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def deadline(self) -> float | None:
        if self.episode.active and self._last is not None:
            return self._last + self.config.recompile_quiet_s
        return None

    def functions(self) -> dict[str, dict[str, Any]]:
        """Per function of the open episode: recompiles, limit, last reason."""
        return {k: dict(v) for k, v in self._involved.items()}

    def set_baseline(self, per_hour: float | None) -> None:
        """The good run's recompiles per hour (the ``rate`` kind's reference)."""
        self.rate.set_baseline(per_hour)

    def quiet_steps(self, steps: Sequence[Progress], /) -> StepCommit | None:
        """Step lines with no episode open (``base.StepCommit``; no deadline
        then): all before the rate's next look, they change nothing
        (``update``'s first line); across it, the look fires nothing while
        nothing is counted (``RecompileRate.silent``), and the commit feeds
        them as one at a time would (a look a minute: cheap)."""
        if self.episode.active:
            return None
        rate = self.rate
        times = read(steps, TIMES)[0]
        if all(map(lt, times, repeat(rate.next_check))):  # (each ``p.time < check``, in C)
            return _unchanged
        if not rate.silent():
            return None
        update = self.update

        def commit() -> None:
            # ``update`` of each step, but for those before the rate's next
            # look, which its first line returns from at once (no episode
            # opens here): each look's step found in C, then fed.
            i, n = 0, len(times)
            while i < n:
                before = list(map(lt, islice(times, i, None), repeat(rate.next_check)))
                if all(before):
                    return
                i += before.index(False)
                update(steps[i])
                i += 1

        return commit

    def update(self, event: Event) -> list[Alert]:
        # A step line (the hot path) between the rate's looks at itself, with
        # no episode to resolve: nothing to do.
        if type(event) is Progress and event.time < self.rate.next_check and not self.episode.active:
            return []
        rated = self.rate.update(event)
        out = self._update(event)
        return out + rated if rated else out

    def _update(self, event: Event) -> list[Alert]:
        if isinstance(event, Recompile):
            return self._recompile(event)
        if isinstance(event, ProbeSample):
            return []
        if self.episode.active and self._last is not None and event.time >= self._last + self.config.recompile_quiet_s:
            msg = f"no torch.compile recompiles for {fmt_duration(event.time - self._last)}"
            involved = self.functions()
            self._involved.clear()
            return self.episode.resolve(event.time, msg, getattr(event, "source", "recompile"), {"functions": involved})
        return []

    def _recompile(self, r: Recompile) -> list[Alert]:
        c = self.config
        t = r.time
        fn = r.function or "<unknown function>"
        self._last = t
        times = self._times.get(fn)
        if times is None:
            times = self._times[fn] = deque(maxlen=max(2, c.recompile_storm_count))
            if len(self._times) > 256:
                self._times.popitem(last=False)
        else:
            self._times.move_to_end(fn)
        limit_hit = r.hit_limit or r.fatal
        if not limit_hit:
            times.append(t)
        info = self._involved.get(fn) or {"recompiles": 0, "limit": None, "reason": None, "hit_limit": False}
        info["recompiles"] = max(info["recompiles"] + 1, len(times))
        info["reason"] = r.reason
        info["limit"] = r.limit if r.limit is not None else info["limit"]
        info["hit_limit"] = info["hit_limit"] or limit_hit
        ep = self.episode
        if ep.active:
            if fn in self._involved or len(self._involved) < 32:
                self._involved[fn] = info
            fired = ep.fired_alert
            if r.fatal and fired is not None and fired.severity != "critical":
                out = ep.resolve(t, f"escalated: the recompile limit of {fn} is fatal", r.source, {})
                return out + self._fire(r, fn, "limit", info)
            if limit_hit and fired is not None and fired.evidence.get("what") == "storm":
                # The storm's alert said "recompiled N times"; the limit hit
                # that ends it is the fact that matters (the function runs
                # eagerly from here on), and it came while the episode was
                # open: said, not only recorded.
                out = ep.resolve(t, f"became: the recompile limit of {fn} was hit", r.source, {})
                return out + self._fire(r, fn, "limit", info)
            return []
        if limit_hit:
            return self._fire(r, fn, "limit", info)
        n = len(times)
        if n >= c.recompile_storm_count and t - times[0] <= c.recompile_storm_window_s:
            return self._fire(r, fn, "storm", info)
        return []

    def _fire(self, r: Recompile, fn: str, what: str, info: dict[str, Any]) -> list[Alert]:
        c = self.config
        self._involved.clear()
        self._involved[fn] = info
        reason = f" (last reason: {r.reason})" if r.reason else ""
        where = f" on rank {r.rank}" if r.rank is not None else ""
        if what == "limit":
            limit = f" ({r.limit})" if r.limit is not None else ""
            if r.fatal:
                msg = f"torch.compile hit its recompile limit{limit} for {fn}{where} and the run fails on it{reason}"
            else:
                msg = f"torch.compile hit its recompile limit{limit} for {fn}{where}: it now runs eagerly, slowly{reason}"
        else:
            times = self._times[fn]
            msg = (
                f"torch.compile recompiled {fn} {len(times)} times in {fmt_duration(r.time - times[0])}{where}"
                f"{reason}"
            )
        evidence = {
            "function": fn,
            "what": what,
            "reason": r.reason,
            "limit": r.limit,
            "fatal": r.fatal,
            "rank": r.rank,
            "recompiles_in_window": len(self._times.get(fn, ())),
            "window_s": c.recompile_storm_window_s,
        }
        return self.episode.fire(r.time, "critical" if r.fatal else "warning", msg, r.source, evidence, r.rank)
