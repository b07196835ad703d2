"""SVG snapshots of the dashboard's main states (pytest-textual-snapshot).

Each state is a deterministic scene: real parsers and detectors fed fixed
data in UTC, no threads, a fixed clock. Update after a deliberate change
with ``pytest tests/snapshots --snapshot-update`` and look at the report.
"""

from __future__ import annotations

from dflash_watch.tui.app import DashboardApp
from dflash_watch.tui.scenes import UTC, SceneJob, build, hand_started, scene_proc_info


def app_for(kind: str, adoption=None) -> DashboardApp:
    scene = build(kind)
    return DashboardApp(scene.monitor, job=SceneJob(scene.job_state, adoption=adoption), tz=UTC,
                        clock=lambda: scene.now, bell_repeat_s=0, proc_info=scene_proc_info)


def test_healthy_run(snap_compare):
    assert snap_compare(app_for("healthy"), terminal_size=(120, 40))


def test_memory_volatility_alert(snap_compare):
    assert snap_compare(app_for("volatile"), terminal_size=(120, 40))


def test_crash_with_relaunch_prompt(snap_compare):
    assert snap_compare(app_for("crashed"), terminal_size=(120, 40))


def test_relaunch_confirmation_on_a_live_job(snap_compare):
    app = app_for("volatile")

    async def settle(pilot):
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()

    async def press_r(pilot):
        await pilot.press("r")
        await settle(pilot)

    assert snap_compare(app, terminal_size=(120, 40), run_before=press_r)


def test_training_health(snap_compare):
    """A NaN loss on the loss chart, rank 2 the straggler, GPU 6 with Xid 48 and thermal throttling."""
    assert snap_compare(app_for("health"), terminal_size=(120, 40))


def test_training_health_80x24(snap_compare):
    assert snap_compare(app_for("health"), terminal_size=(80, 24))


def test_small_terminal_80x24(snap_compare):
    assert snap_compare(app_for("volatile"), terminal_size=(80, 24))


def test_takeover_confirmation_of_a_hand_started_run(snap_compare):
    app = app_for("crashed", adoption=hand_started())

    async def press_r(pilot):
        await pilot.press("r")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 40), run_before=press_r)
