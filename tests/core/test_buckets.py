"""Bucket boundaries (issue 11): the DP is exact, the figures are the formula.

Pure: numpy and lists, no files. The DP is checked against every
combination of boundaries on small inputs, against a plain O(K D^2) DP
on larger ones, and the efficiency figures against a per-sample loop.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dflash_watch.buckets.batching import fill_batches, simulate
from dflash_watch.buckets.optimal import Histogram, TooLarge, optimal_boundaries, padded_tokens
from dflash_watch.buckets.plan import layout, make_plan, parse_boundaries
from tests.core.test_purity import ROOT, violations


def padded_by_loop(lengths: list[int], boundaries: list[int]) -> int:
    """The definition, one sample at a time: padded to the upper boundary of
    the bucket (b[i-1], b[i]] it falls in; above the last: left out."""
    total = 0
    for x in lengths:
        for lo, hi in zip(boundaries, boundaries[1:]):
            if lo < x <= hi:
                total += hi
                break
    return total


def brute_best(lengths: list[int], k: int, candidates: list[int]) -> int:
    """The least padded total over every choice of up to k-1 inner
    boundaries among ``candidates`` (the last is the longest length)."""
    top = max(lengths)
    inner = sorted(c for c in set(candidates) if 0 < c < top)
    best = padded_by_loop(lengths, [0, top])
    for r in range(1, k):
        for cut in itertools.combinations(inner, r):
            best = min(best, padded_by_loop(lengths, [0, *cut, top]))
    return best


def plain_dp(lengths: list[int], k: int) -> int:
    """Textbook O(K D^2) DP over the distinct lengths, no cleverness."""
    v = sorted(set(lengths))
    c = [lengths.count(x) for x in v]
    cum = [0, *itertools.accumulate(c)]
    d = len(v)
    inf = float("inf")
    f = [0] + [inf] * d
    best = inf
    for _ in range(min(k, d)):
        g = [inf] * (d + 1)
        for j in range(1, d + 1):
            g[j] = min(f[i] + v[j - 1] * (cum[j] - cum[i]) for i in range(j))
        f = g
        best = min(best, f[d])
    return int(best)


lengths_st = st.lists(st.integers(1, 60), min_size=1, max_size=30)


@settings(max_examples=150, deadline=None)
@given(lengths=lengths_st, k=st.integers(1, 5))
def test_dp_equals_every_combination_of_distinct_lengths(lengths: list[int], k: int) -> None:
    b = optimal_boundaries(Histogram.of(np.array(lengths)), k)
    assert b[0] == 0 and b[-1] == max(lengths)
    assert list(b) == sorted(set(b.tolist())) and len(b) - 1 <= k
    assert padded_by_loop(lengths, b.tolist()) == brute_best(lengths, k, lengths)


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(1, 9), min_size=1, max_size=12), k=st.integers(1, 3))
def test_no_boundary_off_the_lengths_does_better(lengths: list[int], k: int) -> None:
    """Every integer boundary, not only lengths that occur: the claim the DP rests on."""
    b = optimal_boundaries(Histogram.of(np.array(lengths)), k)
    assert padded_by_loop(lengths, b.tolist()) == brute_best(lengths, k, list(range(1, 10)))


def test_divide_and_conquer_equals_the_plain_dp_on_many_distinct_lengths() -> None:
    rng = random.Random(11)
    for _ in range(6):
        lengths = [int(rng.lognormvariate(5, 0.9)) + 1 for _ in range(rng.randint(200, 600))]
        for k in (2, 5, 9):
            b = optimal_boundaries(Histogram.of(np.array(lengths)), k)
            assert padded_by_loop(lengths, b.tolist()) == plain_dp(lengths, k), (k, b)


def test_fewer_distinct_lengths_than_k_gives_one_exact_bucket_each() -> None:
    plan = make_plan(np.array([5, 9, 5, 3, 9]), 6)
    assert plan.optimal.boundaries == (0, 3, 5, 9)
    assert plan.optimal.efficiency == 1.0 and len(plan.optimal.buckets) == 3 and plan.k == 6


def test_efficiency_is_real_over_padded_per_bucket_and_in_all() -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(1, 3000, 5000)
    bounds = (0, 700, 1300, 2100, 3000)
    lay = layout(Histogram.of(x), bounds)
    assert lay.padded_tokens == padded_by_loop(x.tolist(), list(bounds))
    assert lay.efficiency == pytest.approx(int(x.sum()) / padded_by_loop(x.tolist(), list(bounds)))
    for b in lay.buckets:
        inside = x[(x > b.lower) & (x <= b.upper)]
        assert (b.samples, b.tokens, b.padded_tokens) == (inside.size, int(inside.sum()), inside.size * b.upper)


def test_compare_counts_and_leaves_out_what_lies_above_its_last_boundary() -> None:
    x = np.array([10, 20, 30, 40, 50, 60])
    plan = make_plan(x, 2, compare=parse_boundaries("0,25,45"))
    assert plan.compare is not None
    assert plan.compare.left_out == 2 and plan.compare.samples == 4
    assert plan.compare.padded_tokens == padded_by_loop(x.tolist(), [0, 25, 45]) == 25 * 2 + 45 * 2
    assert plan.optimal.left_out == 0 and plan.optimal.samples == 6


def test_max_len_and_empty_samples_are_counted_and_left_out() -> None:
    plan = make_plan(np.array([0, 3, 4, 100, 200, 0, 50]), 2, max_len=50)
    assert (plan.samples, plan.over_max_len, plan.empty, plan.kept) == (7, 2, 2, 3)
    assert plan.optimal.boundaries[-1] == 50 and plan.optimal.samples == 3


@pytest.mark.parametrize("text, fragment", [
    ("0,770,700", "strictly increasing (770 then 700)"),
    ("0,5,5", "strictly increasing"),
    ("-1,5", ">= 0"),
    ("0,1.5,8", "'1.5' is not a whole number"),
    ("0,,8", "comma-separated"),
    ("0", "at least one boundary"),
])
def test_bad_compare_boundaries_say_why(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=None) as err:
        parse_boundaries(text)
    assert fragment in str(err.value)


def test_compare_without_a_leading_zero_gets_one() -> None:
    assert parse_boundaries("770, 1216,8192") == (0, 770, 1216, 8192)


def test_totals_that_could_overflow_int64_are_refused() -> None:
    with pytest.raises(TooLarge):
        Histogram.of(np.array([1 << 61, 1 << 61, 5]))


def fill_by_loop(lengths: list[int], budget: int) -> tuple[int, int]:
    padded = batches = 0
    top = count = 0
    for x in lengths:
        if count and (count + 1) * max(top, x) > budget:
            padded += count * top
            batches += 1
            top = count = 0
        top, count = max(top, x), count + 1
    if count:
        padded, batches = padded + count * top, batches + 1
    return padded, batches


@settings(max_examples=150, deadline=None)
@given(lengths=st.lists(st.integers(1, 300), min_size=1, max_size=400), budget=st.integers(1, 2000))
def test_greedy_fill_equals_the_sample_by_sample_loop(lengths: list[int], budget: int) -> None:
    padded, batches, over = fill_batches(np.array(lengths), budget)
    assert (padded, batches) == fill_by_loop(lengths, budget)
    assert over == sum(x > budget for x in lengths)


def test_batches_are_padded_to_their_longest_sample_within_one_bucket() -> None:
    rng = np.random.default_rng(5)
    x = rng.integers(1, 1000, 3000)
    bounds = np.array([0, 300, 600, 1000])
    # A budget no batch reaches: one batch per bucket, padded to its longest sample.
    whole = simulate(x, bounds, budget=10**9)
    tops = [int(x[(x > lo) & (x <= hi)].max()) * int(((x > lo) & (x <= hi)).sum())
            for lo, hi in zip(bounds, bounds[1:])]
    assert (whole.batches, whole.padded_tokens, whole.tokens) == (3, sum(tops), int(x.sum()))
    # A budget of one token: every sample alone, no padding at all.
    alone = simulate(x, bounds, budget=1)
    assert (alone.batches, alone.padded_tokens, alone.over_budget) == (x.size, int(x.sum()), int((x > 1).sum()))
    mid = simulate(x, bounds, budget=8192)
    assert mid.tokens == int(x.sum()) and layout(Histogram.of(x), bounds).efficiency <= mid.efficiency <= 1.0
    assert simulate(x, bounds, budget=8192) == mid  # the seeded shuffle repeats
    # Samples above the last boundary are in no bucket, so in no batch.
    part = simulate(x, np.array([0, 300, 600]), budget=8192)
    assert part.tokens == int(x[x <= 600].sum())


def test_padded_tokens_helper_marks_lengths_above_the_last_boundary() -> None:
    hist = Histogram.of(np.array([1, 2, 2, 9]))
    total, where = padded_tokens(hist, [0, 2])
    assert total == 2 * 3 and where.tolist() == [1, 1, 2]


def test_the_computing_modules_are_pure() -> None:
    """The DP, the batch filling, the plan and its formatting read no files,
    clocks or threads (the readers in lengths.py are the only I/O)."""
    found = []
    for name in ("optimal", "batching", "plan", "report"):
        path = ROOT / "dflash_watch" / "buckets" / f"{name}.py"
        found += violations(path.read_text(encoding="utf-8"), path.name)
    assert found == []
