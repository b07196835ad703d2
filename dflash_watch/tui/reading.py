"""Consistent reads of a Monitor that source threads keep writing to.

The Monitor serialises its writers with a lock; a view that copied a ring
buffer while a sampler thread appended to it could see a torn window. The
views therefore copy what they draw under that same lock (copies only,
never drawing, so a source thread waits microseconds) and render from the
copies afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from dflash_watch.detectors.base import Alert
from dflash_watch.parsers.events import TOK_S

if TYPE_CHECKING:
    from ..monitor import Monitor

MEMORY_DETECTORS = ("memory_pressure", "memory_growth", "memory_volatility")
# (label, style) of a GPU's badge, most urgent first.
BADGES = {
    "memory_pressure": ("FULL", "bold white on red"),
    "memory_growth": ("GROWING", "bold black on dark_orange"),
    "memory_volatility": ("VOLATILE", "bold black on yellow"),
}
FLAT_BADGE = ("flat", "bold green")


@contextlib.contextmanager
def locked(monitor: object) -> Iterator[None]:
    """Hold the Monitor's writer lock while copying what a widget shows (a stand-in has none)."""
    lock = getattr(monitor, "lock", None)
    if lock is None:
        yield
        return
    with lock:
        yield


def memory_badge(firing: list[Alert], gpu: int) -> tuple[str, str, Alert | None]:
    """The badge of one GPU from the firing memory_* alerts about it."""
    for detector in MEMORY_DETECTORS:
        for alert in firing:
            if alert.detector == detector and alert.gpu == gpu:
                label, style = BADGES[detector]
                return label, style, alert
    return FLAT_BADGE[0], FLAT_BADGE[1], None


def job_pids(monitor: Monitor) -> frozenset[int]:
    state = monitor.job_state
    return frozenset(getattr(state, "pids", ()) or ())




def current_rate(monitor: Monitor) -> tuple[float | None, str, float | None]:
    """(rate, unit, baseline in that unit) as the run itself reports it.

    The unit is the run's own, the one the throughput chart follows
    (``Monitor.throughput_unit``: tokens over samples over steps, so an
    eval bar's it/s beside training's tok/s does not take over); before
    the chart has a point, the last progress event's ``rate_of``. The
    baseline is shown only in the same unit: the throughput detector's own
    (given or learned, in the run's unit) where it has one, else the
    Monitor's tokens/s baseline for a tokens/s rate. Call under ``locked``.
    """
    from dflash_watch.parsers.events import rate_of

    series = monitor.throughput
    if series.count:
        value, unit = series.last_value, getattr(monitor, "throughput_unit", TOK_S)
    elif monitor.last_progress is not None:
        value, unit = rate_of(monitor.last_progress)
    else:
        value, unit = None, TOK_S
    baseline: float | None = None
    detector = monitor.detectors.get("throughput_drop") if hasattr(monitor, "detectors") else None
    learned = getattr(detector, "learned_rate", None)
    if callable(learned):
        base, base_unit = learned()
        if base and base_unit == unit:
            baseline = base
    if baseline is None and unit == TOK_S:
        baseline = monitor.baseline_tokens_per_s
    return value, unit, baseline


STALE_LOOP_S = 600.0  # a held training bar older than this gives way to whatever reports now


def loop_rank(progress: Any) -> tuple[int, int]:
    """How much a progress line looks like the training loop: tokens/s first, then the most steps.

    An eval or a data-loading bar is short (its total is a few hundred
    steps) and counts in it/s; the training bar counts tokens or runs for
    thousands of steps. The same order as ``Monitor.throughput_unit``
    (tokens over other units), plus the loop's size.
    """
    tokens = progress.tokens_per_s is not None or progress.rate_unit == TOK_S
    return int(tokens), max(progress.total_steps or 0, progress.step or 0)


class TrainingBar:
    """The progress the header's step and ETA read: the training loop's, not an eval bar's.

    ``Monitor.last_progress`` is the newest progress of any loop, so an eval
    tqdm bar drawn between training lines would take the header's step
    (``step 12/50``). The header keeps the progress of the loop that ranks
    highest (``loop_rank``) and lets a lesser one replace it only when the
    held one is stale (``STALE_LOOP_S`` on the data's clock: the training
    ended, another run took the log) or the job restarted.
    """

    __slots__ = ("_restarts", "held")

    def __init__(self) -> None:
        self.held: Any = None
        self._restarts: int | None = None

    def choose(self, latest: Any, restarts: int = 0) -> Any:
        if restarts != self._restarts:
            self._restarts, self.held = restarts, None
        held = self.held
        if latest is None or latest is held:
            return held if held is not None else latest
        if held is None or latest.time - held.time > STALE_LOOP_S or (
                latest.step is not None and loop_rank(latest) >= loop_rank(held)):
            self.held = latest
        return self.held


def split_holders(processes: Any, job: frozenset[int]) -> tuple[list[Any], list[Any]]:
    """(the job's, everyone else's) among one GPU's processes.

    The job's: flagged by the sampler, or a pid of the job's process tree
    (``job``). The GPU tiles and the relaunch preflight both split by this,
    so the dialog never names a holder the tiles do not show, or the reverse.
    """
    mine = [p for p in processes if p.job or p.pid in job]
    others = [p for p in processes if not (p.job or p.pid in job)]
    return mine, others


def gpu_holders(monitor: Monitor, extra_pids: Any = ()) -> dict[int, tuple[list[Any], list[Any]] | None]:
    """Per GPU: (job's, others') processes of its latest sample, as its tile shows
    them; None where the sampler could not list processes. ``extra_pids``: pids
    known to be the job's besides the Monitor's (a fresh status). Call under ``locked``."""
    job = job_pids(monitor) | frozenset(extra_pids or ())
    out: dict[int, tuple[list[Any], list[Any]] | None] = {}
    for gpu in monitor.gpus.gpus:
        last = monitor.gpus.last(gpu)
        if last is None or last.processes is None:
            out[gpu] = None
        else:
            out[gpu] = split_holders(last.processes, job)
    return out
