"""The banner over a stopped job: red for a crash or a kill, calm for a stop the user asked for."""

from __future__ import annotations

import dataclasses

from tui_helpers import job_state, make_app

from dflash_watch.parsers.events import ProcessExit


async def settle(app, pilot, t: float = 0.6) -> None:
    await pilot.pause(t)
    await app.workers.wait_for_complete()
    await pilot.pause()


def aborted(s, *, asked: str | None = "abort") -> None:
    """The job stopped by `a`: SIGINT, and process_exit kind `aborted` (CONTRACTS section 4)."""
    m = s.monitor
    state = dataclasses.replace(job_state("killed", s.job_state.started_at, s.now + 3), signal=2, asked=asked)
    m.feed_events([ProcessExit(s.now + 3, kind="aborted", signal=2, asked="abort")])
    m.set_job_state(state)
    s.now += 4


async def test_an_abort_the_user_asked_for_gets_a_calm_banner_not_the_red_one():
    app, s, job = make_app("healthy", minutes=4)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        aborted(s)
        app.redraw(force=True)
        await settle(app, pilot)
        banner = app.banner
        assert banner.has_class("-shown") and banner.has_class("-calm")
        text = banner._dfw_shown
        assert "stopped as asked" in text.plain and "killed by" not in text.plain
        assert "red" not in " ".join(str(span.style) for span in text.spans)
        header = app.header._shown
        assert "stopped as asked" in header.plain and "killed" not in header.plain
        assert "red" not in " ".join(str(span.style) for span in header.spans)  # the info alert is no red badge
        assert not app.alerts_panel.has_class("-alerting")


async def test_an_abort_known_only_from_process_exit_is_calm_too():
    """The tmux record may not carry ``asked``: the `aborted` exit alone says it."""
    app, s, job = make_app("healthy", minutes=4)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        aborted(s, asked=None)
        app.redraw(force=True)
        await settle(app, pilot)
        text = app.banner._dfw_shown.plain
        assert app.banner.has_class("-calm") and "stopped as asked" in text and "killed by" not in text


async def test_a_kill_from_outside_keeps_the_red_banner():
    app, s, job = make_app("healthy", minutes=4)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        m = s.monitor
        m.feed_events([ProcessExit(s.now + 3, kind="killed", signal=15)])
        m.set_job_state(dataclasses.replace(job_state("killed", s.job_state.started_at, s.now + 3), signal=15))
        app.redraw(force=True)
        await settle(app, pilot)
        assert app.banner.has_class("-shown") and not app.banner.has_class("-calm")
        assert "killed by SIGTERM" in app.banner._dfw_shown.plain
