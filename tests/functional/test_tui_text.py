"""Log text is shown as text: markup and escapes never act; hints say why a panel is empty."""

from __future__ import annotations

from rich.text import Text
from tui_helpers import UTC, make_app, screen_text

from dflash_watch.monitor import Monitor
from dflash_watch.tui.app import DashboardApp
from dflash_watch.tui.text import plain
from dflash_watch.tui.widgets.log_view import ERROR, NORMAL, TB_EXC, TB_FRAME, TB_HEAD, classify

SIZE = (120, 40)
EVIL = "x [bold red]boom[/] [link=https://e.vil]click[/link] \x1b[31mred\x1b[0m \x1b]8;;http://a\x1b\\link\x1b]8;;\x1b\\ bell\x07 end"


def test_plain_strips_escapes_and_shows_controls():
    out = plain(EVIL)
    assert "\x1b" not in out and "\x07" not in out
    assert "[bold red]boom[/]" in out and "[link=https://e.vil]click[/link]" in out
    assert "red" in out and "\\x07" in out


def test_traceback_lines_are_classified():
    lines = ["Traceback (most recent call last):", '  File "a.py", line 3, in f', "    g()",
             "ValueError: bad", "[2025-11-29 10:00:00] [ERROR] x", "plain"]
    prev, out = NORMAL, []
    for line in lines:
        prev = classify(line, prev)
        out.append(prev)
    assert out[0] == TB_HEAD and out[1] == TB_FRAME and out[3] == TB_EXC and out[4] == ERROR and out[5] == NORMAL


async def test_log_view_shows_markup_and_escapes_literally():
    monitor = Monitor(tz=UTC)
    monitor.feed_text("/tmp/x/train.log", f"first\n{EVIL}\nlast\n", 1, 1764410400.0)
    app = DashboardApp(monitor, tz=UTC, clock=lambda: 1764410400.0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        text = screen_text(app)
        assert "[bold red]boom[/]" in text
        assert "[link=https://e.vil]click[/link]" in text
        assert "\x1b" not in text and "\x07" not in text
        view = app.query_one("#log-view")
        strip = view.render_line(1)
        # Nothing in the line became a hyperlink or took the markup's style.
        assert all(seg.style is None or (seg.style.link is None and not seg.style.bold) for seg in strip)


async def test_no_nvml_no_tmux_no_log_each_panel_says_why():
    monitor = Monitor(tz=UTC)
    monitor.gpu_unavailable = "NVML not found (libnvidia-ml.so.1: cannot open shared object file)"
    monitor.note("waiting for /runs/x/train.log to appear")
    app = DashboardApp(monitor, tz=UTC, clock=lambda: 1764410400.0,
                       control_note="job control off: tmux not found on PATH (install tmux; monitoring still works)")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        hint = app.query_one(".gpu-hint")
        assert "libnvidia-ml" in str(hint.render()) and "--gpu-samples" in str(hint.render())
        assert "tmux not found" in app.query_one("#header")._shown.plain
        assert "waiting for /runs/x/train.log" in app.query_one("#log-view").empty_message.plain
        assert "waiting for /runs/x/train.log" in screen_text(app)


async def test_the_screen_fits_80x24_without_overlap():
    app, s, job = make_app("volatile", minutes=8)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.3)
        assert app.compact
        regions = [w.region for w in (app.query_one("#header"), app.query_one("#gpus"), app.query_one("#middle"),
                                      app.query_one("#log"))]
        for a, b in zip(regions, regions[1:]):
            assert a.bottom <= b.y, (a, b)
        assert all(r.height > 0 for r in regions)
        assert app.query_one("#log").region.height >= 5
        assert "VOLATILE" in "".join(str(t.info.render()) for t in app.query("GpuTile"))


async def test_eight_gpus_fit_at_120x40_with_charts():
    app, s, job = make_app("healthy", minutes=8)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        tiles = list(app.query("GpuTile"))
        assert len(tiles) == 8
        screen = app.screen.region
        for tile in tiles:
            assert screen.contains_region(tile.region)
            assert tile.chart.builds >= 1
        log = app.query_one("#log").region
        assert log.height >= 8


def test_plain_is_a_text_object_everywhere():
    # Text(...) never parses markup: the basis of everything above.
    assert Text("[bold]x[/]").plain == "[bold]x[/]"


def test_gpu_hint_tells_sampling_turned_off_from_a_failure() -> None:
    from dflash_watch.monitor import GPU_SAMPLING_OFF, Monitor
    from dflash_watch.tui.widgets.gpu_panel import gpu_hint

    monitor = Monitor()
    monitor.gpu_unavailable = GPU_SAMPLING_OFF
    assert "drop --no-gpu" in gpu_hint(monitor).plain
    # A driver failure whose text happens to hold "off" still gets the driver's fix.
    monitor.gpu_unavailable = "NVML: GPU 3 fell off the bus (NVMLError_GpuIsLost)"
    hint = gpu_hint(monitor).plain
    assert "install the NVIDIA driver" in hint and "drop --no-gpu" not in hint


async def test_the_footer_keeps_help_and_quit_on_screen_after_a_resize_to_80_columns():
    """Textual stores the new size after the app's resize handler: read from
    ``self.size`` the footer was one resize behind (wide at 80 columns, `?
    help` and `q quit` cut off; compact at 160)."""
    app, s, job = make_app("healthy")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause(0.3)
        assert not app.footer.compact
        for width, height in ((80, 24), (160, 48), (80, 24)):
            await pilot.resize_terminal(width, height)
            await pilot.pause(0.3)
            assert app.footer.compact == (width < 100)
            shown = {key.description: key.region for key in app.footer.query("FooterKey")}
            for what in ("help", "quit"):
                region = shown.get(what)
                assert region is not None and region.width > 0 and region.right <= width, (width, what, shown)
            # The palette key (Ctrl-P still opens it) gives its room up below 100 columns.
            assert ("palette" in shown) == (width >= 100), (width, shown)
