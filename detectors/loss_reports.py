"""A run of step lines read at once for the ``loss`` detector (issue 20).

``LossDetector._on_progress`` reads one line: its loss, and the grad norm,
loss scale and skip/NaN counters among its metrics; a line with none of
them is no report. ``read_reports`` reads a whole run the same way, and
``follow_lane`` says which of its reports follow the lane spike, divergence
and overflow are judged on (``LossDetector._follows``). The usual run (a
loss on every line, no figure but a grad norm among the metrics) is read in
a few passes over the run, not line by line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from math import isfinite
from operator import itemgetter

from ..parsers.events import Progress
from ..parsers.step_columns import columns_of, metric_names, read
from .loss_metrics import CODES, GRAD, NO_FIGURES, OTHER, code_of, figures_of

# (scale, skipped iterations, cumulative skipped) of one report.
Extra = tuple[float | None, float | None, float | None]
_value = itemgetter(1)  # of a (name, value) metric
# What a run is read in (``read_reports``): one pass over its lines.
_COLUMNS = columns_of("loss", "metrics", "time", "rank")


@dataclass(slots=True)
class Reports:
    """The run's reports (the lines ``_on_progress`` hands to ``_on_report``)
    and their figures. ``grad``: the last grad norm (None: none);
    ``extras``: each report's, None where no line has one; ``clean``: the
    reports with a loss or a grad norm (``_clean`` counts them); ``full``:
    every report has a loss. ``times`` and ``ranks``: the reports' columns
    where they were read with the losses (every line a report), else None."""

    events: Sequence[Progress]
    losses: list[float | None]
    grad: float | None
    extras: list[Extra] | None
    clean: int
    full: bool
    times: list[float] | None = None
    ranks: list[int | None] | None = None


def read_reports(steps: Sequence[Progress]) -> Reports | None:
    """The run's reports; None where one is NaN/Inf (it would fire)."""
    losses: list[float | None]
    losses, metrics, times, ranks = read(steps, _COLUMNS)
    try:
        if not isfinite(sum(losses)):  # type: ignore[arg-type]
            return None  # a NaN/Inf loss (or a sum too big to tell)
    except TypeError:
        return _read_lines(steps)  # a line without a loss
    grad_name = None
    # The run's metric names, each once (the order they are classified in
    # below changes no answer); the lines' metrics are kept for the sum.
    for name in metric_names(metrics):
        code = CODES.get(name)
        if code is None:
            code = code_of(name)
        if code == OTHER:
            continue
        if code != GRAD or grad_name is not None:
            return _read_lines(steps)
        grad_name = name
    if grad_name is None:
        return Reports(steps, losses, None, None, len(steps), True, times, ranks)
    # Every line is a clean report (each has a loss): of the grad norms
    # only the last is kept, once each is known finite (every figure is: a
    # NaN learning rate only costs the shortcut).
    try:
        if not isfinite(sum(map(_value, chain.from_iterable(metrics)))):
            return None
    except TypeError:
        return _read_lines(steps)  # a figure that is no number
    for m in reversed(metrics):
        for name, value in m:
            if name == grad_name:
                return Reports(steps, losses, value, None, len(steps), True, times, ranks)
    return None  # not reached: the name came from a line


def _read_lines(steps: Sequence[Progress], nan: bool = False) -> Reports | None:
    """``read_reports`` one line at a time, as ``_on_progress`` reads each
    (the same loop: a change there is a change here); ``nan``: every
    report must be NaN/Inf, not clean (``read_nan_reports``)."""
    events: list[Progress] = []
    losses: list[float | None] = []
    extras: list[Extra] = []
    last_grad = None
    any_extra = False
    clean = 0
    full = True
    for e in steps:
        loss = e.loss
        metrics = e.metrics
        if metrics:
            grad, scale, nan_iters, skipped, skipped_total = figures_of(metrics)
            if loss is None and grad is None and nan_iters is None and scale is None and skipped is None \
                    and skipped_total is None:
                continue
        elif loss is None:
            continue
        else:
            grad, scale, nan_iters, skipped, skipped_total = NO_FIGURES
        bad = ((loss is not None and not isfinite(loss)) or (grad is not None and not isfinite(grad))
               or (nan_iters is not None and nan_iters > 0))
        if bad is not nan:
            return None
        events.append(e)
        losses.append(loss)
        extras.append((scale, skipped, skipped_total))
        if grad is not None:
            last_grad = grad
        if loss is not None or grad is not None:
            clean += 1
        full = full and loss is not None
        any_extra = any_extra or scale is not None or skipped is not None or skipped_total is not None
    return Reports(events, losses, last_grad, extras if any_extra else None, 0 if nan else clean, full)


def read_nan_reports(steps: Sequence[Progress]) -> Reports | None:
    """The run's reports where every one is NaN/Inf (a run that went on
    after its weights went bad: the NaN episode open, each report only
    counted); None where one is not (it counts towards resolving the
    episode: one at a time)."""
    return _read_lines(steps, nan=True)


def follow_lane(lane: int | None, ranks: list[int | None]) -> tuple[int | None, list[int] | None]:
    """The lane after reports of ``ranks`` and the indices of those that
    follow it (``LossDetector._follows``); None for the indices: all."""
    try:
        low = min(ranks)  # type: ignore[type-var]
    except TypeError:
        low = None  # ranks and no ranks mixed: one at a time below
    if low is None:
        if ranks.count(None) == len(ranks):
            return lane, None
    elif lane is not None and low >= lane:
        count = ranks.count(lane)
        if count == len(ranks):
            return lane, None
        at, follow = -1, []
        for _ in range(count):
            at = ranks.index(lane, at + 1)
            follow.append(at)
        return lane, follow
    follow = []
    for i, r in enumerate(ranks):
        if r is not None:
            if lane is None or r < lane:
                lane = r
            elif r != lane:
                continue
        follow.append(i)
    return lane, follow
