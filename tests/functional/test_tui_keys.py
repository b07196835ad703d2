"""Each key of the dashboard drives the right action on a fake job controller."""

from __future__ import annotations

import json

import pytest
from tui_helpers import job_state, make_app, screen_text, toasts

from dflash_watch.control.job import RelaunchRefused
from dflash_watch.tui.scenes import SceneJob, SceneSpec
from dflash_watch.tui.screens.confirm import ConfirmScreen
from dflash_watch.tui.screens.help import HelpScreen

SIZE = (120, 40)


async def settle(app, pilot) -> None:
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


def dead(job: SceneJob, code: int = 1) -> None:
    job.state = job_state("exited", job.state.started_at, job.state.started_at + 100, code=code)


async def test_s_starts_a_dead_job():
    app, s, job = make_app("healthy")
    dead(job)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        await pilot.press("s")
        await settle(app, pilot)
        assert "start" in job.calls
        assert any("created session" in t for t in toasts(app))
        assert s.monitor.job_state.state == "running"
        assert s.monitor.restarts == 1  # a start after an exit is a new incarnation


async def test_a_asks_first_and_n_touches_nothing():
    app, _s, job = make_app("healthy")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("a")
        await settle(app, pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await settle(app, pilot)
        assert "abort" not in job.calls
        assert not isinstance(app.screen, ConfirmScreen)


async def test_a_then_y_aborts():
    app, _s, job = make_app("healthy")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("a")
        await settle(app, pilot)
        await pilot.press("y")
        await settle(app, pilot)
        assert job.calls.count("abort") == 1
        assert any("stopped after Ctrl-C" in step for step in app.steps)


async def test_enter_on_the_confirmation_cancels():
    """The focused default is Cancel: a stray Enter must not kill a week-long run."""
    app, _s, job = make_app("healthy")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("a")
        await settle(app, pilot)
        await pilot.press("enter")
        await settle(app, pilot)
        assert "abort" not in job.calls


async def test_r_on_a_dead_job_is_one_key_and_shows_the_preflight():
    app, s, job = make_app("crashed")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        await pilot.press("r")
        await settle(app, pilot)
        assert not isinstance(app.screen, ConfirmScreen)
        assert job.calls == ["status", "status", "relaunch"] or job.calls[-1] == "relaunch"
        assert any(t.startswith("relaunch: preflight|") and "command" in t for t in toasts(app))
        assert s.monitor.restarts == 1
        # The old run's crash is history after a relaunch.
        assert not [a for a in s.monitor.alerts.firing() if a.detector in ("crash", "fx_tracing")]


async def test_r_on_a_live_job_asks_with_the_preflight_before_killing():
    app, _s, job = make_app("volatile")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("r")
        await settle(app, pilot)
        assert isinstance(app.screen, ConfirmScreen)
        body = app.screen.body.plain
        assert "will stop" in body and "48213" in body
        assert "51877" in body  # someone else's process on GPU 3 is named
        assert "relaunch" not in job.calls
        await pilot.press("y")
        await settle(app, pilot)
        assert job.calls.count("relaunch") == 1


async def test_r_without_a_command_is_blocked_and_kills_nothing():
    app, s, _job = make_app("volatile", job=None)
    app.job = SceneJob(s.job_state, spec=SceneSpec(command=""))
    app.control_note = None
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        await pilot.press("r")
        await settle(app, pilot)
        assert not isinstance(app.screen, ConfirmScreen)
        assert "relaunch" not in app.job.calls and "abort" not in app.job.calls
        assert any("no run command configured" in t for t in toasts(app))


async def test_relaunch_refused_names_the_blocking_pids():
    app, _s, job = make_app("crashed")
    job.fail["relaunch"] = RelaunchRefused("refusing to relaunch: old run still holds pids 777", (777,))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        await pilot.press("r")
        await settle(app, pilot)
        assert any("relaunch failed" in t and "777" in t for t in toasts(app))
        assert app.busy is None


async def test_b_saves_the_window_as_baseline(tmp_path):
    target = tmp_path / "base.json"
    app, s, _job = make_app("healthy", baseline_path=str(target))
    s.monitor.fingerprint = {"packages": {"transformers": "5.8.1"}}  # as the live session reads it
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        await pilot.press("b")
        await settle(app, pilot)
        data = json.loads(target.read_text())
        assert data["version"] == 1
        assert 20_000 < data["throughput_tokens_per_s"] < 25_000
        # The profile `d` and `baseline diff` compare later: spread, padding, environment.
        assert data["throughput_p10"] <= data["throughput_tokens_per_s"] <= data["throughput_p90"]
        assert data["padding_efficiency"] == 0.93
        assert data["fingerprint"] == {"packages": {"transformers": "5.8.1"}}
        assert any(str(target) in t for t in toasts(app))


async def test_m_acknowledges_keeps_listed_and_silences_the_bell():
    app, s, _job = make_app("volatile", bell_repeat_s=0.01)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        panel = app.query_one("#alerts")
        before = len(panel.rows)
        await pilot.pause(0.6)
        assert app.bells >= 1  # unacknowledged warnings ring again
        await pilot.press("m")
        await settle(app, pilot)
        rang = app.bells
        assert s.monitor.alerts.unacked() == []
        assert len(panel.rows) == before  # still listed
        assert all(acked for _, firing, acked in panel.rows if firing)
        await pilot.pause(0.6)
        assert app.bells == rang


async def test_slash_filters_the_log_and_keys_type_into_the_filter():
    app, _s, job = make_app("volatile")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("slash")
        await pilot.press(*"bucketing")  # contains s, a, r... none may act on the job
        await settle(app, pilot)
        view = app.query_one("#log-view")
        assert view.filter_text == "bucketing"
        assert view.shown and all("bucketing" in view.lines[i][1] for i in view.shown)
        assert "bucketing" in screen_text(app)
        assert job.calls == ["status"] or set(job.calls) == {"status"}
        await pilot.press("escape")
        await settle(app, pilot)
        assert view.filter_text == ""


async def test_question_mark_opens_help():
    app, _s, _job = make_app("healthy")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("question_mark")
        await settle(app, pilot)
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await settle(app, pilot)
        assert not isinstance(app.screen, HelpScreen)


async def test_q_quits_without_touching_the_job():
    app, _s, job = make_app("healthy")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_value == 0
    assert set(job.calls) <= {"status"}


@pytest.mark.parametrize("key", ["s", "a", "r"])
async def test_job_keys_without_control_say_why(key):
    app, _s, _ = make_app("healthy", job=None)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        await pilot.press(key)
        await settle(app, pilot)
        assert any("not managed" in t for t in toasts(app))


async def test_palette_lists_actions_and_log_files():
    app, _s, _job = make_app("healthy")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for wanted in ("Start job (s)", "Abort job (a)", "Relaunch job (r)", "Save baseline (b)",
                       "Acknowledge alerts (m)", "Filter log (/)", "Help (?)", "Log: train.log"):
            assert wanted in titles


async def test_a_offers_to_end_a_run_that_survived_outside_tmux():
    """The tmux server died but the training lives on (it ignores SIGHUP):
    the job is not "running" in tmux, yet `a` must offer to end it."""
    from dataclasses import replace

    app, _s, job = make_app("healthy")
    dead(job)
    job.state = replace(job.state, pids=(4242, 4243))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("a")
        await settle(app, pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await settle(app, pilot)
        assert job.calls.count("abort") == 1


# -- [keys]: every binding has an id, and the config rebinds it ----------------------


def test_every_binding_has_the_id_and_default_key_the_config_declares():
    """`[keys]` is checked against ``keymap.KEY_BINDINGS`` without Textual: it must be the app's bindings."""
    from textual.binding import Binding

    from dflash_watch.keymap import KEY_BINDINGS
    from dflash_watch.tui.app import DashboardApp
    from dflash_watch.tui.screens.diagnosis import DiagnosisScreen
    from dflash_watch.tui.screens.evidence import EvidenceScreen
    from dflash_watch.tui.widgets.log_panel import LogPanel

    # Where each scope's bindings live: the app (and the log panel's filter), each modal screen.
    homes = {"dashboard": [DashboardApp, LogPanel], "help": [HelpScreen], "confirm": [ConfirmScreen],
             "evidence": [EvidenceScreen], "diagnosis": [DiagnosisScreen]}
    for scope, classes in homes.items():
        bindings = [b for cls in classes for b in cls.BINDINGS]
        assert all(isinstance(b, Binding) and b.id for b in bindings), scope
        declared = {name: spec.default for name, spec in KEY_BINDINGS.items() if spec.scope == scope}
        assert {b.id: b.key for b in bindings if isinstance(b, Binding)} == declared, scope
    assert {spec.scope for spec in KEY_BINDINGS.values()} == set(homes)


def test_a_key_may_be_shared_across_scopes_but_not_within_one():
    from dflash_watch.config import ConfigError, parse_config

    assert parse_config({"keys": {"help_close": "escape,s"}}).keys == {"help_close": "escape,s"}  # s: start, elsewhere
    with pytest.raises(ConfigError, match=r"\[keys\] confirm_yes = \"n\": n is also the key of confirm_no"):
        parse_config({"keys": {"confirm_yes": "n"}})


async def test_the_modal_screens_keys_are_rebound_and_help_shows_the_keys_in_use():
    from dflash_watch.config import parse_config

    keys = parse_config({"keys": {"abort": "ctrl+a", "help": "h", "help_close": "x", "confirm_yes": "j",
                                  "filter": "backslash", "window_1h": "f2"}}).keys
    app, _, job = make_app("healthy", keymap=keys)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("h")
        await settle(app, pilot)
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        rows = dict((text, key) for key, text in help_screen.rows)
        assert rows["abort: Ctrl-C, then SIGTERM after the grace period, then SIGKILL (asks first)"] == "^a"
        assert rows["this help / close it"] == "h / x"
        assert rows["filter the log view / clear the filter (Enter keeps it)"] == "\\ / esc"
        assert rows[next(t for t in rows if t.startswith("chart window"))] == "1 f2 3 4"
        assert rows[next(t for t in rows if t.startswith("start the job"))] == "s"  # not rebound: the default
        await pilot.press("escape")  # help_close's old keys no longer close it
        await settle(app, pilot)
        assert app.screen is help_screen
        await pilot.press("x")
        await settle(app, pilot)
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("ctrl+a")
        await settle(app, pilot)
        assert isinstance(app.screen, ConfirmScreen)
        labels = {str(b.label) for b in app.screen.query("Button")}
        assert labels == {"Cancel (n)", "Abort (j)"}, labels
        await pilot.press("y")  # confirm_yes's old key: nothing
        await settle(app, pilot)
        assert isinstance(app.screen, ConfirmScreen) and "abort" not in job.calls
        await pilot.press("j")
        await settle(app, pilot)
        assert job.calls.count("abort") == 1


async def test_a_rebound_key_triggers_its_action_and_the_old_key_no_longer_does():
    from dflash_watch.config import parse_config

    keys = parse_config({"keys": {"abort": "ctrl+a", "help": "h", "start": "a"}}).keys
    app, _, job = make_app("healthy", keymap=keys)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        await pilot.press("question_mark")  # help's old key: nothing
        await settle(app, pilot)
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("h")
        await settle(app, pilot)
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await settle(app, pilot)
        await pilot.press("a")  # abort's old key, now start's: no abort prompt
        await settle(app, pilot)
        assert not isinstance(app.screen, ConfirmScreen)
        assert "start" in job.calls and "abort" not in job.calls
        await pilot.press("ctrl+a")
        await settle(app, pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await settle(app, pilot)
        assert job.calls.count("abort") == 1
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Abort job (^a)" in titles and "Help (h)" in titles and "Start job (a)" in titles, titles


async def _quit_while_aborting(app, pilot, key: str) -> None:  # noqa: ANN001
    """a, y (an abort that takes its time), then ``key`` while it runs."""
    await settle(app, pilot)
    await pilot.press("a")
    await settle(app, pilot)
    await pilot.press("y")
    await pilot.pause(0.2)
    assert app.busy == "abort"
    await pilot.press(key)
    await pilot.pause(0.2)


@pytest.mark.parametrize("key", ["q", "ctrl+q"])
async def test_quit_during_an_abort_asks_and_waiting_is_the_default(key):
    """An abort runs in the dashboard (Ctrl-C, then SIGTERM and SIGKILL
    seconds later): quitting in between left a job that ignores Ctrl-C
    running, unsaid. Now quit asks; n waits, the abort ends, and q quits."""
    import threading

    app, _s, job = make_app("healthy")
    release = threading.Event()
    acted = job.abort

    def slow_abort(grace_s=None, on_step=None):  # noqa: ANN001, ANN202
        if on_step is not None:
            on_step("sent Ctrl-C to pane %3; waiting up to 15 s")
        assert release.wait(10)
        return acted(grace_s, on_step)

    job.abort = slow_abort
    async with app.run_test(size=SIZE) as pilot:
        await _quit_while_aborting(app, pilot, key)
        assert isinstance(app.screen, ConfirmScreen) and "abort in progress" in app.screen.title_text
        await pilot.press("n")
        await pilot.pause(0.2)
        assert app.is_running and not isinstance(app.screen, ConfirmScreen)
        release.set()
        await settle(app, pilot)
        assert app.busy is None and job.calls.count("abort") == 1
        await pilot.press(key)
        await pilot.pause(0.2)
        assert not isinstance(app.screen, ConfirmScreen)
    assert app.return_code == 0


async def test_quit_during_an_abort_y_quits():
    import threading

    app, _s, job = make_app("healthy")
    release = threading.Event()
    job.abort = lambda grace_s=None, on_step=None: release.wait(10)  # noqa: ARG005
    try:
        async with app.run_test(size=SIZE) as pilot:
            await _quit_while_aborting(app, pilot, "q")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("y")
            await pilot.pause(0.2)
            assert app._exit or not app.is_running
    finally:
        release.set()


async def test_s_after_an_exit_read_before_the_watch_began_clears_that_exit():
    """The job's tmux server is gone (status "absent") and its record says
    the last run crashed before this dashboard started: that exit is
    reported, critical. A start is a new run: the old exit is history, not
    "firing" beside the new run (it stayed, a review found)."""
    from dflash_watch.parsers.events import ProcessExit

    app, s, job = make_app("healthy")
    job.state = job_state("absent", job.state.started_at, job.state.started_at + 100)
    s.monitor.set_job_state(job.state)
    s.monitor._incarnation = None  # this dashboard never saw the old run running (it began after it ended)
    s.monitor.feed_events([ProcessExit(s.now, kind="crash", code=1, source="tmux")])
    assert any(a.detector == "process_exit" for a in s.monitor.alerts.firing())
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        await pilot.press("s")
        await settle(app, pilot)
        assert "start" in job.calls and s.monitor.job_state.state == "running"
    assert not any(a.detector == "process_exit" for a in s.monitor.alerts.firing())
    assert s.monitor.restarts == 1
