"""Budgets of the stall detector: max(120 s, 5 x usual interval) + <= 60 s."""

from __future__ import annotations

from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.registry import DetectorSet
from dflash_watch.detectors.stall import Stall
from dflash_watch.parsers.events import Crash, GpuSample, ProcessExit, Progress, Tick
from tests.core.synthetic import T0, ProgressProfile, drive, merge, process_exit, progress


def stalled(interval_s=30.0, stop_s=3000.0, ranks=1, step_seconds=None):
    return progress(
        ProgressProfile(interval_s=interval_s, stop_s=stop_s, ranks=ranks, step_seconds=step_seconds), 7200.0
    )


def test_stall_at_30_s_interval_fires_within_150_to_210_s_of_last_progress():
    for ranks in (1, 8):
        scenario = stalled(ranks=ranks)
        det = Stall(DetectorConfig(tz="UTC"))
        alerts = drive(DetectorSet([det]), scenario.events, until=T0 + 7200.0)
        last = max(e.time for e in scenario.events if e.rank in (None, 0))
        (alert,) = alerts
        assert alert.state == "firing"
        assert 150.0 <= alert.time - last <= 210.0, alert.time - last
        assert alert.evidence["usual_interval_s"] == 30.0
        assert "no progress for 2 min 30 s" in alert.message


def test_live_ticks_every_second_fire_on_time_and_not_before():
    scenario = stalled()
    det = Stall()
    alerts = []
    for e in scenario.events:
        alerts += det.update(e)
    last = scenario.events[-1].time
    t = last
    while not alerts and t < last + 400:
        t += 1.0
        alerts += det.update(Tick(t))
    assert 150.0 <= alerts[0].time - last <= 151.0
    assert det.deadline() is None  # firing: nothing more to wait for


def test_progress_resuming_resolves_the_stall():
    det = Stall()
    events = [Progress(T0 + 10 * i, "log:1", step=i) for i in range(20)]
    events += [Progress(T0 + 190 + 400, "log:2", step=20)]
    alerts = drive(DetectorSet([det]), events)
    assert [a.state for a in alerts] == ["firing", "resolved"]
    assert alerts[0].time == T0 + 190 + 120  # max(120, 5 x 10 s)
    assert "progress resumed at step 20 after 6 min 40 s" in alerts[1].message


def test_step_seconds_from_the_log_sets_the_usual_interval():
    det = Stall()
    for i in range(5):
        det.update(Progress(T0 + 60 * i, "log:1", step=i * 100, step_seconds=0.6))
    assert det.deadline() == T0 + 240 + 300  # 5 x 60 s lines, not 5 x 0.6 s steps
    det2 = Stall()
    det2.update(Progress(T0, "log:1", step=1, step_seconds=45.0))
    assert det2.deadline() == T0 + 225.0


def test_no_stall_before_the_first_progress_nor_after_a_crash_or_exit():
    det = Stall()
    assert drive(DetectorSet([det]), [GpuSample(T0 + i, 0, 1, 2) for i in range(0, 3000, 10)]) == []
    assert det.deadline() is None
    for death in (
        Crash(T0 + 3100, "log:9", "crash", "nccl_timeout", "DistBackendError", "Watchdog caught collective operation timeout", "s"),
        ProcessExit(T0 + 3100, "crash", code=1),
    ):
        det = Stall()
        events = [Progress(T0 + 3000 + 10 * i, "log:1", step=i) for i in range(10)] + [death]
        assert drive(DetectorSet([det]), events, until=T0 + 9000) == []
        # progress after a relaunch re-arms it
        events = [Progress(T0 + 9500, "log:1", step=5)]
        assert drive(DetectorSet([det]), events, until=T0 + 9800) != []


def test_crash_after_the_stall_fired_resolves_it():
    scenario = merge(stalled(interval_s=10.0, stop_s=1000.0), process_exit(T0 + 1500.0, "killed", signal=9))
    alerts = drive(DetectorSet([Stall()]), scenario.events, until=T0 + 3000)
    assert [a.state for a in alerts] == ["firing", "resolved"]
    assert alerts[1].time == T0 + 1500.0


# -- cadence, epochs, clocks --------------------------------------------------------


def test_a_run_logging_every_300_s_does_not_flap():
    from tests.core.synthetic import ProgressProfile as P

    scenario = progress(P(interval_s=300.0), 20000.0)
    det = Stall(DetectorConfig(tz="UTC"))
    assert drive(DetectorSet([det]), scenario.events) == []
    assert det.usual == 300.0 and det.threshold == 1500.0


def test_a_tick_at_the_deadline_waits_for_the_next_input():
    det = Stall()
    for i in range(10):
        det.update(Progress(T0 + 10 * i, "log:1", step=i))
    d = det.deadline()
    assert det.update(Tick(d)) == [] and det.deadline() is None
    # The stamps jumped forward by an hour and the run went on at once: no stall.
    assert det.update(Progress(d + 3600 - 120 + 10, "log:2", step=10)) == []
    assert det.clock_jumps == 1 and det.deadline() is not None
    # A real silence: the next input (here the data's end) confirms it.
    d = det.deadline()
    assert det.update(Tick(d)) == []
    (alert,) = det.flush()
    assert alert.state == "firing" and alert.time == d


def test_tqdm_elapsed_tells_a_clock_jump_from_a_stall():
    det = Stall()
    for i in range(10):
        det.update(Progress(T0 + 10 * i, "log:1", step=i, elapsed_s=10.0 * i))
    d = det.deadline()
    det.update(Tick(d))
    assert det.update(Progress(T0 + 1234, "log:2", step=10, elapsed_s=100.0)) == []  # 10 s of tqdm time
    det = Stall()
    for i in range(10):
        det.update(Progress(T0 + 10 * i, "log:1", step=i, elapsed_s=10.0 * i))
    det.update(Tick(det.deadline()))
    alerts = det.update(Progress(T0 + 1234, "log:2", step=10, elapsed_s=1234.0))  # tqdm waited too
    assert [a.state for a in alerts] == ["firing", "resolved"]
