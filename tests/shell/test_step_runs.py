"""The Monitor's runs of step lines (issue 20's batching contract) change nothing but speed.

``Monitor._feed_runs`` offers runs of consecutive step lines to
``DetectorSet.take_steps``, which commits them when every detector of the
route proves them quiet (``detectors.base.StepCommit``). Each detector's
proof has its own differential (``tests/core/test_quiet_steps_*.py``); this
checks the plumbing around them with an oracle that proves any run for any
detector the slow way: it feeds a deep copy of the whole set one step at a
time (ticks at deadlines, as ``Monitor.advance_to``), and takes the run only
if no alert and no tick came, by moving the copies' state into the set.
With the oracle, replay with runs and replay one event at a time must give
the same alerts and the same Monitor (its history, counters, clock) on every
fixture and shared log, the speed shapes and random logs; and the runs must
really be taken (most of them on the speed shapes), halved around a step
that is not quiet.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from dflash_watch import replay as replay_module
from dflash_watch.detectors.registry import DetectorSet
from dflash_watch.history import SeriesHistory
from dflash_watch.monitor import Monitor
from dflash_watch.parsers.events import Progress
from tests.core.step_runs import log_paths, speed_log
from tests.random_logs import random_log


def _move_state(into: object, source: object) -> None:
    for cls in type(into).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if hasattr(source, name) and name != "__weakref__":
                object.__setattr__(into, name, getattr(source, name))
    if hasattr(into, "__dict__"):
        into.__dict__.update(source.__dict__)


class Oracle:
    """``DetectorSet.take_steps`` proven by feeding copies (slow, exact)."""

    def __init__(self) -> None:
        self.offered = self.taken = 0
        self.sizes: list[int] = []

    def take_steps(self, dset: DetectorSet, steps: Sequence[Progress]) -> bool:
        self.offered += 1
        copies = copy.deepcopy(dset.detectors)
        trial = DetectorSet(copies)
        for i, step in enumerate(steps):
            d = trial.deadline()
            if i and d is not None and d < step.time:
                return False  # a tick would fall inside the run
            if trial.update(step):
                return False
        for mine, theirs in zip(dset.detectors, copies):
            _move_state(mine, theirs)
        dset.refresh()
        self.taken += 1
        self.sizes.append(len(steps))
        return True


@pytest.fixture
def oracle(monkeypatch: pytest.MonkeyPatch) -> Iterator[Oracle]:
    o = Oracle()
    monkeypatch.setattr(DetectorSet, "take_steps", lambda self, steps: o.take_steps(self, steps))
    monkeypatch.setattr(DetectorSet, "takes_step_runs", property(lambda self: True))
    yield o


def _series(history: SeriesHistory) -> list[list[list[float]]]:
    return [tier.rows().tolist() for tier in history._tiers] + [[[float(history.count)]]]


def _picture(monitor: Monitor) -> tuple[object, ...]:
    return (
        monitor.progress_events, repr(monitor.last_progress), monitor.now, monitor.first_time,
        monitor.last_event_time, monitor.version, monitor.throughput_unit,
        monitor.keep_history, _series(monitor.throughput), _series(monitor.loss), repr(list(monitor.loss_nonfinite)),
    )


def _replay(path: Path, runs: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], tuple[object, ...]]:
    monkeypatch.setattr(Monitor, "step_runs", runs)
    monitor = Monitor(keep_lines=0)
    result = replay_module.replay([str(path)], monitor=monitor)
    return [a.to_json() for a in result.alerts], _picture(monitor)


def _check(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    batched = _replay(path, True, monkeypatch)
    plain = _replay(path, False, monkeypatch)
    assert batched[0] == plain[0], f"{path.name}: alerts differ"
    assert batched[1] == plain[1], f"{path.name}: the Monitor differs"


@pytest.mark.parametrize("path", log_paths(), ids=lambda p: p.name)
def test_runs_change_no_alert_on_any_log(path: Path, oracle: Oracle, monkeypatch: pytest.MonkeyPatch) -> None:
    _check(path, monkeypatch)


@pytest.mark.parametrize("seed", range(4))
def test_runs_change_no_alert_on_random_logs(seed: int, tmp_path: Path, oracle: Oracle,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _check(random_log(tmp_path / "r.log", seed, lines=4000), monkeypatch)


@pytest.mark.parametrize("shape", ["progress", "ranks", "quiet"])
def test_speed_shapes_take_most_runs(shape: str, oracle: Oracle, monkeypatch: pytest.MonkeyPatch) -> None:
    path = speed_log(shape, 6000)
    _check(path, monkeypatch)
    assert oracle.offered, "no run was offered"
    assert oracle.taken >= 0.5 * oracle.offered, (oracle.taken, oracle.offered)
    if shape == "progress":
        assert max(oracle.sizes) >= 64, "runs are cut too short"


def test_a_run_with_one_loud_step_is_halved_around_it(oracle: Oracle, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stall inside a run of steady steps: the run is refused, its halves
    offered again, and the alert comes as one at a time would give it."""
    monkeypatch.setattr(Monitor, "step_runs", True)
    steps = [Progress(time=1000.0 + i, source="log", step=i, tokens_per_s=20000.0, loss=2.0) for i in range(64)]
    # a silence of 66 minutes before step 40 (not a whole hour: that reads as
    # the clock stepping): the stall's tick falls inside the run
    steps = steps[:40] + [Progress(time=s.time + 3960, source="log", step=s.step, tokens_per_s=20000.0, loss=2.0)
                          for s in steps[40:]]
    batched = Monitor(keep_lines=0)
    got = [a.to_json() for a in batched.feed_events(list(steps))]
    monkeypatch.setattr(Monitor, "step_runs", False)
    plain = Monitor(keep_lines=0)
    want = [a.to_json() for a in plain.feed_events(list(steps))]
    assert got == want
    assert any('"stall"' in a for a in want), want
    assert oracle.taken >= 2 and oracle.offered > oracle.taken, (oracle.offered, oracle.taken)
    assert _picture(batched) == _picture(plain)



@pytest.mark.parametrize("shape", ["progress", "ranks"])
def test_a_refused_run_turns_where_its_detector_says(shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run refused around a traceback held (``crash``) is cut where that
    detector says it turns (``refused_at``), not halved down to steps fed
    one at a time: the same alerts and Monitor, and far fewer steps fed on
    their own."""
    path = speed_log(shape, 60000)

    def run() -> tuple[list[str], int, Monitor]:
        monitor = Monitor(keep_lines=0)
        fed = [0]
        step = monitor._step

        def counted(event: Progress, out: list[object]) -> list[object]:
            fed[0] += 1
            return step(event, out)  # type: ignore[arg-type]

        monkeypatch.setattr(monitor, "_step", counted)
        alerts = [a.to_json() for a in replay_module.replay([str(path)], monitor=monitor).alerts]
        return alerts, fed[0], monitor

    turned = run()
    with monkeypatch.context() as m:
        m.setattr(DetectorSet, "refused_at", lambda self, steps: None)
        halved = run()
    assert turned[0] == halved[0]
    assert _picture(turned[2]) == _picture(halved[2])
    # (ranks: the straggler's refusals, a judgement or a hang, are still halved)
    assert turned[1] < {"progress": 0.5, "ranks": 0.8}[shape] * halved[1], (turned[1], halved[1])


@pytest.mark.parametrize("odd", ["no loss", "no step", "nan loss", "another unit"])
def test_runs_of_steps_with_gaps_keep_the_charts_as_one_at_a_time(
    odd: str, tmp_path: Path, oracle: Oracle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs taken whole whose lines now and then lack a loss or a step, hold
    a NaN loss or a rate in another unit: the throughput and loss charts'
    series (``Monitor._remember_steps``, in columns where every line has
    both and a finite loss) as the steps one at a time leave them."""
    lines = []
    for i in range(3000):
        stamp = f"2026-11-29 10:{i // 600:02d}:{i // 10 % 60:02d},{i % 10}00"
        step, loss, rate = f"step {i}/100000 | ", f"loss {2 + (i % 7) / 10:.3f} | ", f"{20 + i % 5}.0 Ktok/s"
        if i % 97 == 13:
            if odd == "no loss":
                loss = ""
            elif odd == "no step":
                step = ""
            elif odd == "nan loss":
                loss = "loss nan | "
            else:
                rate = f"{3 + i % 2}.5 samples/s"
        lines.append(f"{stamp} - INFO - train - {step}{loss}{rate}\n")
    path = tmp_path / "gaps.log"
    path.write_text("".join(lines), encoding="utf-8")
    _check(path, monkeypatch)
    # (runs with an odd line in them are taken: but a NaN loss alerts, and its run is cut around it)
    assert oracle.taken and (max(oracle.sizes) >= 97 or odd == "nan loss"), (oracle.taken, oracle.sizes)


def test_a_run_taken_moves_the_clock_to_its_latest_step_not_its_last(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranks' lines a little out of order: a run taken whole leaves the
    Monitor's clock at its latest time, as one at a time does (not at its
    last line's)."""
    times = [1000.0 + i + (0.5 if i == 14 else 0.0) - (0.8 if i == 15 else 0.0) for i in range(16)]
    steps = [Progress(t, f"l:{i}", step=i, tokens_per_s=20000.0, rank=i % 2) for i, t in enumerate(times)]
    pictures = []
    for runs in (True, False):
        monkeypatch.setattr(Monitor, "step_runs", runs)
        monkeypatch.setattr(DetectorSet, "take_steps", lambda self, steps: True)
        monitor = Monitor(keep_lines=0)
        monitor.feed_events(list(steps))
        pictures.append((monitor.now, monitor.last_event_time))
    assert pictures[0] == pictures[1] == (max(times), times[-1])
