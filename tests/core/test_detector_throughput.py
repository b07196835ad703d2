"""Budgets of throughput_drop on labelled synthetic progress streams."""

from __future__ import annotations

import math

import pytest

from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.registry import DetectorSet
from dflash_watch.detectors.throughput import ThroughputDrop
from dflash_watch.parsers.events import Crash, Progress
from tests.core.synthetic import T0, ProgressProfile, drive, progress, replace


def run(profile, duration_s, *, seed=0, baseline=None, config=None):
    scenario = progress(profile, duration_s, seed=seed)
    det = ThroughputDrop(config or DetectorConfig(tz="UTC"), baseline_tokens_per_s=baseline)
    return scenario, det, drive(DetectorSet([det]), scenario.events)


@pytest.mark.parametrize("interval_s", [0.5, 2.0, 5.0, 10.0])
@pytest.mark.parametrize("baseline", [None, 21500.0])
def test_sustained_drop_fires_within_120_s_and_resolves_on_recovery(interval_s, baseline):
    for seed in range(3):
        start = 3600.0 + 1.7 * seed  # not aligned with the reports
        profile = ProgressProfile(interval_s=interval_s, dips=((start, 1800.0, 0.2),))
        scenario, det, alerts = run(profile, 7200.0, seed=seed, baseline=baseline)
        assert [a.state for a in alerts] == ["firing", "resolved"]
        fired, resolved = alerts
        (label,) = scenario.labels
        delay = fired.time - label.start
        assert 90 <= delay <= 120, delay
        assert 0 < resolved.time - label.end <= 60
        assert "below baseline 21." in fired.message and "Ktok/s" in fired.message
        assert fired.message.startswith("throughput 4.")
        assert fired.evidence["baseline_source"] == ("given" if baseline else "learned")
        assert math.isclose(fired.evidence["baseline_tokens_per_s"], 21500.0, rel_tol=0.03)


@pytest.mark.parametrize("interval_s", [1.0, 5.0, 10.0])
def test_dips_shorter_than_90_s_never_fire(interval_s):
    dips = tuple((1000.0 + 600.0 * i + 0.37 * i, 85.0 + 0.4 * (i % 10), 0.1) for i in range(20))
    profile = ProgressProfile(interval_s=interval_s, dips=dips, checkpoint_every_s=1800.0, checkpoint_dip_s=80.0)
    _, _, alerts = run(profile, 14000.0, baseline=21500.0)
    assert alerts == []


def test_a_drop_of_35_percent_fires_and_25_percent_does_not():
    _, _, alerts = run(ProgressProfile(dips=((3600.0, 600.0, 0.65),)), 7200.0)
    assert [a.state for a in alerts] == ["firing", "resolved"]
    _, _, alerts = run(ProgressProfile(dips=((3600.0, 600.0, 0.75),), label_dips=False), 7200.0)
    assert alerts == []


def test_eight_ranks_printing_each_step_count_once():
    scenario, det, alerts = run(ProgressProfile(ranks=8, dips=((3600.0, 900.0, 0.2),)), 7200.0)
    assert [a.state for a in alerts] == ["firing", "resolved"]
    assert alerts[0].time - scenario.labels[0].start <= 120
    assert math.isclose(det.baseline, 21500.0, rel_tol=0.03)


def test_relaunch_warmup_is_not_a_drop_and_the_baseline_is_kept():
    profile = ProgressProfile(relaunch_at_s=(2000.0, 4000.0), warmup_reports=12, warmup_factor=0.2)
    _, det, alerts = run(profile, 7200.0)
    assert alerts == []
    assert math.isclose(det.learned_baseline(), 21500.0, rel_tol=0.03)


def test_none_tokens_are_ignored_and_a_crash_resolves_an_open_drop():
    det = ThroughputDrop(DetectorConfig(), baseline_tokens_per_s=20000.0)
    alerts = []
    for i in range(200):
        alerts += det.update(Progress(T0 + 5 * i, "log:1", step=i, tokens_per_s=None))
    assert alerts == [] and det.smoothed is None
    for i in range(200, 260):
        alerts += det.update(Progress(T0 + 5 * i, "log:1", step=i, tokens_per_s=3000.0))
    assert [a.state for a in alerts] == ["firing"]
    assert "85% below baseline 20.0 Ktok/s" in alerts[0].message
    alerts = det.update(Crash(T0 + 5 * 261, "log:9", "crash", "cuda_oom", "OOM", "x", "sig"))
    assert [a.state for a in alerts] == ["resolved"]


def test_learned_baseline_ignores_warmup_and_checkpoints():
    profile = ProgressProfile(checkpoint_every_s=240.0, checkpoint_dip_s=60.0, warmup_reports=10)
    _, det, _ = run(profile, 1200.0)
    assert math.isclose(det.learned_baseline(), 21500.0, rel_tol=0.03)


# -- units, the dashboard's baseline key, clocks ---------------------------------


def test_it_per_s_run_says_its_unit_and_ignores_a_tokens_baseline():
    profile = ProgressProfile(tokens_per_s=3.1, noise=0.0, dips=((3600.0, 900.0, 0.4),))
    scenario = progress(replace(profile, unit="it/s"), 7200.0)
    det = ThroughputDrop(DetectorConfig(tz="UTC"), baseline_tokens_per_s=21500.0)
    alerts = drive(DetectorSet([det]), scenario.events)
    fired, resolved = alerts
    assert fired.message.startswith("throughput 1.2 it/s is 60% below baseline 3.1 it/s since ")
    assert fired.evidence["unit"] == "it/s" and fired.evidence["baseline_source"] == "learned"
    assert math.isclose(fired.evidence["baseline_rate"], 3.1) and "baseline_tokens_per_s" not in fired.evidence
    assert "3.1 it/s" in resolved.message and resolved.evidence["unit"] == "it/s"
    assert det.learned_baseline() is None and det.learned_rate() == (det.baseline, "it/s")


def test_tok_per_s_evidence_keeps_its_contract_keys():
    _, _, alerts = run(ProgressProfile(dips=((3600.0, 900.0, 0.2),)), 7200.0)
    ev = alerts[0].evidence
    assert {"tokens_per_s", "baseline_tokens_per_s", "baseline_source", "below_fraction", "since", "step"} <= set(ev)
    assert ev["unit"] == "tok/s" and "rate" not in ev
    assert "worst_tokens_per_s" in alerts[1].evidence


def test_set_baseline_applies_at_once_and_none_learns_again():
    det = ThroughputDrop(DetectorConfig(tz="UTC"))
    alerts = []
    t = T0
    for i in range(120):  # 10 min at 20 Ktok/s: learned
        alerts += det.update(Progress(t + 5 * i, "log:1", step=i, tokens_per_s=20000.0))
    assert det.learned_baseline() == 20000.0 and alerts == []
    det.set_baseline(40000.0)  # the `b` key: a faster run is the reference now
    assert det.baseline == 40000.0 and det.learned_baseline() is None
    for i in range(120, 150):
        alerts += det.update(Progress(t + 5 * i, "log:1", step=i, tokens_per_s=20000.0))
    (fired,) = alerts
    assert fired.evidence["baseline_source"] == "given" and fired.time - (t + 5 * 120) <= 120
    assert "50% below baseline 40.0 Ktok/s" in fired.message
    det.set_baseline(None)
    assert det.baseline is None and det.given_baseline is None


def test_backward_clock_jump_neither_restarts_nor_blinds():
    profile = replace(ProgressProfile(dips=((2500.0, 900.0, 0.2),)), clock_jumps=((2000.0, -3600.0),))
    scenario, det, alerts = run(profile, 7200.0)
    assert det.restarts == 1 and det._clock.jumps == 1
    fired = alerts[0]
    assert 90 <= fired.time - (T0 + 2500 - 3600) <= 120


def test_a_bar_of_another_length_after_the_last_is_another_loop_not_a_drop() -> None:
    """HF Trainer: training's bar ends (625/625 at 0.27 it/s), then predict's bar
    (its first rated state 2/2850) runs at 0.15 it/s. That is another loop,
    learned anew, not a drop."""
    from dflash_watch.detectors.config import DetectorConfig
    from dflash_watch.detectors.throughput import ThroughputDrop
    from dflash_watch.parsers.events import Progress

    det = ThroughputDrop(DetectorConfig())
    alerts = []
    t = 1000.0
    for step in range(1, 626):
        t += 3.7
        alerts += det.update(Progress(t, f"l:{step}", step=step, total_steps=625, rate=0.27, rate_unit="it/s"))
    assert det.learned_rate() == (pytest.approx(0.27), "it/s")
    for step in range(2, 400):
        t += 6.6
        alerts += det.update(Progress(t, f"p:{step}", step=step, total_steps=2850, rate=0.15, rate_unit="it/s"))
    assert [a for a in alerts if a.state == "firing"] == []
