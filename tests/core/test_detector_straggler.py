"""straggler: the slow rank and the hung rank, on the data's own clock.

Pure: events in, alerts out. Ranks are simulated as DDP makes them: every
rank's step takes as long as the slowest rank's compute plus the
collective, and the others wait that difference.
"""

from __future__ import annotations

import doctest
import importlib

import pytest

from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.registry import DetectorSet, build_detectors
from dflash_watch.detectors.straggler import Straggler
from dflash_watch.detectors.straggler_ranks import rank_of_source
from dflash_watch.parsers.events import Crash, Heartbeat, Phase, ProbeSample, ProcessExit, Progress, Tick

COMM = 0.05


def ddp(det: Straggler | DetectorSet, start: float, steps: int, compute: dict[int, float], *,
        first_step: int = 0, probe: bool = True) -> list:
    """``steps`` DDP steps: each rank reports its step, compute and wait."""
    out: list = []
    t = start
    step_s = max(compute.values()) + COMM
    for i in range(steps):
        t += step_s
        for rank, c in compute.items():
            if probe:
                out += det.update(ProbeSample(t, rank=rank, step=first_step + i, step_seconds=step_s,
                                              compute_seconds=c, wait_seconds=step_s - c,
                                              source=f"dflash-probe-rank{rank}.jsonl:{i}"))
            else:
                out += det.update(Progress(t, f"train.log:{i}", step=first_step + i, rank=rank, step_seconds=step_s))
    return out


def until_alert(det: Straggler) -> list:
    """Tick at each deadline, as a replay does, until something fires."""
    out: list = []
    while not out and (due := det.deadline()) is not None:
        out = det.update(Tick(due))
    return out


def fired(alerts: list, kind: str) -> list:
    return [(a.state, a.rank) for a in alerts if a.kind == kind]


# -- slow ----------------------------------------------------------------------


def test_slow_fires_names_rank_and_gpu_then_resolves() -> None:
    det = Straggler(DetectorConfig(straggler_gpus_per_node=8))
    healthy = {0: 0.30, 1: 0.31, 9: 0.30, 10: 0.29}
    assert ddp(det, 0.0, 300, healthy) == []  # 105 s of healthy steps, past warm-up
    slow_at = 300 * 0.36
    out = ddp(det, slow_at, 600, {**healthy, 10: 0.60}, first_step=300)
    (alert,) = out
    assert (alert.state, alert.kind, alert.rank, alert.gpu, alert.severity) == ("firing", "slow", 10, 2, "warning")
    # The median turns within the window (60 s), then it must last straggler_slow_for_s (120 s).
    assert 120.0 + 30.0 <= alert.time - slow_at <= 120.0 + 45.0
    assert "rank 10 (GPU 2)" in alert.message and "2.00x" in alert.message and "waits 0.05 s" in alert.message
    assert alert.evidence["metric"] == "compute"
    assert [r.rank for r in det.rank_table() if r.slow] == [10]
    back = ddp(det, det._now, 400, healthy, first_step=900)
    assert [(a.state, a.rank, a.gpu) for a in back] == [("resolved", 10, 2)]
    assert not any(r.slow for r in det.rank_table())


def test_slow_found_on_compute_is_not_back_in_line_on_ddp_step_times() -> None:
    """The slow rank's compute times stop coming (it hangs; its probe went
    quiet) while every rank's log line says the same DDP step time: that is
    no "back in line" (it resolved in the middle of an 80 s hang)."""
    det = Straggler(DetectorConfig())
    healthy = {0: 0.30, 1: 0.30}
    assert ddp(det, 0.0, 300, healthy) == []
    (alert,) = ddp(det, 300 * 0.35, 600, {0: 0.30, 1: 0.60}, first_step=300)
    assert (alert.state, alert.rank, alert.evidence["metric"]) == ("firing", 1, "compute")
    assert ddp(det, det._now, 300, {0: 0.60, 1: 0.60}, first_step=900, probe=False) == []
    assert [r.rank for r in det.rank_table() if r.slow] == [1]
    back = ddp(det, det._now, 400, healthy, first_step=1200)  # its compute times again, as the others'
    assert [(a.state, a.rank) for a in back] == [("resolved", 1)]


def test_log_line_and_probe_line_of_one_step_both_count() -> None:
    """Each rank logs its step line just before its probe line: the log line
    must not make the probe line's split look like a repeat."""
    det = Straggler()
    out: list = []
    for i in range(400):
        for rank in range(3):
            c = 0.6 if rank == 1 else 0.3
            out += det.update(Progress(i * 0.7, f"train.log:{i}", step=i, rank=rank, step_seconds=0.65))
            out += det.update(ProbeSample(i * 0.7 + 0.001, rank=rank, step=i, step_seconds=0.65,
                                          compute_seconds=c, wait_seconds=0.65 - c))
    assert fired(out, "slow") == [("firing", 1)] and out[0].evidence["metric"] == "compute"


def test_a_relaunch_starts_the_steps_again() -> None:
    """Probe steps restart from 0 after a relaunch: the new run is measured."""
    det = Straggler()
    out = ddp(det, 0.0, 2000, {0: 0.3, 1: 0.3, 2: 0.3})
    out += ddp(det, det._now + 60.0, 600, {0: 0.3, 1: 0.6, 2: 0.3})
    assert fired(out, "slow") == [("firing", 1)]
    assert [r.last_step for r in det.rank_table()] == [599, 599, 599]


def test_step_minus_wait_is_compute_where_compute_is_not_given() -> None:
    det = Straggler()
    out: list = []
    for i in range(500):
        t = i * 0.7
        for rank in range(3):
            c = 0.6 if rank == 1 else 0.3
            out += det.update(ProbeSample(t, rank=rank, step=i, step_seconds=0.65, wait_seconds=0.65 - c))
    assert fired(out, "slow") == [("firing", 1)]


def test_step_times_that_differ_name_the_slow_rank_without_a_split() -> None:
    """Ranks that do not wait for each other (no split given): their step times differ."""
    det = Straggler()
    out: list = []
    for i in range(400):
        for rank in range(4):
            s = 1.0 if rank == 3 else 0.5
            out += det.update(Progress(i * 1.0, f"train.log:{i}", step=i, rank=rank, step_seconds=s))
    assert fired(out, "slow") == [("firing", 3)]
    assert out[0].evidence["metric"] == "step" and out[0].gpu is None


def test_a_slow_minute_is_no_straggler() -> None:
    det = Straggler()
    healthy = {0: 0.3, 1: 0.3, 2: 0.3}
    out = ddp(det, 0.0, 300, healthy)
    out += ddp(det, det._now, 100, {**healthy, 2: 0.6}, first_step=300)  # 65 s slow
    out += ddp(det, det._now, 600, healthy, first_step=400)
    assert out == []


def test_equal_ddp_step_times_name_nobody() -> None:
    """Only step times per rank, equal as DDP makes them, rank 0 logging 10x more often."""
    det = Straggler()
    out: list = []
    for i in range(2000):
        for rank in range(4):
            if rank == 0 or i % 10 == 0:
                out += det.update(Progress(i * 0.5, f"train.log:{i}", step=i, rank=rank, step_seconds=0.5))
    out += det.update(Tick(2000 * 0.5 + 30))
    assert out == []


def test_the_waiting_rank_is_not_the_straggler() -> None:
    """A rank whose compute reads high but which waits the most (its compute
    includes the others' lateness) is vetoed: the slow rank waits least."""
    det = Straggler()
    out: list = []
    for i in range(500):
        for rank in range(3):
            c, w = (0.6, 0.5) if rank == 0 else (0.3, 0.1)
            out += det.update(ProbeSample(i * 1.0, rank=rank, step=i, compute_seconds=c, wait_seconds=w))
    assert out == []


def test_single_rank_and_warm_up_never_fire() -> None:
    det = Straggler()
    assert ddp(det, 0.0, 1000, {0: 0.3}) == []
    det = Straggler(DetectorConfig(straggler_slow_for_s=20.0))
    # Rank 0 compiles slowly for its first 55 s (longer than slow_for), then all are equal.
    out = ddp(det, 0.0, 100, {0: 0.5, 1: 0.2, 2: 0.2})
    out += ddp(det, det._now, 1000, {0: 0.2, 1: 0.2, 2: 0.2}, first_step=100)
    assert out == []


def test_ranks_without_a_rank_are_ignored() -> None:
    det = Straggler()
    for i in range(500):
        assert det.update(ProbeSample(i * 1.0, step=i, compute_seconds=0.3 + (i % 2))) == []
    assert det.rank_table() == []


# -- hung ----------------------------------------------------------------------


def hang(det: Straggler | DetectorSet, heartbeats: bool = True) -> tuple[list, float]:
    """Three ranks step every 0.5 s to step 99; then ranks 0 and 1 wait in
    all_reduce (heartbeats every 10 s) while rank 2 is silent."""
    out = ddp(det, 0.0, 100, {0: 0.4, 1: 0.4, 2: 0.4})
    stop = det._now if isinstance(det, Straggler) else 50.0
    if heartbeats:
        for k in range(1, 4):
            for rank in (0, 1):
                out += det.update(Heartbeat(stop + 10.0 * k, f"train.log:{900 + k}", rank=rank, last_step=99,
                                            waiting_in="all_reduce"))
    return out, stop


def test_hung_fires_on_a_tick_naming_the_rank_and_where_the_others_wait() -> None:
    det = Straggler()
    out, stop = hang(det)
    assert out == []
    due = det.deadline()
    assert due == pytest.approx(stop + 60.0)  # straggler_hung_min_s: 5 x 0.45 s is less
    assert det.update(Tick(due - 1.0)) == []
    (alert,) = det.update(Tick(due))
    assert (alert.kind, alert.rank, alert.severity, alert.time) == ("hung", 2, "critical", due)
    assert "rank 2 is hung" in alert.message and "ranks 0, 1 wait in all_reduce" in alert.message
    assert alert.evidence["waiting"] == {"all_reduce": [0, 1]}
    assert det.deadline() is None and det.update(Tick(due + 100)) == []  # one episode
    assert [r.rank for r in det.rank_table() if r.hung] == [2]
    # Rank 2 steps again: resolved, with its rank.
    back = ddp(det, due + 200, 3, {0: 0.4, 1: 0.4, 2: 0.4}, first_step=100)
    assert [(a.state, a.kind, a.rank) for a in back] == [("resolved", "hung", 2)]


def test_hung_through_the_detector_set_and_replay_ticks() -> None:
    detectors = DetectorSet([d for d in build_detectors() if d.name == "straggler"])
    out, stop = hang(detectors)
    due = detectors.deadline()
    assert due is not None
    out += detectors.update(Tick(due))
    assert fired(out, "hung") == [("firing", 2)]
    assert {r.rank for r in detectors.rank_table()} == {0, 1, 2}


def test_a_rank_waiting_in_its_loader_is_the_one_the_others_wait_on() -> None:
    det = Straggler()
    out, stop = hang(det)
    out += det.update(Heartbeat(stop + 5.0, "train.log:990", rank=2, last_step=99, waiting_in="data loader"))
    (alert,) = until_alert(det)
    assert (alert.kind, alert.rank) == ("hung", 2) and "data loader" not in alert.message


def test_the_rank_behind_is_hung_without_heartbeats() -> None:
    det = Straggler()
    ddp(det, 0.0, 100, {0: 0.4, 1: 0.4, 2: 0.4})
    t = det._now + 0.45
    for rank in (0, 1):  # ranks 0 and 1 report step 100; rank 2 never does
        det.update(ProbeSample(t, rank=rank, step=100, compute_seconds=0.4, wait_seconds=0.05))
    (alert,) = until_alert(det)
    assert (alert.kind, alert.rank) == ("hung", 2) and "the others reached step 100" in alert.message


def test_a_log_in_bursts_gives_the_rank_behind_a_few_bursts_before_it_is_hung() -> None:
    """``torchrun ... > out`` (its stdout block-buffered): a burst may end
    between the ranks' lines of one step, and the rank behind comes with
    the next burst, 66 s on. Hung only after ``BURSTS_ALLOWED`` intervals,
    as a stall; a healthy run was called hung (critical) at such a boundary."""
    from dflash_watch.detectors.stall import BURSTS_ALLOWED
    from dflash_watch.parsers.events import Delivery

    def behind(det: Straggler, burst_s: float | None) -> tuple[list, float]:
        out = ddp(det, 0.0, 100, {0: 0.9, 1: 0.9}, probe=False)
        if burst_s is not None:
            out += det.update(Delivery(det._now, "train.log", burst_s))
        t = det._now + 1.0
        out += det.update(Progress(t, "train.log:999", step=100, rank=1, step_seconds=1.0))
        return out, t

    det = Straggler()
    out, t = behind(det, 66.0)
    while (due := det.deadline()) is not None and due < t + 70.0:
        out += det.update(Tick(due))
    out += det.update(Tick(t + 70.0))
    assert fired(out, "hung") == []
    out += det.update(Progress(t + 70.0, "train.log:1000", step=100, rank=0, step_seconds=1.0))  # the next burst
    assert fired(out, "hung") == []
    det = Straggler()
    out, t = behind(det, 66.0)
    (alert,) = until_alert(det)  # never coming: hung after the bursts allowed
    assert (alert.kind, alert.rank) == ("hung", 0) and alert.time - t >= BURSTS_ALLOWED * 66.0 - 1.0
    det = Straggler()
    out, t = behind(det, None)  # line by line: the same silence is a hang
    (alert,) = until_alert(det)
    assert (alert.kind, alert.rank) == ("hung", 0) and alert.time - t < 70.0


def test_collective_timeouts_are_the_others_waiting() -> None:
    det = Straggler()
    ddp(det, 0.0, 100, {0: 0.4, 1: 0.4, 2: 0.4})
    t = det._now + 30.0
    for rank in (1, 2):
        det.update(Crash(t, f"train.log:{rank}", "crash", "nccl_timeout", "DistBackendError", "timed out", "sig",
                         rank=rank))
    (alert,) = until_alert(det)
    assert (alert.kind, alert.rank) == ("hung", 0) and "a timed-out collective" in alert.message


def test_everyone_stopped_at_the_same_step_is_a_stall_not_a_straggler() -> None:
    det = Straggler()
    ddp(det, 0.0, 100, {0: 0.4, 1: 0.4, 2: 0.4})
    for k in range(1, 100):
        assert det.update(Tick(det._now + 10.0)) == []


def test_a_rank_that_stopped_reporting_while_the_others_step_on() -> None:
    """Its probe heartbeat stopped: rank 2's lines end at step 50, the others go on."""
    det = Straggler()
    out = ddp(det, 0.0, 50, {0: 0.4, 1: 0.4, 2: 0.4})
    stop = det._now
    out += ddp(det, stop, 300, {0: 0.4, 1: 0.4}, first_step=50)
    assert fired(out, "hung") == [("firing", 2)]
    (alert,) = out
    assert alert.time == pytest.approx(stop + 60.0, abs=1.0) and "step on without it" in alert.message


def test_rank_zero_logging_more_often_and_its_eval_are_no_hang() -> None:
    det = Straggler()
    out: list = []
    # Rank 0 logs every step, the others every 50: each is judged by its own cadence.
    for i in range(1000):
        for rank in range(3):
            if rank == 0 or i % 50 == 0:
                out += det.update(Progress(i * 1.0, f"train.log:{i}", step=i, rank=rank, step_seconds=1.0))
    # Rank 0 evaluates for 20 min (its eval bar counts from 0); the others wait in a barrier.
    t = 1000.0
    out += det.update(Phase(t, "train.log:5000", "eval", rank=0))
    for k in range(1200):
        out += det.update(Progress(t + k, f"train.log:{5001 + k}", step=k % 100, total_steps=100, rank=0))
        if k % 30 == 0:
            for rank in (1, 2):
                out += det.update(Heartbeat(t + k, "train.log:9", rank=rank, last_step=999, waiting_in="barrier"))
    out += det.update(Tick(t + 1300))
    assert out == []


def test_a_silent_eval_is_allowed_its_allowance_then_it_is_a_hang() -> None:
    det = Straggler(DetectorConfig(straggler_phase_allowance_s=600.0))
    ddp(det, 0.0, 200, {0: 0.4, 1: 0.4, 2: 0.4})
    t = det._now
    det.update(Phase(t, "train.log:1", "eval", rank=0))
    for rank in (1, 2):
        det.update(Heartbeat(t + 5, "train.log:2", rank=rank, last_step=199, waiting_in="barrier"))
    out = until_alert(det)
    assert [(a.kind, a.rank, a.time) for a in out] == [("hung", 0, pytest.approx(t + 660.0))]


def test_process_exit_resolves_and_stops_judging() -> None:
    det = Straggler()
    out, stop = hang(det)
    out += det.update(Tick(det.deadline()))
    out += det.update(ProcessExit(stop + 100, "crash", code=1))
    assert [(a.state, a.kind) for a in out] == [("firing", "hung"), ("resolved", "hung")]
    assert det.deadline() is None and det.update(Tick(stop + 1000)) == []


# -- sources and the seams -------------------------------------------------------


@pytest.mark.parametrize(("source", "rank"), [
    ("rank3.log:12", 3), ("logs/train_rank12.out:7", 12), ("rank-0.txt:1", 0), ("train.log:5", None),
    ("ranking.log:3", None), ("rank3/stdout.log:4", None),
])
def test_rank_of_a_per_rank_log(source: str, rank: int | None) -> None:
    assert rank_of_source(source) == rank


def test_per_rank_logs_without_prefixes() -> None:
    det = Straggler()
    out: list = []
    for i in range(400):
        for rank in range(3):
            out += det.update(Progress(float(i), f"rank{rank}.log:{i}", step=i, step_seconds=0.9 if rank == 1 else 0.4))
    assert fired(out, "slow") == [("firing", 1)]


def test_registered_with_a_rank_table() -> None:
    detectors = DetectorSet(build_detectors())
    assert detectors.get("straggler") is not None
    assert detectors.rank_table() == []
    ddp(detectors, 0.0, 10, {0: 0.3, 1: 0.3})
    (row0, row1) = detectors.rank_table()
    assert (row0.rank, row0.last_step, row0.gpu, row0.slow, row0.hung) == (0, 9, None, False, False)
    assert row0.compute_seconds == pytest.approx(0.3) and row0.wait_seconds == pytest.approx(COMM)


def test_docstring_examples() -> None:
    for name in ("dflash_watch.detectors.straggler", "dflash_watch.detectors.straggler_hung",
                 "dflash_watch.detectors.straggler_ranks"):
        result = doctest.testmod(importlib.import_module(name))
        assert result.attempted > 0 and result.failed == 0, name
