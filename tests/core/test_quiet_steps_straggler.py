"""straggler's batching (issue 20, ``Straggler.quiet_steps``) against its per-step path.

Every log the project has is fed one step at a time and in offered runs;
the alerts, deadlines and whole state must match (``tests.core.step_runs``).
Then the edges of the proof: a rank silent just under, at and over
``straggler_hung_min_s``, ranks named by their file, step seconds and
probe figures that let ``slow`` be judged, an open episode, a phase, an
exit, rankless lines next to ranks that probes made. Last, the speed logs'
runs must be taken, so that the fast path cannot quietly become "always
None".
"""

from __future__ import annotations

import pytest

from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.registry import DetectorSet
from dflash_watch.detectors.straggler import Straggler
from dflash_watch.parsers.events import Event, Phase, ProbeSample, ProcessExit, Progress
from tests.core.step_runs import LOG_COUNT, all_log_events, compare_runs, snapshot


def _make() -> Straggler:
    return Straggler(DetectorConfig(tz="UTC"))


@pytest.mark.parametrize("index", range(LOG_COUNT))
def test_every_log_batched_as_one_at_a_time(index: int) -> None:
    name, events = all_log_events()[index]
    for seed in (1, 2) if name.startswith("speed-") else (1, 2, 3):
        compare_runs(_make, events, seed=seed, label=f"{name} seed {seed}")


def _both_ways(events: list[Event], seeds: int = 6) -> int:
    """compare_runs over several cuts; the runs taken at once."""
    taken = 0
    for seed in range(seeds):
        taken += compare_runs(_make, events, seed=seed, label=f"seed {seed}")[1]
    return taken


def _ranks(t0: float, t1: float, ranks: tuple[int, ...] = (0, 1, 2, 3), *, every: float = 1.0,
           first_step: int = 0, named: str = "", step_seconds: dict[int, float] | None = None,
           jitter: bool = False) -> list[Event]:
    """Each rank prints a step every ``every`` s from t0 to t1 (interleaved)."""
    out: list[Event] = []
    i = 0
    while t0 + every * i <= t1:
        for r in ranks:
            t = t0 + every * i + ((r * 0.003 - 0.004) if jitter else 0.0)
            secs = step_seconds.get(r) if step_seconds else None
            if named:  # the rank in the file's name only
                out.append(Progress(t, named.format(r=r) + f":{i}", step=first_step + i, step_seconds=secs))
            else:
                out.append(Progress(t, f"train.log:{i}", step=first_step + i, rank=r, step_seconds=secs))
        i += 1
    return out


def _fed(events: list[Event]) -> Straggler:
    det = _make()
    s = DetectorSet([det])
    for e in events:
        s.update(e)
    return det


def test_rankless_lines_are_taken_and_move_only_the_clock() -> None:
    events: list[Event] = [Progress(1000.0 + 0.5 * i, f"train.log:{i}", step=i) for i in range(400)]
    assert _both_ways(events) > 0
    det = _fed(events[:10])
    before = snapshot(det)
    commit = det.quiet_steps(events[10:80])
    assert commit is not None
    assert snapshot(det) == before  # asking changes nothing
    commit()
    assert det._now == events[79].time and det.deadline() is None


@pytest.mark.parametrize("eps", [-1e-9, 0.0, 1e-9])
def test_a_rank_silent_at_the_hung_floor(eps: float) -> None:
    # Rank 3 stops at t=100; the others step on: after 60 s it is hung ("silent").
    events = _ranks(0.0, 100.0) + _ranks(101.0, 300.0, (0, 1, 2), first_step=101)
    _both_ways(events)
    det = _fed(_ranks(0.0, 100.0) + _ranks(101.0, 150.0, (0, 1, 2), first_step=101))
    run = [Progress(151.0, "train.log:a", step=151, rank=0), Progress(160.0 + eps, "train.log:b", step=152, rank=1)]
    commit = det.quiet_steps(run)
    # Taken only while every stamp is within 60 s of rank 3's last word.
    assert (commit is not None) == (eps < 0.0)


@pytest.mark.parametrize("named", ["out/rank{r}.log", "attempt_0/{r}/stdout.log"])
def test_ranks_named_by_their_files(named: str) -> None:
    events = _ranks(0.0, 100.0, named=named) + _ranks(101.0, 300.0, (0, 1, 2), first_step=101, named=named)
    _both_ways(events)
    det = _fed(_ranks(0.0, 20.0, named=named))
    commit = det.quiet_steps(_ranks(21.0, 40.0, named=named, first_step=21))
    assert commit is not None
    commit()
    assert det.ranks[2].last_step == 40  # the lines were taken as rank 2's steps


def test_step_seconds_let_slow_be_judged() -> None:
    slow = {0: 0.3, 1: 0.3, 2: 0.5, 3: 0.3}
    events = _ranks(0.0, 400.0, step_seconds=slow)
    _both_ways(events)
    assert _fed(_ranks(0.0, 400.0, step_seconds=slow)).slow.active
    det = _fed(_ranks(0.0, 20.0))
    assert det.quiet_steps(_ranks(21.0, 30.0, step_seconds=slow)) is None


def _probed(seconds: int, slow_rank: int | None) -> list[Event]:
    """Probe figures of 4 ranks each second, with rank and rankless step lines between."""
    events: list[Event] = []
    for i in range(seconds):
        t = float(i)
        for r in range(4):
            c = 0.5 if r == slow_rank else 0.3
            events.append(ProbeSample(t, rank=r, step=i, step_seconds=0.6, compute_seconds=c, wait_seconds=0.6 - c,
                                      source=f"probe-rank{r}.jsonl:{i}"))
        for r in range(4):
            events.append(Progress(t + 0.5, f"train.log:{i}", step=i, rank=r))
        events.append(Progress(t + 0.6, f"train.log:{i}", step=i))
    return events


def test_probe_figures_within_the_window() -> None:
    events = _probed(200, slow_rank=2)
    assert _fed(events).slow.active
    _both_ways(events, 2)
    det = _fed(events[:100])
    assert det.quiet_steps([Progress(30.0, "a", step=30, rank=0), Progress(30.1, "b", step=30, rank=1)]) is None
    # Probes stop: step lines go on, the figures age out of the window, runs
    # are taken (the open ``slow`` is judged no more: it stays as it is).
    after = [Progress(200.0 + 0.25 * i, f"train.log:{i}", step=200 + i // 5, rank=(i % 5 if i % 5 < 4 else None))
             for i in range(400)]
    assert _both_ways(events + after, 2) > 0
    events = _probed(100, slow_rank=None)
    events += [Progress(100.0 + 0.25 * i, f"train.log:{i}", step=100 + i // 5, rank=(i % 5 if i % 5 < 4 else None))
               for i in range(800)]
    assert _both_ways(events, 2) > 0


def test_rankless_lines_next_to_probed_ranks() -> None:
    events: list[Event] = [ProbeSample(float(i), rank=r, step=i, source=f"p{r}:{i}") for i in range(100) for r in range(3)]
    events += [Progress(100.0 + 0.5 * i, f"train.log:{i}", step=100 + i) for i in range(600)]
    assert _both_ways(events) > 0


def test_ranks_that_stepped_once_then_rankless_lines() -> None:
    # Two ranks step once (no cadence yet), rank 1 behind; then only rankless
    # lines: a minute after the last step, rank 1 is hung ("behind").
    events: list[Event] = [Progress(0.0, "a:1", step=1, rank=0), Progress(0.0, "a:2", step=0, rank=1)]
    events += [Progress(1.0 + i, f"train.log:{i}", step=2 + i) for i in range(200)]
    assert _fed(events).hung.active
    _both_ways(events)
    det = _fed(events[:50])
    assert det.quiet_steps(events[50:61]) is not None  # up to t=59
    assert det.quiet_steps(events[50:62]) is None  # t=60: a minute after the last step


def test_an_open_hung_and_a_phase_and_an_exit() -> None:
    events = (_ranks(0.0, 100.0) + _ranks(101.0, 300.0, (0, 1, 2), first_step=101)
              + [Phase(300.5, "train.log:eval", "eval")] + _ranks(301.0, 500.0, first_step=301)
              + [ProcessExit(500.5, "clean")] + _ranks(600.0, 700.0, jitter=True, first_step=600))
    _both_ways(events)
    det = _fed(_ranks(0.0, 100.0) + _ranks(101.0, 200.0, (0, 1, 2), first_step=101))
    assert det.hung.active
    assert det.quiet_steps(_ranks(201.0, 203.0, (0, 1, 2), first_step=201)) is None


def test_unsorted_stamps_and_a_late_clock() -> None:
    events = _ranks(0.0, 300.0, tuple(range(16)), every=0.7, jitter=True)
    events = events[:200] + [Progress(50.0, "late.log:1", step=3, rank=5)] + events[200:]
    assert _both_ways(events) > 0


def test_nan_stamps_are_not_quiet() -> None:
    det = _fed(_ranks(0.0, 20.0))
    assert det.quiet_steps([Progress(21.0, "a", step=21), Progress(float("nan"), "b", step=22)]) is None


@pytest.mark.parametrize("shape, share", [("progress", 0.95), ("ranks", 0.8)])
def test_speed_logs_runs_are_taken(shape: str, share: float) -> None:
    events = dict(all_log_events())[f"speed-{shape}"]
    offered, taken = compare_runs(_make, events, seed=7, label=shape, check_state=False)
    assert offered > 50
    assert taken >= share * offered, (offered, taken)


def test_rank_cadence_window_keeps_its_invariant() -> None:
    """``RankState._interval`` skips the sorted lists when the interval
    leaving the window equals the one coming (a steady cadence): they and
    the medians must stay those of the window, whatever the mix."""
    import random

    from dflash_watch.detectors.steps import sorted_median
    from dflash_watch.detectors.straggler_ranks import RankState

    rng = random.Random(5)
    state = RankState(0, 0.0)
    t, step = 0.0, 0
    for i in range(3000):
        # Long steady stretches (equal in and out) broken by changes.
        phase = (i // 200) % 3
        t += (1.0, rng.choice((1.0, 2.0)), rng.uniform(0.5, 3.0))[phase]
        step += (1, 1, rng.choice((1, 1, 2, 100)))[phase]
        state.add(t, step=step, window_s=60.0)
        secs = sorted(s for s, _ in state.intervals)
        steps = sorted(float(n) for _, n in state.intervals)
        assert state._seconds == secs and state._steps == steps, i
        if not secs:
            assert state.usual_s is None and state.usual_n == 1
            continue
        assert state.usual_s == sorted_median(secs), i
        assert state.usual_n == max(1, int(sorted_median(steps))), i


def test_rank_figures_kept_and_pruned_whatever_figure_comes() -> None:
    """``RankState.add`` skips the figures and the pruning when there is
    nothing to keep or to prune: a single figure (wait only) is still kept,
    and a later report without any figure still prunes the window."""
    from dflash_watch.detectors.straggler_ranks import RankState

    state = RankState(0, 0.0)
    for i in range(200):
        state.add(float(i), step=i, wait_s=0.1, window_s=60.0)
    waits = list(state.series["wait"])
    assert waits and waits[0][0] == 199.0 - 60.0 and waits[-1] == (199.0, 0.1)
    assert state.newest["wait"] == 199.0 and not state.series["step"] and not state.series["compute"]
    state.add(400.0, step=400, window_s=60.0)  # no figure: the window moves on all the same
    assert not state.series["wait"] and state.newest["wait"] == 199.0


def test_a_step_line_ends_a_phase_and_an_eval_bar_is_no_figure() -> None:
    """``Straggler._progress``: the next training step (above the rank's
    last) ends an eval or a save; a bar below it is a sign of life only,
    its seconds no step time."""
    det = _fed(_ranks(0.0, 10.0, (0, 1), step_seconds={0: 0.3, 1: 0.3}))
    det.update(Phase(10.5, "train.log:eval", "eval"))
    det.update(Progress(11.0, "train.log:e1", step=2, rank=0, step_seconds=5.0))  # an eval bar
    assert det._phase is not None
    assert [v for _, v in det.ranks[0].series["step"]] == [0.3] * 11
    assert det.ranks[0].last_seen == 11.0 and det.ranks[0].last_step == 10
    det.update(Progress(12.0, "train.log:11", step=11, rank=1, step_seconds=0.3))
    assert det._phase is None and det.ranks[1].last_step == 11
