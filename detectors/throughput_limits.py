"""The throughput detector's limits and cadence rules, shared by its per-step
path (``throughput``) and its runs of step lines (``throughput_quiet``): one
home, so neither module imports the other's."""

from __future__ import annotations

import math

from .config import DetectorConfig

WINDOW_MAX = 1024  # reports in the smoothing window at most
INTERVALS_KEPT = 16  # recent report intervals, for the run's cadence
INTERVAL_EVERY = 8  # reports between re-reads of the cadence
LEARN_MAX = 4096


def cadence_budgets(c: DetectorConfig, interval: float) -> tuple[float, int]:
    """What the run's report interval decides: the silence that is a
    relaunch, and the reports of a warm-up."""
    gap_limit = max(c.throughput_restart_gap_s, c.throughput_restart_gap_intervals * interval)
    return gap_limit, min(c.throughput_warmup_events, max(1, math.ceil(c.throughput_warmup_s / interval)))
