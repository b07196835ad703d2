"""alloc_thrash: allocator retries rising between probe lines, as a rate."""

from __future__ import annotations

from dflash_watch.detectors.alloc_thrash import AllocThrash
from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.registry import DetectorSet
from dflash_watch.parsers.events import ProbeSample
from tests.core.probe_streams import ProbeProfile, probes
from tests.core.synthetic import T0, drive

CFG = DetectorConfig(tz="UTC")


def test_a_steady_thrash_fires_once_with_the_remedy_and_resolves_after_a_quiet_window():
    scenario = probes(ProbeProfile(ranks=4, thrash=(1800.0, 3600.0), thrash_ranks=(2,)), 7200.0)
    alerts = drive(DetectorSet([AllocThrash(CFG)]), scenario.events)
    assert [a.state for a in alerts] == ["firing", "resolved"]
    fired, resolved = alerts
    # A retry every other 5 s step is 360/h: min_retries (5) arrive in 50 s.
    assert 1800 <= fired.time - T0 <= 1800 + 60
    assert fired.evidence["rank"] == 2 and set(fired.evidence["ranks"]) == {"2"}
    assert fired.evidence["per_hour"] >= CFG.alloc_thrash_per_hour
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in fired.message
    assert "expandable_segments:True" in fired.evidence["remedy"]
    # The last retry is just before 3600; a window later it resolves.
    assert 3600 + CFG.alloc_thrash_window_s - 15 <= resolved.time - T0 <= 3600 + CFG.alloc_thrash_window_s + 5


def test_silence_resolves_it_through_the_deadline():
    """The run dies thrashing: no probe line comes, the tick at the deadline resolves."""
    scenario = probes(ProbeProfile(ranks=1, thrash=(600.0, None)), 1200.0)
    det = AllocThrash(CFG)
    alerts = drive(DetectorSet([det]), scenario.events, until=T0 + 5000.0)
    assert [a.state for a in alerts] == ["firing", "resolved"]
    last = scenario.events[-1].time
    assert det.deadline() is None
    assert alerts[1].time <= last + CFG.alloc_thrash_window_s + 1


def test_one_retry_or_a_few_do_not_fire():
    events = [ProbeSample(T0 + 5.0 * i, rank=0, alloc_retries=(1 if i > 100 else 0) + (1 if i > 400 else 0))
              for i in range(1000)]
    assert drive(DetectorSet([AllocThrash(CFG)]), events) == []
    # A burst of three at the first minute is a rate of 144/h, but three
    # retries are not a thrash (alloc_thrash_min_retries).
    burst = [ProbeSample(T0 + 5.0 * i, rank=0, alloc_retries=min(3, max(0, i - 12))) for i in range(400)]
    assert drive(DetectorSet([AllocThrash(CFG)]), burst) == []


def test_a_counter_reset_is_a_relaunch_not_a_negative_rate():
    """The counter falls from 500 to 0 at a relaunch, then stays: no alert,
    and the rate after it is zero, not negative."""
    events = [ProbeSample(T0 + 5.0 * i, rank=0, alloc_retries=500) for i in range(100)]
    events += [ProbeSample(T0 + 500.0 + 5.0 * i, rank=0, alloc_retries=0) for i in range(200)]
    det = AllocThrash(CFG)
    assert drive(DetectorSet([det]), events) == []
    assert det.rises.resets == 1 and det.rises.busiest(events[-1].time) == (0, 0, 0.0)
    # ...and after the reset a real thrash still counts from the new reference.
    more = [ProbeSample(T0 + 1500.0 + 5.0 * i, rank=0, alloc_retries=i) for i in range(20)]
    alerts = drive(DetectorSet([det]), more)
    assert [a.state for a in alerts] == ["firing"] and alerts[0].evidence["retries_in_window"] >= 5


def test_a_good_run_that_already_retried_is_judged_against_its_own_rate():
    # 360/h: a thrash against no baseline, the usual against a good run at 300/h.
    scenario = probes(ProbeProfile(ranks=1, thrash=(0.0, None)), 3600.0)
    assert drive(DetectorSet([AllocThrash(CFG, baseline_per_hour=300.0)]), scenario.events) == []
    alerts = drive(DetectorSet([AllocThrash(CFG, baseline_per_hour=50.0)]), scenario.events)
    assert [a.state for a in alerts] == ["firing"] and alerts[0].evidence["baseline_per_hour"] == 50.0
    assert "50/h in the good run" in alerts[0].message


def test_a_cpu_run_without_allocator_figures_says_nothing_and_stays_bounded():
    det = AllocThrash(CFG)
    cpu = probes(ProbeProfile(ranks=2, cuda=False, thrash=(0.0, None)), 1800.0)
    assert drive(DetectorSet([det]), cpu.events) == [] and det.per_hour is None and len(det.rises._ranks) == 0
    # 5000 ranks retrying: the ranks kept are bounded.
    many = [ProbeSample(T0 + 2000.0 + i * 0.01, rank=i, alloc_retries=i % 3) for i in range(5000)]
    drive(DetectorSet([det]), many)
    assert len(det.rises._ranks) <= 1024


def test_the_job_exiting_ends_the_episode_and_a_relaunch_counts_afresh():
    """The process that thrashed died (the demo's FX crash): its episode
    resolves at the exit, not a window later on the next incarnation."""
    from dflash_watch.parsers.events import ProcessExit

    events = [ProbeSample(T0 + 5.0 * i, rank=0, alloc_retries=2 * i) for i in range(60)]
    exit_at = events[-1].time + 1.0
    events.append(ProcessExit(exit_at, "crash", code=1))
    events += [ProbeSample(exit_at + 30.0 + 5.0 * i, rank=0, alloc_retries=0) for i in range(20)]
    alerts = drive(DetectorSet([AllocThrash(CFG)]), events)
    assert [a.state for a in alerts] == ["firing", "resolved"]
    assert alerts[1].time == exit_at and "exited" in alerts[1].message
