"""The dashboard at 80x24 and the header's step (issue 17: the dashboard, where alerts meet the user)."""

from __future__ import annotations

from textual.widgets._footer import FooterKey
from textual.widgets._toast import Toast
from tui_helpers import crash, make_app


async def settle(app, pilot, t: float = 0.6) -> None:
    await pilot.pause(t)
    await app.workers.wait_for_complete()
    await pilot.pause()


async def test_at_80x24_toasts_leave_the_alerts_panel_uncovered_and_the_footer_keeps_help_and_quit():
    app, s, job = make_app("volatile", minutes=20)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await settle(app, pilot)
        crash(s)  # three toasts at once: the crash, its exit, a resolve
        app.redraw(force=True)
        await settle(app, pilot)
        toasts = list(app.screen.query(Toast))
        assert len(toasts) >= 3
        alerts = app.alerts_panel.region
        for toast in toasts:
            assert not toast.region.overlaps(alerts), (toast.region, alerts)
        keys = {k.key: k for k in app.screen.query(FooterKey)}
        screen = app.screen.region
        for key in ("question_mark", "q"):
            assert key in keys
            assert screen.contains_region(keys[key].region), (key, keys[key].region)
            assert keys[key].region.width > 0


async def test_an_eval_bar_between_training_lines_never_takes_the_headers_step():
    from dflash_watch.parsers.events import Progress

    app, s, job = make_app("healthy", minutes=4)
    m = s.monitor
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        train = m.last_progress
        assert f"step {train.step:,}/" in app.header._shown.plain
        m.feed_events([Progress(time=m.now + 1, source="train.log:999", step=12, total_steps=50, rate=9.5,
                                rate_unit="it/s")])
        m.version += 1
        app.redraw(force=True)
        await settle(app, pilot)
        shown = app.header._shown.plain
        assert f"step {train.step:,}/50,000" in shown and "step 12/50 " not in shown, shown
        # The training bar moves on: the header follows it.
        m.feed_events([Progress(time=m.now + 2, source="train.log:1000", step=train.step + 1, total_steps=50_000,
                                tokens_per_s=22_000.0)])
        m.version += 1
        app.redraw(force=True)
        await settle(app, pilot)
        assert f"step {train.step + 1:,}/50,000" in app.header._shown.plain


async def test_the_filter_shows_its_text_as_it_is_typed():
    for size in ((80, 24), (120, 40)):
        app, s, job = make_app("volatile", minutes=20)
        async with app.run_test(size=size) as pilot:
            await settle(app, pilot, 0.3)
            await pilot.press("slash", *"buck")
            await settle(app, pilot, 0.3)
            field = app.query_one("#log-filter")
            assert app.focused is field and field.value == "buck"
            assert field.content_region.height >= 1, field.content_region
            row = field.content_region.y
            shown = "".join(seg.text for seg in app.screen._compositor.render_strips()[row])
            assert "buck" in shown, (size, shown)


async def test_gpu_chart_ticks_carry_units_and_the_values_the_tiles_show():
    from dflash_watch.tui.text import fmt_gib

    for size in ((120, 40), (200, 50)):
        app, s, job = make_app("volatile", minutes=20)
        async with app.run_test(size=size) as pilot:
            await settle(app, pilot, 0.5)
            for tile in app.query("GpuTile"):
                view = tile.view
                chart = tile.chart.render().plain
                info = tile.info.render().plain if hasattr(tile.info.render(), "plain") else str(tile.info.render())
                assert "GiB" in chart, (size, chart)
                assert f"{fmt_gib(view.used)}/" in info
                if view.badge == "flat":  # one tick: the level the tile shows
                    assert f"{fmt_gib(view.used)} GiB" in chart, (tile.gpu, chart)
                    if size[0] >= 200:
                        assert f"{fmt_gib(view.used)} GiB {view.used / view.total:.0%}" in chart
                        assert f"{view.used / view.total:4.0%}".strip() in info
                else:  # the swing's low and high, as the alert says them
                    alert = next(a for a in s.monitor.alerts.firing() if a.gpu == tile.gpu)
                    _, high = alert.message.split("swinging ")[1].split(" GiB")[0].split("-")
                    assert f"{high} GiB" in chart, (chart, alert.message)
