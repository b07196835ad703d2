"""``SeriesDeduper.peek``'s all-new shortcut (``fresh_series`` in C) against
its Python reading and against ``is_copy`` one line at a time.

Steady training of one rank makes every step line new; the kernel picks
each series' steps and times in one pass where it can prove that, and
hands every other run to Python. Either way ``peek`` must answer, and
``take`` leave, what the dedupers fed line by line would.
"""

from __future__ import annotations

import copy
import random
import types
from typing import Any

import pytest

from dflash_watch.detectors import steps as steps_module
from dflash_watch.detectors.steps import SeenSeries, SeriesDeduper
from dflash_watch.parsers import native

needs_kernels = pytest.mark.skipif(native.KERNELS is None, reason=f"no compiled kernels: {native.status()}")


def _line(step: Any, time: float, rank: Any) -> types.SimpleNamespace:
    return types.SimpleNamespace(step=step, time=time, rank=rank)


def _state(d: SeriesDeduper) -> list[Any]:
    return [(list(s._recent), {k: list(v) for k, v in s._times.items()}, s._rank) for s in d.of]


def _answer(seen: SeenSeries) -> Any:
    return list(seen.new), [
        (k, list(p.steps), list(p.times), list(p.new), p.rank, p.fresh) for k, p in seen.parts
    ]


def _history(rng: random.Random) -> SeriesDeduper:
    d = SeriesDeduper(5.0)
    t = 0.0
    tops = [rng.randrange(0, 50), rng.randrange(0, 50)]
    for _ in range(rng.randrange(0, 90)):
        k = rng.random() < 0.4
        tops[k] += 1
        t += rng.uniform(0.0, 0.5)
        d.of[k].is_copy(_line(tops[k], t, rng.choice([None, None, None, 0, 2])))  # type: ignore[arg-type]
    return d


def _run(rng: random.Random, d: SeriesDeduper) -> tuple[list[Any], list[float], list[Any], list[Any]]:
    n = rng.randrange(1, 160)
    known = [max(s._times, default=0) for s in d.of]
    tops = [k + rng.choice([1, 1, 1, 0, -3, -70]) for k in known]
    odd = rng.random() < 0.5  # one odd line somewhere in half the runs
    steps, times, ranks, bars = [], [], [], []
    t = rng.uniform(0, 60)
    for i in range(n):
        k = rng.random() < rng.choice([0.0, 0.3, 1.0])
        tops[k] += rng.choice([1, 1, 1, 1, 2]) if not (odd and rng.random() < 0.03) else rng.choice([0, -1])
        step: Any = tops[k]
        rank: Any = None
        bar: Any = bool(k)
        t += rng.uniform(0.0, 0.2)
        if odd and rng.random() < 0.02:
            kind = rng.randrange(6)
            if kind == 0:
                step = None
            elif kind == 1:
                step = float(step)
            elif kind == 2:
                step = 2**70 + step
            elif kind == 3:
                rank = rng.randrange(3)
            elif kind == 4:
                bar = int(k)
            else:
                step = True if step == 1 else step
        steps.append(step)
        times.append(t)
        ranks.append(rank)
        bars.append(bar)
    return steps, times, ranks, bars


@needs_kernels
@pytest.mark.parametrize("seed", range(40))
def test_peek_and_take_are_the_python_reading_and_one_at_a_time(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    taken = refused = 0
    for _ in range(25):
        d = _history(rng)
        steps, times, ranks, bars = _run(rng, d)
        kernels = native.KERNELS
        assert kernels is not None
        split = kernels.fresh_series(steps, times, ranks, bars, d.of[0]._times, d.of[1]._times)
        taken += split is not None
        refused += split is None
        py, one = copy.deepcopy(d), copy.deepcopy(d)

        seen = d.peek(steps, times, ranks, bars)
        with monkeypatch.context() as m:
            m.setattr(steps_module, "KERNELS", None)
            seen_py = py.peek(steps, times, ranks, bars)
        assert _answer(seen) == _answer(seen_py)
        # The ground truth: each line fed to its series' deduper in order.
        new = [i for i, (s, t, r, b) in enumerate(zip(steps, times, ranks, bars))
               if not one.of[bool(b)].is_copy(_line(s, t, r))]  # type: ignore[arg-type]
        assert list(seen.new) == new
        if split is not None:
            assert list(seen.new) == list(range(len(steps)))
            assert all(p.fresh for _, p in seen.parts)
        d.take(seen)
        py.take(seen_py)
        assert _state(d) == _state(py) == _state(one)
    assert taken >= 3 and refused >= 3, (taken, refused)


@needs_kernels
def test_what_fresh_series_refuses() -> None:
    kernels = native.KERNELS
    assert kernels is not None
    t = [1.0, 2.0, 3.0]
    plain = ([5, 6, 7], t, [None] * 3, [False, True, False])
    assert kernels.fresh_series(*plain, {}, {}) == ([5, 7], [1.0, 3.0], [6], [2.0])
    assert kernels.fresh_series(*plain, {4: [0.0], 8: [0.0]}, {5: [0.0], 7: [0.0]}) is not None
    for steps, ranks, bars, known0, known1 in (
        ([5, 6, 5], [None] * 3, [False, True, False], {}, {}),  # a step line's step not above its last
        ([5, 6, 7], [None, 0, None], [False, True, False], {}, {}),  # a rank
        ([5, 6, 7], [None] * 3, [False, 1, False], {}, {}),  # not exactly a bool
        ([5, 6.0, 7], [None] * 3, [False, True, False], {}, {}),  # not exactly an int
        ([5, True, 7], [None] * 3, [False, True, False], {}, {}),  # (a subclass's == and hash are its own)
        ([5, None, 7], [None] * 3, [False, True, False], {}, {}),
        ([5, 2**64, 7], [None] * 3, [False, True, False], {}, {}),  # past 64 bits
        ([5, 6, 7], [None] * 3, [False, True, False], {6: [0.0]}, {}),  # remembered within the run's range
        ([5, 6, 7], [None] * 3, [False, True, False], {}, {6: [0.0]}),
        ([5, 6, 7], [None] * 3, [False, True, False], {5.5: [0.0]}, {}),  # a remembered step not an int
        ([5, 6, 7], [None] * 3, [False, True, False], {True: [0.0]}, {}),
        ([], [], [], {}, {}),
    ):
        assert kernels.fresh_series(steps, t[: len(steps)], ranks, bars, known0, known1) is None
    assert kernels.fresh_series([5, 6], t, [None] * 3, [False] * 3, {}, {}) is None  # lengths differ
    assert kernels.fresh_series((5, 6, 7), t, [None] * 3, [False] * 3, {}, {}) is None  # not a list
    # A remembered step past 64 bits cannot be one of the run's.
    # (its reading as -1 on the overflow is not one of the run's either).
    for huge in (2**80, -(2**80)):
        assert kernels.fresh_series([-2, 0, 3], t, [None] * 3, [False] * 3, {huge: [0.0]}, {}) is not None
