"""The training loss over time, its NaN/Inf steps marked in red.

A NaN loss is the point of this chart: ``SeriesHistory`` keeps finite
values only, so the Monitor keeps the non-finite ones aside
(``Monitor.loss_nonfinite``) and they are drawn as red marks along the top
of the chart, the first one named in the title ("NaN at step 1234").
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from ..health import DEFAULT_WINDOW_S, loss_state, window_label
from ..reading import locked
from ..text import fmt_clock, set_static
from .plot import PlotextChart

if TYPE_CHECKING:
    from ...monitor import Monitor

WHOLE_RUN_S = 1e12  # ``SeriesHistory.window`` of "everything it holds"


def nonfinite_name(value: float) -> str:
    return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")


def loss_title(bad: list[tuple[float, int | None, float]], window: float | None) -> Text:
    """``loss (1h)``, and the first non-finite loss in red: ``NaN at step 1234``."""
    title = Text("loss" if window == DEFAULT_WINDOW_S else f"loss ({window_label(window)})")
    if bad:
        t, step, value = bad[0]
        where = f"step {step}" if step is not None else fmt_clock(t, None)[:8]
        title.append(f" {nonfinite_name(value)} at {where} ", style="bold white on red")
    return title


class LossPanel(Vertical):
    DEFAULT_CSS = """
    LossPanel { border: round $panel-lighten-2; padding: 0 1; }
    LossPanel > .loss-info { height: 1; }
    LossPanel > PlotextChart { height: 1fr; }
    """

    def __init__(self, *, tz: Any = None, chart_interval_s: float = 5.0, id: str | None = None) -> None:
        super().__init__(id=id)
        self.tz = tz
        self.chart_interval_s = chart_interval_s
        self.window_s: float | None = DEFAULT_WINDOW_S
        self._last_chart = -1e18
        self._seen: tuple | None = None
        self.border_title = "loss"
        self._info = Static("", classes="loss-info")
        self._chart = PlotextChart(placeholder="no loss in the log yet")
        self.nonfinite: list[tuple[float, int | None, float]] = []  # marked in the window shown (tests read it)

    def compose(self) -> ComposeResult:
        yield self._info
        yield self._chart

    def set_window(self, window_s: float | None) -> None:
        self.window_s = window_s
        self._seen = None
        self._last_chart = -1e18

    def update_view(self, monitor: Monitor) -> None:
        span = self.window_s if self.window_s is not None else WHOLE_RUN_S
        with locked(monitor):
            series = monitor.loss
            count = series.count
            bad_all = list(monitor.loss_nonfinite)
            bad_total = monitor.loss_nonfinite_total
            end = max((t for t in (series.last_time, bad_all[-1][0] if bad_all else None) if t is not None),
                      default=None)
            state = loss_state(monitor)
            due = time.monotonic() - self._last_chart >= self.chart_interval_s
            last = series.last_value if count else None
            last_time = series.last_time
            key = (count, end, bad_total, self.window_s)
            window = series.window(span, end) if count and due and key != self._seen and end is not None else None
        bad = [b for b in bad_all if end is not None and b[0] >= end - span]
        self.nonfinite = bad
        self.border_title = loss_title(bad, self.window_s)
        self.set_class(bool(bad), "-alerting")
        info = Text(no_wrap=True, overflow="ellipsis")
        if bad and (last is None or bad[-1][0] >= (last_time or -math.inf)):
            info.append(f"loss {nonfinite_name(bad[-1][2])}", style="bold red")
        elif last is not None:
            info.append(f"loss {last:.4g}", style="bold")
        else:
            info.append("loss -", style="dim")
        grad = getattr(state, "grad_norm", None)
        if grad is not None:
            info.append(f"  grad {grad:.3g}", style="red" if not math.isfinite(grad) else "")
        if bad_total:  # steps, not reports: every rank's copy of a step's NaN is one
            info.append(f"  {bad_total} non-finite step{'s' if bad_total != 1 else ''}", style="red")
        set_static(self._info, info)
        chart = self._chart
        if count == 0 and not bad:
            chart.set_plot(("empty",), None)
            return
        if end is None or (window is None and count) or key == self._seen:
            return
        self._seen = key
        self._last_chart = time.monotonic()
        chart.set_plot(key, self._drawer(window, end, bad, span))

    def _drawer(self, window, end: float, bad: list[tuple[float, int | None, float]], span: float):
        tz = self.tz
        if window is None:
            empty = np.empty(0)
            window = (empty, empty, empty, empty)
        times, _, _, means = window

        def draw(fig, width: int, height: int) -> None:
            points = max(8, (width - 8) * 2)
            start_t = float(times[0]) if len(times) else (bad[0][0] if bad else end)
            start = max(start_t, end - span)
            width_s = max(end - start, 60.0)
            top, bottom = 1.0, 0.0
            if len(times):
                edges = np.linspace(end - width_s, end, points + 1)
                idx = np.clip(np.searchsorted(edges, times, side="right") - 1, 0, points - 1)
                sums = np.bincount(idx, weights=means, minlength=points)
                counts = np.bincount(idx, minlength=points)
                keep = counts > 0
                xs = ((edges[:-1] + edges[1:]) / 2)[keep] - end
                ys = sums[keep] / counts[keep]
                lo, hi = float(ys.min()), float(ys.max())
                pad = max((hi - lo) * 0.1, abs(hi) * 0.01, 1e-6)
                bottom, top = lo - pad, hi + pad
                fig.plot(xs.tolist(), ys.tolist(), marker="braille", color="green")
                fig.yticks([bottom, top], [f"{bottom:.3g}", f"{top:.3g}"])
            if bad:
                # Each non-finite loss: a red column from the top, where a value would be off the chart.
                for t, _, _ in bad:
                    x = max(t - end, -width_s)
                    fig.plot([x, x], [bottom + (top - bottom) * 0.5, top], marker="braille", color="red")
            fig.ylim(bottom, top)
            fig.xlim(-width_s, 0)
            ticks = [-width_s, 0.0]
            fig.xticks(ticks, [fmt_clock(end + x, tz)[:5] for x in ticks])
            fig.frame(False)

        return draw
