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
from typing import Any

from detectors.base import Alert

MEMORY_DETECTORS = ("memory_pressure", "memory_growth", "memory_volatility")
# (label, style) of a GPU's badge, most urgent first.
BADGES = {
    "memory_pressure": ("FULL", "bold white on red"),
    "memory_growth": ("GROWING", "bold black on dark_orange"),
    "memory_volatility": ("VOLATILE", "bold black on yellow"),
}
FLAT_BADGE = ("flat", "bold green")


@contextlib.contextmanager
def locked(monitor: Any) -> Iterator[None]:
    """Hold the Monitor's writer lock while copying what a widget shows."""
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


def job_pids(monitor: Any) -> frozenset[int]:
    state = monitor.job_state
    return frozenset(getattr(state, "pids", ()) or ())


TOKENS = "tok/s"


def current_rate(monitor: Any) -> tuple[float | None, str, float | None]:
    """(rate, unit, baseline in that unit) as the run itself reports it.

    The unit is the run's own, the one the throughput chart follows
    (``Monitor.throughput_unit``: tokens over samples over steps, so an
    eval bar's it/s beside training's tok/s does not take over); before
    the chart has a point, the last progress event's ``rate_of``. The
    baseline is shown only in the same unit: the throughput detector's own
    (given or learned, in the run's unit) where it has one, else the
    Monitor's tokens/s baseline for a tokens/s rate. Call under ``locked``.
    """
    from parsers.events import rate_of

    series = monitor.throughput
    if series.count:
        value, unit = series.last_value, getattr(monitor, "throughput_unit", TOKENS)
    elif monitor.last_progress is not None:
        value, unit = rate_of(monitor.last_progress)
    else:
        value, unit = None, TOKENS
    baseline: float | None = None
    detector = monitor.detectors.get("throughput_drop") if hasattr(monitor, "detectors") else None
    learned = getattr(detector, "learned_rate", None)
    if callable(learned):
        base, base_unit = learned()
        if base and base_unit == unit:
            baseline = base
    if baseline is None and unit == TOKENS:
        baseline = monitor.baseline_tokens_per_s
    return value, unit, baseline
