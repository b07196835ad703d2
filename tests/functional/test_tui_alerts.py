"""Alerts reach the panel, a toast and the bell; selecting one shows its evidence and line."""

from __future__ import annotations

import threading

from tui_helpers import make_app, screen_text, toasts

from dflash_watch.detectors.base import Alert
from dflash_watch.tui.screens.evidence import EvidenceScreen

SIZE = (120, 40)


async def settle(app, pilot, t: float = 1.2) -> None:
    await pilot.pause(t)
    await app.workers.wait_for_complete()
    await pilot.pause()


async def test_a_new_alert_shows_in_the_panel_as_a_toast_and_rings():
    app, s, job = make_app("healthy")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        assert app.bells == 0
        # The Monitor raises the alert itself: a stall (no progress for long).
        s.monitor.tick(s.now + 3600)
        await settle(app, pilot)
        panel = app.query_one("#alerts")
        assert [a.detector for a, firing, _ in panel.rows if firing] == ["stall"]
        assert any(t.startswith("warning: stall|") for t in toasts(app))
        assert app.bells == 1
        assert "1 firing" in app.query_one("#header")._shown.plain


async def test_alerts_from_a_source_thread_arrive_without_deadlock():
    """Listeners run under the Monitor's lock on source threads: the app must not block there."""
    app, s, job = make_app("healthy")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        done = threading.Event()

        def source() -> None:
            s.monitor.tick(s.now + 3600)
            done.set()

        thread = threading.Thread(target=source)
        thread.start()
        await settle(app, pilot)
        thread.join(timeout=5)
        assert done.is_set()
        assert any("stall" in t for t in toasts(app))


async def test_selecting_an_alert_shows_evidence_and_jumps_the_log():
    app, s, job = make_app("crashed")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        panel = app.query_one("#alerts")
        row = next(i for i, (a, _, _) in enumerate(panel.rows) if a.detector == "fx_tracing")
        fx = panel.rows[row][0]
        panel.table.focus()
        panel.table.move_cursor(row=row)
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, EvidenceScreen)
        shown = "\n".join(str(w.render()) for w in app.screen.query("Static"))
        assert "traceback" in shown and "eval_frame.py" in shown  # the traceback and its frames
        assert "RuntimeError" in shown
        view = app.query_one("#log-view")
        line = int(fx.source.rsplit(":", 1)[1])
        assert view.marked == line and not view.following
        await pilot.press("escape")
        await settle(app, pilot)
        assert f"{line} RuntimeError" in " ".join(screen_text(app).split())


async def test_resolved_alerts_stay_listed_below_firing_ones():
    app, s, job = make_app("crashed")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        rows = app.query_one("#alerts").rows
        states = [firing for _, firing, _ in rows]
        assert states == sorted(states, reverse=True)
        assert any(a.state == "resolved" for a, _, _ in rows)


async def test_markup_in_an_alert_message_is_shown_literally():
    app, s, job = make_app("healthy")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        evil = Alert(time=s.now, detector="crash", state="firing", severity="critical",
                     message="boom [bold red]x[/] [link=http://evil]y[/link] \x1b]0;title\x07\x1b[31mred",
                     source="train.log:3", kind="exception")
        s.monitor.alerts.add(evil)
        for listener in s.monitor._listeners:
            listener(evil)
        s.monitor.version += 1
        await settle(app, pilot)
        toast = next(t for t in toasts(app) if t.startswith("critical: crash|"))
        assert "[bold red]x[/]" in toast and "[link=http://evil]y[/link]" in toast
        assert "\x1b" not in toast and "\x07" not in toast
        panel = app.query_one("#alerts")
        cells = panel._cells(evil, True, False)
        text = "".join(c.plain for c in cells)
        assert "[bold red]x[/]" in text and "\x1b" not in text


async def _a_step_30_s_later(app, pilot, s):  # noqa: ANN001, ANN202
    """One more step line 30 s after the scene's last (a rate and an ETA to show); returns it."""
    from dflash_watch.parsers.events import Progress

    last = s.monitor.last_progress
    s.monitor.feed_events([Progress(last.time + 30, "train.log:99999", step=last.step + 12,
                                    total_steps=last.total_steps, tokens_per_s=22000.0)])
    await settle(app, pilot)
    return s.monitor.last_progress


async def test_the_rate_and_eta_read_as_stale_while_a_stall_fires_and_after_the_job_ended():
    """At 3 a.m. a header that still says "21.4 Ktok/s, ETA 6h56m" two
    minutes into a hang (or after the job died) reads as a healthy run: the
    last rate is marked as the last, with its age, and no ETA is made of it."""
    app, s, job = make_app("healthy")
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(app, pilot)
        header = app.query_one("#header")
        last = await _a_step_30_s_later(app, pilot, s)
        assert "ETA" in header._shown.plain and "last " not in header._shown.plain, header._shown.plain
        s.monitor.tick(last.time + 3600)  # an hour without a step: the stall fires
        await settle(app, pilot)
        text = header._shown.plain
        assert "ETA" not in text and "last 22.0 Ktok/s 1h00m ago" in text, text
    app, s, job = make_app("crashed")
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(app, pilot)
        text = app.query_one("#header")._shown.plain
        assert "exited" in text and "ETA" not in text and "last " in text, text


async def test_the_header_rate_is_the_last_one_after_a_crash_with_no_job_of_ours():
    """With no --session (a log watched, no job control) the job's state
    never says "exited": a fatal crash read after the last step makes the
    rate the last one, with its age, and no ETA (the header said "ETA
    21m39s | 21.5 Ktok/s" half a minute after the crash banner)."""
    from dflash_watch.parsers.events import Crash, Progress

    app, s, _job = make_app("healthy", job=None)
    async with app.run_test(size=(240, 40)) as pilot:
        await settle(app, pilot)
        header = app.query_one("#header")
        last = await _a_step_30_s_later(app, pilot, s)
        assert "ETA" in header._shown.plain, header._shown.plain
        s.monitor.feed_events([Crash(last.time + 1, "train.log:99999", "crash", kind="cuda_error", exc_type="RuntimeError",
                                     message="CUDA error: an illegal memory access was encountered", signature="x")])
        s.monitor.tick(last.time + 35)
        await settle(app, pilot)
        app.redraw(force=True)
        await settle(app, pilot)
        text = header._shown.plain
        assert "ETA" not in text and "last 22.0 Ktok/s 35s ago" in text, text
        # Steps again after it (a relaunch into the same log): the rate is live again.
        s.monitor.feed_events([Progress(last.time + 40, "train.log:100000", step=1, total_steps=last.total_steps,
                                        tokens_per_s=21000.0)])
        app.redraw(force=True)
        await settle(app, pilot)
        assert "last " not in header._shown.plain and "21.0 Ktok/s" in header._shown.plain, header._shown.plain
