"""The GPU grid: one tile per GPU the Monitor has seen, or why there are none.

Charts are expensive to build and a ten-minute memory chart moves by less
than a column per second, so they are offered new data every
``chart_interval_s``; the numbers beside them update at every redraw.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Grid, VerticalScroll
from textual.widgets import Static

from ...monitor import GPU_SAMPLING_OFF
from ..health import gpu_health
from ..reading import job_pids, locked, memory_badge
from ..text import fmt_duration, set_static
from .gpu_tile import CHART_WINDOW_S, GpuTile, GpuView
from .series import WHOLE_RUN_S

if TYPE_CHECKING:
    from ...monitor import Monitor

_EMPTY = np.empty(0)


# A GPU sampled at 1 Hz with no sample for this long (on the data's clock)
# is not being read: NVML hung, the sampler stopped, a sample file ended.
GPU_STALE_S = 15.0


def _stale(now: float | None, last: float | None) -> str | None:
    if now is None or last is None or now - last < GPU_STALE_S:
        return None
    return fmt_duration(now - last)


def gpu_hint(monitor: Monitor) -> Text:
    """Why there is no GPU data, and what to do about it."""
    reason = monitor.gpu_unavailable
    if reason == GPU_SAMPLING_OFF:
        return Text.assemble(
            ("GPU memory is not being sampled: ", "bold yellow"), str(reason), "\n",
            ("fix: ", "bold"), "drop --no-gpu, or pass --gpu-samples FILE to read recorded samples.",
        )
    if reason:
        return Text.assemble(
            ("GPU memory is not being sampled: ", "bold yellow"), str(reason), "\n",
            ("fix: ", "bold"),
            "install the NVIDIA driver and nvidia-ml-py on this node, or pass "
            "--gpu-samples FILE (JSON lines: time, gpu, used_bytes, total_bytes).",
        )
    return Text("waiting for the first GPU sample…", style="dim")


# "The whole run": a span longer than any run (the series' coarsest tier holds it).


class GpuPanel(VerticalScroll):
    DEFAULT_CSS = """
    GpuPanel { height: auto; max-height: 50%; }
    GpuPanel > Grid { grid-size: 4; grid-gutter: 0 0; height: auto; grid-rows: 8; }
    GpuPanel > .gpu-hint { padding: 0 1; height: auto; }
    """

    def __init__(self, *, chart_interval_s: float = 5.0, id: str | None = None) -> None:
        super().__init__(id=id)
        self.chart_interval_s = chart_interval_s
        # The memory charts' span: 10 min until a window key picks another
        # (None: the whole run), like the throughput and loss charts.
        self.window_s: float | None = CHART_WINDOW_S
        self._tiles: dict[int, GpuTile] = {}
        self._last_chart = -1e18
        self._columns = 4
        self._xids: dict[int, int] = {}  # the last Xid a sample carried, per GPU
        # Held, not queried: a query per redraw was a tenth of the panel's cost.
        self._hint = Static("", classes="gpu-hint")
        self._grid = Grid(id="gpu-grid")

    def compose(self) -> ComposeResult:
        yield self._hint
        yield self._grid

    def set_window(self, window_s: float | None) -> None:
        """Show ``window_s`` of memory from the next redraw on (None: the whole run)."""
        self.window_s = window_s
        self._last_chart = -1e18  # the next redraw copies the new window

    def update_view(self, monitor: Monitor, firing: list, compact: bool) -> None:
        grid = self._grid
        hint = self._hint
        pids = job_pids(monitor)
        views: list[GpuView] = []
        now = time.monotonic()
        chart_due = now - self._last_chart >= self.chart_interval_s
        with locked(monitor):
            history = monitor.gpus
            health = gpu_health(monitor)
            for gpu in history.gpus:
                series = history.used(gpu)
                last = history.last(gpu)
                tile = self._tiles.get(gpu)
                wanted = chart_due or tile is None or tile.wants_chart_data
                span = self.window_s
                if wanted and series is not None and series.count:
                    times, lows, highs, _ = series.window(WHOLE_RUN_S if span is None else span)
                    if span is None:  # the whole run: as far as the samples go back
                        span = max(CHART_WINDOW_S, float(series.last_time - times[0])) if len(times) else CHART_WINDOW_S
                else:
                    times = lows = highs = _EMPTY
                badge, style, _ = memory_badge(firing, gpu)
                state = health.get(gpu)
                if last is not None and last.xid:
                    self._xids[gpu] = last.xid[-1]
                # The gpu_health detector's word where it has one for this GPU;
                # without that detector, the last Xid a sample carried.
                xid = state.last_xid if state is not None else self._xids.get(gpu)
                ecc = getattr(state, "ecc_uncorrected", None)
                if ecc is None and last is not None:
                    ecc = last.ecc_uncorrected
                throttle = tuple(getattr(state, "throttle", None) or (last.throttle if last else None) or ())
                views.append(GpuView(
                    gpu=gpu,
                    used=last.used_bytes if last else None,
                    total=history.total_bytes(gpu),
                    util=last.util if last else None,
                    processes=last.processes if last else None,
                    lost=history.lost(gpu),
                    badge=badge if series is not None and series.count else "-",
                    badge_style=style if series is not None and series.count else "dim",
                    last_time=series.last_time if series is not None else None,
                    times=times, lows=lows, highs=highs,
                    job_pids=pids,
                    temp_c=last.temp_c if last else None,
                    power_w=last.power_w if last else None,
                    power_limit_w=last.power_limit_w if last else None,
                    throttle=throttle, xid=xid, ecc=ecc, window_s=span or CHART_WINDOW_S,
                    stale=_stale(monitor.now, series.last_time if series is not None and series.count else None),
                ))
        if hint.display != (not views):
            hint.display = not views
        if not views:
            set_static(hint, gpu_hint(monitor), layout=True)
        for view in views:
            if view.gpu not in self._tiles:
                tile = self._tiles[view.gpu] = GpuTile(view.gpu)
                grid.mount(tile)
        if chart_due:
            self._last_chart = now
        self._layout(len(views), compact)
        for view in views:
            self._tiles[view.gpu].show(view, compact, chart_due)

    def _layout(self, n: int, compact: bool) -> None:
        grid = self._grid
        width = self.app.size.width
        if compact:
            columns = 2 if width < 120 else 4
        else:
            columns = 4 if width >= 100 else 2
        columns = max(1, min(columns, n or 1))
        if columns != self._columns:
            self._columns = columns
            grid.styles.grid_size_columns = columns
        self.set_class(compact, "-compact")

