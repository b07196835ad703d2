"""One series over a chart window: a one-line reading above a plotext chart.

The throughput and the loss panels are this same panel with their own
reading and drawing (``throughput.py``, ``loss.py``). What they share
lives here once: the frame, the window keys, and when a chart is worth
rebuilding. A plotext build costs milliseconds, so a new picture is
offered at most every ``chart_interval_s`` and only when the data key
moved; the reading above it updates at every redraw.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from .plot import Draw, PlotextChart

WHOLE_RUN_S = 1e12  # ``SeriesHistory.window`` of "everything it holds"


class SeriesPanel(Vertical):
    """A bordered panel: ``_info`` (one line) over ``_chart``; subclasses fill both."""

    DEFAULT_CSS = """
    SeriesPanel { border: round $panel-lighten-2; padding: 0 1; }
    SeriesPanel > .series-info { height: 1; }
    SeriesPanel > PlotextChart { height: 1fr; }
    """

    def __init__(self, *, title: str, placeholder: str, window_s: float | None, tz: Any = None,
                 chart_interval_s: float = 5.0, id: str | None = None) -> None:
        super().__init__(id=id)
        self.tz = tz
        self.chart_interval_s = chart_interval_s
        self.window_s: float | None = window_s  # None: the whole run (the window keys set it)
        self._last_chart = -1e18
        self._seen: tuple | None = None
        self.border_title = title
        self._title: str | Text = title
        # Held, not queried on every redraw.
        self._info = Static("", classes="series-info")
        self._chart = PlotextChart(placeholder=placeholder)

    def compose(self) -> ComposeResult:
        yield self._info
        yield self._chart

    def set_window(self, window_s: float | None) -> None:
        self.window_s = window_s
        self._seen = None
        self._last_chart = -1e18

    def retitle(self, title: str | Text) -> None:
        """Set the border title when it changed: assigning one repaints the whole panel,
        and with the header in the same frame, the top of the screen down to it."""
        if title != self._title:
            self._title = title
            self.border_title = title

    @property
    def span_s(self) -> float:
        """The window in seconds, the whole run as a span longer than any run."""
        return self.window_s if self.window_s is not None else WHOLE_RUN_S

    def chart_wanted(self, key: tuple) -> bool:
        """Worth copying a window for: the data moved and the last picture is old enough."""
        return key != self._seen and time.monotonic() - self._last_chart >= self.chart_interval_s

    def offer(self, key: tuple, draw: Draw) -> None:
        """Hand the chart a new picture for ``key``."""
        self._seen = key
        self._last_chart = time.monotonic()
        self._chart.set_plot(key, draw)

    def show_empty(self) -> None:
        self._chart.set_plot(("empty",), None)


def binned(times: Any, means: Any, end: float, width_s: float, points: int) -> tuple[Any, Any]:
    """Means of ``(times, means)`` in ``points`` equal bins over ``[end - width_s, end]``.

    Returns the bins' centres relative to ``end`` (seconds, <= 0) and their
    means, empty bins left out: one point per chart column, however many
    samples the window holds.
    """
    edges = np.linspace(end - width_s, end, points + 1)
    idx = np.clip(np.searchsorted(edges, times, side="right") - 1, 0, points - 1)
    sums = np.bincount(idx, weights=means, minlength=points)
    counts = np.bincount(idx, minlength=points)
    keep = counts > 0
    return ((edges[:-1] + edges[1:]) / 2)[keep] - end, sums[keep] / counts[keep]
