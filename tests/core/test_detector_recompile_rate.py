"""recompile, kind "rate": recompiles per hour after warm-up, beside the limit alert."""

from __future__ import annotations

from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.recompile import RecompileDetector
from dflash_watch.detectors.registry import DetectorSet
from dflash_watch.parsers.events import ProcessExit, Progress
from tests.core.probe_streams import ProbeProfile, probes
from tests.core.synthetic import T0, drive, merge, recompiles

CFG = DetectorConfig(tz="UTC")


def _progress(duration_s: float, every: float = 5.0) -> list[Progress]:
    return [Progress(T0 + every * i, f"train.log:{i}", step=i, tokens_per_s=21500.0)
            for i in range(int(duration_s / every))]


def test_warmup_recompiles_do_not_count_a_steady_rate_after_it_fires_and_resolves():
    # 12 recompiles in the first minute (compiling), then one a minute (60/h)
    # from 30 min to 90 min, then none.
    scenario = probes(ProbeProfile(ranks=2, recompile=(1800.0, 5400.0), recompile_every_s=60.0), 4 * 3600.0)
    alerts = drive(DetectorSet([RecompileDetector(CFG)]), scenario.events)
    assert [(a.state, a.kind) for a in alerts] == [("firing", "rate"), ("resolved", "rate")]
    fired, resolved = alerts
    # min_count (3) and 30/h over the time since warm-up: 3 in 15+ min is 12/h,
    # so it takes until the rate over the span reaches 30/h.
    assert 1800 < fired.time - T0 <= 1800 + 25 * 60
    assert fired.evidence["source"] == "probe" and fired.evidence["per_hour"] >= CFG.recompile_rate_per_hour
    assert "TORCH_LOGS=recompiles" in fired.evidence["remedy"] and "after warm-up" in fired.message
    # Resolved once the window's rate is below half the threshold.
    assert 5400 < resolved.time - T0 <= 5400 + CFG.recompile_rate_window_s
    assert resolved.detector == "recompile"


def test_only_warmup_recompiles_and_a_healthy_run_do_not_fire():
    scenario = probes(ProbeProfile(ranks=4, warmup_recompiles=40), 3 * 3600.0)
    assert drive(DetectorSet([RecompileDetector(CFG)]), scenario.events) == []


def test_against_a_baseline_rate():
    # 60/h: usual for a good run at 40/h (threshold 120/h), rising for one at 5/h.
    scenario = probes(ProbeProfile(ranks=1, recompile=(0.0, None), recompile_every_s=60.0), 2 * 3600.0)
    det = RecompileDetector(CFG, baseline_per_hour=40.0)
    assert drive(DetectorSet([det]), scenario.events) == []
    assert 50.0 <= det.rate.per_hour(scenario.events[-1].time) <= 70.0
    alerts = drive(DetectorSet([RecompileDetector(CFG, baseline_per_hour=5.0)]), scenario.events)
    assert [(a.state, a.kind) for a in alerts] == [("firing", "rate")]
    assert alerts[0].evidence["threshold_per_hour"] == 15.0 and "5.0/h in the good run" in alerts[0].message


def test_from_log_recompile_lines_beside_the_limit_alert():
    """Recompile lines every 90 s after warm-up: the storm rule (8 in 10 min
    of one function) stays quiet, the rate (40/h) fires; a limit hit later
    fires the existing alert, kind null, as its own episode."""
    times = [T0 + 1000.0 + 90.0 * i for i in range(40)]
    scenario = merge(
        recompiles(times, hit_limit=False, function="forward"), recompiles([T0 + 2500.0], hit_limit=True, limit=8)
    )
    events = sorted(scenario.events + _progress(6000.0), key=lambda e: e.time)
    alerts = drive(DetectorSet([RecompileDetector(CFG)]), events)
    kinds = [(a.state, a.kind) for a in alerts]
    assert kinds[:2] == [("firing", "rate"), ("firing", None)], kinds
    assert ("resolved", None) in kinds and kinds.count(("firing", "rate")) == 1
    rate = alerts[0]
    # The warm-up ran from the first step line (T0), so the third recompile
    # after it (at 1180 s: 3 in the 280 s since warm-up, 39/h) fires.
    assert rate.evidence["source"] == "log" and rate.time == T0 + 1180.0


def test_a_relaunch_is_a_new_warmup():
    """Every incarnation compiles again: counters reset (probe) or the job
    exits (log); the compile burst after each is not a rate."""
    scenario = probes(ProbeProfile(ranks=2, warmup_recompiles=30, relaunch_at_s=(3600.0, 7200.0)), 3 * 3600.0)
    det = RecompileDetector(CFG)
    assert drive(DetectorSet([det]), scenario.events) == []
    burst = recompiles([T0 + 100.0 + 10.0 * i for i in range(6)], hit_limit=False, function="f")
    events = [ProcessExit(T0 + 50.0, "crash")] + burst.events
    log_det = RecompileDetector(CFG)
    log_det.update(Progress(T0 - 3000.0, "train.log:1", step=1))  # the first run started long ago
    assert drive(DetectorSet([log_det]), events) == []
