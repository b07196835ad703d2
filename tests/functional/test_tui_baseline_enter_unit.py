"""The dashboard's keys on real scenes: `b` applies the baseline at once (and
refuses an unhealthy window), Enter opens an alert from the starting focus,
and the rate is shown in the run's own unit."""

from __future__ import annotations

import json

from tui_helpers import job_state, make_app, toasts

from dflash_watch.parsers.events import Progress
from dflash_watch.tui.screens.evidence import EvidenceScreen

SIZE = (120, 40)


async def settle(app, pilot) -> None:
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


# -------------------------------------------------------------------- b
async def test_b_applies_the_baseline_in_this_session_at_once(tmp_path):
    target = tmp_path / "base.json"
    app, s, job = make_app("healthy", baseline_path=str(target))
    monitor = s.monitor
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        monitor.set_baseline(None)  # judge by nothing: the key must bring one
        assert monitor.baseline is None
        await pilot.press("b")
        await settle(app, pilot)
        saved = json.loads(target.read_text())["throughput_tokens_per_s"]
        assert monitor.baseline is not None and monitor.baseline.throughput_tokens_per_s == saved
        assert monitor.baseline_tokens_per_s == saved
        detector = monitor.detectors.get("throughput_drop")
        assert detector.learned_rate()[0] == saved  # the detector judges by it from now on
        assert any("applied now" in t for t in toasts(app))
        assert f"vs {saved / 1000:.1f}K" in app.header._shown.plain or f"{saved / 1000:.1f} Ktok/s" in app.header._shown.plain


async def test_b_refuses_a_window_with_alerts_firing(tmp_path):
    target = tmp_path / "base.json"
    app, s, job = make_app("volatile", baseline_path=str(target))
    before = s.monitor.baseline
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        await pilot.press("b")
        await settle(app, pilot)
    assert not target.exists() and s.monitor.baseline is before
    refusal = next(t for t in toasts(app) if t.startswith("baseline|"))
    assert "alerts fired" in refusal and "memory_volatility gpu5" in refusal


async def test_b_refuses_a_window_whose_alert_resolved_since(tmp_path):
    """Firing in the window counts even when it has resolved (and even when acknowledged)."""
    target = tmp_path / "base.json"
    app, s, job = make_app("healthy", baseline_path=str(target))
    from dflash_watch.detectors.base import Alert

    m = s.monitor
    for state in ("firing", "resolved"):
        m.raise_alert(Alert(time=m.now - 120, detector="stall", state=state, severity="warning",
                            message="no progress", source="train.log:1"))
    assert m.alerts.firing() == []
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        await pilot.press("b")
        await settle(app, pilot)
    assert not target.exists()
    assert any("stall" in t and "not saved" in t for t in toasts(app))


async def test_b_refuses_when_the_job_is_dead(tmp_path):
    target = tmp_path / "base.json"
    app, s, job = make_app("healthy", baseline_path=str(target))
    job.state = job_state("exited", job.state.started_at, job.state.started_at + 100, code=1)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        await pilot.press("b")
        await settle(app, pilot)
    assert not target.exists()
    assert any("not saved: the job is not running" in t for t in toasts(app))


# ---------------------------------------------------------------- Enter
async def test_enter_right_after_start_opens_the_newest_most_severe_alert():
    app, s, job = make_app("crashed")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, EvidenceScreen)
        first = s.monitor.alerts.firing()[0]
        assert app.screen.alert is first
        await pilot.press("escape")
        await settle(app, pilot)
        assert not isinstance(app.screen, EvidenceScreen)


async def test_enter_without_alerts_says_so():
    app, s, job = make_app("healthy")
    assert not s.monitor.alerts.history
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.pause()
        await pilot.press("enter")
        await settle(app, pilot)
        assert not isinstance(app.screen, EvidenceScreen)
        assert any("no alerts yet" in t for t in toasts(app))


# ----------------------------------------------------------------- unit
async def test_the_rate_is_shown_in_the_runs_own_unit():
    from dflash_watch.monitor import Monitor
    from dflash_watch.tui.app import DashboardApp

    m = Monitor()
    m.feed_events([Progress(time=1_764_410_400.0, source="train.log:7", step=7, rate=3.1, rate_unit="it/s")])
    app = DashboardApp(m, job=None, bell_repeat_s=0, clock=lambda: 1_764_410_401.0)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        header = app.header._shown.plain
        info = str(app.throughput_panel._info.render())
        assert "3.1 it/s" in header and "tok/s" not in header
        assert info.startswith("3.1 it/s") and app.throughput_panel.unit == "it/s"


async def test_without_a_series_the_last_progress_gives_the_rate_and_unit():
    from dflash_watch.monitor import Monitor
    from dflash_watch.tui.app import DashboardApp

    m = Monitor(keep_history=False)  # no chart series: the last progress line is all there is
    m.feed_events([Progress(time=1_764_410_400.0, source="train.log:7", step=7, rate=412.0, rate_unit="samples/s")])
    assert m.throughput.count == 0
    app = DashboardApp(m, job=None, bell_repeat_s=0, clock=lambda: 1_764_410_401.0)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert "412 samples/s" in app.header._shown.plain


async def test_an_eval_bars_it_s_beside_tokens_does_not_take_the_header():
    app, s, job = make_app("healthy")
    m = s.monitor
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        m.feed_events([Progress(time=m.now + 5, source="train.log:999", rate=9.5, rate_unit="it/s")])
        app.redraw(force=True)
        await settle(app, pilot)
        assert "Ktok/s" in app.header._shown.plain and "it/s" not in app.header._shown.plain
        assert app.throughput_panel.unit == "tok/s"


async def test_b_refuses_a_run_that_reports_another_unit(tmp_path):
    """A baseline file holds tokens/s: an it/s median saved there would lie."""
    from dflash_watch.monitor import Monitor
    from dflash_watch.tui.app import DashboardApp

    target = tmp_path / "base.json"
    m = Monitor()
    m.feed_events([Progress(time=1_764_410_400.0 + 5 * i, source=f"train.log:{i}", step=i, rate=3.1,
                            rate_unit="it/s") for i in range(1, 20)])
    assert m.throughput_unit == "it/s"
    app = DashboardApp(m, job=None, bell_repeat_s=0, baseline_path=str(target))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        await pilot.press("b")
        await settle(app, pilot)
    assert not target.exists() and m.baseline is None
    assert any("reports it/s" in t for t in toasts(app))
