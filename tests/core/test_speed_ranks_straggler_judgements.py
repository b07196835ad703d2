"""The straggler's judgements within a run of step lines (``quiet_steps``,
issue 20 speed): found by ``bisect`` where the stamps are in order, they
must be the ones ``_judged`` makes line by line (once per
``_JUDGE_EVERY_S`` of data time, from the next judging time on)."""

from __future__ import annotations

import random

import pytest

from dflash_watch.detectors.straggler import _JUDGE_EVERY_S, _judgements


def _one_by_one(times: list[float], next_judge: float) -> tuple[float, int, int]:
    """``_judged``'s rule, a line at a time (the old loop)."""
    first = last = -1
    for i, t in enumerate(times):
        if t >= next_judge:
            next_judge = t + _JUDGE_EVERY_S
            last = i
            if first < 0:
                first = i
    return next_judge, first, last


@pytest.mark.parametrize("ordered", [True, False])
def test_the_judgements_are_the_ones_made_line_by_line(ordered: bool) -> None:
    """Stamps in order or not, on whole seconds (lines exactly a judging
    period apart, several of one stamp) or not, starting before, at or after
    the next judging time: the same judgements and next judging time."""
    rng = random.Random(7 if ordered else 8)
    for _ in range(3000):
        n = rng.choice((1, 2, 8, 40, 256))
        whole = rng.random() < 0.5
        t = 1000.0
        times = []
        for _ in range(n):
            t += rng.choice((0.0, 0.25, 0.5, 1.0, 2.0)) if whole else rng.uniform(0.0, 1.5)
            times.append(t)
        if not ordered:
            rng.shuffle(times)
        next_judge = rng.choice((float("-inf"), times[0], times[0] + 1.0, times[-1], times[-1] + 0.5,
                                 min(times) + rng.uniform(-2.0, 5.0)))
        assert _judgements(times, next_judge) == _one_by_one(times, next_judge), (times, next_judge)
