"""Tiered min/max/mean history: bounds, downsampling, tier choice."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from dflash_watch import history
from dflash_watch.history import DEFAULT_TIERS, LATEST_ONLY, GpuHistory, SeriesHistory
from dflash_watch.parsers.events import GpuLost, GpuProcess, GpuSample

DAY = 86400.0
T0 = 1_764_410_400.0  # on a minute boundary
GiB = 1 << 30


def test_five_days_eight_gpus_fit_in_20_mb_and_memory_is_fixed() -> None:
    h = SeriesHistory()
    before = h.nbytes
    for i in range(0, 20000, 3):
        h.append(T0 + i, float(i))
    assert h.nbytes == before  # preallocated: no growth with data
    assert before == sum(cap for _, cap in DEFAULT_TIERS) * 4 * 8
    assert 8 * before < 20e6


def test_one_sample_spike_survives_five_days_in_the_oldest_tier() -> None:
    h = SeriesHistory()  # default tiers: the real bound
    flat, spike_at = 76 * GiB, 137
    for i in range(int(5 * DAY) + 150):  # the ring has just wrapped past minutes 0 and 1
        h.append(T0 + i, float(flat + (4 * GiB if i == spike_at else 0)))
    times, mins, maxs, means = h.window(5 * DAY)
    assert h.tier_of(5 * DAY) == 60.0
    assert len(times) == 7201  # a full ring of 7200 minutes plus the open one
    assert times[0] == T0 + 120.0  # the bucket holding the spike is the oldest kept
    assert maxs[0] == flat + 4 * GiB  # the spike, not averaged away
    assert mins[0] == flat and means[0] == pytest.approx(flat + 4 * GiB / 60)
    assert (maxs[1:] == flat).all() and (mins == flat).all()
    # Finer tiers have already forgotten it: it is only in the oldest tier.
    assert h.window(3600)[2].max() == flat and h.window(12 * 3600)[2].max() == flat


def test_window_picks_the_finest_tier_holding_its_start() -> None:
    h = SeriesHistory(((0.0, 100), (10.0, 50), (60.0, 1000)))
    for i in range(1000):
        h.append(T0 + i, float(i))
    # raw holds the last 100 samples (t = 900..999)
    times, mins, maxs, means = h.window(50)
    assert h.tier_of(50) == 0.0 and list(times) == [T0 + t for t in range(949, 1000)]
    assert list(mins) == list(maxs) == list(means) == [float(t) for t in range(949, 1000)]
    # the 10 s tier holds 50 full buckets plus the open one (t = 490..999)
    times, mins, maxs, means = h.window(300)
    assert h.tier_of(300) == 10.0
    assert times[0] == T0 + 690 and times[-1] == T0 + 990  # 690..699 overlaps the window start 699
    assert (mins[0], maxs[0], means[0]) == (690.0, 699.0, 694.5)
    assert (mins[-1], maxs[-1], means[-1]) == (990.0, 999.0, 994.5)  # the open bucket
    # the 60 s tier never wrapped: it holds everything
    times, mins, maxs, means = h.window(10 * DAY)
    assert h.tier_of(10 * DAY) == 60.0 and len(times) == math.ceil(1000 / 60)
    assert mins[0] == 0.0 and maxs[-1] == 999.0
    # an explicit end cuts the newer buckets
    times, *_ = h.window(100, end=T0 + 960)
    assert times[-1] <= T0 + 960


def test_buckets_are_exact_min_max_mean() -> None:
    rng = np.random.default_rng(7)
    steps = rng.uniform(0.05, 3.0, 4000)
    t = T0 + np.cumsum(steps)
    v = rng.normal(50, 10, 4000)
    h = SeriesHistory(((0.0, 10), (7.0, 10000)))
    for ti, vi in zip(t, v):
        h.append(float(ti), float(vi))
    times, mins, maxs, means = h.window(1e9)
    keys = np.floor_divide(t, 7.0)  # what Python's // does
    expected = sorted(set(keys))
    assert list(times) == [k * 7.0 for k in expected]
    for k, tt, lo, hi, mean in zip(expected, times, mins, maxs, means):
        chunk = v[keys == k]
        assert (lo, hi) == (chunk.min(), chunk.max())
        assert mean == pytest.approx(chunk.mean(), rel=1e-12)


def test_ring_wraps_and_keeps_the_newest() -> None:
    h = SeriesHistory(((0.0, 5),))
    for i in range(12):
        h.append(T0 + i, float(i))
    times, mins, _, _ = h.window(1e9)
    assert list(mins) == [7.0, 8.0, 9.0, 10.0, 11.0] and h.count == 12


def test_missing_values_and_a_clock_stepping_back() -> None:
    h = SeriesHistory(((0.0, 10), (10.0, 10)))
    empty = h.window(60)
    assert all(len(a) == 0 for a in empty)
    h.append(T0 + 5, 1.0)
    h.append(T0 + 6, math.nan)
    h.append(T0 + 7, math.inf)
    h.append(T0 + 3, 2.0)  # NTP stepped back: clamped to T0 + 5
    h.append(T0 + 12, 3.0)
    times, mins, maxs, means = h.window(60)
    assert list(times) == [T0 + 5, T0 + 5, T0 + 12] and list(means) == [1.0, 2.0, 3.0]
    assert h.count == 3 and (h.last_time, h.last_value) == (T0 + 12, 3.0)
    h2 = SeriesHistory(((10.0, 10),))
    for t, v in ((T0 + 5, 1.0), (T0 + 3, 2.0), (T0 + 12, 3.0)):
        h2.append(t, v)
    assert list(h2.window(60)[1]) == [1.0, 3.0] and list(h2.window(60)[2]) == [2.0, 3.0]


def test_bad_tiers_are_refused() -> None:
    """Tiers out of order, negative widths, empty rings (no tiers is ``LATEST_ONLY``, allowed)."""
    for tiers in (((60.0, 10), (10.0, 10)), ((-1.0, 10),), ((0.0, 0),)):
        with pytest.raises(ValueError):
            SeriesHistory(tiers)


def test_gpu_history_keeps_series_and_latest_state() -> None:
    g = GpuHistory(tiers=((0.0, 100), (60.0, 100)), max_gpus=2)
    procs = (GpuProcess(10, 5 * GiB, "python", True),)
    g.add(GpuSample(T0, 3, 5 * GiB, 80 * GiB, 0.9, procs))
    g.add(GpuSample(T0 + 1, 3, None, None, None, None))  # not available: no point, no zero
    g.add(GpuSample(T0 + 1, 0, GiB, 80 * GiB))
    g.add(GpuSample(T0 + 2, 3, 6 * GiB, 80 * GiB, 0.5, ()))
    g.add(GpuSample(T0 + 2, 9, GiB, 80 * GiB))  # a third GPU: over the bound
    g.add(GpuLost(T0 + 3, 0, "GPU 0 lost: GPU is lost"))
    assert g.gpus == [0, 3] and g.dropped == 1 and g.used(9) is None
    times, mins, _, _ = g.used(3).window(60)
    assert list(times) == [T0, T0 + 2] and list(mins) == [5 * GiB, 6 * GiB]
    assert g.last(3).util == 0.5 and g.last(3).processes == ()
    assert g.total_bytes(3) == 80 * GiB
    assert g.lost(0).message.startswith("GPU 0 lost") and g.lost(3) is None
    assert g.nbytes == 2 * g.used(0).nbytes


def _state(h: SeriesHistory) -> tuple:
    tiers = [(t.head, t.size, t.key, t.o_t, t.o_min, t.o_max, t.o_sum, t.o_n, list(t.data)) for t in h._tiers]
    return h.count, h.last_time, h.last_value, tiers


@pytest.fixture(params=["kernel", "python"])
def folds(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test below twice: a batch's buckets folded by the compiled
    kernel (``fold_buckets``, where built) and by the Python loop."""
    if request.param == "kernel" and history.KERNELS is None:
        pytest.skip("the compiled kernels are not built here (parsers/native.py)")
    if request.param == "python":
        monkeypatch.setattr(history, "KERNELS", None)
    return str(request.param)


@pytest.mark.parametrize("seed", range(12))
def test_extend_is_append_for_each_pair(seed: int, folds: str) -> None:
    """Batches of any size, rings that wrap inside one batch, bucket edges,
    NaN and None values, a clock stepping back: the same state as appends.
    Half the batches are plain (every value finite, times in order), as a
    catch-up's are: those take whole buckets at once when long enough."""
    rng = random.Random(seed)
    tiers = ((0.0, rng.choice((3, 7, 50, 400))), (rng.choice((2.0, 5.0)), rng.choice((4, 9, 300))), (30.0, 6))
    one, many = SeriesHistory(tiers), SeriesHistory(tiers)
    t = 1000.0
    for _ in range(40):
        flat: list = []
        plain = rng.random() < 0.5
        for _ in range(rng.choice((0, 1, 2, 5, 60, 64, 130, 700))):
            if plain:
                t += rng.choice((0.0, 0.1, 0.4, 1.0, 3.0, 11.0))
                value = rng.choice((rng.uniform(0, 100), float(rng.randint(0, 3)), -0.0, 1e300))
            else:
                t += rng.choice((0.0, 0.4, 1.0, 3.0, 11.0, -4.0))
                value = rng.choice((rng.uniform(0, 100), rng.uniform(0, 100), float("nan"), None, float("inf")))
            flat += (t, value)
            one.append(t, value)
        many.extend(flat)
        assert _state(many) == _state(one)


@pytest.mark.parametrize("width", [0.1, 0.3, 7.7])
def test_extend_finds_bucket_ends_where_the_division_rounds_across(width: float, folds: str) -> None:
    """A width no float holds exactly: times a few ulps around each bucket's
    edge, where ``t // width`` and ``t < (k + 1) * width`` disagree (the
    bucket's end is bisected, then checked on the samples at the cut): the
    same buckets as appends."""
    rng = random.Random(int(width * 10))
    times: list[float] = []
    k = 1_000_003.0
    while len(times) < 3000:
        edge = (k + 1) * width
        for _ in range(rng.randrange(1, 6)):
            t = edge
            for _ in range(rng.randrange(0, 4)):
                t = math.nextafter(t, -math.inf if rng.random() < 0.5 else math.inf)
            times.append(t)
        k += rng.choice((1.0, 1.0, 2.0))
    times.sort()
    assert any(t >= (t // width + 1) * width for t in times)  # the division rounds across an edge
    tiers = ((0.0, 100), (width, 500), (width * 3, 500))
    one, many = SeriesHistory(tiers), SeriesHistory(tiers)
    flat: list[float] = []
    for i, t in enumerate(times):
        flat += (t, float(i % 17))
        one.append(t, float(i % 17))
        if len(flat) >= 2 * 300:
            many.extend(flat)
            flat = []
    many.extend(flat)
    assert _state(many) == _state(one)


@pytest.mark.parametrize("seed", range(8))
def test_latest_only_keeps_the_count_and_latest_sample_of_a_full_history(seed: int) -> None:
    """``LATEST_ONLY`` (headless's throughput and loss: no chart) keeps what
    is still read of them, the count and the latest sample, equal to a full
    history's after the same appends and batches: NaN, None and Inf values
    skipped, a clock stepping back clamped, plain batches and the rest."""
    rng = random.Random(seed)
    full, latest, appended = SeriesHistory(), SeriesHistory(LATEST_ONLY), SeriesHistory(LATEST_ONLY)
    t = 5000.0
    for _ in range(60):
        flat: list = []
        plain = rng.random() < 0.5
        for _ in range(rng.choice((0, 1, 3, 64, 300))):
            t += rng.choice((0.0, 0.5, 2.0) if plain else (0.0, 1.0, -7.0))
            value = rng.uniform(0, 9) if plain else rng.choice((rng.uniform(0, 9), float("nan"), None, float("inf"), 4))
            flat += (t, value)
            appended.append(t, value)
        full.extend(flat)
        latest.extend(flat)
        want = (full.count, full.last_time, full.last_value)
        assert (latest.count, latest.last_time, latest.last_value) == want
        assert (appended.count, appended.last_time, appended.last_value) == want
        assert latest.last_value is None or type(latest.last_value) is float
    assert full.count > 0 and latest.nbytes == 0
    assert [len(c) for c in latest.window(60)] == [0, 0, 0, 0] and latest.tier_of(60) == 0.0
