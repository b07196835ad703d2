"""Which alert Enter opens, and where an alert's evidence points the log view (issue 17)."""

from __future__ import annotations

from tui_helpers import crash, make_app

from dflash_watch.detectors.base import Alert
from dflash_watch.tui.screens.evidence import EvidenceScreen

SIZE = (120, 40)


async def settle(app, pilot, t: float = 0.6) -> None:
    await pilot.pause(t)
    await app.workers.wait_for_complete()
    await pilot.pause()


async def test_after_a_crash_enter_opens_the_crash_scrolled_into_view_and_up_down_move():
    """Warnings fired first (the cursor sat on one); the crash that follows takes the highlight."""
    app, s, job = make_app("volatile", minutes=20)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        panel = app.alerts_panel
        first = panel.selected
        assert first is not None and first.severity == "warning"
        crash(s)
        app.redraw(force=True)
        await settle(app, pilot)
        newest_worst = s.monitor.alerts.firing()[0]
        assert newest_worst.severity == "critical"
        assert panel.selected is newest_worst
        table = panel.table
        assert table.cursor_row == 0 and table.scroll_y == 0  # the crash rows are in view
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, EvidenceScreen) and app.screen.alert is newest_worst
        await pilot.press("escape")
        await settle(app, pilot)
        await pilot.press("down")
        await settle(app, pilot)
        assert panel.selected is panel.rows[1][0]
        await pilot.press("up")
        await settle(app, pilot)
        assert panel.selected is newest_worst


async def test_a_highlight_the_user_chose_is_kept_until_something_worse_fires():
    app, s, job = make_app("volatile", minutes=20)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        panel = app.alerts_panel
        panel.table.focus()
        await pilot.press("down")
        await settle(app, pilot)
        chosen = panel.selected
        assert chosen is panel.rows[1][0]
        s.monitor.tick(s.now + 1)  # nothing new: a redraw keeps the user's row
        app.redraw(force=True)
        await settle(app, pilot)
        assert panel.selected is chosen
        crash(s)  # worse than what the user chose: the crash takes the highlight
        app.redraw(force=True)
        await settle(app, pilot)
        assert panel.selected is s.monitor.alerts.firing()[0] and panel.selected.severity == "critical"


async def test_evidence_citing_a_probe_or_sample_file_never_moves_the_log_view():
    app, s, job = make_app("healthy")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        view = app.query_one("#log-view")
        assert view.following and view.marked is None
        for source in ("dflash-probe-3.jsonl:12", "gpu-samples:5", "/runs/other/train.log:7"):
            probe = Alert(time=s.now, detector="memory_growth", state="firing", severity="warning",
                          message="allocator growing", source=source)
            app.open_evidence(probe)
            await settle(app, pilot)
            assert isinstance(app.screen, EvidenceScreen)
            assert "not a followed log" in app.screen.jumped
            assert view.marked is None and view.following
            await pilot.press("escape")
            await settle(app, pilot)


async def test_evidence_citing_the_followed_log_by_path_or_name_jumps_there():
    from dflash_watch.tui.scenes import LOG

    app, s, job = make_app("healthy")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        view = app.query_one("#log-view")
        for source in (f"{LOG}:7", "train.log:8"):
            alert = Alert(time=s.now, detector="stall", state="firing", severity="warning", message="x", source=source)
            app.open_evidence(alert)
            await settle(app, pilot)
            assert view.marked == int(source.rsplit(":", 1)[1]) and not view.following
            assert "log view: train.log line" in app.screen.jumped
            await pilot.press("escape")
            await settle(app, pilot)


async def test_an_untouched_highlight_follows_the_newest_alert_of_the_same_severity():
    app, s, job = make_app("volatile", minutes=20)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        panel = app.alerts_panel
        assert panel.selected is panel.rows[0][0] and panel.selected.severity == "warning"
        s.monitor.tick(s.now + 3600)  # a stall: another warning, the newest
        app.redraw(force=True)
        await settle(app, pilot)
        top = s.monitor.alerts.firing()[0]
        assert top.detector == "stall"
        assert panel.selected is top


async def test_a_log_named_with_brackets_is_text_in_the_evidence_title_and_the_palette():
    """``exp[lr=1e-4].log`` is a common run name. A border title or a palette
    entry given as a str is read as markup: the evidence screen of its alert
    ended the dashboard (MarkupError), the palette too, and ``x[b].log``
    showed as ``x.log``."""
    from textual.content import Content

    app, s, job = make_app("healthy")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        for source in ("exp[lr=1e-4].log:8", "sweep[model=llama:7b].log:3", "x[b].log:2"):
            alert = Alert(time=s.now, detector="stall", state="firing", severity="warning", message="x", source=source)
            app.open_evidence(alert)
            await settle(app, pilot)
            assert isinstance(app.screen, EvidenceScreen)
            subtitle = app.screen.query_one("VerticalScroll").border_subtitle
            assert source.rsplit(":", 1)[0] in Content.from_markup(subtitle).plain, subtitle
            await pilot.press("escape")
            await settle(app, pilot)
        app.log_panel.files = [*app.log_panel.files, "/runs/exp[lr=1e-4].log", "/runs/x[b][red].log"]
        shown = [Content.from_markup(c.title).plain + " " + Content.from_markup(c.help).plain
                 for c in app.get_system_commands(app.screen)]
        assert any("Log: exp[lr=1e-4].log show /runs/exp[lr=1e-4].log" in line for line in shown), shown
        assert any("Log: x[b][red].log" in line for line in shown), shown
