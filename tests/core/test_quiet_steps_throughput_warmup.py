"""throughput_drop's column path (``throughput_quiet._steady``) on runs that
begin inside the warm-up (issue 20).

After a start (or a relaunch) the first ``throughput_warmup_s`` seconds of
steps are counted, not learned nor judged. A run that begins inside them
is read in columns too (its warm part is the run's first steps: times are
in order); these hold it to the per-step path at the warm-up's end, to
the second and exactly on it, with the baseline to learn or learned.
"""

from __future__ import annotations

import pytest

from dflash_watch.detectors import throughput_quiet
from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.throughput import ThroughputDrop
from dflash_watch.parsers.events import Event, Progress
from tests.core.step_runs import compare_runs, snapshot


def _make() -> ThroughputDrop:
    return ThroughputDrop(DetectorConfig(tz="UTC"))


def _step(t: float, step: int, rate: float = 1000.0) -> Progress:
    return Progress(t, f"log:{step}", step=step, total_steps=100_000, rate=rate, rate_unit="tok/s", clocked=True)


def _fed(events: list[Progress]) -> ThroughputDrop:
    det = _make()
    for e in events:
        det.update(e)
    return det


def _taken_in_columns(det: ThroughputDrop, run: list[Progress]) -> bool:
    """The run is taken by the column path (not the walk) and leaves the
    state of the per-step path."""
    calls: list[bool] = []
    steady = throughput_quiet._steady

    def spy(*args: object) -> object:
        out = steady(*args)  # type: ignore[arg-type]
        calls.append(out is not None)
        return out

    throughput_quiet._steady = spy  # type: ignore[assignment]
    try:
        commit = det.quiet_steps(run)
    finally:
        throughput_quiet._steady = steady
    assert commit is not None
    commit()
    return calls == [True]


@pytest.mark.parametrize("end", [59.0, 59.5, 60.0, 60.5, 61.0, 90.0, 400.0])
@pytest.mark.parametrize("every", [0.5, 1.0])
def test_a_run_across_the_warm_ups_end(end: float, every: float) -> None:
    """Started at 1000 s, 10 steps fed one at a time, then a run from 1005 s
    to past the warm-up's end at 1060 s (steps exactly on it included): the
    run is read in columns and leaves the per-step state."""
    c = DetectorConfig(tz="UTC")
    assert c.throughput_warmup_s == 60.0
    first = [_step(1000.0 + 0.5 * i, i) for i in range(10)]
    n = int((end - 5.0) / every) + 1
    run = [_step(1005.0 + every * i, 10 + i, 1000.0 + (i % 7)) for i in range(n)]
    det = _fed(first)
    assert det._start == 1000.0
    assert _taken_in_columns(det, run)
    assert snapshot(det) == snapshot(_fed([*first, *run]))


def test_learned_then_judged_after_a_warm_start() -> None:
    """One long run: the warm part, the learning (300 s) and judged steps,
    all in columns, against the per-step state."""
    first = [_step(1000.0 + i, i) for i in range(10)]
    run = [_step(1010.0 + i, 10 + i, 1000.0 + (i % 5)) for i in range(500)]
    det = _fed(first)
    assert det.baseline is None
    assert _taken_in_columns(det, run)
    plain = _fed([*first, *run])
    assert plain.baseline is not None and plain._window
    assert snapshot(det) == snapshot(plain)


def test_relaunches_and_warm_ups_both_ways() -> None:
    """Relaunches (silences) then steady steps: every run offered, many of
    them in a warm-up, gives the per-step path's alerts and states; a drop
    after a relaunch still fires alike."""
    events: list[Event] = []
    t, step = 1000.0, 0
    for k in range(4):
        rate = 500.0 if k == 3 else 1000.0
        for i in range(1500):
            events.append(_step(t, step, rate if i > 1000 else 1000.0))
            t += 0.5
            step += 1
        t += 500.0  # a silence: a relaunch
    plain = _make()
    assert [a.state for e in events for a in plain.update(e)] == ["firing"]
    for seed in range(4):
        offered, taken = compare_runs(_make, events, seed=seed, label=f"seed {seed}")
        assert taken > 0.5 * offered
