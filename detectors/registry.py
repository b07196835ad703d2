"""All detectors of a run, and the router that feeds them.

``DetectorSet`` sends each event only to the detectors whose ``accepts``
names its type (at 8 GPUs x 1 Hz the GPU samples are most of the traffic
and four detectors of ten care about them), straight to each one's handler
of that type (``routes``: a table built once, no type tests per event).
``deadline()`` is the earliest of the detectors' deadlines, for the
Monitor's ticks. ``BaselineFigures`` are the good run's figures the
detectors judge against (``build_detectors``, ``DetectorSet.set_baseline``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from ..parsers.events import Event, Progress
from .alloc_thrash import AllocThrash
from .base import EVENT_TYPES, Alert, Detector, DetectorBase, Handler, StepCommit
from .config import DetectorConfig
from .counters import RankRises
from .crash import CrashDetector, CrashEpisode
from .crash_steps import StepLines
from .gpu_health import GpuHealth, GpuHealthState
from .loss import LossDetector, LossState
from .memory import MemoryModel
from .memory_growth import MemoryGrowth
from .memory_pressure import MemoryPressure
from .memory_volatility import MemoryVolatility
from .padding import PaddingDetector
from .process_exit import ProcessExitDetector
from .recompile import RecompileDetector
from .recompile_rate import RecompileRate
from .stall import Stall
from .straggler import RankRow, Straggler
from .throughput import ThroughputDrop

_INF = float("inf")
# An event type's route: each detector's bound update, and (slot in the kept
# deadlines, bound deadline) for the timed ones.
_Plan = tuple[
    tuple[Handler, ...],
    tuple[tuple[int, Callable[[], "float | None"]], ...],
]


def _inf_if_none(t: float | None) -> float:
    return _INF if t is None else t


@dataclass(frozen=True, slots=True)
class BaselineFigures:
    """The good run's figures the detectors judge against (None: unknown).

    Read from a baseline file (CONTRACTS section 6: ``throughput_tokens_per_s``
    and the optional ``padding_efficiency``, ``recompiles_per_hour``,
    ``alloc_retries_per_hour``) by the shell; the core never opens it.
    """

    tokens_per_s: float | None = None
    padding_efficiency: float | None = None
    recompiles_per_hour: float | None = None
    alloc_retries_per_hour: float | None = None


def build_detectors(
    config: DetectorConfig | None = None,
    *,
    baseline: BaselineFigures | None = None,
) -> list[Detector]:
    """One of each detector this package implements, sharing one config,
    judging against ``baseline``: every figure of the good run."""
    config = config or DetectorConfig()
    figures = baseline or BaselineFigures()
    # One per-GPU memory model read by the three memory detectors: each
    # sample is worked out once, and what one learns (warm-up over, a
    # relaunch) the others know.
    memory = MemoryModel(config)
    steps = StepLines()
    return [
        MemoryVolatility(config, memory=memory),
        MemoryGrowth(config, memory=memory),
        MemoryPressure(config, memory=memory),
        ThroughputDrop(config, baseline_tokens_per_s=figures.tokens_per_s),
        Stall(config),
        # One record of the step lines for both (``crash_steps``), each
        # line recorded once whichever of the two sees it first.
        CrashDetector(config, name="fx_tracing", steps=steps),
        CrashDetector(config, name="crash", steps=steps),
        RecompileDetector(config, baseline_per_hour=figures.recompiles_per_hour),
        PaddingDetector(config, baseline_efficiency=figures.padding_efficiency),
        AllocThrash(config, baseline_per_hour=figures.alloc_retries_per_hour),
        ProcessExitDetector(config),
        GpuHealth(config),
        Straggler(config),
        LossDetector(config),
    ]


class DetectorSet:
    def __init__(self, detectors: Sequence[Detector]) -> None:
        self.detectors = list(detectors)
        # Detectors that declare ``timed = False`` never have a deadline; the
        # Monitor asks for deadline() before every event, so skip them.
        self._timed = tuple(d for d in self.detectors if d.timed)
        # A detector's deadline moves only when it handles an event: each is
        # kept here (inf for None) and re-read only from the detectors an
        # event went to, so deadline() is one min() over floats.
        self._deadlines = [_inf_if_none(d.deadline()) for d in self._timed]
        self._best = min(self._deadlines, default=_INF)
        # Per event type, in the detectors' order: each one's handler of
        # that type (``routes``), and the deadlines it may move.
        tables = [d.routes() for d in self.detectors]
        self._plans: dict[type, _Plan] = {}
        for etype in EVENT_TYPES:
            self._plans[etype] = self._plan(
                [(d, routes[etype]) for d, routes in zip(self.detectors, tables) if etype in routes])
        # The batching contract (``base.StepCommit``): the detectors a step
        # line goes to, each asked whether a run is quiet. One that keeps the
        # default (always None) would refuse every run: then none is offered.
        route = tuple(d for d, routes in zip(self.detectors, tables) if Progress in routes)
        batches = all(type(d).quiet_steps is not DetectorBase.quiet_steps for d in route)
        self._step_route: tuple[Detector, ...] = route if batches else ()
        # The order they are asked in: the last to refuse first (a crash
        # held open refuses every run until it settles; asked last, the
        # others worked each halved run out for nothing). Commits keep the
        # route's order.
        self._ask_order: list[int] = list(range(len(self._step_route)))

    def _plan(self, route: list[tuple[Detector, Handler]]) -> _Plan:
        timed = tuple((i, d.deadline) for i, d in enumerate(self._timed) if any(d is r for r, _ in route))
        return tuple(handler for _, handler in route), timed

    def __iter__(self) -> Iterator[Detector]:
        return iter(self.detectors)

    def __len__(self) -> int:
        return len(self.detectors)

    def get(self, name: str) -> Detector | None:
        for d in self.detectors:
            if d.name == name:
                return d
        return None

    def update(self, event: Event) -> list[Alert]:
        """The alerts ``event`` causes. Detectors in a set must be fed
        through it (or told with ``refresh``): it keeps their deadlines."""
        plan = self._plans.get(type(event))
        if plan is None:
            plan = self._plans[type(event)] = self._plan(
                [(d, d.update) for d in self.detectors if isinstance(event, d.accepts)]
            )
        updates, timed = plan
        out: list[Alert] = []
        try:
            for update in updates:
                alerts = update(event)
                if alerts:
                    out.extend(alerts)
        finally:
            # Also when a detector raised: those before it did change.
            if timed:
                self._reread(timed)
        return out

    def _reread(self, timed: tuple[tuple[int, Callable[[], float | None]], ...]) -> None:
        """Keep the deadlines of ``timed`` (the detectors an event went to) afresh."""
        deadlines = self._deadlines
        for i, deadline in timed:
            t = deadline()
            deadlines[i] = _INF if t is None else t
        self._best = min(deadlines)

    @property
    def takes_step_runs(self) -> bool:
        """Whether every detector of the step lines' route may take a run at once."""
        return bool(self._step_route)

    def take_steps(self, steps: Sequence[Progress]) -> bool:
        """Take a run of consecutive step lines at once, if every detector
        they go to proves it quiet (``base.StepCommit``): no alert, no
        deadline inside it. False: nothing changed, feed them one at a time.

        Asked all before any commits, so a refusal leaves every detector as
        it was; the deadlines of the route's timed detectors are re-read."""
        route = self._step_route
        if not route:
            return False
        order = self._ask_order
        commits: list[StepCommit | None] = [None] * len(route)
        for at, i in enumerate(order):
            commit = route[i].quiet_steps(steps)
            if commit is None:
                if at:
                    del order[at]
                    order.insert(0, i)
                return False
            commits[i] = commit
        for commit in commits:
            commit()  # type: ignore[misc]
        timed = self._plans[Progress][1]
        if timed:
            self._reread(timed)
        return True

    def refused_at(self, steps: Sequence[Progress]) -> int | None:
        """After ``take_steps`` refused ``steps``: where the detector that
        refused them says the run turns (``base.StepCommit``'s hint), or None.
        (``take_steps`` moved that detector to the front of the ask order.)"""
        route = self._step_route
        if not route:
            return None
        return route[self._ask_order[0]].refused_at(steps)

    def refresh(self) -> None:
        """Re-read every deadline (after a detector was changed directly)."""
        self._deadlines = [_inf_if_none(d.deadline()) for d in self._timed]
        self._best = min(self._deadlines, default=_INF)

    def deadline(self) -> float | None:
        best = self._best
        return None if best == _INF else best

    def flush(self) -> list[Alert]:
        """The data ended: detectors that hold alerts back send them now."""
        out: list[Alert] = []
        for d in self.detectors:
            out.extend(d.flush())
        self.refresh()
        return out

    def set_baseline(self, figures: BaselineFigures) -> None:
        """Judge from now on against ``figures``: each detector takes its own
        reference at once and keeps everything else it has seen."""
        setters = (
            ("throughput_drop", figures.tokens_per_s),
            ("padding", figures.padding_efficiency),
            ("recompile", figures.recompiles_per_hour),
            ("alloc_thrash", figures.alloc_retries_per_hour),
        )
        for name, value in setters:
            d = self.get(name)
            if d is not None:
                d.set_baseline(value)
        self.refresh()

    def learned_baseline(self) -> float | None:
        """The tokens/s baseline the throughput detector learned, if it did."""
        d = self.get("throughput_drop")
        return d.learned_baseline() if isinstance(d, ThroughputDrop) else None

    def padding_efficiency(self) -> float | None:
        """The padding detector's latest windowed efficiency, if it has one."""
        d = self.get("padding")
        return d.efficiency if isinstance(d, PaddingDetector) else None

    def recompile_rate(self) -> RecompileRate | None:
        """The recompile detector's rate part (its figures per rank), if any."""
        d = self.get("recompile")
        return d.rate if isinstance(d, RecompileDetector) else None

    def alloc_rises(self) -> RankRises | None:
        """The allocator detector's retries per rank over its window, if any."""
        d = self.get("alloc_thrash")
        return d.rises if isinstance(d, AllocThrash) else None

    def loss_state(self) -> LossState | None:
        """What the loss detector knows now (latest loss, grad norm, scale), if any."""
        d = self.get("loss")
        return d.state() if isinstance(d, LossDetector) else None

    def crash_episodes(self) -> list[CrashEpisode]:
        """Recent crashes with every rank seen (see ``crash.py``), oldest first."""
        out: list[CrashEpisode] = []
        for d in self.detectors:
            if isinstance(d, CrashDetector):
                out.extend(d.episodes())
        return sorted(out, key=lambda e: e.first_time)

    def rank_table(self) -> list[RankRow]:
        """Per-rank timing the straggler detector keeps (the ranks panel, Prometheus)."""
        d = self.get("straggler")
        return d.rank_table() if isinstance(d, Straggler) else []

    def gpu_health(self) -> dict[int, GpuHealthState]:
        """Per GPU, what the gpu_health detector knows now (the dashboard's GPU tiles)."""
        d = self.get("gpu_health")
        return d.state() if isinstance(d, GpuHealth) else {}
