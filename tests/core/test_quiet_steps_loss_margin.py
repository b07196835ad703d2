"""``loss`` runs whose smoothed loss goes above the divergence margin (issue 20).

A noisy loss (the progress speed shape's: uniform over a wide band) has a
smoothed value that now and then goes above its margin over the recent
minimum for a report or two: a rise starts and is reset, nothing fires.
``loss_steps._walk_margin`` judges such a run one smoothed loss at a time
instead of refusing it; it refuses only a run in which one would fire.
Held here to the per-step path (alerts, deadlines, whole state).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.loss import LossDetector
from dflash_watch.parsers.events import Event, Progress
from tests.core.step_runs import snapshot
from tests.core.test_quiet_steps_loss import _make, _same


def _p(t: float, step: int, loss: float) -> Progress:
    return Progress(t, f"train.log:{step}", step=step, loss=loss, metrics=(("grad_norm", 1.0),))


def _fed(events: Sequence[Event]) -> LossDetector:
    det = _make()()
    for e in events:
        det.update(e)
    return det


def _noisy(n: int, seed: int, low: float = 2.3, width: float = 1.0, dt: float = 0.5) -> list[Progress]:
    rng = random.Random(seed)
    return [_p(dt * i, i, low + width * rng.random()) for i in range(n)]


@pytest.mark.parametrize(("seed", "width", "share"), [(1, 1.0, 0.9), (3, 1.0, 0.9), (1, 2.0, 0.4), (2, 2.0, 0.4)])
def test_a_noisy_loss_is_taken_with_its_short_rises(seed: int, width: float, share: float) -> None:
    """The speed shape's loss (width 1.0) and a wider one: rises above the
    margin start and reset inside runs; the runs are taken and leave the
    rise as the per-step path does (the wider one's spike bound refuses
    some runs)."""
    events = _noisy(3000, seed, width=width)
    det = _make()()
    above = 0
    for e in events:
        assert not det.update(e)
        above += det._above_reports > 0
    assert above, "the stream never goes above the margin"
    offered, taken = _same(events)
    assert taken > share * offered


def test_a_run_that_ends_above_the_margin_leaves_the_rise_open() -> None:
    """A run ending with its smoothed loss above the margin: the rise's start
    and count are the per-step path's (the next reports fire on time)."""
    base = [_p(float(i), i, 2.0) for i in range(60)]
    run = [_p(60.0 + i, 60 + i, 2.0 if i < 10 else 3.0) for i in range(40)]
    det = _fed(base)
    commit = det.quiet_steps(run)
    assert commit is not None
    commit()
    plain = _fed([*base, *run])
    assert plain._above_since is not None and plain._above_reports > 0
    assert snapshot(det) == snapshot(plain)
    _same([*base, *run, *(_p(100.0 + i, 100 + i, 3.0) for i in range(600))])


@pytest.mark.parametrize(("end", "quiet"), [(299.0, True), (300.0, False)])
def test_a_rise_that_would_fire_inside_the_run_refuses_it(end: float, quiet: bool) -> None:
    """A rise started before the run (fed one at a time): the run is taken
    only where its last report is still short of loss_divergence_s."""
    c = DetectorConfig()
    assert c.loss_divergence_s == 300.0
    base = [_p(float(i), i, 2.0) for i in range(60)]
    high = [_p(60.0 + i, 60 + i, 3.0) for i in range(10)]  # the smoothed loss crosses at the 6th
    det = _fed([*base, *high])
    since = det._above_since
    assert since is not None
    n = int(since + end - 70.0) + 1
    run = [_p(70.0 + i, 70 + i, 3.0) for i in range(n)]
    assert run[-1].time == since + end
    before = snapshot(det)
    commit = det.quiet_steps(run)
    assert snapshot(det) == before
    assert (commit is not None) is quiet
    _same([*base, *high, *run, *(_p(80.0 + n + i, 80 + n + i, 2.0) for i in range(100))])


def test_a_rise_short_of_its_reports_is_taken() -> None:
    """Long enough but with fewer than loss_divergence_min_reports reports
    above: no fire (both conditions are needed)."""
    base = [_p(float(i), i, 2.0) for i in range(60)]
    high = [_p(60.0 + 100.0 * i, 60 + i, 3.0) for i in range(9)]
    events = [*base, *high]
    _same(events, loss_divergence_min_reports=20, loss_divergence_window_s=1e6)
    det = LossDetector(DetectorConfig(loss_divergence_min_reports=20, loss_divergence_window_s=1e6))
    for e in base:
        det.update(e)
    assert det.quiet_steps(high) is not None


def test_a_smoothed_loss_right_at_the_margin_after_a_rise() -> None:
    """A short rise (the one look cannot clear the run) then a long flat loss
    exactly at the margin (``<=``: not above): taken, and nothing fires."""
    c = DetectorConfig()
    margin = 2.0 + c.loss_divergence_margin * abs(2.0) + 1e-12
    base = [_p(float(i), i, 2.0) for i in range(60)]
    run = [_p(60.0 + i, 60 + i, 3.0 if i < 6 else margin) for i in range(400)]
    det = _fed(base)
    assert det.quiet_steps(run) is not None
    plain = _fed([*base, *run])
    assert plain._above_since is None
    _same([*base, *run])
