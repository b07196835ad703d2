"""One GPU: memory chart, used/total, flat/volatile/growing badge, util, holders.

The badge is the firing memory_* alert of this GPU (what the detectors
concluded), not a judgement of the tile: the panel and `check` can never
disagree. Processes are split into the job's (pids of the managed job's
process tree, or flagged by the sampler) and anyone else's, because
"someone else grabbed 20 GiB on GPU 3" is a different problem from a leak.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from dflash_watch.parsers.events import GpuLost, GpuProcess

from ..reading import split_holders
from ..text import fmt_gib, plain, set_static
from .plot import PlotextChart

CHART_WINDOW_S = 600.0
COMPACT_BAR_CELLS = 6  # the bar of a compact (one-line) tile
AXIS_PCT_WIDTH = 34  # charts at least this wide also label their ticks in % of the card
_EIGHTHS = " ▏▎▍▌▋▊▉"


@dataclass(frozen=True, slots=True, eq=False)
class GpuView:
    """What one tile shows, copied from the Monitor under its lock.

    ``times``/``lows``/``highs`` are the chart's window; empty when the
    panel did not offer the chart new data at this redraw.
    """

    gpu: int
    used: int | None
    total: int | None
    util: float | None
    processes: tuple[GpuProcess, ...] | None
    lost: GpuLost | None
    badge: str
    badge_style: str
    last_time: float | None
    times: np.ndarray
    lows: np.ndarray
    highs: np.ndarray
    job_pids: frozenset[int]
    # Health (issue 19): the latest sample's reads, None where the card does
    # not say; ``xid``/``ecc`` also from the gpu_health detector's state.
    temp_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    throttle: tuple[str, ...] = ()
    xid: int | None = None  # the last Xid seen on this GPU
    ecc: int | None = None  # uncorrected ECC errors
    # The chart's span in seconds (the window keys: 10 min, 1 h, 6 h, the
    # whole run as far as the samples go back).
    window_s: float = CHART_WINDOW_S
    # How old the newest sample is, as shown ("1m30s"), once it is older
    # than ``GPU_STALE_S``: a hung NVML or a sampler that stopped leaves the
    # last reading on screen, which must not read as the card's state now.
    stale: str | None = None

    @property
    def key(self) -> tuple:
        """Everything the tile's text shows, as it shows it (the chart has its own key: ``GpuTile._chart_key``).

        Displayed values, not raw ones: used memory, power and the holders'
        bytes move a little at every sample while the tile still reads
        "70.0/96.0G", and rebuilding eight tiles' text every second for an
        equal picture was a visible share of the dashboard's CPU.
        """
        return (memory_shown(self.used, self.total), util_shown(self.util),
                holders_shown(self.processes, self.job_pids), self.lost, self.badge, self.badge_style, health_shown(self),
                self.throttle, self.xid, self.ecc, self.stale)

    @property
    def has_health(self) -> bool:
        return self.temp_c is not None or self.power_w is not None or bool(self.flags)

    @property
    def flags(self) -> list[str]:
        """What is wrong with the card itself, worst first: ``XID 48``, ``ECC 2``, ``THERMAL``."""
        out = []
        if self.xid is not None:
            out.append(f"XID{self.xid}")
        if self.ecc:
            out.append(f"ECC{self.ecc}")
        out.extend(t.upper() for t in self.throttle)
        return out


def health_shown(view: GpuView) -> tuple[str | None, bool, str | None]:
    """The temperature, whether it is hot, and the power, as ``health_text`` writes them."""
    temp = None if view.temp_c is None else f"{view.temp_c:.0f}°C"
    power = None
    if view.power_w is not None:
        limit = f"/{view.power_limit_w:.0f}" if view.power_limit_w else ""
        power = f"{view.power_w:.0f}{limit}W"
    return temp, view.temp_c is not None and view.temp_c >= 85, power


def health_text(view: GpuView) -> Text:
    """The card's flags (Xid, ECC in red, throttle reasons in yellow), then ``72°C 412/700W``.

    Flags first: a tile 28 columns wide cuts the power, never the Xid."""
    out = Text(no_wrap=True, overflow="ellipsis")
    for flag in view.flags:
        out.append(flag, style="bold white on red" if flag.startswith(("XID", "ECC")) else "bold black on yellow")
        out.append(" ")
    temp, hot, power = health_shown(view)
    if temp is not None:
        out.append(temp, style="bold red" if hot else "")
    if power is not None:
        out.append(" " if out else "")
        out.append(power)
    return out


@dataclass(frozen=True, slots=True)
class MemoryShown:
    """Used/total memory as the tile writes it: the one home of that formatting.

    The tile's text key compares these (displayed values, not bytes), and
    ``_info`` and ``usage_bar`` write them: a change to how memory reads
    cannot leave the key comparing something the tile no longer shows.
    """

    used: str  # "70.0"
    total: str  # "96.0"
    pct: str  # " 73%"; "" without a total
    eighths: int | None  # the compact bar's length in eighths of a cell; None: no bar
    colour: str  # the bar's colour: green, yellow from 85%, red from 95%


def memory_shown(used: int | None, total: int | None) -> MemoryShown:
    """``used``/``total`` bytes as the tile shows them, with the compact tile's bar."""
    if not used or not total:
        return MemoryShown(fmt_gib(used), fmt_gib(total), "", None, "dim")
    frac = used / total
    bar = min(1.0, max(0.0, frac))
    colour = "red" if bar >= 0.95 else "yellow" if bar >= 0.85 else "green"
    return MemoryShown(fmt_gib(used), fmt_gib(total), f" {frac:4.0%}", round(bar * COMPACT_BAR_CELLS * 8), colour)


def util_shown(util: float | None) -> str | None:
    """The utilisation's digits as the tile writes them (``" 97"``); None: not reported."""
    return None if util is None else f"{util * 100:3.0f}"


def usage_bar(shown: MemoryShown) -> Text:
    """The compact tile's bar of ``shown``: ``COMPACT_BAR_CELLS`` cells in eighths."""
    cells = COMPACT_BAR_CELLS
    if shown.eighths is None:
        return Text("▕" + " " * cells + "▏", style="dim")
    full, part = divmod(shown.eighths, 8)
    body = "█" * full + (_EIGHTHS[part] if part and full < cells else "")
    return Text.assemble("▕", (body.ljust(cells), shown.colour), "▏")


def holders_shown(procs: tuple[GpuProcess, ...] | None, job_pids: frozenset[int]) -> tuple[str, ...] | None:
    """The holders' line as words: the job's part, then everyone else's; None: not available."""
    if procs is None:
        return None
    if not procs:
        return ()
    mine, others = split_holders(procs, job_pids)
    job = ""
    if mine:
        count = f" ×{len(mine)}" if len(mine) > 1 else ""
        job = f"job{count} {fmt_gib(sum(p.used_bytes for p in mine))}G"
    rest = ""
    if len(others) == 1:
        rest = f"{others[0].pid} {fmt_gib(others[0].used_bytes)}G"
    elif others:
        rest = f"{len(others)} others {fmt_gib(sum(p.used_bytes for p in others))}G"
    return job, rest


def processes_text(view: GpuView) -> Text:
    shown = holders_shown(view.processes, view.job_pids)
    if shown is None:
        return Text("processes: not available", style="dim")
    if not shown:
        return Text("no processes", style="dim")
    job, rest = shown
    out = Text(no_wrap=True, overflow="ellipsis")
    if job:
        out.append(job, style="green")
    if rest:
        out.append(" + " if out else "")
        out.append(rest, style="magenta")
    return out


def envelope(times: np.ndarray, lows: np.ndarray, highs: np.ndarray, end: float, points: int,
             window_s: float = CHART_WINDOW_S) -> tuple[list[float], list[float], list[float]]:
    """Per-column min and max over the window: one-sample spikes survive downsampling."""
    if len(times) == 0:
        return [], [], []
    start = end - window_s
    edges = np.linspace(start, end, points + 1)
    idx = np.clip(np.searchsorted(edges, times, side="right") - 1, 0, points - 1)
    lo = np.full(points, np.inf)
    hi = np.full(points, -np.inf)
    np.minimum.at(lo, idx, lows)
    np.maximum.at(hi, idx, highs)
    keep = np.isfinite(lo)
    xs = ((edges[:-1] + edges[1:]) / 2 - end)[keep]
    return xs.tolist(), lo[keep].tolist(), hi[keep].tolist()


class GpuTile(Vertical):
    DEFAULT_CSS = """
    GpuTile { height: 8; border: round $panel-lighten-2; padding: 0 1; }
    GpuTile .gpu-info { height: 1; }
    GpuTile .gpu-procs { height: 1; color: $text-muted; }
    GpuTile .gpu-health { height: 1; display: none; }
    GpuTile .gpu-health.-shown { display: block; }
    GpuTile PlotextChart { height: 1fr; }
    """

    def __init__(self, gpu: int) -> None:
        super().__init__(id=f"gpu-{gpu}", classes="gpu-tile")
        self.gpu = gpu
        self.view: GpuView | None = None
        self._text_key: tuple | None = None  # ``view.key`` of the text shown
        self.compact = False
        self.border_title = f"GPU {gpu}"
        self._title: Text | None = None
        # Built here, not in compose: the panel fills a tile in the same
        # redraw that mounts it, before its children would exist.
        self.info = Static("", classes="gpu-info")
        self.chart = PlotextChart(placeholder="waiting for samples", classes="gpu-chart")
        self.procs = Static("", classes="gpu-procs")
        self.health = Static("", classes="gpu-health")

    def compose(self) -> ComposeResult:
        yield self.info
        yield self.health
        yield self.chart
        yield self.procs

    @property
    def wants_chart_data(self) -> bool:
        """True until the chart has been offered data once (the panel then copies the window)."""
        return self.chart.key is None

    def show(self, view: GpuView, compact: bool, chart_due: bool) -> None:
        """Show ``view``: the text when what it shows changed, the chart when ``chart_due``.

        ``view`` carries the chart window only when ``chart_due`` or
        ``wants_chart_data`` (copying eight windows every redraw for a
        chart offered new data every 5 s was most of the panel's cost).
        """
        key = view.key
        changed = key != self._text_key or compact != self.compact
        self._text_key = key
        self.view = view
        self.compact = compact
        if changed:
            self._show_text(view, compact)
        chart = self.chart
        if compact:
            return
        if chart_due or chart.key is None:
            if len(view.times) == 0 or view.last_time is None:
                chart.set_plot(("empty",), None)
            else:
                key = self._chart_key(view)
                # A picture key is the same chart on any tile: GPUs that hold the same memory share one build.
                chart.set_plot(key, self._drawer(view), share="gpu-memory" if key[0] == "picture" else None)

    def _show_text(self, view: GpuView, compact: bool) -> None:
        self.set_class(view.badge != "flat" or bool(view.flags), "-alerting")
        self.set_class(view.lost is not None or view.xid is not None, "-lost")
        self.health.set_class(view.has_health and not compact, "-shown")
        if view.has_health:
            set_static(self.health, health_text(view))
        title = Text.assemble((f"GPU {view.gpu} ", "bold"), (f" {view.badge} ", view.badge_style))
        if view.stale is not None:
            title.append(f" no sample for {view.stale} ", "bold black on yellow")
        if title != self._title:  # assigning repaints even when equal
            self._title = self.border_title = title
        set_static(self.info, self._info(view, compact))
        set_static(self.procs, processes_text(view))

    def _info(self, view: GpuView, compact: bool) -> Text:
        if view.lost is not None:
            return Text.assemble((f"GPU {view.gpu} " if compact else "", "bold"),
                                 ("LOST ", "bold white on red"), plain(view.lost.message))
        mem, digits = memory_shown(view.used, view.total), util_shown(view.util)
        used = f"{mem.used}/{mem.total}G"
        if compact:
            util = "  -%" if digits is None else f"{digits}%"
            line = Text.assemble(
                (f"GPU{view.gpu:<2}", "bold"), usage_bar(mem),
                f"{used:>10} {util} ", (view.badge, view.badge_style),
                no_wrap=True, overflow="ellipsis",
            )
            for flag in view.flags[:2]:  # one line per GPU: the worst two flags
                line.append(f" {flag}", style="bold red")
            return line
        util = "util -" if digits is None else f"util {digits}%"
        return Text.assemble((used, "bold"), mem.pct, "  ", util, no_wrap=True, overflow="ellipsis")

    def _chart_key(self, view: GpuView) -> tuple:
        """What the chart would show now: a new key is a new picture, an equal one is none.

        A plotext build costs about 2 ms and a repaint of the GPU grid more,
        and a ten-minute chart rarely changes by a whole braille dot in the
        5 s between offers, so the key is the picture (``MemoryPlot.key``) at
        the chart's current size, not the data's time. Before the first
        layout the size is unknown: then any new data is news.
        """
        width, height = self.chart.content_size
        if width < 8 or height < 2:
            return ("data", view.last_time, len(view.times), view.badge)
        plot = memory_plot(view, width)
        return ("picture", width, height, _colour(view.badge), plot.key(height) if plot else None)

    @staticmethod
    def _drawer(view: GpuView):
        colour = _colour(view.badge)

        def draw(fig, width: int, height: int) -> None:
            plot = memory_plot(view, width)
            if plot is None:
                return
            xs, lo, hi, (y0, y1) = plot.xs, plot.lo, plot.hi, plot.ylim
            fig.plot(xs, hi, marker="braille", color=colour)
            if plot.both:
                fig.plot(xs, lo, marker="braille", color=colour)
            fig.ylim(y0, y1)
            fig.xlim(-view.window_s, 0)
            fig.yticks(plot.ticks, plot.labels)
            fig.xticks([])
            fig.frame(False)

        return draw


def _colour(badge: str) -> str:
    return {"flat": "green", "VOLATILE": "yellow", "GROWING": "orange", "FULL": "red"}.get(badge, "green")


@dataclass(frozen=True, slots=True, eq=False)
class MemoryPlot:
    """What one GPU's memory chart draws at one width: the envelope, the y range, the ticks."""

    xs: list[float]
    lo: list[float]
    hi: list[float]
    ylim: tuple[float, float]
    both: bool  # the lows drawn as a second line: the memory swings within a column
    ticks: list[float]
    labels: list[str]

    def key(self, rows: int) -> tuple:
        """The picture to a quarter of a braille dot (4 dots a row): equal keys, same chart.

        Values are taken relative to the y range, which the tick labels
        pin down; x positions are the columns that have samples. A value
        that moved by less than a quarter dot may still cross a dot
        boundary: the chart then shows it one dot off until its next change.
        """
        y0, y1 = self.ylim
        scale = rows * 16 / (y1 - y0)
        hi = tuple(round((v - y0) * scale) for v in self.hi)
        lo = tuple(round((v - y0) * scale) for v in self.lo) if self.both else ()
        return (tuple(round(x, 3) for x in self.xs), hi, lo, tuple(self.labels))


def memory_plot(view: GpuView, width: int) -> MemoryPlot | None:
    """The chart of ``view`` for a plot ``width`` columns wide; None without samples."""
    if view.last_time is None or len(view.times) == 0:
        return None
    points = max(4, (width - 6) * 2)
    xs, lo, hi = envelope(view.times, view.lows, view.highs, view.last_time, points, view.window_s)
    if not xs:
        return None
    ymin, ymax = min(lo), max(hi)
    span = max(ymax - ymin, 2**30 * 0.5, 0.02 * (view.total or 0))
    mid = (ymin + ymax) / 2
    y0, y1 = mid - span * 0.6, mid + span * 0.6
    both = any(h - low > span * 0.02 for h, low in zip(hi, lo))
    # Ticks at values the window really held (its low and its high), in the
    # tile's units: a flat line's one tick reads as the tile's "71.0/96.0G".
    ticks = [ymin, ymax] if (ymax - ymin) / (y1 - y0) > 0.3 else [(ymin + ymax) / 2]
    return MemoryPlot(xs, lo, hi, (y0, y1), both, ticks, [axis_label(t, view.total, width) for t in ticks])


def axis_label(used: float, total: int | None, width: int) -> str:
    """A memory tick with its units: ``71.0 GiB``, and its share of the card
    (``71.0 GiB 74%``, as the tile writes it) where the chart is wide enough."""
    label = f"{fmt_gib(used)} GiB"
    if total and width >= AXIS_PCT_WIDTH:
        label += f" {used / total:.0%}"
    return label
