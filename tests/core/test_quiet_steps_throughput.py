"""throughput_drop's batching (issue 20, ``ThroughputDrop.quiet_steps``)
against its per-step path.

Every log the project has (fixtures, shared real-world logs, the speed
shapes, random logs) is fed one step at a time and in offered runs; the
alerts, deadlines and whole state must match (``tests.core.step_runs``).
Then the edges of the proof: values at the drop and rise thresholds, the
baseline learned mid-run, given or forgotten by ``set_baseline``, an open
episode, the window filling, the warm-up, copies from many ranks and the
deduper forgetting, unsorted and jumping stamps, relaunches, another
loop's bar, the next epoch's bar, another unit, unclocked lines, the
window's cap. An ask must change nothing. Last, the speed logs' runs must
be taken, so that the fast path cannot quietly become "always None".
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import pytest

from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.registry import DetectorSet
from dflash_watch.detectors.throughput import ThroughputDrop
from dflash_watch.parsers.events import Crash, Event, ProcessExit, Progress
from tests.core.step_runs import LOG_COUNT, all_log_events, compare_runs, snapshot

_SEEDS = (1, 2, 3)


def _make() -> ThroughputDrop:
    return ThroughputDrop(DetectorConfig(tz="UTC"))


@pytest.mark.parametrize("index", range(LOG_COUNT))
def test_every_log_batched_as_one_at_a_time(index: int) -> None:
    name, events = all_log_events()[index]
    for seed in _SEEDS:
        compare_runs(_make, events, seed=seed, label=f"{name} seed {seed}")


# -- runs built on the proof's edges -------------------------------------------

def _step(t: float, step: int | None, rate: float, *, rank: int | None = None, total: int | None = 100_000,
          unit: str = "tok/s", clocked: bool = True) -> Progress:
    return Progress(t, f"log:{step}", step=step, total_steps=total, rank=rank, rate=rate, rate_unit=unit,
                    clocked=clocked)


def _steady(n: int, *, t0: float = 1000.0, every: float = 1.0, step0: int = 0, rate: float = 1000.0,
            jitter: float = 0.0, seed: int = 0, uneven: float = 0.0) -> list[Progress]:
    """A run reporting every ``every`` s (+- ``uneven`` of it) at ``rate``
    (+- ``jitter`` of it)."""
    rng = random.Random(seed)
    out: list[Progress] = []
    t = t0
    for i in range(n):
        out.append(_step(t, step0 + i, rate * (1 + rng.uniform(-jitter, jitter))))
        t += every * (1 + rng.uniform(-uneven, uneven))
    return out


def _both_ways(events: Sequence[Event], make: Callable[[], ThroughputDrop] = _make,
               seeds: range = range(8)) -> tuple[int, int]:
    offered = taken = 0
    for seed in seeds:
        o, t = compare_runs(make, events, seed=seed, label=f"seed {seed}")
        offered += o
        taken += t
    return offered, taken


def _fed(events: Sequence[Event], det: ThroughputDrop | None = None) -> ThroughputDrop:
    det = det or _make()
    s = DetectorSet([det])
    for e in events:
        s.update(e)
    return det


def _learned(n: int = 400, rate: float = 1000.0) -> list[Progress]:
    """Warm-up and learning over (300 s), a steady baseline ``rate``."""
    return _steady(n, rate=rate, jitter=0.02)


def test_steady_training_is_taken_and_equal() -> None:
    events = _learned(1500)
    offered, taken = _both_ways(events)
    assert taken > 0.8 * offered
    det = _fed(events[:400])
    assert det.baseline is not None
    assert det.quiet_steps(_steady(64, t0=1400.0, step0=400, jitter=0.02)) is not None


def test_an_uneven_cadence() -> None:
    """Intervals that differ: the cadence re-read every 8 reports moves."""
    events = _steady(1200, jitter=0.02, uneven=0.4, seed=2)
    offered, taken = _both_ways(events)
    assert taken > 0.8 * offered


def test_a_slow_cadence() -> None:
    """A report every 90 s: the warm-up is one report, and learning ends on
    its fifth value, not on its 300 s."""
    events = _steady(60, every=90.0, jitter=0.02, uneven=0.2, seed=4)
    offered, taken = _both_ways(events, seeds=range(24))
    assert taken > 0.5 * offered


@pytest.mark.parametrize("shift", [-1e-9, 0.0, 1e-9])
def test_values_at_the_drop_threshold(shift: float) -> None:
    det = _make()
    det.set_baseline(1000.0)
    lo = (1.0 - det.config.throughput_drop_frac) * 1000.0
    value = lo * (1.0 + shift)
    head = _steady(100)  # warm-up and a window at the baseline
    run = _steady(40, t0=1100.0, step0=100, rate=value)
    _fed(head, det)
    quiet = det.quiet_steps(run)
    assert (quiet is None) == (value < lo)

    def make() -> ThroughputDrop:
        d = _make()
        d.set_baseline(1000.0)
        return d

    _both_ways(head + run + _steady(200, t0=1140.0, step0=140, rate=value), make=make)


@pytest.mark.parametrize("shift", [-1e-9, 0.0, 1e-9])
def test_values_at_the_rise_threshold(shift: float) -> None:
    det = _fed(_learned())
    base = det.baseline
    assert base is not None
    hi = det._rise_factor * base
    value = hi * (1.0 + shift)
    run = _steady(30, t0=1400.0, step0=400, rate=value)
    assert (det.quiet_steps(run) is None) == (value > hi)
    # A rise sustained long enough re-learns the baseline: the per-step path
    # tracks it, the batched one must refuse and feed it one at a time.
    _both_ways(_learned() + _steady(500, t0=1400.0, step0=400, rate=value))


def test_a_given_baseline_does_not_rise() -> None:
    det = _make()
    det.set_baseline(1000.0)
    _fed(_steady(100), det)
    assert det.quiet_steps(_steady(30, t0=1100.0, step0=100, rate=5000.0)) is not None

    def make() -> ThroughputDrop:
        d = _make()
        d.set_baseline(1000.0)
        return d

    _both_ways(_steady(100) + _steady(300, t0=1100.0, step0=100, rate=5000.0), make=make)


def test_the_baseline_learned_mid_run() -> None:
    det = _fed(_steady(300, jitter=0.02))
    assert det.baseline is None
    run = _steady(64, t0=1300.0, step0=300, jitter=0.02, seed=3)
    commit = det.quiet_steps(run)
    assert commit is not None
    commit()
    assert det.baseline is not None
    _both_ways(_steady(800, jitter=0.02), seeds=range(16))


def _after_set_baseline(before: Sequence[Event], given: float | None, later: Sequence[Progress],
                        seed: int = 7) -> int:
    """Both ways with ``set_baseline(given)`` between ``before`` and
    ``later`` (``compare_runs`` has no call between events): the runs taken."""
    plain, batched = _make(), _make()
    ps, bs = DetectorSet([plain]), DetectorSet([batched])
    for e in before:
        ps.update(e)
        bs.update(e)
    plain.set_baseline(given)
    batched.set_baseline(given)
    rng = random.Random(seed)
    i = 0
    taken = 0
    while i < len(later):
        n = rng.choice((2, 3, 5, 16, 64))
        run = [e for e in later[i:i + n] if isinstance(e, Progress)]
        alerts = [a.to_json() for e in run for a in ps.update(e)]
        commit = batched.quiet_steps(run)
        if commit is None:
            assert alerts == [a.to_json() for e in run for a in bs.update(e)]
        else:
            assert alerts == []
            commit()
            taken += 1
        assert snapshot(batched) == snapshot(plain), f"baseline {given}, run at {i}"
        i += n
    return taken


@pytest.mark.parametrize("given", [1000.0, 1300.0, 800.0, None])
def test_set_baseline_between_runs(given: float | None) -> None:
    """Given, changed, forgotten (learned again with the window's old values
    still in it): each followed by runs."""
    for seed in range(4):
        taken = _after_set_baseline(_learned(500), given, _steady(600, t0=1500.0, step0=500, jitter=0.02, seed=5),
                                    seed=seed)
        if given != 1300.0:  # 1300 * 0.7 < 1000 * (1 +- 0.02): quiet
            assert taken > 0, given


def test_learning_again_at_a_slow_cadence() -> None:
    """Forgotten at a report every 100 s: 300 s pass on the fourth value,
    and learning ends on the fifth."""
    before = _steady(30, every=100.0, jitter=0.02, seed=1)
    later = _steady(30, t0=4000.0, every=100.0, step0=30, jitter=0.02, seed=2)
    assert sum(_after_set_baseline(before, None, later, seed=seed) for seed in range(12)) > 0


def test_an_open_drop_that_stays_down_is_taken_in_runs() -> None:
    """A run that slowed and stayed slow (the case the tool is for): with
    the drop open, runs that keep the smoothed rate under the threshold are
    taken (the worst moves with them, deeper here), and the recovery is
    fed one step at a time, its resolve alert the same."""
    events = (_learned() + _steady(300, t0=1400.0, step0=400, rate=400.0, jitter=0.05, seed=3)
              + _steady(300, t0=1700.0, step0=700, rate=250.0, jitter=0.05, seed=4)
              + _steady(300, t0=2000.0, step0=1000))
    offered, taken = _both_ways(events)
    assert taken > 0.5 * offered
    det = _fed(events[:600])
    assert det.episode.active and det._worst is not None
    before = det._worst
    commit = det.quiet_steps(_steady(64, t0=1600.0, step0=600, rate=250.0))
    assert commit is not None
    commit()
    assert det.episode.active and det._worst < before  # type: ignore[operator]
    s = DetectorSet([_make()])
    states = [a.state for e in events for a in s.update(e)]
    assert states == ["firing", "resolved"]  # fired once, resolved once


def test_a_dip_towards_the_sustain_time_is_taken_until_it_fires() -> None:
    """Low, no drop open yet: runs before the sustain time are taken (only
    the worst moves), the run that reaches it is fed one step at a time
    and fires as it would; a dip shorter than it, never."""
    for low_s in (60, 89, 91, 95, 200):
        events = (_learned() + _steady(low_s, t0=1400.0, step0=400, rate=450.0, jitter=0.03, seed=low_s)
                  + _steady(200, t0=1400.0 + low_s, step0=400 + low_s))
        s = DetectorSet([_make()])
        fired = [a.state for e in events for a in s.update(e)]
        if low_s in (60, 200):  # well under and well over the sustain time
            assert ("firing" in fired) == (low_s == 200), (low_s, fired)
        offered, taken = _both_ways(events, seeds=range(6))
        assert taken > 0.5 * offered


def test_an_open_drop_is_fed_one_at_a_time_where_it_could_change() -> None:
    """Refused with the drop open: a run back over the drop threshold (the
    recovery, or a rate between the threshold and the recovery share), a
    relaunch after a silence, the first low step's start not set."""
    events = _learned() + _steady(300, t0=1400.0, step0=400, rate=400.0)
    det = _fed(events)
    assert det.episode.active
    assert det.quiet_steps(_steady(64, t0=1700.0, step0=700)) is None  # back to the baseline
    assert det.quiet_steps(_steady(64, t0=1700.0, step0=700, rate=750.0)) is None  # over the threshold, under 85%
    assert det.quiet_steps(_steady(8, t0=5000.0, step0=700, rate=400.0)) is None  # a silence: a relaunch
    for tail in (
        _steady(300, t0=1700.0, step0=700, rate=750.0) + _steady(100, t0=2000.0, step0=1000, rate=400.0),
        _steady(50, t0=5000.0, step0=0, rate=400.0) + _steady(300, t0=5050.0, step0=50, rate=400.0),
        _steady(300, t0=1700.0, step0=700, rate=690.0, jitter=0.02, seed=5),  # around the threshold
    ):
        _both_ways(events + tail, seeds=range(6))


def test_an_open_drop_at_the_windows_cap() -> None:
    """60 reports a second, down by half and staying there: the window at
    its cap slides on copies as the detector slides it."""
    up = [_step(1000.0 + i / 60.0, i, 1000.0 * (1 + 0.01 * ((i * 7) % 5 - 2))) for i in range(60 * 400)]
    down = [_step(1400.0 + i / 60.0, 60 * 400 + i, 500.0 * (1 + 0.02 * ((i * 3) % 7 - 3))) for i in range(60 * 200)]
    offered, taken = _both_ways(up + down, seeds=range(2))
    assert taken > 0.5 * offered
    assert _fed(up + down).episode.active


def test_the_window_filling_and_a_short_dip() -> None:
    # The first judged reports (a window of one, two, three), then a dip of
    # 60 s (no alert), judged while it lasts and after: the window still
    # holds its low values when the rates are back.
    events = _learned(420) + _steady(60, t0=1420.0, step0=420, rate=500.0) + _steady(200, t0=1480.0, step0=480)
    _both_ways(events, seeds=range(16))
    det = _fed(events[:480])
    assert det._low_since is not None and not det.episode.active
    # The window still low: taken as low, no alert before the sustain time ...
    assert det.quiet_steps(_steady(3, t0=1480.0, step0=480)) is not None
    # ... but not a run still low at it (the drop would fire in it).
    assert det.quiet_steps(_steady(41, t0=1480.0, step0=480, rate=500.0)) is None


def test_a_step_printed_again_after_the_copy_window() -> None:
    """A step's lines over 36 s: the one after 30 s is a new report."""
    events: list[Event] = list(_learned())
    t = 1400.0
    for i in range(400, 460):
        for k, lag in enumerate((0.0, 12.0, 24.0, 36.0) if i % 3 == 0 else (0.0, 0.2)):
            events.append(_step(t + lag, i, 1000.0 + 10 * k, rank=k))
        t += 37.0 if i % 3 == 0 else 1.0
    _both_ways(events, seeds=range(16))


def test_warm_up_runs() -> None:
    _both_ways(_steady(120, every=0.5), seeds=range(16))


def test_a_relaunch_after_a_dip() -> None:
    """A dip that did not fire leaves its start behind; a relaunch (a
    silence over the restart gap) forgets it, in a run as one at a time."""
    events: list[Event] = list(_learned(420))
    events += _steady(60, t0=1420.0, step0=420, rate=500.0)
    events += _steady(100, t0=1480.0, step0=480)
    events += _steady(200, t0=1800.0, step0=580, jitter=0.02)
    _both_ways(events, seeds=range(16))
    det = _fed(events[:580])
    assert det._drop_start is not None and not det.episode.active
    commit = det.quiet_steps(events[580:590])  # type: ignore[arg-type]
    assert commit is not None
    commit()
    assert det._drop_start is None and det.restarts == 2


def test_warm_up_after_a_relaunch_is_counted_in_reports() -> None:
    """Three reports after a relaunch, a pause of 70 s (no silence): the
    warm-up's time is over but not its five reports."""
    events: list[Event] = list(_learned())
    events.append(ProcessExit(1400.5, "crash", 1))
    events += _steady(3, t0=1401.0, step0=400)
    events += _steady(200, t0=1473.0, step0=403, jitter=0.02)
    _both_ways(events, seeds=range(24))
    det = _fed(events[:404])
    assert det._seen == 3 and det.quiet_steps(events[404:420]) is not None  # type: ignore[arg-type]


def test_copies_from_many_ranks_and_stepless_lines() -> None:
    rng = random.Random(11)
    events: list[Event] = []
    for i in range(600):
        for _ in range(rng.randint(1, 6)):
            rank = rng.randrange(8)
            events.append(_step(1000.0 + i + rng.uniform(0.0, 0.3), i, 1000.0 * rng.uniform(0.97, 1.03), rank=rank))
        if i % 37 == 0:
            events.append(_step(1000.0 + i + 0.5, None, 1000.0, rank=rng.choice((None, 0, 3))))
    offered, taken = _both_ways(events)
    assert taken > offered // 2


def test_the_deduper_forgets_mid_run() -> None:
    """More than 64 steps in a run, then a step seen 64+ steps ago comes back
    within the copy window: forgotten, so it counts (per-step and batched)."""
    events = _learned(400)
    t = 1400.0
    for i in range(150):
        events.append(_step(t + 0.1 * i, 400 + i, 1000.0))
    for i in range(70):
        events.append(_step(t + 15.0 + 0.05 * i, 400 + i, 1010.0))  # repeats within 30 s
    _both_ways(events, seeds=range(16))


def test_unsorted_stamps_jitter_and_jumps() -> None:
    rng = random.Random(5)
    events: list[Event] = []
    t = 1000.0
    for i in range(900):
        t += 1.0
        stamp = t + rng.uniform(-1.5, 1.5)
        if i == 500:
            t -= 3600.0  # a clock set back an hour
        events.append(_step(stamp, i, 1000.0 * rng.uniform(0.98, 1.02)))
        if i % 3 == 0:  # another rank's copy, just behind
            events.append(_step(stamp - 0.01, i - 1, 1000.0, rank=1))
    _both_ways(events)


def test_relaunches_loops_and_epochs() -> None:
    events = _learned()
    events += _steady(50, t0=1400.0, step0=400)
    events += _steady(100, t0=1700.0, step0=450)  # a silence over the restart gap
    events += _steady(100, t0=1800.0, step0=10)  # back to step 10: a relaunch
    events += [_step(1900.0 + i, i, 1000.0, total=50) for i in range(50)]  # another loop's bar
    events += [_step(1950.0 + i, i % 100, 1000.0, total=100) for i in range(400)]  # epochs 100/100 -> 0/100
    _both_ways(events)


def test_crash_exit_and_another_unit() -> None:
    events: list[Event] = list(_learned())
    events.append(Crash(1400.5, "log:crash", "crash", "exception", "RuntimeError", "boom", "RuntimeError"))
    events += _steady(350, t0=1401.0, step0=0)
    events.append(ProcessExit(1751.5, "crash", 1))
    # A relaunch with another logger (it/s), then an eval bar in samples/s
    # beside its own reports (ignored).
    events += [_step(1800.0 + i, i, 2.0, unit="it/s") for i in range(400)]
    events += [_step(2200.0 + i + 0.5 * (i % 2), i, 30.0 if i % 2 else 2.0, unit="samples/s" if i % 2 else "it/s")
               for i in range(100)]
    events += [_step(2300.0 + i, 100 + i, 2.0, unit="it/s", clocked=i % 5 != 0) for i in range(100)]
    _both_ways(events)


def test_the_window_at_its_cap() -> None:
    """60 reports a second: the smoothing window reaches its 1024 reports."""
    events = [_step(1000.0 + i / 60.0, i, 1000.0 * (1 + 0.01 * ((i * 7) % 5 - 2))) for i in range(60 * 400)]
    _both_ways(events, seeds=range(2))


@pytest.mark.parametrize("shape", ["progress", "degraded"])
def test_an_ask_changes_nothing(shape: str) -> None:
    """Asked and not committed (another detector refused), nothing moved
    (the degraded shape: asked with the drop open too)."""
    _, events = next((name, ev) for name, ev in all_log_events() if name == f"speed-{shape}")
    steps = [e for e in events if isinstance(e, Progress)]
    det = _make()
    s = DetectorSet([det])
    answers = set()
    for i in range(0, len(steps), 50):
        run = steps[i:i + 50]
        before = snapshot(det)
        answers.add(det.quiet_steps(run) is None)
        assert snapshot(det) == before
        for e in run:
            s.update(e)
    assert answers == {True, False}


def test_lines_without_a_rate() -> None:
    """Loss-only lines change nothing, before the first rate and after; the
    first rate (it sets the unit and starts the run) goes one at a time."""
    bare = [Progress(1000.0 + i, f"log:{i}", step=i, loss=2.0) for i in range(20)]
    det = _make()
    before = snapshot(det)
    commit = det.quiet_steps(bare)
    assert commit is not None
    commit()
    assert snapshot(det) == before
    assert det.quiet_steps(bare[:3] + _steady(3, t0=1003.0, step0=3)) is None
    mixed: list[Event] = []
    for e in _learned():
        mixed += [e, Progress(e.time + 0.5, "log:loss", step=e.step, loss=2.0)]
    _both_ways(bare + mixed)


@pytest.mark.parametrize("odd", ["nan", "inf", "-inf", "negative", "minus-zero", "huge-pair", "none", "unclocked",
                                 "unit"])
def test_a_run_with_one_odd_rate(odd: str) -> None:
    """The run's rates are checked in columns (every line clocked, in the
    unit, finite and not below 0, by a sum and a minimum): each odd line
    sends the run to the line-by-line reading, which must answer as one
    line at a time would; a -0.0 is no odd line, and two rates whose sum
    overflows only cost the shortcut."""
    base = _learned()
    t0 = base[-1].time + 1.0
    step0 = (base[-1].step or 0) + 1
    run = _steady(40, t0=t0, step0=step0, seed=3)
    at = 17
    p = run[at]
    if odd in ("nan", "inf", "-inf", "negative", "minus-zero"):
        value = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"), "negative": -1.0,
                 "minus-zero": -0.0}[odd]
        run[at] = _step(p.time, p.step, value)
    elif odd == "huge-pair":
        run[at] = _step(p.time, p.step, 1e308)
        run[at + 1] = _step(run[at + 1].time, run[at + 1].step, 1e308)
    elif odd == "none":
        run[at] = Progress(p.time, p.source, step=p.step, total_steps=p.total_steps, loss=2.0)
    elif odd == "unclocked":
        run[at] = _step(p.time, p.step, p.rate or 0.0, clocked=False)
    else:
        run[at] = _step(p.time, p.step, p.rate or 0.0, unit="it/s")  # in range, in another unit
    _both_ways(base + run)
    det = _fed(base)
    quiet = det.quiet_steps(run)
    if odd == "minus-zero":
        assert quiet is None  # a 0 rate under the learned baseline: a drop starts (not an odd line)
    if odd in ("nan", "inf", "-inf", "negative", "none", "unclocked"):
        assert quiet is not None  # the line is left out; the others are steady
    if odd == "unit":
        assert quiet is None  # another logger's rate: one at a time


@pytest.mark.parametrize(("shape", "least"), [("progress", 50), ("ranks", 50), ("quiet", 20), ("degraded", 50)])
def test_speed_logs_are_mostly_taken(shape: str, least: int) -> None:
    """The quiet shape's two interleaved step counters relaunch the run
    again and again (a step far behind, seconds late): taken as well. The
    degraded shape's second half is down, its drop open: taken too."""
    _, events = next((name, ev) for name, ev in all_log_events() if name == f"speed-{shape}")
    offered, taken = compare_runs(_make, events, seed=4, label=shape)
    assert offered > least
    assert taken >= 0.9 * offered, (offered, taken)


@pytest.mark.parametrize("back", [3600.0, 7.5])
def test_steady_training_after_a_clock_set_back(back: float) -> None:
    """A clock set back (a DST fall-back, an NTP step) while training goes
    on steadily: the timeline's offset then moves every later stamp, and the
    runs after it are taken in columns with it (the window, the cadence and
    the judging times on the moved times), as one at a time reads them."""
    before = _learned(600)
    after = _steady(900, t0=before[-1].time + 1.0 - back, step0=600, jitter=0.02, seed=3)
    offered, taken = _both_ways([*before, *after])
    assert taken > 0.6 * offered
    det = _fed([*before, *after])
    assert det._clock.offset > 0.0 and det._clock.jumps == 1
