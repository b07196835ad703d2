"""The run's rate over time, the baseline drawn as a line, drops marked in red.

The rate and its unit are the run's own (``reading.current_rate``: tok/s,
it/s, samples/s), so a run that counts iterations is not shown as "-".

"Below baseline" is marked with the detector's own threshold
(``throughput_drop_frac``), so a red point on the chart means the same as
the alert: the chart cannot cry wolf where the detector stays quiet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text

from dflash_watch.parsers.events import TOK_S

from ..health import window_label
from ..reading import current_rate, locked
from ..text import fmt_clock, fmt_rate_unit, set_static
from .series import SeriesPanel, binned

if TYPE_CHECKING:
    from ...monitor import Monitor

WINDOW_S = 3600.0


class ThroughputPanel(SeriesPanel):
    def __init__(self, *, tz: Any = None, chart_interval_s: float = 5.0, id: str | None = None) -> None:
        super().__init__(title="throughput", window_s=WINDOW_S, tz=tz, chart_interval_s=chart_interval_s, id=id,
                         placeholder="no rate in the log yet: the chart starts with the first "
                         "progress line that reports one (tok/s, it/s, samples/s; or set "
                         "progress_regex in the config)")
        self.unit = TOK_S  # the unit shown last (tests read it)

    def update_view(self, monitor: Monitor, firing: list) -> None:
        drop = next((a for a in firing if a.detector == "throughput_drop"), None)
        with locked(monitor):
            series = monitor.throughput
            count = series.count
            last_time = series.last_time
            last_value, unit, baseline = current_rate(monitor)
            chart_baseline = baseline  # the series is in ``unit`` whenever it has points
            frac = float(getattr(monitor.detector_config, "throughput_drop_frac", 0.3))
            span = self.span_s
            key = (count, last_time, chart_baseline, drop is not None, self.window_s)
            window = series.window(span) if count and self.chart_wanted(key) else None
        self.unit = unit
        info = Text(no_wrap=True, overflow="ellipsis")
        info.append(fmt_rate_unit(last_value, unit), style="bold")
        if baseline:
            info.append(f"  baseline {fmt_rate_unit(baseline, unit)}", style="cyan")
            if last_value is not None:
                delta = last_value / baseline - 1.0
                info.append(f"  {delta:+.0%}", style="red" if delta <= -frac else "yellow" if delta < -0.05 else "green")
        else:
            info.append("  no baseline yet (learned after warm-up, or press b)", style="dim")
        if drop is not None:
            info.append("  DROP", style="bold white on red")
        set_static(self._info, info)
        self.set_class(drop is not None, "-alerting")
        if count == 0:
            self.show_empty()
            return
        if window is None or last_time is None:  # a series with points has a last time
            return
        # The default window goes unsaid; another one is named (``1``-``4`` pick it).
        self.retitle("throughput" if self.window_s == WINDOW_S else f"throughput ({window_label(self.window_s)})")
        self.offer(key, self._drawer(window, last_time, chart_baseline, frac, span))

    def _drawer(self, window, end: float, baseline: float | None, frac: float, window_s: float = WINDOW_S):
        times, lows, highs, means = window
        tz = self.tz

        def draw(fig, width: int, height: int) -> None:
            points = max(8, (width - 8) * 2)
            start = max(float(times[0]), end - window_s)
            span = max(end - start, 60.0)
            xs, ys = binned(times, means, end, span, points)
            top = max(float(ys.max()), baseline or 0.0) * 1.1
            fig.plot(xs.tolist(), ys.tolist(), marker="braille", color="green")
            if baseline:
                fig.hline(baseline, color="cyan")
                low = ys < baseline * (1.0 - frac)
                if low.any():
                    fig.scatter(xs[low].tolist(), ys[low].tolist(), marker="braille", color="red")
            fig.ylim(0, top)
            fig.xlim(-span, 0)
            ticks = [-span, -span / 2, 0.0]
            fig.xticks(ticks, [_clock(end + t, tz) for t in ticks])
            yt = [0.0, top / 2, top]
            fig.yticks(yt, [_rate(v) for v in yt])
            fig.frame(False)

        return draw


def _clock(t: float, tz: Any) -> str:
    return fmt_clock(t, tz)[:5]


def _rate(v: float) -> str:
    return f"{v / 1000:.0f}K" if v >= 1000 else f"{v:.0f}"

