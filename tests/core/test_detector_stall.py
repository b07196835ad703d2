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


def test_a_resolve_is_never_dated_before_its_firing():
    """A stall fired at a tick; the step that ends it came in a late burst
    of a block-buffered log, stamped before that tick: the resolve carries
    the firing's time (a webhook's endsAt never before its startsAt)."""
    det = Stall()
    alerts = []
    for i in range(20):
        alerts += det.update(Progress(T0 + 10 * i, "log:1", step=i))
    alerts += det.update(Tick(T0 + 190 + 130))
    (fire,) = alerts
    back = det.update(Progress(T0 + 190 + 60, "log:2", step=20))  # written 70 s before the firing
    assert [(a.state, a.time) for a in back] == [("resolved", fire.time)]


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


# -- issue 19: heartbeats are no progress, phases extend the budget ---------------

from dflash_watch.parsers.events import Heartbeat, Overflow, Phase, XidError  # noqa: E402


def _steady(n=10, every=10.0, t0=T0):
    return [Progress(t0 + every * i, "log:%d" % i, step=i) for i in range(n)]


def test_heartbeats_never_delay_the_stall_and_say_where_the_rank_waits():
    events = _steady()  # last step 9 at T0 + 90: fires at T0 + 210 (max(120, 5 x 10 s))
    # A watchdog repeats the last step every 20 s: before the fix each one was
    # read as progress and the stall never came.
    events += [Heartbeat(T0 + 90 + 20 * k, "log:hb%d" % k, rank=3, last_step=9, waiting_in="all_reduce")
               for k in range(1, 40)]
    alerts = drive(DetectorSet([Stall(DetectorConfig(tz="UTC"))]), events, until=T0 + 2000)
    (alert,) = alerts
    assert alert.state == "firing" and alert.time == T0 + 210
    assert "rank 3 waits in all_reduce at step 9" in alert.message
    assert alert.evidence["waiting"][0]["rank"] == 3
    assert alert.evidence["waiting"][0]["waiting_in"] == "all_reduce"


def test_heartbeats_name_the_rank_that_is_behind():
    events = _steady()
    events += [Heartbeat(T0 + 150, "log:a", rank=r, last_step=9, waiting_in="all_reduce") for r in (0, 1, 2, 4, 5)]
    events += [Heartbeat(T0 + 151, "log:b", rank=3, last_step=8, waiting_in="backward")]
    (alert,) = drive(DetectorSet([Stall()]), events, until=T0 + 600)
    assert "rank 3 is behind at step 8, waiting in backward" in alert.message
    assert "ranks 0-2, 4-5 wait in all_reduce at step 9" in alert.message
    assert alert.evidence["behind_ranks"] == [3]


def test_heartbeats_from_before_the_last_progress_are_not_evidence():
    # One stamped before the last progress, read after it (another rank's file, read late).
    events = _steady() + [Heartbeat(T0 + 85, "log:hb", rank=1, last_step=8, waiting_in="all_reduce")]
    (alert,) = drive(DetectorSet([Stall()]), events, until=T0 + 600)
    assert "waits" not in alert.message and "waiting" not in alert.evidence


def test_overflow_xid_and_heartbeat_events_are_not_progress():
    def fire_time(extra):
        alerts = drive(DetectorSet([Stall()]), sorted(_steady() + extra, key=lambda e: e.time), until=T0 + 3000)
        return [a.time for a in alerts if a.state == "firing"]

    plain = fire_time([])
    assert plain == [T0 + 210]
    noise = []
    for k in range(1, 200):
        t = T0 + 90 + 10 * k
        noise += [Overflow(t, "log:o", rank=0, scale=65536.0, new_scale=32768.0), XidError(t + 1, 79, gpu=0),
                  Heartbeat(t + 2, "log:h", rank=0, last_step=9)]
    assert fire_time(noise) == plain


def test_a_checkpoint_save_extends_the_budget_and_the_stall_says_so():
    cfg = DetectorConfig(tz="UTC", stall_checkpoint_allowance_s=1200.0)
    events = _steady(every=60.0)  # threshold 5 x 60 s = 5 min; last step 9 at T0 + 540
    events.append(Phase(T0 + 545, "log:save", "checkpoint"))
    (alert,) = drive(DetectorSet([Stall(cfg)]), events, until=T0 + 9000)
    assert alert.time == T0 + 540 + 300 + 1200
    assert "no progress for 25 min during checkpoint save (allowance 20 min)" in alert.message
    assert alert.evidence["phase"] == "checkpoint" and alert.evidence["allowance_s"] == 1200.0


def test_an_eval_that_ends_measures_the_silence_from_its_end():
    events = _steady()  # threshold 120 s; last progress T0 + 90
    events += [Phase(T0 + 95, "log:ev", "eval"), Phase(T0 + 700, "log:ev2", "eval", begin=False)]
    (alert,) = drive(DetectorSet([Stall()]), events, until=T0 + 5000)
    assert alert.time == T0 + 700 + 120  # no alert during the 10-min eval
    assert "during" not in alert.message and "phase" not in alert.evidence


def test_training_progress_ends_a_phase():
    events = _steady()
    events += [Phase(T0 + 95, "log:ev", "eval"), Progress(T0 + 200, "log:p", step=10)]
    (alert,) = drive(DetectorSet([Stall()]), events, until=T0 + 5000)
    assert alert.time == T0 + 200 + 120 and "during" not in alert.message


def test_an_eval_that_hangs_fires_after_its_allowance():
    events = _steady() + [Phase(T0 + 95, "log:ev", "eval")]
    (alert,) = drive(DetectorSet([Stall(DetectorConfig(tz="UTC"))]), events, until=T0 + 9000)
    assert alert.time == T0 + 90 + 120 + DetectorConfig().stall_eval_allowance_s
    assert "during evaluation (allowance 20 min)" in alert.message
