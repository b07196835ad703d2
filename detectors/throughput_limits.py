"""The throughput detector's limits, cadence rules and step series, shared by
its per-step path (``throughput``) and its runs of step lines
(``throughput_quiet``): one home, so neither module imports the other's."""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections import deque

from ..parsers.events import Progress
from .config import DetectorConfig
from .steps import sorted_median

WINDOW_MAX = 1024  # reports in the smoothing window at most
INTERVALS_KEPT = 16  # recent report intervals, for the run's cadence
INTERVAL_EVERY = 8  # reports between re-reads of the cadence
LEARN_MAX = 4096


def slide(window: deque[tuple[float, float]], ordered: list[float], t: float, v: float, smooth_s: float) -> float:
    """One report into the smoothing window and its sorted values, in
    place, and the window's median after: the oldest out at the cap, then
    every report older than ``smooth_s`` before ``t`` but the last three.
    The per-step path slides the detector's own window; a run proved to
    stay down (``throughput_quiet._stays_low``) slides copies. ``v`` is
    finite: a bisect finds the value that leaves, where ``list.remove``
    would scan for it."""
    if len(window) == WINDOW_MAX:
        del ordered[bisect_left(ordered, window.popleft()[1])]
    window.append((t, v))
    insort(ordered, v)
    cutoff = t - smooth_s
    while len(window) > 3 and window[0][0] < cutoff:
        del ordered[bisect_left(ordered, window.popleft()[1])]
    return sorted_median(ordered)


def cadence_budgets(c: DetectorConfig, interval: float) -> tuple[float, int]:
    """What the run's report interval decides: the silence that is a
    relaunch, and the reports of a warm-up."""
    gap_limit = max(c.throughput_restart_gap_s, c.throughput_restart_gap_intervals * interval)
    return gap_limit, min(c.throughput_warmup_events, max(1, math.ceil(c.throughput_warmup_s / interval)))


# Step series: the counts a log's progress lines keep, each going up on its
# own (index: ``series_of``).
SERIES = 2


def series_of(p: Progress) -> int:
    """The step series of a progress line: 1 for a tqdm bar, 0 for any
    other line (stamped ``step N`` lines, dicts, user patterns).

    A log may keep two counts in the same rate unit: a tqdm bar that counts
    micro-batches while the log lines count optimizer steps (gradient
    accumulation), or a bar redrawn behind the stamped lines. Read as one,
    every bar line below the last step line is "back", a relaunch. The
    shape tells them apart with no guess at what they count: only a tqdm
    bar carries its elapsed counter (``Progress.elapsed_s``, always parsed
    from ``[MM:SS<...]``), and no other reader sets it. Bars of one run
    that differ (an epoch bar, predict after train) stay one series, told
    apart by their total as before (``throughput``'s new loop). The per-step
    path reads this inline; it is here to name the rule once. A rank copy
    is the same step of the same series (``steps.SeriesDeduper``).
    """
    return int(p.elapsed_s is not None)


def first_bar_is_new_loop(step: int, total: int | None, lines_step: int | None, lines_total: int | None) -> bool:
    """Whether the first tqdm bar a run shows, after its step lines (series
    0) only, is another loop's bar (``ThroughputDrop._new_loop``).

    A loop of step lines, then a bar of another length below their last
    step: prediction or evaluation after training logged by lines, in the
    same unit. Its rate is not the training's. Before the series were told
    apart the bar went "back" below the lines and was read so; its own
    series has no last step, so this names that case. A bar beside the
    lines from the start counts micro-batches (at or above the optimizer
    step) or the same steps (the same total): neither is taken. Asked only
    of the first bar of the detector's life: after a relaunch the run's own
    bar comes back below the lines' global step, and is no other loop.
    """
    return lines_step is not None and bool(lines_total) and total is not None and total != lines_total \
        and step < lines_step
