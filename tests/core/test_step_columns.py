"""``parsers.step_columns``: a run's fields read in one pass (C where built)
are the comprehensions' values, the same objects, on either path."""

from __future__ import annotations

import random

import pytest

from dflash_watch.parsers import native
from dflash_watch.parsers.events import Progress
from dflash_watch.parsers.step_columns import columns_of, read

_ALL = ("time", "source", "step", "total_steps", "tokens_per_s", "loss", "rank", "metrics", "step_seconds",
        "clocked", "rate", "rate_unit", "elapsed_s")


def _events(seed: int, n: int) -> list[Progress]:
    rng = random.Random(seed)
    pool = [None, 0, 3, -2, 1.5, float("nan"), float("inf"), 10**30]
    return [
        Progress(rng.random() * 1e9, f"f.log:{i}", step=rng.choice(pool), total_steps=rng.choice(pool),
                 loss=rng.choice(pool), rank=rng.choice([None, 0, 7]), metrics=rng.choice([(), (("lr", 1e-3),)]),
                 clocked=rng.random() < 0.8, rate=rng.choice(pool), rate_unit=rng.choice([None, "tok/s"]),
                 elapsed_s=rng.choice([None, 3.0]))
        for i in range(n)
    ]


@pytest.mark.parametrize("seed", range(20))
def test_read_is_one_comprehension_per_field(seed: int) -> None:
    rng = random.Random(seed)
    steps = _events(seed, rng.randrange(0, 300))
    names = tuple(rng.sample(_ALL, rng.randrange(1, len(_ALL) + 1)))
    which = columns_of(*names)
    want = tuple([getattr(p, name) for p in steps] for name in names)
    for got in (read(steps, which), which.python(steps), read(tuple(steps), which)):
        assert type(got) is tuple and len(got) == len(names)
        for column, expected in zip(got, want):
            assert type(column) is list and len(column) == len(expected)
            assert all(a is b for a, b in zip(column, expected))


def test_a_name_that_is_no_field() -> None:
    with pytest.raises(KeyError):
        columns_of("time", "nope")


needs_kernels = pytest.mark.skipif(native.KERNELS is None, reason="the compiled kernels are not built here")


@needs_kernels
def test_the_kernel_leaves_other_lists_to_python() -> None:
    kernels = native.KERNELS
    assert kernels is not None
    which = columns_of("time", "rank")
    steps = _events(1, 5)
    assert kernels.columns(steps, which.at) == ([p.time for p in steps], [p.rank for p in steps])
    assert kernels.columns([], which.at) == ([], [])

    class Other:
        time, rank = 1.0, 2

    assert kernels.columns([*steps, Other()], which.at) is None  # not exactly a Progress

    class Renamed(Progress):  # the same slots, a field read through a property
        __slots__ = ()

        @property  # type: ignore[misc]
        def rank(self) -> int:
            return 99

    odd = Progress(5.0, "x", rank=3)
    object.__setattr__(odd, "__class__", Renamed)
    assert odd.rank == 99
    assert kernels.columns([*steps, odd], which.at) is None
    assert read([*steps, odd], which)[1][-1] == 99
    assert read([*steps, Other()], which) == ([p.time for p in steps] + [1.0], [p.rank for p in steps] + [2])
    with pytest.raises(IndexError):
        kernels.columns(steps, (0, 99))


@pytest.mark.parametrize("seed", range(20))
def test_metric_names_is_the_set_comprehension(seed: int) -> None:
    from itertools import chain

    from dflash_watch.parsers.step_columns import metric_names

    rng = random.Random(seed)
    names = ["lr", "grad_norm", "pad_eff", "loss_scale", "x" * 40]
    metrics = [tuple((rng.choice(names), rng.random()) for _ in range(rng.randrange(0, 4)))
               for _ in range(rng.randrange(0, 50))]
    want = {m[0] for m in chain.from_iterable(metrics)}
    got = metric_names(metrics)
    assert got == want and list(got) == list(want)  # the same set, the same order
    if native.KERNELS is not None:
        assert native.KERNELS.metric_names(metrics) == want
        assert native.KERNELS.metric_names([*metrics, [("lr", 1.0)]]) is None  # a list, not a tuple
        assert native.KERNELS.metric_names([*metrics, ((),)]) is None  # an empty pair: Python raises
        assert native.KERNELS.metric_names([*metrics, (([], 1.0),)]) is None  # an unhashable name
        assert native.KERNELS.metric_names(tuple(metrics)) is None
    assert metric_names([*metrics, [("lr", 1.0)]]) == want | {"lr"}
    with pytest.raises(IndexError):
        metric_names([*metrics, ((),)])
