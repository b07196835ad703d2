"""The dashboard skips work that would not change the picture (issue #5: <= 3% of a core).

Each test pins one saving of benchmarks/bench_dashboard.py and that it
still shows what changed: an equal chart is not rebuilt but a moved one
is, a growing log does not lay out the screen but still follows, the
tile numbers update between chart offers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tui_helpers import UTC, screen_text

from dflash_watch.monitor import Monitor
from dflash_watch.parsers.events import GpuProcess, GpuSample
from dflash_watch.tui.app import DashboardApp
from dflash_watch.tui.widgets.log_view import (
    _ERROR_WORDS,
    _TB_CHAIN,
    _WARNING_WORDS,
    ERROR,
    NORMAL,
    TB_CODE,
    TB_EXC,
    TB_FRAME,
    TB_HEAD,
    WARNING,
    _classify_rules,
    _plain_line,
    classify,
)

SIZE = (120, 40)
GIB = 1 << 30
T0 = 1764410400.0
LOG = "/runs/x/train.log"


def flat_samples(monitor: Monitor, start: float, seconds: int, level: int = 70 * GIB) -> float:
    """``seconds`` of 1 Hz samples of 8 GPUs at a constant level; returns the last time."""
    t = start
    for k in range(seconds):
        t = start + k
        monitor.feed_samples([GpuSample(t, g, level, 96 * GIB, 0.97, (GpuProcess(4242, level - GIB, "python", job=True),))
                              for g in range(8)])
    return t


def count_calls(obj: object, name: str, when: Callable[..., bool] = lambda *a, **k: True) -> list[Any]:
    """Each call of ``obj.name`` that ``when`` picks, as (args, kwargs); the call is still made.

    A saving is pinned by a method not being called (a layout, a repaint, a
    callback), while what it would have shown must still land: so the real
    method runs on, and only this instance's attribute is replaced."""
    calls: list[Any] = []
    real = getattr(obj, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        if when(*args, **kwargs):
            calls.append((args, kwargs))
        return real(*args, **kwargs)

    setattr(obj, name, counting)
    return calls


def log_lines(monitor: Monitor, first: int, n: int, t: float) -> None:
    text = "".join(f"[2025-11-29 10:00:00,000] [INFO] [dflash.data] prefetched batch {i}\n" for i in range(first, first + n))
    monitor.feed_text(LOG, text, first, t)


async def test_an_unchanged_memory_chart_is_not_rebuilt_and_a_moved_one_is():
    monitor = Monitor(tz=UTC)
    now = flat_samples(monitor, T0, 700)  # more than the 10-minute window: the chart is full
    app = DashboardApp(monitor, tz=UTC, clock=lambda: now, chart_interval_s=0.0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        app.redraw(force=True)  # a second offer: now the chart knows its size
        await pilot.pause(0.1)
        tiles = list(app.query("GpuTile"))
        assert len(tiles) == 8
        built = [t.chart.builds for t in tiles]
        assert all(b >= 1 for b in built)
        # More samples at the same level: time moved on, the picture did not.
        now = flat_samples(monitor, now + 1, 5)
        for _ in range(3):
            app.redraw(force=True)
            await pilot.pause(0.05)
        assert [t.chart.builds for t in tiles] == built
        # GPU 2 jumps by 20 GiB: its chart, and only its chart, is built again.
        monitor.feed_samples([GpuSample(now + 1, 2, 90 * GIB, 96 * GIB, 0.97, ())])
        app.redraw(force=True)
        await pilot.pause(0.1)
        after = [t.chart.builds for t in tiles]
        assert after[2] == built[2] + 1
        assert after[:2] + after[3:] == built[:2] + built[3:]


async def test_tile_numbers_update_between_chart_offers():
    monitor = Monitor(tz=UTC)
    now = flat_samples(monitor, T0, 30)
    app = DashboardApp(monitor, tz=UTC, clock=lambda: now, chart_interval_s=3600.0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        tile = app.query_one("#gpu-0")
        built = tile.chart.builds
        assert "70.0/96.0G" in str(tile.info.render())
        monitor.feed_samples([GpuSample(now + 1, 0, 80 * GIB, 96 * GIB, 0.5, ())])
        app.redraw(force=True)
        await pilot.pause(0.1)
        assert "80.0/96.0G" in str(tile.info.render()) and "util  50%" in str(tile.info.render())
        assert tile.chart.builds == built  # the chart waits for its next offer


async def test_a_growing_log_is_followed_without_laying_out_the_screen():
    monitor = Monitor(tz=UTC)
    log_lines(monitor, 1, 100, T0)
    app = DashboardApp(monitor, tz=UTC, clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        view = app.query_one("#log-view")
        assert view.show_vertical_scrollbar
        # the view asking for a layout of the screen
        layouts = count_calls(view, "refresh", lambda *regions, **kwargs: bool(kwargs.get("layout")))
        for first in (101, 201, 301):
            log_lines(monitor, first, 100, T0)
            app.log_panel.update_view(monitor)
            await pilot.pause(0.1)
        assert layouts == []
        assert view.virtual_size.height == 400
        assert view.vertical_scrollbar.window_virtual_size == 400
        assert view.scroll_y == view.max_scroll_y  # still following
        assert "prefetched batch 400" in screen_text(app).splitlines()[-1]


async def test_a_filter_that_shrinks_a_paused_view_keeps_the_scroll_inside_it():
    monitor = Monitor(tz=UTC)
    log_lines(monitor, 1, 300, T0)
    app = DashboardApp(monitor, tz=UTC, clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        view = app.query_one("#log-view")
        view.following = False  # paused at the end: its top line is about 290
        view.set_filter("batch 1")  # 1, 10-19, 100-199: 111 lines, none at or after the top line
        await pilot.pause(0.1)
        assert view.virtual_size.height == 111
        assert view.scroll_y == view.max_scroll_y
        assert screen_text(app).splitlines()[-1].rstrip().endswith("prefetched batch 199")


def test_the_plain_line_shortcut_never_hides_a_word_classify_looks_for():
    for word in _ERROR_WORDS + _WARNING_WORDS + _TB_CHAIN:
        assert not _plain_line(f"[2025-11-29 10:00:00] x {word} y"), word
    lines = [
        "[2025-11-29 10:00:00,000] [INFO] [dflash.data] prefetched batch 1 (65536 tokens)",
        "Traceback (most recent call last):", '  File "train.py", line 3, in step', "    loss.backward()",
        "RuntimeError: CUDA error: an illegal memory access", "", "^^^^^", "[rank3]: ValueError: bad",
        "During handling of the above exception, another exception occurred:",
        "The above exception was the direct cause of the following exception:",
        "[W] WARN something", "W1129 10:00:00.000 WARNING dynamo", "E ERROR x", "FATAL y", "CRITICAL z",
        "plain words: with a colon", "\tindented", "    four spaces",
    ]
    for previous in (NORMAL, TB_HEAD, TB_FRAME, TB_CODE, TB_EXC, ERROR, WARNING):
        for line in lines:
            assert classify(line, previous) == _classify_rules(line, previous), (line, previous)


def test_settle_gc_exempts_what_exists_from_full_collections():
    import gc

    app = DashboardApp(Monitor(tz=UTC), tz=UTC)
    before = gc.get_freeze_count()
    threshold = gc.get_threshold()
    try:
        app.settle_gc()
        assert gc.get_freeze_count() > before
        # Young collections are rarer: a frame's thousands of short-lived strips are freed by count.
        assert gc.get_threshold()[0] >= 10_000 and gc.get_threshold()[1:] == threshold[1:]
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


async def test_settle_gc_is_not_scheduled_in_a_headless_app(monkeypatch):
    """Tests (headless) share their process with the test runner: it is not the dashboard's to freeze."""
    import gc

    from dflash_watch.tui import app as app_module

    monkeypatch.setattr(app_module, "GC_SETTLE_S", 0.01)
    calls = []
    monkeypatch.setattr(DashboardApp, "settle_gc", lambda self: calls.append(1))
    app = DashboardApp(Monitor(tz=UTC), tz=UTC)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.2)
    assert calls == [] and gc.get_freeze_count() == 0


def loss_lines(monitor: Monitor, first: int, n: int, t: float, loss: str | None = None) -> None:
    text = "".join(f"[2025-11-29 10:00:{i % 60:02d},000] [INFO] [dflash.train] step {i}/1000 | "
                   f"loss {loss or f'{2.0 - i / 1000:.3f}'} | 20.0 Ktok/s\n" for i in range(first, first + n))
    monitor.feed_text("/runs/x/loss.log", text, first, t)


async def test_a_loss_panel_is_not_repainted_for_a_title_that_did_not_change():
    """Setting a border title repaints the whole panel, and with the header (repainted every
    second) the box Textual repaints was then the top two thirds of the screen, every second."""
    monitor = Monitor(tz=UTC)
    loss_lines(monitor, 1, 20, T0)
    app = DashboardApp(monitor, tz=UTC, clock=lambda: T0 + 20, chart_interval_s=3600.0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        panel = app.loss_panel
        assert panel.has_class("-shown")
        repaints = count_calls(panel, "refresh")
        for first in (21, 41, 61):
            loss_lines(monitor, first, 20, T0 + first)
            app.redraw(force=True)
            await pilot.pause(0.05)
        assert repaints == []
        assert "loss 1.92" in str(panel._info.render())  # the reading above the chart still moves
        loss_lines(monitor, 81, 1, T0 + 81, loss="nan")
        app.redraw(force=True)
        await pilot.pause(0.05)
        assert repaints and "NaN at step 81" in str(panel.border_title)


async def test_gpus_that_hold_the_same_memory_share_one_chart_build(monkeypatch):
    """A data-parallel job's GPUs usually draw the same chart: plotext runs once for all of them."""
    from collections import OrderedDict

    from dflash_watch.tui.widgets import plot

    monkeypatch.setattr(plot, "_SHARED", OrderedDict())  # no picture from an earlier test in this process
    monitor = Monitor(tz=UTC)
    now = flat_samples(monitor, T0, 700)
    app = DashboardApp(monitor, tz=UTC, clock=lambda: now, chart_interval_s=0.0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        app.redraw(force=True)  # the first offer with the tiles' size: picture keys
        await pilot.pause(0.1)
        tiles = list(app.query("GpuTile"))
        built = [t.chart.builds for t in tiles]
        plotted = sum(t.chart.plotted for t in tiles)
        # All eight step up by 20 GiB together: eight new pictures, one plotext build.
        monitor.feed_samples([GpuSample(now + 1, g, 90 * GIB, 96 * GIB, 0.97, ()) for g in range(8)])
        app.redraw(force=True)
        await pilot.pause(0.1)
        assert [t.chart.builds for t in tiles] == [b + 1 for b in built]
        assert sum(t.chart.plotted for t in tiles) == plotted + 1
        charts = {str(t.chart.render()) for t in tiles}
        assert len(charts) == 1 and "90.0 GiB" in charts.pop()


async def test_tile_text_is_not_rebuilt_for_bytes_it_does_not_show(monkeypatch):
    """Used memory moves by a few MiB at every sample while the tile still reads "70.0/96.0G":
    eight tiles' text was rebuilt every second for the same picture. A change it shows still lands."""
    from dflash_watch.tui.widgets.gpu_tile import GpuTile

    monitor = Monitor(tz=UTC)
    now = flat_samples(monitor, T0, 30)
    app = DashboardApp(monitor, tz=UTC, clock=lambda: now, chart_interval_s=3600.0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        built = []
        real = GpuTile._show_text
        monkeypatch.setattr(GpuTile, "_show_text", lambda self, *a: (built.append(self.gpu), real(self, *a))[1])
        for k in range(1, 4):  # a few MiB up and down, the job's own bytes with them
            level = 70 * GIB + k * 3 * 2**20
            monitor.feed_samples([GpuSample(now + k, g, level, 96 * GIB, 0.97, (GpuProcess(4242, level - GIB, "python", job=True),))
                                  for g in range(8)])
            app.redraw(force=True)
            await pilot.pause(0.05)
        assert built == []
        monitor.feed_samples([GpuSample(now + 5, 3, 70 * GIB + 200 * 2**20, 96 * GIB, 0.97,
                                        (GpuProcess(4242, 69 * GIB, "python", job=True),))])
        app.redraw(force=True)
        await pilot.pause(0.05)
        tile = app.query_one("#gpu-3")
        assert built == [3] and "70.2/96.0G" in str(tile.info.render())


async def test_a_new_plain_log_row_is_built_once_as_shown_and_reads_the_same():
    """At 100 lines/s every row on screen is new at every redraw: a plain ASCII row is built
    as one cropped and padded strip, equal to what the general path (three strips) gives."""
    from rich.style import Style

    monitor = Monitor(tz=UTC)
    log_lines(monitor, 1, 50, T0)
    app = DashboardApp(monitor, tz=UTC, clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        view = app.query_one("#log-view")
        texts = ["", "plain", "x" * 300, "ERROR bad", "WARNING w", "Traceback (most recent call last):",
                 '  File "a.py", line 1, in f', "    f()", "ValueError: bad", "tab\there", "wide 日本語",
                 "\x1b[31mred\x1b[0m", "bell\x07", "é", "a" * 110, "a" * 111, "a" * 112]
        view.set_lines(LOG, [(1000 + i, t) for i, t in enumerate(texts)])
        fitted = 0
        for width in (5, 6, 7, 40, 116, 117, 118, 200):
            for base in (Style(), view.rich_style):
                for lineno, text in view.lines:
                    fast = view._fitted_strip(lineno, text, width, base)
                    slow = view._render_strip(lineno, text).crop_extend(0, width, base)
                    if fast is not None:
                        fitted += 1
                        assert list(fast) == list(slow) and fast.cell_length == slow.cell_length, (width, text)
        assert fitted > 100
        general = count_calls(view, "_render_strip")
        log_lines(monitor, 51, 100, T0)
        app.log_panel.update_view(monitor)
        await pilot.pause(0.1)
        assert "prefetched batch 150" in screen_text(app).splitlines()[-1]
        assert general == []  # every new row took the one-strip path


async def test_a_followed_log_that_is_laid_out_schedules_no_callback_per_redraw():
    monitor = Monitor(tz=UTC)
    log_lines(monitor, 1, 100, T0)
    app = DashboardApp(monitor, tz=UTC, clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        view = app.query_one("#log-view")
        later = count_calls(view, "call_after_refresh")
        for first in (101, 201, 301):
            log_lines(monitor, first, 100, T0)
            app.log_panel.update_view(monitor)
            await pilot.pause(0.05)
        assert later == []
        assert view.scroll_y == view.max_scroll_y
        assert "prefetched batch 400" in screen_text(app).splitlines()[-1]
