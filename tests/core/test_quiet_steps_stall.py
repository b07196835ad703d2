"""stall's batching (issue 20, ``Stall.quiet_steps``) against its per-step path.

Every log the project has (fixtures, shared real-world logs, the speed
shapes, random logs) is fed one step at a time and in offered runs; the
alerts, deadlines and whole state must match (``tests.core.step_runs``).
Then the edges of the proof: a gap just under, at and over the deadline
floor, an open or pending stall, a phase, unsorted and copied steps,
unclocked lines, a bar's end, bursts. Last, the speed logs' runs must be
taken, so that the fast path cannot quietly become "always None".
"""

from __future__ import annotations

import pytest

from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.registry import DetectorSet
from dflash_watch.detectors.stall import Stall
from dflash_watch.parsers.events import Delivery, Event, Phase, Progress, Tick
from tests.core.step_runs import LOG_COUNT, all_log_events, compare_runs


def _make() -> Stall:
    return Stall(DetectorConfig(tz="UTC"))


@pytest.mark.parametrize("index", range(LOG_COUNT))
def test_every_log_batched_as_one_at_a_time(index: int) -> None:
    name, events = all_log_events()[index]
    for seed in (1, 2) if name.startswith("speed-") else (1, 2, 3):
        compare_runs(_make, events, seed=seed, label=f"{name} seed {seed}")


def _steady(n: int = 40, every: float = 1.0, t0: float = 1000.0) -> list[Event]:
    """A run stepping every ``every`` s: usual interval ``every``, threshold 120 s."""
    return [Progress(t0 + every * i, "log:%d" % i, step=i, total_steps=10_000) for i in range(n)]


def _fed(events: list[Event]) -> Stall:
    det = _make()
    s = DetectorSet([det])
    for e in events:
        s.update(e)
    return det


def _both_ways(events: list[Event]) -> None:
    for seed in range(6):
        compare_runs(_make, events, seed=seed, label=f"seed {seed}")


@pytest.mark.parametrize("eps", [-1e-9, 0.0, 1e-9])
def test_a_gap_at_the_deadline_floor(eps: float) -> None:
    base = _steady()
    det = _fed(base)
    last = base[-1].time
    assert det.deadline() == last + 120.0
    gap = Progress(last + 1.0 + 120.0 + eps, "log:gap", step=41, total_steps=10_000)
    run = [Progress(last + 1.0, "log:a", step=40, total_steps=10_000), gap,
           Progress(gap.time + 1.0, "log:b", step=42, total_steps=10_000)]
    # After the first line the deadline is its time + 120 s: the second line
    # at or before it is quiet, a nanosecond later it is a stall.
    quiet = det.quiet_steps(run)
    assert (quiet is not None) == (eps <= 0.0)
    _both_ways(base + run + _steady(20, t0=gap.time + 2.0))


def test_the_first_line_is_not_judged_against_the_old_deadline() -> None:
    base = _steady()
    det = _fed(base)
    # The set ticked up to the run's first line: only later lines count.
    run = [Progress(base[-1].time + 500.0, "log:a", step=40), Progress(base[-1].time + 501.0, "log:b", step=41)]
    assert det.quiet_steps(run) is not None


def test_asking_changes_nothing() -> None:
    from tests.core.step_runs import snapshot

    det = _fed(_steady())
    before = snapshot(det)
    assert det.quiet_steps(_steady(30, t0=1040.0)) is not None
    assert det.quiet_steps([Progress(1040.0, "a", step=40), Progress(1400.0, "b", step=41)]) is None
    assert snapshot(det) == before


def test_an_open_stall_is_not_quiet() -> None:
    base = _steady()
    det = _fed(base)
    assert det.update(Tick(base[-1].time + 300.0))  # fires
    assert det.episode.active
    assert det.quiet_steps(_steady(5, t0=base[-1].time + 301.0)) is None
    _both_ways(base + [Tick(base[-1].time + 300.0)] + _steady(30, t0=base[-1].time + 301.0))


def test_a_pending_stall_is_not_quiet() -> None:
    base = _steady()
    det = _fed(base)
    d = det.deadline()
    assert d is not None
    det.update(Tick(d))  # exactly at the deadline: the next input decides
    assert det.deadline() is None
    assert det.quiet_steps(_steady(5, t0=d + 1.0)) is None


def test_copies_unsorted_times_and_ranks() -> None:
    events: list[Event] = []
    for i in range(200):
        for r in (3, 0, 2, 1):
            jitter = (-0.004, 0.003, 0.001, -0.002)[r]
            events.append(Progress(1000.0 + 2.0 * i + jitter, f"r{r}:{i}", step=i if r != 2 else max(i - 1, 0),
                                   rank=r, step_seconds=1.9 if i % 7 == 0 else None))
    _both_ways(events)
    # Without step numbers only the lowest rank is followed.
    events = [Progress(1000.0 + 0.5 * i + 0.01 * r, f"r{r}", rank=r) for i in range(200) for r in (2, 1, 0, 3)]
    _both_ways(events)


def test_a_phase_and_heartbeat_then_steps() -> None:
    base = _steady()
    t = base[-1].time
    events = base + [Phase(t + 1.0, "log:eval", "eval")] + _steady(30, t0=t + 1500.0)
    _both_ways(events)
    det = _fed(base + [Phase(t + 1.0, "log:eval", "eval")])
    d = det.deadline()
    assert d is not None and d == t + 120.0 + 1200.0
    run = [Progress(t + 1300.0, "a", step=40), Progress(t + 1301.0, "b", step=41)]
    assert det.quiet_steps(run) is not None  # first line ends the phase; the second is within 120 s of it


def test_unclocked_lines_and_bar_ends() -> None:
    events: list[Event] = []
    t = 1000.0
    for i in range(60):
        t += 1.0
        events.append(Progress(t, f"l{i}", step=i, clocked=i % 5 != 3))
    # A bar that ends (10/10) then silence, then epochs: ended bars re-arm.
    for epoch in range(4):
        for i in range(10):
            t += 1.0
            events.append(Progress(t, f"e{epoch}:{i}", step=i, total_steps=10))
        t += 900.0
    _both_ways(events)


def test_bursts_raise_the_floor() -> None:
    base = _steady()
    det = _fed(base + [Delivery(base[-1].time, "log", 100.0)])
    last = base[-1].time
    run = [Progress(last + 1.0, "a", step=40), Progress(last + 251.0, "b", step=41)]
    assert det.quiet_steps(run) is not None  # 2.5 x 100 s of bursts allowed
    run = [Progress(last + 1.0, "a", step=40), Progress(last + 251.0 + 1e-9, "b", step=41)]
    assert det.quiet_steps(run) is None
    _both_ways(base + [Delivery(last, "log", 100.0)] + _steady(30, every=250.0, t0=last + 1.0))


def test_nan_time_is_not_quiet() -> None:
    det = _fed(_steady())
    assert det.quiet_steps([Progress(1040.0, "a", step=40), Progress(float("nan"), "b", step=41)]) is None


@pytest.mark.parametrize("shape", ["progress", "ranks"])
def test_speed_logs_runs_are_taken(shape: str) -> None:
    events = dict(all_log_events())[f"speed-{shape}"]
    offered, taken = compare_runs(_make, events, seed=7, label=shape, check_state=False)
    assert offered > 50
    assert taken >= 0.9 * offered, (offered, taken)
