"""The relaunch preflight reads the GPU holders the tiles show (same samples, same job pids)."""

from __future__ import annotations

from tui_helpers import job_state, make_app, scene

from dflash_watch.parsers.events import GpuProcess, GpuSample
from dflash_watch.tui.preflight import preflight
from dflash_watch.tui.scenes import GIB, N_GPUS, TOTAL, SceneJob
from dflash_watch.tui.widgets.gpu_tile import processes_text


def _after_the_crash(s, *, listed: bool = True) -> None:
    """NVML after the job died: its processes are gone, a notebook still holds GPU 3."""
    t = s.now + 5
    samples = []
    for gpu in range(N_GPUS):
        procs = (GpuProcess(51877, 2 * GIB, "jupyter-kernel"),) if gpu == 3 else ()
        samples.append(GpuSample(t, gpu, 2 * GIB if gpu == 3 else 0, TOTAL, 0.0, procs if listed else None))
    s.monitor.feed_samples(samples)
    dead = job_state("exited", s.job_state.started_at, t, code=1)
    s.monitor.set_job_state(dead)
    s.job_state = dead


async def test_after_a_crash_the_preflight_names_the_holder_the_tile_shows():
    app, s, job = make_app("healthy")
    _after_the_crash(s)
    job.state = s.job_state
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.5)
        tile3 = app.query_one("#gpu-3")
        assert "51877" in processes_text(tile3.view).plain
    facts = preflight(job, job.status(), s.monitor)
    assert [h.pid for h in facts.foreign] == [51877] and facts.foreign[0].gpu == 3
    text = facts.text().plain
    assert "pid 51877 jupyter-kernel on GPU 3" in text and "none seen" not in text


def test_processes_the_sampler_could_not_list_are_not_called_none():
    s = scene("healthy")
    _after_the_crash(s, listed=False)
    job = SceneJob(s.job_state)
    text = preflight(job, job.status(), s.monitor).text().plain
    assert "none seen" not in text and "not available" in text


def test_the_job_pids_the_tiles_use_count_as_the_jobs_in_the_preflight():
    """A sample that lists the job's pid without the sampler's flag: the tile calls it the job's
    (the Monitor's job pids); so must the preflight, even when a fresh status lists no pids."""
    s = scene("healthy")
    pid = s.job_state.pids[1]
    s.monitor.feed_samples([GpuSample(s.now + 1, 0, 70 * GIB, TOTAL, 0.9, (GpuProcess(pid, 70 * GIB, "python"),))])
    gone = job_state("exited", s.job_state.started_at, s.now + 2, code=1)
    job = SceneJob(gone)
    facts = preflight(job, gone, s.monitor)
    assert pid not in [h.pid for h in facts.foreign]
    assert 0 in facts.job_gpus
