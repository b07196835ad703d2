"""The training loss over time, its NaN/Inf steps marked in red.

A NaN loss is the point of this chart: ``SeriesHistory`` keeps finite
values only, so the Monitor keeps the non-finite ones aside
(``Monitor.loss_nonfinite``) and they are drawn as red marks along the top
of the chart, the first one named in the title ("NaN at step 1234").
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.text import Text

from ..health import DEFAULT_WINDOW_S, loss_state, window_label
from ..reading import locked
from ..text import fmt_clock, set_static
from .series import SeriesPanel, binned

if TYPE_CHECKING:
    from ...monitor import Monitor


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


class LossPanel(SeriesPanel):
    def __init__(self, *, tz: Any = None, chart_interval_s: float = 5.0, id: str | None = None) -> None:
        super().__init__(title="loss", placeholder="no loss in the log yet", window_s=DEFAULT_WINDOW_S, tz=tz,
                         chart_interval_s=chart_interval_s, id=id)
        self.nonfinite: list[tuple[float, int | None, float]] = []  # marked in the window shown (tests read it)

    def update_view(self, monitor: Monitor) -> None:
        span = self.span_s
        with locked(monitor):
            series = monitor.loss
            count = series.count
            bad_all = list(monitor.loss_nonfinite)
            bad_total = monitor.loss_nonfinite_total
            end = max((t for t in (series.last_time, bad_all[-1][0] if bad_all else None) if t is not None),
                      default=None)
            state = loss_state(monitor)
            last = series.last_value if count else None
            last_time = series.last_time
            key = (count, end, bad_total, self.window_s)
            window = series.window(span, end) if count and end is not None and self.chart_wanted(key) else None
        bad = [b for b in bad_all if end is not None and b[0] >= end - span]
        self.nonfinite = bad
        self.retitle(loss_title(bad, self.window_s))
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
        if count == 0 and not bad:
            self.show_empty()
            return
        if end is None or (window is None and count) or key == self._seen:
            return
        self.offer(key, self._drawer(window, end, bad, span))

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
                xs, ys = binned(times, means, end, width_s, points)
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
