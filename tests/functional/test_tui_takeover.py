"""`r` on a hand-started run offers a takeover that names what it will do (fake job, no tmux)."""

from __future__ import annotations

import dataclasses

from tui_helpers import make_app, toasts

from dflash_watch.tui.scenes import SceneJob, hand_started
from dflash_watch.tui.screens.confirm import ConfirmScreen

SIZE = (120, 40)


async def settle(app, pilot) -> None:
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


def with_adoption(adoption):
    app, s, _ = make_app("crashed")
    job = SceneJob(s.job_state, adoption=adoption)
    app.job = job
    return app, s, job


async def test_r_asks_naming_pane_command_cwd_and_y_takes_over():
    app, s, job = with_adoption(hand_started("%7"))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        await pilot.press("r")
        await settle(app, pilot)
        assert isinstance(app.screen, ConfirmScreen)
        assert "pane %7" in app.screen.title_text
        body = " ".join(app.screen.body.plain.split())  # rows wrap at spaces
        for part in ("%7", "tee train.log", "/home/ml/dflash", "a guess, check it", "--cmd",
                     "respawn-pane -k", "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7"):
            assert part in body, part
        assert "take_over" not in job.calls and "relaunch" not in job.calls
        await pilot.press("y")
        await settle(app, pilot)
    assert job.calls.count("take_over") == 1 and "relaunch" not in job.calls
    assert s.monitor.restarts == 1  # a new incarnation: the old crash is history
    assert any("took over pane %7" in t for t in toasts(app))


async def test_n_cancels_the_takeover():
    app, s, job = with_adoption(hand_started())
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        await pilot.press("r")
        await settle(app, pilot)
        await pilot.press("n")
        await settle(app, pilot)
    assert "take_over" not in job.calls and s.monitor.restarts == 0


async def test_nothing_known_asks_for_cmd_and_opens_no_dialog():
    unknown = dataclasses.replace(hand_started(), command="", source="nothing: the pane shows no command line")
    app, s, job = with_adoption(unknown)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        await pilot.press("r")
        await settle(app, pilot)
        assert not isinstance(app.screen, ConfirmScreen)
    assert "take_over" not in job.calls
    assert any("--cmd" in t and "Nothing was touched" in t for t in toasts(app))
