"""straggler: one rank holds the others back (CONTRACTS section 4).

Per-rank timing comes from probe lines (``ProbeSample``: ``step_seconds``,
``compute_seconds``, ``wait_seconds``), from progress lines that carry a
rank (``[rank3]:`` prefixes, or a per-rank log named ``rank3.log``) and
their step time, and from ``Heartbeat`` lines (where a rank waits).

``slow``: under DDP every rank's step takes the same wall time, so the step
time names nobody; the split does: the slow rank computes longest and
waits least. The judged figure is each rank's median compute seconds over
``straggler_window_s`` (``step - wait`` where only those are given), the
same stretch of data time for every rank, the one all of them have
reported (a rank whose lines come late is judged on the same steps as the
others: ``_stretch``); only where no rank gives a split is the step time
judged (ranks that do not wait for each other, whose step times then
differ). A rank fires when its figure is ``straggler_slow_factor`` times
the median of the other ranks' (and ``straggler_slow_min_excess_s`` more)
for ``straggler_slow_for_s``; where waits are known it must also wait no
more than the others do. It resolves once its ratio is under
``straggler_resolve_factor``.

``hung``: no rank stepped for ``max(straggler_hung_min_s,
straggler_hung_factor x the usual step interval)`` and the others wait on
one: their heartbeats say they wait in a collective (or their collective
timed out) while it, silent, does not; or its last step is behind theirs.
A rank silent for that long by its own cadence while the others step on
has stopped reporting: hung too. ``deadline()`` is when either becomes
true, so a Tick fires it. It resolves when the rank steps again.

Never fired: a single rank (nothing to compare), ranks that log at
different intervals (each is judged by its own cadence), rank 0 alone in
an evaluation or a save (``Phase``: the others wait on it for
``straggler_phase_allowance_s``), each rank's first ``straggler_warmup_s``.

Example: rank 2 computes 0.5 s per step, ranks 0 and 1 0.3 s, from the
start: judged once each rank has 5 reports (t=5), named 2 minutes later.

>>> det = Straggler(DetectorConfig(straggler_warmup_s=0.0))
>>> out = []
>>> for i in range(400):
...     for r in range(3):
...         c = 0.5 if r == 2 else 0.3
...         out += det.update(ProbeSample(float(i), rank=r, step=i, step_seconds=0.6,
...                                       compute_seconds=c, wait_seconds=0.6 - c))
>>> [(a.state, a.kind, a.rank, a.time) for a in out]
[('firing', 'slow', 2, 125.0)]
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..parsers.events import (
    Crash,
    Delivery,
    Event,
    Heartbeat,
    Phase,
    ProbeSample,
    ProcessExit,
    Progress,
    Tick,
)
from ..parsers.step_columns import columns_of, read
from .base import Alert, DetectorBase, Episode, Handler, StepCommit
from .config import DetectorConfig, fmt_duration
from .stall import BURSTS_ALLOWED
from .steps import sorted_median
from .straggler_hung import find_hung, hung_report, next_deadline, quiet_floor
from .straggler_ranks import RankRow, RankState, rank_of_source, sources_name_ranks, take_log_steps

NAME = "straggler"
# Ranks followed at most (a bounded state even if a log names rank 999999).
_MAX_RANKS = 4096
# Judge at most this often in data time (a report per rank per step).
_JUDGE_EVERY_S = 1.0
_COLLECTIVE_KINDS = ("nccl_timeout",)
# What a run is read in (``quiet_steps``): one pass over its lines.
_COLUMNS = columns_of("time", "rank", "source", "step_seconds")

__all__ = ["NAME", "RankRow", "Straggler"]


def _judgements(times: list[float], next_judge: float) -> tuple[float, int, int]:
    """(the next judging time, the first and last line judged, -1: none) of
    step lines at ``times`` (finite), judged at most once per
    ``_JUDGE_EVERY_S`` from ``next_judge`` on, as ``_judged`` would one by
    one. Stamps in order (most runs): each judgement found by ``bisect``,
    not a look per line."""
    first = last = -1
    if sorted(times) != times:
        for i, t in enumerate(times):
            if t >= next_judge:
                next_judge = t + _JUDGE_EVERY_S
                last = i
                if first < 0:
                    first = i
        return next_judge, first, last
    n = len(times)
    i = bisect_left(times, next_judge)  # the first line at or after it
    if i < n:
        first = i
        while i < n:
            last = i
            next_judge = times[i] + _JUDGE_EVERY_S
            i = bisect_left(times, next_judge, i + 1)
    return next_judge, first, last


class Straggler(DetectorBase):
    name = NAME
    accepts = (Progress, ProbeSample, Heartbeat, Phase, Crash, ProcessExit, Tick, Delivery)
    timed = True

    def __init__(self, config: DetectorConfig | None = None) -> None:
        self.config = config or DetectorConfig()
        # The hung rules' config: the floor raised to a few burst intervals
        # of a log that arrives in bursts (``_delivered``).
        self._hung_config = self.config
        self._bursts: dict[str, float] = {}
        self.ranks: dict[int, RankState] = {}
        self.slow = Episode(NAME, kind="slow")
        self.hung = Episode(NAME, kind="hung")
        self.slow_rank: int | None = None
        self.hung_rank: int | None = None
        self.metric: str | None = None  # "compute" or "step": what the last judgement compared
        self._candidate: int | None = None  # the rank now over the factor...
        self._candidate_since: float | None = None  # ...since then
        self._phase: Phase | None = None
        self._now: float | None = None
        self._next_judge = float("-inf")
        self._deadline: float | None = None
        self._stopped = False  # the job exited: nothing to judge until it steps again
        # Per figure, the time of the latest report of any rank (each
        # RankState keeps it up, ``RankState.newest`` per rank), -inf before any.
        self._newest_any: dict[str, float] = dict.fromkeys(("step", "compute", "wait"), -math.inf)

    # -- the detector --------------------------------------------------------
    def deadline(self) -> float | None:
        d = self._deadline
        if d is None or (self._now is not None and d <= self._now):
            return None
        return d

    def fast_routes(self) -> dict[type[Event], Handler]:
        return {Progress: self._on_progress}

    def _on_progress(self, p: Progress) -> list[Alert]:
        """A step line: ``update``'s path for it, without the type tests."""
        t = p.time
        if self._now is None or t > self._now:
            self._now = t
        self._progress(p)
        return self._judged(t)

    def quiet_steps(self, steps: Sequence[Progress], /) -> StepCommit | None:
        """A run of step lines at once (``base.StepCommit``), when provably quiet.

        Between two judgements a step line changes the ranks' figures and
        nothing else (no hang is open to resolve); a judgement fires only
        ``slow`` or ``hung``. ``slow`` is judged (fired, resolved, counted
        towards) only with two ranks' step or compute seconds within the
        window: none are (``_newest_any``) and these lines bring none, so
        an open ``slow`` stays as it is. ``hung`` and the deadline are held
        off by ``quiet_floor``: every stamp of the run under the floor plus
        ``straggler_hung_min_s`` away from it. Lines that name no rank (the
        common case: one process's log) change no rank at all: the commit
        only moves the clock and the judging times, and judges the deadline
        once, at the last judgement the lines would have made; lines of
        ranks are taken one by one (``_progress``), judged only there too.
        """
        if self.hung.active:
            return None  # a step of the hung rank resolves it (``quiet_floor`` rules it out too)
        times, line_ranks, sources, seconds = read(steps, _COLUMNS)
        if not math.isfinite(sum(times)):
            return None  # NaN or infinite stamps: not worth a proof
        n = len(steps)
        rankless = line_ranks.count(None) == n
        if rankless and sources_name_ranks(sources):
            rankless = False  # per-rank files: their lines are their ranks'
        if not rankless and seconds.count(None) != n:
            return None  # figures: a judgement of ``slow`` could start counting
        ranks = self.ranks
        now = self._now
        high = max(times)
        end = high if now is None or high > now else now  # the clock after the run (``_on_progress``'s fold)
        if rankless and len(ranks) < 2 and self._deadline is None:
            # The common case: a log of one process, no rank anywhere. A
            # judgement of fewer than two ranks finds nothing and leaves no
            # deadline (``next_deadline``): only the clock and the judging
            # times move.
            next_judge = self._next_judge
            for t in times:
                if t >= next_judge:
                    next_judge = t + _JUDGE_EVERY_S

            def commit_clock() -> None:
                self._now = end
                self._next_judge = next_judge
            return commit_clock
        cfg = self.config
        if not rankless or len(ranks) >= 2:
            low = min(times)
            start = low - cfg.straggler_window_s  # every judgement's window starts after this
            newest = self._newest_any
            if not (newest["step"] < start and newest["compute"] < start):
                return None  # a rank gave figures within the window: ``slow`` is judged
            floor = self._hung_config.straggler_hung_min_s
            lo = quiet_floor(ranks.values(), low if not rankless else math.inf)
            if not (end - lo < floor and end <= lo + floor):
                return None
        # The judgements the lines would make: at most one per second of data time.
        next_judge, first_judged, last_judged = _judgements(times, self._next_judge)
        d = self._deadline
        if d is not None and (now is None or d > now) and d < end and first_judged != 0:
            return None  # the deadline now could fall inside the run before a judgement moves it
        # The clock at the last judgement: the newest stamp until then.
        at = None
        if last_judged >= 0:
            at = max(times[:last_judged + 1])
            if now is not None and not at > now:
                at = now
        if rankless:
            def commit() -> None:
                self._now = end
                self._next_judge = next_judge
                if at is not None:
                    self._rearm(at)
            return commit

        def commit_ranks() -> None:
            # Each line as ``_on_progress`` takes it (``take_log_steps``: no
            # line has figures); only the last judgement leaves anything
            # (the deadline), on the ranks as they were then.
            if at is None:
                self._take(steps)
            else:
                self._take(steps[:last_judged + 1])
                self._rearm(at)
                self._take(steps[last_judged + 1:])
            self._now = end
            self._next_judge = next_judge
        return commit_ranks

    def _take(self, steps: Sequence[Progress]) -> None:
        """``_progress`` of each line, none with figures (``take_log_steps``)."""
        stepped, advanced = take_log_steps(self.ranks, steps, self.config.straggler_window_s, self._state)
        if stepped:
            self._stopped = False
        if advanced:
            self._phase = None

    def update(self, event: Event) -> list[Alert]:
        if type(event) is Progress:
            return self._on_progress(event)
        t = event.time
        if self._now is None or t > self._now:
            self._now = t
        if isinstance(event, ProbeSample):
            self._probe(event)
        elif isinstance(event, Heartbeat):
            self._heartbeat(event)
        elif isinstance(event, Phase):
            self._phase = event if event.begin else None
        elif isinstance(event, Crash):
            if event.kind in _COLLECTIVE_KINDS and event.rank is not None and event.rank in self.ranks:
                self.ranks[event.rank].timed_out = True  # it was waiting on someone
            else:
                return []
        elif isinstance(event, ProcessExit):
            return self._exited(event)
        elif isinstance(event, Tick):
            self._next_judge = t  # a Tick comes at a deadline: judged whenever it comes
        elif isinstance(event, Delivery):
            self._delivered(event)
            return []
        else:
            return []
        return self._judged(t)

    def _delivered(self, event: Delivery) -> None:
        """A log arrives in bursts ``burst_s`` apart (a block-buffered
        ``torchrun ... > out``): a rank whose line fell after a burst's end
        is silent until the next burst, while the others' lines of the same
        step came in this one. It is hung only after ``BURSTS_ALLOWED``
        intervals, as a stall is (a healthy run's rank 0 was called hung,
        critical, at every burst boundary between the ranks' lines)."""
        self._bursts[event.source] = event.burst_s
        burst = max(self._bursts.values())
        floor = max(self.config.straggler_hung_min_s, BURSTS_ALLOWED * burst)
        self._hung_config = (replace(self.config, straggler_hung_min_s=floor)
                             if floor != self.config.straggler_hung_min_s else self.config)

    def _judged(self, t: float) -> list[Alert]:
        """After a report at ``t``: judged at most once per ``_JUDGE_EVERY_S``
        of data time; in between only a hung rank that stepped again resolves."""
        if t < self._next_judge:
            return self._resolve_hung_if_back() if self.hung.active else []
        self._next_judge = t + _JUDGE_EVERY_S
        now = self._now
        return self._judge(t if now is None else now)

    # -- intake --------------------------------------------------------------
    def _state(self, rank: int, t: float) -> RankState | None:
        state = self.ranks.get(rank)
        if state is None:
            if len(self.ranks) >= _MAX_RANKS:
                return None
            state = self.ranks[rank] = RankState(rank, t, self._newest_any)
        return state

    def _probe(self, p: ProbeSample) -> None:
        if p.rank is None:
            return
        state = self._state(p.rank, p.time)
        if state is not None:
            self._stopped = False
            state.add(p.time, step=p.step, step_s=p.step_seconds, compute_s=p.compute_seconds,
                      wait_s=p.wait_seconds, window_s=self.config.straggler_window_s, source=p.source,
                      restart=True)

    def _progress(self, p: Progress) -> None:
        rank = p.rank
        if rank is None:
            rank = rank_of_source(p.source)
            if rank is None:
                return
        state = self.ranks.get(rank)
        if state is None:
            state = self._state(rank, p.time)
            if state is None:
                return
        step = p.step
        training = False
        if step is not None:
            self._stopped = False
            # A step below the rank's last is an eval bar or a redraw: a sign
            # of life, not a training step's time.
            seen = state.measured.get("log")
            training = seen is None or step > seen
            if training and (state.last_step is None or step > state.last_step):
                self._phase = None  # the next training step ends an eval or a save
        state.add(p.time, step=step, step_s=p.step_seconds, window_s=self.config.straggler_window_s,
                  source=p.source, clocked=p.clocked, measure=training and p.clocked, kind="log")

    def _heartbeat(self, hb: Heartbeat) -> None:
        if hb.rank is None:
            return
        state = self._state(hb.rank, hb.time)
        if state is not None:
            state.heartbeat = hb
            if hb.last_step is not None and (state.last_step is None or hb.last_step > state.last_step):
                state.last_step = hb.last_step  # a rank that logs every 100 steps says where it is

    def _exited(self, e: ProcessExit) -> list[Alert]:
        self._stopped = True
        self._deadline = None
        out = self._resolve_slow(e.time, "the job exited", e.source)
        if self.hung.active:
            out += self._resolve(self.hung, e.time, f"the job exited ({e.kind}); rank {self.hung_rank} no longer hangs",
                                 e.source)
            self.hung_rank = None
        return out

    # -- judging -------------------------------------------------------------
    def _judge(self, t: float) -> list[Alert]:
        out = self._resolve_hung_if_back()
        if not self._stopped:
            out += self._judge_slow(t)
            out += self._judge_hung(t)
        self._rearm(t)
        return out

    def _rearm(self, t: float) -> None:
        """The deadline a judgement at ``t`` leaves (``_judge``, and the
        commit of ``quiet_steps`` at its last judgement)."""
        self._deadline = (None if self._stopped or self.hung.active
                          else next_deadline(list(self.ranks.values()), self._hung_config, self._phase is not None, t))

    def _stretch(self, t: float, name: str) -> tuple[float, float, dict[int, float]] | None:
        """(begin, end, ranks): the stretch of data time over which the ranks
        that gave a figure within the window are compared (the ranks with
        their newest report of it), or None when none did.

        It ends where all of them have reported, not at ``t``: live, one
        rank's probe file is read a poll after the others' (at 60x a minute
        of data time), and a window ending at the newest line of any source
        would hold earlier steps of that rank than of the others. While step
        times change (the throughput falls) that reads as a rank back in
        line, or out of it. It begins where every one of them still holds
        its values (a rank keeps a window back from its own newest report,
        ``RankState.add``). Ranks silent in the figure for a whole window are
        not compared, and do not hold the others' stretch back.
        """
        window = self.config.straggler_window_s
        start = t - window
        if self._newest_any[name] < start:
            return None  # no rank gave it within the window (most logs: never): the loop would skip all
        newest: dict[int, float] = {}
        end = start
        held = float("-inf")  # the latest of the compared ranks' oldest kept values
        for rank, state in self.ranks.items():
            at = state.newest[name]
            if at < start:
                continue  # silent in it for a window, or never gave it (most logs: no compute or wait)
            if not newest or at < end:
                end = at
            newest[rank] = at
            # Not empty: a report at or after ``t - window`` outlives every prune.
            first = state.series[name][0][0]
            if first > held:
                held = first
        if not newest:
            return None
        return max(end - window, held), end, newest

    def _medians(self, t: float, name: str) -> dict[int, float]:
        """Each rank's median of a figure over ``_stretch`` (after its warm-up),
        where it has enough values there."""
        stretch = self._stretch(t, name)
        if stretch is None:
            return {}
        begin, end, ranks = stretch
        cfg = self.config
        warmup, need = cfg.straggler_warmup_s, cfg.straggler_min_samples
        out: dict[int, float] = {}
        for rank in ranks:
            state = self.ranks[rank]
            values = state.values(name, max(begin, state.first_seen + warmup), end)
            if values and len(values) >= need:
                out[rank] = sorted_median(values)
        return out

    def _judge_slow(self, t: float) -> list[Alert]:
        if len(self.ranks) < 2:
            return []  # nothing to compare (most logs: no rank at all)
        cfg = self.config
        metric = "compute"
        figures = self._medians(t, metric)
        if len(figures) < 2:
            metric = "step"
            figures = self._medians(t, metric)
        if len(figures) < 2:
            return []
        self.metric = metric
        waits = self._medians(t, "wait") if metric == "compute" else {}
        worst, ratio, others = self._worst(figures)
        over = (ratio >= cfg.straggler_slow_factor
                and figures[worst] - others >= cfg.straggler_slow_min_excess_s
                and self._waits_least(worst, waits))
        out: list[Alert] = []
        if self.slow.active and self.slow_rank is not None:
            own = figures.get(self.slow_rank)
            fired = self.slow.fired_alert
            # Judged back in line on the figure it was found slow on: under
            # DDP every rank's step takes as long (they wait for each other),
            # so when the slow rank's compute times stop coming (it hangs)
            # the step times would call it "back in line" in the middle of it.
            if fired is not None and fired.evidence.get("metric", metric) != metric:
                own = None
            if own is not None:
                rest = sorted_median(sorted(v for r, v in figures.items() if r != self.slow_rank))
                if rest > 0 and own / rest < cfg.straggler_resolve_factor:
                    out += self._resolve_slow(t, f"rank {self.slow_rank} is back in line: {metric} "
                                                 f"{own:.3g} s per step vs {rest:.3g} s on the others",
                                              self.ranks[self.slow_rank].source)
            if self.slow.active:
                return out
        if not over:
            self._candidate = self._candidate_since = None
            return out
        if self._candidate != worst:
            self._candidate, self._candidate_since = worst, t
        since = self._candidate_since if self._candidate_since is not None else t
        if t - since < cfg.straggler_slow_for_s:
            return out
        return out + self._fire_slow(t, worst, metric, figures, waits, ratio, others, since)

    @staticmethod
    def _worst(figures: dict[int, float]) -> tuple[int, float, float]:
        """(the rank with the largest figure, its ratio to the median of the others, that median)."""
        worst = max(figures, key=lambda r: figures[r])
        others = sorted_median(sorted(v for r, v in figures.items() if r != worst))
        ratio = figures[worst] / others if others > 0 else (float("inf") if figures[worst] > 0 else 1.0)
        return worst, ratio, others

    @staticmethod
    def _waits_least(rank: int, waits: dict[int, float]) -> bool:
        """Where waits are known, the slow rank waits no more than the others
        (it is the one they wait for); unknown waits do not veto."""
        if rank not in waits or len(waits) < 2:
            return True
        return waits[rank] <= sorted_median(sorted(v for r, v in waits.items() if r != rank))

    def _fire_slow(self, t: float, rank: int, metric: str, figures: dict[int, float], waits: dict[int, float],
                   ratio: float, others: float, since: float) -> list[Alert]:
        gpu = self._gpu(rank)
        on = f" (GPU {gpu})" if gpu is not None else ""
        what = "computes" if metric == "compute" else "steps"
        message = (f"rank {rank}{on} is a straggler: it {what} {figures[rank]:.3g} s per step, "
                   f"{ratio:.2f}x the other ranks' {others:.3g} s, for {fmt_duration(t - since)}")
        if rank in waits and len(waits) >= 2:
            message += f"; it waits {waits[rank]:.3g} s while the others wait on it"
        evidence: dict[str, Any] = {
            "rank": rank, "gpu": gpu, "metric": metric, "ratio": round(ratio, 3),
            "seconds": {str(r): round(v, 4) for r, v in sorted(figures.items())},
            "others_median_s": round(others, 4), "since": since,
        }
        if waits:
            evidence["wait_seconds"] = {str(r): round(v, 4) for r, v in sorted(waits.items())}
        self.slow_rank = rank
        self.slow.gpu = gpu
        return self._fire(self.slow, t, "warning", message, self.ranks[rank].source, evidence, rank)

    def _resolve_slow(self, t: float, message: str, source: str) -> list[Alert]:
        self._candidate = self._candidate_since = None
        if not self.slow.active:
            return []
        out = self._resolve(self.slow, t, message, source)
        self.slow_rank = None
        return out

    # -- hung (the rules: straggler_hung.py) ------------------------------------
    def _judge_hung(self, t: float) -> list[Alert]:
        if self.hung.active:
            return []
        ranks = list(self.ranks.values())
        found = find_hung(ranks, self._hung_config, self._phase is not None, t)
        if found is None:
            return []
        state, why = found
        gpu = self._gpu(state.rank)
        message, evidence = hung_report(state, ranks, why, t, gpu)
        self.hung_rank = state.rank
        self.hung.gpu = gpu
        return self._fire(self.hung, t, "critical", message, state.source, evidence, state.rank)

    def _resolve_hung_if_back(self) -> list[Alert]:
        """The hung rank stepped (or spoke) again: resolved."""
        rank = self.hung_rank
        if not self.hung.active or rank is None:
            return []
        state = self.ranks.get(rank)
        since = self.hung.since
        if state is None or since is None or state.last_step_time is None or state.last_step_time <= since:
            return []
        out = self._resolve(self.hung, state.last_step_time,
                            f"rank {rank} steps again (step {state.last_step})", state.source)
        self.hung_rank = None
        return out

    # -- shared ----------------------------------------------------------------
    def _gpu(self, rank: int) -> int | None:
        per_node = self.config.straggler_gpus_per_node
        return rank % per_node if per_node > 0 else None

    @staticmethod
    def _fire(episode: Episode, t: float, severity: Any, message: str, source: str,
              evidence: dict[str, Any], rank: int) -> list[Alert]:
        return episode.fire(t, severity, message, source, evidence, rank)

    @staticmethod
    def _resolve(episode: Episode, t: float, message: str, source: str) -> list[Alert]:
        return episode.resolve(t, message, source)

    def rank_table(self) -> list[RankRow]:
        """One row per rank, lowest first: medians over the stretch the
        alerts judge (``_stretch``), and which rank a firing alert names."""
        t = self._now
        if t is None:
            return []
        stretches = {name: self._stretch(t, name) for name in ("step", "compute", "wait")}

        def median(state: RankState, name: str) -> float | None:
            stretch = stretches[name]
            if stretch is None or state.rank not in stretch[2]:
                return None
            return state.median(name, stretch[0], stretch[1])

        rows = []
        for rank in sorted(self.ranks):
            s = self.ranks[rank]
            rows.append(RankRow(
                rank=rank, gpu=self._gpu(rank), step_seconds=median(s, "step"),
                compute_seconds=median(s, "compute"), wait_seconds=median(s, "wait"),
                last_step=s.last_step, last_seen=s.last_seen,
                slow=self.slow.active and self.slow_rank == rank, hung=self.hung.active and self.hung_rank == rank,
                waiting_in=s.waiting_in(),
            ))
        return rows
