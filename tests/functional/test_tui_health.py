"""The training-health parts of the dashboard (issue 19): loss chart, ranks, GPU health, processes, windows.

Scenes feed the real parsers and detectors (``tui.scenes``, ``tui.scene_health``):
what a panel shows is what the detectors concluded for that data.
"""

from __future__ import annotations

import math

from tui_helpers import job_state, make_app, toasts

from dflash_watch.monitor import Monitor
from dflash_watch.parsers.events import GpuProcess, GpuSample, ProcessExit
from dflash_watch.tui.scenes import JOB_PID, TOTAL
from dflash_watch.tui.screens.help import HelpScreen
from dflash_watch.tui.widgets.gpu_tile import GpuTile

SIZE = (120, 40)
GIB = 1 << 30


def fake_proc(pid: int) -> tuple[str, str]:
    return "alice", f"python train.py --pid {pid} [bold]x[/]"


async def settle(app, pilot) -> None:
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


def test_monitor_keeps_the_training_loss_and_its_nan_steps_aside() -> None:
    m = Monitor()
    lines = "".join(
        f"[2025-11-29 10:00:{i:02d},000] [INFO] [dflash.train] step {i}/100 | loss "
        f"{'nan' if i == 5 else f'{2.0 - i / 100:.2f}'} | 20.0 Ktok/s\n" for i in range(1, 10))
    m.feed_text("/x/train.log", lines, 1, 1764410500.0)
    # An HF dict with a NaN loss and an eval line: eval_loss is not the training loss.
    m.feed_text("/x/hf.log", "{'loss': inf, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.1}\n"
                "{'eval_loss': 3.0, 'epoch': 0.1}\n", 1, 1764410600.0)
    assert m.loss.count == 8 and m.loss.last_value == 1.91
    steps = [(step, value) for _, step, value in m.loss_nonfinite]
    assert steps[0][0] == 5 and math.isnan(steps[0][1])
    assert steps[1][1] == math.inf
    assert m.loss_nonfinite_total == 2
    m2 = Monitor(keep_history=False)  # replay --json: no chart, no series kept
    m2.feed_text("/x/train.log", lines, 1, 1764410500.0)
    assert m2.loss.count == 0 and not m2.loss_nonfinite


async def test_health_scene_shows_nan_straggler_and_gpu_flags() -> None:
    app, s, _job = make_app("health", minutes=6.0, proc_info=fake_proc)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        loss = app.loss_panel
        assert loss.display
        assert "NaN at step" in str(loss.border_title)
        assert loss.nonfinite and math.isnan(loss.nonfinite[0][2])
        ranks = app.ranks_panel
        assert ranks.display
        assert [r.rank for r in ranks.rows if r.slow] == [2]
        assert "rank 2 slow" in str(ranks.border_title)
        tile = app.query_one("#gpu-6", GpuTile)
        assert tile.health.display
        text = str(tile.health.render())
        assert "THERMAL" in text and "°C" in text and "/700W" in text
        assert tile.has_class("-alerting")
        # A GPU without trouble shows its temperature and power, no flag.
        quiet = app.query_one("#gpu-0", GpuTile)
        assert "°C" in str(quiet.health.render()) and not quiet.view.flags
        # The ranks panel brings the process table along: the jupyter kernel is not the job's.
        procs = app.process_panel
        assert procs.display
        foreign = [r for r in procs.rows if not r.job]
        assert [r.pid for r in foreign] == [51877]


async def test_without_per_rank_or_health_data_the_new_panels_stay_hidden() -> None:
    app, _s, _job = make_app("healthy", proc_info=fake_proc)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert not app.ranks_panel.display
        assert not app.process_panel.display  # no ranks, no leftover, not asked for
        tile = app.query_one("#gpu-0", GpuTile)
        assert not tile.health.display  # samples without health fields: the tile as before
        assert app.loss_panel.display  # the scene logs a loss
        assert "NaN" not in str(app.loss_panel.border_title)


async def test_xid_from_a_sample_flags_the_tile() -> None:
    app, s, _job = make_app("healthy", proc_info=fake_proc)
    t = s.now + 1
    s.monitor.feed_samples([GpuSample(t, 2, 71 * GIB, TOTAL, 0.9, (), temp_c=91.0, power_w=420.0,
                                      power_limit_w=700.0, throttle=("thermal",), xid=(79,), ecc_uncorrected=0)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        tile = app.query_one("#gpu-2", GpuTile)
        text = str(tile.health.render())
        assert "XID79" in text and "THERMAL" in text
        assert tile.has_class("-lost")  # the red border of a card in trouble


async def test_g_shows_the_process_table_and_a_leftover_after_exit_is_marked() -> None:
    app, s, _job = make_app("healthy", proc_info=fake_proc)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert not app.process_panel.display
        await pilot.press("g")
        await settle(app, pilot)
        assert app.process_panel.display
        assert any(not r.job for r in app.process_panel.rows)
        # The job exits; a later sample shows its pid still holding memory on GPU 0.
        m = s.monitor
        m.feed_events([ProcessExit(s.now + 2, kind="crash", code=1)])
        m.set_job_state(job_state("exited", s.job_state.started_at, s.now + 3, code=1))
        # The sampler no longer knows the pid as the job's (job=False): the panel remembers it.
        m.feed_samples([GpuSample(s.now + 5, 0, 40 * GIB, TOTAL, 0.0,
                                  (GpuProcess(JOB_PID, 40 * GIB, "python", job=False),))])
        await pilot.press("g")  # hidden again by the key, but a leftover shows itself
        await settle(app, pilot)
        panel = app.process_panel
        assert panel.display
        assert [r.pid for r in panel.rows if r.leftover] == [JOB_PID]
        assert "leftover" in str(panel.border_title)
        # The command line is data: shown as text, never read as markup.
        from rich.console import Console

        console = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
        console.print(panel._dfw_shown)  # the table last shown (``text.set_static``)
        assert "[bold]x[/]" in console.export_text()


async def test_window_keys_change_the_charts_and_are_in_the_help() -> None:
    app, _s, _job = make_app("health", minutes=6.0, proc_info=fake_proc)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        assert app.throughput_panel.window_s == 3600.0
        await pilot.press("1")
        await settle(app, pilot)
        assert app.throughput_panel.window_s == 600.0 and app.loss_panel.window_s == 600.0
        assert app.throughput_panel.border_title == "throughput (10m)"
        await pilot.press("4")
        await settle(app, pilot)
        assert app.throughput_panel.window_s is None and app.loss_panel.window_s is None
        assert any("whole run" in t for t in toasts(app))
        await pilot.press("3")
        await settle(app, pilot)
        assert app.loss_panel.window_s == 6 * 3600.0 and app.gpu_panel.window_s == 6 * 3600.0
        await pilot.press("question_mark")
        await settle(app, pilot)
        assert isinstance(app.screen, HelpScreen)
        assert any(k.startswith("1 2 3 4") and "whole run" in text for k, text in app.screen.rows)


async def test_window_keys_can_be_rebound() -> None:
    from dflash_watch.keymap import check_keys

    keymap = check_keys({"window_10m": "f7"})
    app, _s, _job = make_app("healthy", keymap=keymap, proc_info=fake_proc)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("f7")
        await settle(app, pilot)
        assert app.throughput_panel.window_s == 600.0


async def test_80x24_keeps_the_log_and_alerts_with_a_straggler() -> None:
    app, _s, _job = make_app("health", minutes=6.0, proc_info=fake_proc)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert app.log_panel.region.height >= 4
        assert app.alerts_panel.region.height >= 5
        assert not app.loss_panel.display  # collapsed: the NaN still alerts
        assert app.ranks_panel.display and app.ranks_panel.region.height <= 6
        assert not app.process_panel.display


async def test_window_keys_widen_the_memory_charts_too(monkeypatch) -> None:
    from dflash_watch.tui.widgets.gpu_tile import GpuTile, memory_plot

    spans: list[float] = []  # GPU 0's chart window, each time the panel offers one
    drawn: list[float] = []  # how far back the drawn chart's oldest column is
    show = GpuTile.show

    def spy(self, view, compact, chart_due):  # type: ignore[no-untyped-def]
        if view.gpu == 0 and len(view.times) > 1:
            spans.append(float(view.times[-1] - view.times[0]))
            plot = memory_plot(view, 60)
            assert plot is not None
            drawn.append(-min(plot.xs))
        return show(self, view, compact, chart_due)

    monkeypatch.setattr(GpuTile, "show", spy)
    app, _s, _job = make_app("healthy", minutes=40.0, proc_info=fake_proc)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert spans and spans[-1] <= 660.0  # 10 min until a key says otherwise
        await pilot.press("4")
        await settle(app, pilot)
        assert app.gpu_panel.window_s is None and spans[-1] >= 30 * 60
        assert drawn[-1] >= 30 * 60  # the picture reaches back too, not only the data handed over
        await pilot.press("1")
        await settle(app, pilot)
        assert spans[-1] <= 660.0 and drawn[-1] <= 600.0


async def test_a_tile_whose_samples_stopped_says_how_long_ago_its_reading_was() -> None:
    """NVML hung or the sampler stopped: the last reading stayed on the tile
    as if current. Once the data's clock is 15 s past a GPU's last sample,
    its title says so; a fresh sample clears it."""
    app, s, _job = make_app("healthy")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        tile = app.query_one("#gpu-0", GpuTile)
        assert "no sample" not in tile._title.plain
        last = s.monitor.gpus.used(0).last_time
        s.monitor.tick(last + 90)
        await pilot.pause(1.2)
        await settle(app, pilot)
        assert "no sample for 1m30s" in tile._title.plain, tile._title.plain
        s.monitor.feed_samples([GpuSample(last + 91, 0, 40 * GIB, TOTAL, 0.9, ())])
        await pilot.pause(1.2)
        await settle(app, pilot)
        assert "no sample" not in tile._title.plain, tile._title.plain
