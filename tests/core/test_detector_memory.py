"""Budgets of memory_volatility, memory_growth and memory_pressure on
labelled synthetic streams (tests/core/synthetic.py)."""

from __future__ import annotations

import time

from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.memory_growth import MemoryGrowth
from dflash_watch.detectors.memory_pressure import MemoryPressure
from dflash_watch.detectors.memory_volatility import MemoryVolatility
from dflash_watch.detectors.registry import DetectorSet, build_detectors
from dflash_watch.parsers.events import GpuSample
from tests.core.synthetic import GIB, T0, MemProfile, drive, gpu_samples, replace

BASE = MemProfile()


def run(profiles, duration_s, *, seed=0, detectors=None, none_every=0):
    scenario = gpu_samples(profiles, duration_s, seed=seed, none_every=none_every)
    ds = DetectorSet(detectors or build_detectors(DetectorConfig(tz="UTC")))
    return scenario, drive(ds, scenario.events)


def firing(alerts, name):
    return [a for a in alerts if a.detector == name and a.state == "firing"]


# -- memory_volatility ------------------------------------------------------------


def test_swinging_gpus_5_to_7_fire_within_120_s_and_only_they_fire():
    for seed in range(3):
        profiles = {g: replace(BASE, swing_start_s=1800.0, swing_end_s=2700.0) if g >= 5 else BASE for g in range(8)}
        scenario, alerts = run(profiles, 3600.0, seed=seed)
        fired = firing(alerts, "memory_volatility")
        assert sorted(a.gpu for a in fired) == [5, 6, 7]
        assert [a for a in alerts if a.detector != "memory_volatility"] == []
        for label in scenario.labels:
            (alert,) = [a for a in fired if a.gpu == label.gpu]
            delay = alert.time - label.start
            assert 0 <= delay <= 120, delay
            assert "swinging" in alert.message and "GiB" in alert.message and "was flat at 63.5 GiB" in alert.message
            assert alert.evidence["band_bytes"] > 5 * GIB
        resolved = [a for a in alerts if a.state == "resolved"]
        assert sorted(a.gpu for a in resolved) == [5, 6, 7]
        for a in resolved:
            assert T0 + 2700 < a.time <= T0 + 2700 + 240  # flat for resolve_s (180 s) again


def test_slow_swing_of_a_minute_period_fires_within_120_s():
    profiles = {0: replace(BASE, swing_start_s=1800.0, swing_period_s=60.0)}
    scenario, alerts = run(profiles, 3000.0)
    (alert,) = firing(alerts, "memory_volatility")
    assert alert.time - scenario.labels[0].start <= 120


def test_warmup_ramp_steps_and_relaunch_are_silent():
    profiles = {
        0: BASE,  # the warm-up ramp alone
        1: replace(BASE, step_at_s=1500.0, step_gib=6.0),  # one step up
        2: replace(BASE, step_at_s=1500.0, step_gib=-9.0),  # one step down
        3: replace(BASE, relaunch_at_s=(1200.0, 2400.0)),  # relaunches: drop to idle + ramp
        4: replace(BASE, start_s=600.0, ramp_s=400.0),  # a late, slow start
        5: replace(BASE, step_at_s=1000.0, step_gib=3.0, noise_mib=60.0),  # a noisier GPU
    }
    _, alerts = run(profiles, 3600.0, none_every=7)
    assert alerts == []


def test_swinging_from_the_start_is_caught_after_the_warmup_cap():
    cfg = DetectorConfig(tz="UTC")
    profiles = {0: replace(BASE, swing_start_s=200.0)}
    _, alerts = run(profiles, 1500.0, detectors=[MemoryVolatility(cfg)])
    (alert,) = alerts
    assert alert.time - T0 <= cfg.mem_warmup_max_s + 120


def test_none_samples_are_ignored():
    det = MemoryVolatility()
    assert det.update(GpuSample(T0, 0, None, None)) == []
    assert det.update(GpuSample(T0 + 1, 0, None, 80 * 1 << 30)) == []


# -- memory_growth -----------------------------------------------------------------


def test_leak_of_2_gib_per_hour_fires_within_30_min_and_resolves():
    profiles = {
        0: replace(BASE, leak_start_s=1200.0, leak_end_s=3 * 3600.0, leak_gib_per_h=2.0),
        1: replace(BASE, leak_start_s=1200.0, leak_gib_per_h=2.0, leak_staircase_mib=256.0),  # allocator steps
        2: replace(BASE, level_gib=40.0, leak_start_s=1200.0, leak_gib_per_h=6.0, noise_mib=40.0),
    }
    scenario, alerts = run(profiles, 4 * 3600.0, detectors=[MemoryGrowth(DetectorConfig(tz="UTC"))])
    fired = firing(alerts, "memory_growth")
    assert sorted(a.gpu for a in fired) == [0, 1, 2]
    for label in scenario.labels:
        (alert,) = [a for a in fired if a.gpu == label.gpu]
        assert 0 < alert.time - label.start <= 1800, alert.time - label.start
        assert "GiB/h" in alert.message
        assert alert.evidence["slope_bytes_per_h"] > 1.7 * GIB
    (res,) = [a for a in alerts if a.state == "resolved"]
    assert res.gpu == 0 and T0 + 3 * 3600 < res.time <= T0 + 3 * 3600 + 1800


def test_one_gib_per_hour_is_below_the_rate_and_does_not_fire():
    """Decision: the rate is a threshold, not a hint; a clean 1 GiB/h climb
    (a day of headroom on 80 GiB) stays silent at the default 2 GiB/h."""
    profiles = {0: replace(BASE, leak_start_s=1200.0, leak_gib_per_h=1.0, noise_mib=0.0)}
    _, alerts = run(profiles, 4 * 3600.0, detectors=[MemoryGrowth()])
    assert alerts == []
    # ...and fires once the user lowers the threshold to it.
    _, alerts = run(profiles, 4 * 3600.0, detectors=[MemoryGrowth(DetectorConfig(growth_rate_gib_per_h=1.0))])
    assert len(firing(alerts, "memory_growth")) == 1


def test_growth_is_silent_for_steps_ramps_swings_and_relaunches():
    profiles = {
        0: replace(BASE, step_at_s=2400.0, step_gib=4.0),
        1: replace(BASE, relaunch_at_s=(2000.0,), ramp_s=900.0),
        2: replace(BASE, swing_start_s=1800.0, swing_end_s=3000.0),
        3: replace(BASE, relaunch_at_s=(1800.0, 2200.0, 5000.0)),
        4: replace(BASE, start_s=900.0, ramp_s=1500.0),  # a 25-minute staircase warm-up
    }
    _, alerts = run(profiles, 3 * 3600.0, detectors=[MemoryGrowth()])
    assert alerts == []


# -- memory_pressure ------------------------------------------------------------------


def test_pressure_fires_after_10_s_above_97_percent_and_resolves_below_94():
    cfg = DetectorConfig(tz="UTC")
    det = MemoryPressure(cfg)
    total = 80 * (1 << 30)
    alerts = []
    fracs = [0.90] * 20 + [0.975] * 5 + [0.95] * 3 + [0.98] * 30 + [0.95] * 10 + [0.93] * 5
    for i, f in enumerate(fracs):
        alerts += det.update(GpuSample(T0 + i, 3, int(f * total), total))
    assert [(a.state, a.time - T0, a.gpu) for a in alerts] == [("firing", 38.0, 3), ("resolved", 68.0, 3)]
    assert "98.0%" in alerts[0].message and "GiB free" in alerts[0].message


def test_gpu_sample_update_is_cheap():
    profiles = {g: BASE for g in range(8)}
    scenario = gpu_samples(profiles, 1800.0)
    for det in (MemoryVolatility(), MemoryGrowth(), MemoryPressure()):
        update = det.update
        t = time.perf_counter()
        for e in scenario.events:
            update(e)
        per = (time.perf_counter() - t) / len(scenario.events)
        assert per < 20e-6, (type(det).__name__, per)


# -- the shared memory model ------------------------------------------------------------


def test_three_detectors_share_one_model_and_each_sample_is_observed_once():
    from dflash_watch.detectors.memory import MemoryModel

    model = MemoryModel(DetectorConfig())
    dets = [MemoryVolatility(memory=model), MemoryGrowth(memory=model), MemoryPressure(memory=model)]
    ds = DetectorSet(dets)
    for i in range(100):
        ds.update(GpuSample(T0 + i, 0, int(60 * GIB) + (i % 3) * (1 << 20), int(80 * GIB)))
    phase = model.gpus[0]
    assert dets[0]._gpus[0].phase is phase and dets[1]._gpus[0].phase is phase
    assert len(phase.diffs) == 99  # one difference per sample, not three
    # Alone, a detector keeps a model of its own.
    assert MemoryVolatility().memory is not MemoryGrowth().memory


def test_a_swinging_gpu_whose_processes_change_is_a_relaunch_and_resolves():
    from dflash_watch.parsers.events import GpuProcess, Progress

    det = MemoryVolatility(DetectorConfig(tz="UTC"))
    alerts = []
    old, new = (GpuProcess(100, 0, "python", job=True),), (GpuProcess(200, 0, "python", job=True),)
    for i in range(600):
        t = T0 + i
        if i % 5 == 0 and i < 300:
            alerts += det.update(Progress(t, "log:1", step=i))
        if i < 300:
            gib, procs = (60 if (i // 10) % 2 else 0.5), old  # swinging to near zero, the same pid
        elif i < 340:
            gib, procs = 0.3, ()  # the job died: its pid is gone
        else:
            gib, procs = 40, new
        alerts += det.update(GpuSample(t, 0, int(gib * GIB), int(80 * GIB), processes=procs))
    assert [a.state for a in alerts] == ["firing", "resolved"]
    assert alerts[1].time == T0 + 300 and alerts[1].evidence["reason"] == "relaunch"


def test_pressure_evidence_says_whether_the_gpu_was_warming_up():
    det = MemoryPressure()
    total = int(80 * GIB)
    alerts = []
    for i in range(30):
        alerts += det.update(GpuSample(T0 + i, 0, int(0.98 * total), total))
    assert alerts[0].evidence["warming_up"] is True
