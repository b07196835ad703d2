"""padding: windowed, token-weighted efficiency against a baseline or a floor."""

from __future__ import annotations

from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.padding import _BUCKETS, _KEPT, PaddingDetector
from dflash_watch.detectors.registry import DetectorSet
from dflash_watch.parsers.events import PaddingReport, ProbeSample, ProcessExit, Progress
from tests.core.probe_streams import ProbeProfile, probes
from tests.core.synthetic import T0, drive

CFG = DetectorConfig(tz="UTC")


def _run(det: PaddingDetector, events) -> list:
    return drive(DetectorSet([det]), events)


def test_a_fall_below_the_baseline_fires_once_and_resolves_on_recovery():
    scenario = probes(ProbeProfile(ranks=4, padding_drops=((1800.0, 3600.0, 0.41),)), 5400.0)
    alerts = _run(PaddingDetector(CFG, baseline_efficiency=0.93), scenario.events)
    assert [a.state for a in alerts] == ["firing", "resolved"]
    fired, resolved = alerts
    # The 120 s window crosses 0.83 within about a minute; back above
    # 0.88 (the hysteresis) within one window.
    assert 1800 <= fired.time - T0 <= 1800 + 60
    assert 3600 <= resolved.time - T0 <= 3600 + CFG.padding_window_s
    assert fired.detector == "padding" and fired.kind is None and fired.gpu is None
    ev = fired.evidence
    assert ev["baseline"] == 0.93 and abs(ev["threshold"] - 0.83) < 1e-9
    assert ev["source"] == "probe" and ev["ranks"] == [0, 1, 2, 3] and ev["window_s"] == CFG.padding_window_s
    assert 0.41 < ev["now"] < 0.83
    assert "below the good run's 93%" in fired.message
    assert "print the bucket boundaries the loader uses" in fired.message
    assert "dflash-watch buckets" in ev["remedy"]
    assert resolved.message.startswith("padding efficiency back to")


def test_a_small_drop_inside_the_margin_and_a_healthy_run_do_not_fire():
    healthy = probes(ProbeProfile(), 3600.0)
    inside = probes(ProbeProfile(padding_drops=((600.0, None, 0.86),)), 3600.0)
    assert _run(PaddingDetector(CFG, baseline_efficiency=0.93), healthy.events) == []
    assert _run(PaddingDetector(CFG, baseline_efficiency=0.93), inside.events) == []


def test_without_a_baseline_the_floor_decides():
    scenario = probes(ProbeProfile(efficiency=0.80, padding_drops=((1200.0, None, 0.60),)), 2400.0)
    det = PaddingDetector(CFG)
    alerts = _run(det, scenario.events)
    assert [a.state for a in alerts] == ["firing"]
    assert "below the 70% floor" in alerts[0].message and alerts[0].evidence["baseline"] is None
    assert abs(det.efficiency - 0.60) < 0.02 and det.source == "probe"


def test_efficiency_is_token_weighted_across_ranks():
    """A rank with tiny, badly padded batches weighs by its tokens: the mean
    of the ranks' efficiencies (0.5) would fire, the weighted one (0.83) not."""
    events = []
    for i in range(60):
        t = T0 + 5.0 * i
        events.append(ProbeSample(t, rank=0, tokens=9000, padded_tokens=10000))
        events.append(ProbeSample(t, rank=1, tokens=100, padded_tokens=1000))
    det = PaddingDetector(CFG)
    assert _run(det, events) == []
    assert abs(det.efficiency - 9100 / 11000) < 1e-9


def test_hovering_at_the_line_fires_once_thanks_to_hysteresis():
    events = []
    for i in range(400):
        eff = 0.69 if (i // 20) % 2 else 0.71  # 100 s either side of the floor, for half an hour
        events.append(ProbeSample(T0 + 5.0 * i, rank=0, tokens=int(eff * 10000), padded_tokens=10000))
    alerts = _run(PaddingDetector(CFG), events)
    assert [a.state for a in alerts] == ["firing"]


def test_log_reports_and_progress_metrics_count_and_probe_lines_win():
    det = PaddingDetector(CFG, baseline_efficiency=0.95)
    events = [Progress(T0 + 10.0 * i, f"train.log:{i}", step=i, loss=2.0, metrics=(("pad_eff", 0.95),))
              for i in range(30)]
    events += [PaddingReport(T0 + 300.0 + 10.0 * i, 0.50, f"train.log:{100 + i}", rank=2) for i in range(30)]
    alerts = _run(det, events)
    assert [a.state for a in alerts] == ["firing"]
    assert alerts[0].evidence["source"] == "log" and alerts[0].evidence["ranks"] == [2]
    assert alerts[0].source.startswith("train.log:")
    # Probe lines come: from now on they are the measure, the log's reports are not.
    events = [ProbeSample(T0 + 700.0 + 5.0 * i, rank=0, tokens=9500, padded_tokens=10000) for i in range(40)]
    events += [PaddingReport(T0 + 900.0 + i, 0.10, "train.log:999") for i in range(10)]
    alerts = _run(det, sorted(events, key=lambda e: e.time))
    assert [(a.state, a.evidence["source"]) for a in alerts] == [("resolved", "probe")]


def test_a_new_baseline_applies_at_once_and_an_exit_starts_the_window_again():
    det = PaddingDetector(CFG)
    low = [ProbeSample(T0 + 5.0 * i, rank=0, tokens=8000, padded_tokens=10000) for i in range(30)]
    assert _run(det, low) == []  # 80% is above the floor
    det.set_baseline(0.97)
    assert abs(det.threshold() - 0.87) < 1e-9
    (alert,) = _run(det, [ProbeSample(T0 + 150.0, rank=0, tokens=8000, padded_tokens=10000)])
    assert alert.state == "firing" and alert.evidence["baseline"] == 0.97
    det.update(ProcessExit(T0 + 200.0, "crash"))
    # A new incarnation needs its own min_samples before it is judged.
    good = [ProbeSample(T0 + 300.0 + 5.0 * i, rank=0, tokens=9700, padded_tokens=10000)
            for i in range(CFG.padding_min_samples)]
    alerts = _run(det, good)
    assert [a.state for a in alerts] == ["resolved"] and alerts[0].time == good[-1].time


def test_missing_counts_are_absent_not_zero_and_state_stays_bounded():
    det = PaddingDetector(CFG)
    # No padded count (a loop without an attention mask): nothing to judge.
    assert _run(det, [ProbeSample(T0 + i, rank=0, tokens=100) for i in range(50)]) == []
    assert det.efficiency is None
    # 20 000 lines, 8 ranks, 10 a second: the window keeps its buckets, no more.
    many = [ProbeSample(T0 + 100.0 + i * 0.1, rank=i % 8, tokens=90, padded_tokens=100) for i in range(20000)]
    assert _run(det, many) == []
    assert len(det._probe.buckets) <= _BUCKETS + 1 and abs(det.efficiency - 0.9) < 1e-9
    assert det._probe.samples() <= (CFG.padding_window_s + 2 * det._probe.bucket_s) * 10
    # A sparse log (a report every 10 min) keeps its last few reports, no more.
    sparse = PaddingDetector(CFG)
    _run(sparse, [PaddingReport(T0 + 600.0 * i, 0.9, f"log:{i}") for i in range(500)])
    assert len(sparse._log.buckets) < CFG.padding_min_samples + 1 <= _KEPT


def test_a_bucket_of_a_busy_log_is_the_mean_of_its_first_reports():
    """Ten step lines a second: each 5 s bucket is read from its first
    _PER_BUCKET reports (the hot path skips the rest), never from one."""
    from dflash_watch.detectors.padding import _PER_BUCKET

    det = PaddingDetector(CFG)
    events = []
    for i in range(200):
        t = T0 + 0.1 * i
        eff = 0.9 if i % 50 == 0 else 0.5  # the first report of each bucket differs
        events.append(Progress(t, f"log:{i}", step=i, metrics=(("pad_eff", eff),)))
    _run(det, events)
    assert _PER_BUCKET >= 2
    want = (0.9 + 0.5 * (_PER_BUCKET - 1)) / _PER_BUCKET
    assert abs(det.efficiency - want) < 1e-9
