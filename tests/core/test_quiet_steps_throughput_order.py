"""throughput_drop's column path (``throughput_quiet._steady``) on the
progress shape's runs: step lines and a tqdm bar, each its own series
(issue 20).

Its look per line must send to the walk whatever it cannot read in
columns: a NaN time, a gap right at the relaunch silence, a step back
(within the jitter: another rank's; past it: a relaunch), a rate that is
not counted; and each series must keep its own last step. Each case is
held to the per-step state.
"""

from __future__ import annotations

import math

from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.throughput import ThroughputDrop
from dflash_watch.parsers.events import Progress
from tests.core.step_runs import compare_runs, snapshot


def _make() -> ThroughputDrop:
    return ThroughputDrop(DetectorConfig(tz="UTC"))


def _step(t: float, step: int, *, bar: bool = False, rate: float = 1000.0) -> Progress:
    return Progress(t, f"log:{step}", step=step, total_steps=100_000, rate=rate, rate_unit="tok/s", clocked=True,
                    elapsed_s=float(step) if bar else None)


def _fed(events: list[Progress]) -> ThroughputDrop:
    det = _make()
    for e in events:
        det.update(e)
    return det


def _both(steps_before: list[Progress], run: list[Progress]) -> bool:
    """Offer ``run`` after ``steps_before``: the state after it (taken or
    fed) is the per-step state. True if taken at once."""
    det = _fed(steps_before)
    commit = det.quiet_steps(run)
    if commit is not None:
        commit()
    else:
        for e in run:
            det.update(e)
    assert snapshot(det) == snapshot(_fed([*steps_before, *run]))
    return commit is not None


def _mixed(n: int, t0: float = 1000.0) -> list[Progress]:
    """Step lines and a bar, each its own series (bars count lower)."""
    out = []
    for i in range(n):
        out.append(_step(t0 + 0.5 * i, 1000 + i))
        if i % 3 == 0:
            out.append(_step(t0 + 0.5 * i, 300 + i // 3, bar=True))
    return out


BASE = _mixed(1200)  # warm, learned, judged
T_END = BASE[-1].time


def test_the_usual_mixed_run_is_taken() -> None:
    run = _mixed(300, T_END + 0.5)
    run = [Progress(p.time, p.source, step=p.step + (1200 if p.elapsed_s is None else 400), total_steps=p.total_steps,
                    rate=p.rate, rate_unit=p.rate_unit, clocked=True, elapsed_s=p.elapsed_s) for p in run]
    assert _both(BASE, run)


def test_each_series_keeps_its_own_last_step() -> None:
    """Bars first, then step lines (or the other way round, the bar jumping
    ahead): all the steps in order together, but each series ends at its
    own last step, not the other's."""
    t = T_END + 0.5
    run = [_step(t + 0.5 * i, 700 + i, bar=True) for i in range(10)]
    run += [_step(t + 5.0 + 0.5 * i, 2300 + i) for i in range(10)]
    assert _both(BASE, run)
    run = [_step(t + 0.5 * i, 2300 + i) for i in range(10)]
    run += [_step(t + 5.0 + 0.5 * i, 2400 + i, bar=True) for i in range(10)]
    assert _both(BASE, run)


def test_a_nan_time_inside_a_run() -> None:
    t = T_END + 0.5
    run = [_step(t + 0.5 * i, 2300 + i) for i in range(20)]
    run[7] = _step(math.nan, 2307)
    det = _fed(BASE)
    assert det.quiet_steps(run) is None


def test_a_gap_right_at_the_relaunch_silence() -> None:
    """A gap of exactly ``throughput_restart_gap_s`` is a relaunch (per step:
    ``>=`` the gap limit); one just under it is not."""
    c = DetectorConfig(tz="UTC")
    for gap in (c.throughput_restart_gap_s, c.throughput_restart_gap_s - 1e-6):
        t = T_END + 0.5
        run = [_step(t + 0.5 * i, 2300 + i) for i in range(10)]
        t2 = run[-1].time + gap
        run += [_step(t2 + 0.5 * i, 2310 + i) for i in range(10)]
        _both(BASE, run)
        relaunched = _fed([*BASE, *run]).restarts - _fed(BASE).restarts
        assert relaunched == (1 if gap == c.throughput_restart_gap_s else 0)


def test_steps_back_within_and_past_the_jitter() -> None:
    """A step line just behind (within the jitter: another rank's) and one
    behind after a long gap (a relaunch) go to the look per line."""
    t = T_END + 0.5
    run = [_step(t + 0.5 * i, 2300 + i) for i in range(10)]
    run.insert(5, _step(run[4].time, 2301))
    assert _both(BASE, run)
    run2 = [_step(t + 0.5 * i, 2300 + i) for i in range(10)] + [_step(t + 30.0, 2200)]
    _both(BASE, run2)
    for seed in range(3):
        compare_runs(_make, [*BASE, *run2, *_mixed(400, t + 31.0)], seed=seed)


def test_rates_not_counted_inside_a_run() -> None:
    """A NaN, an infinite or a negative rate among good ones is not counted
    (per step: skipped), and the run's state is the per-step one."""
    t = T_END + 0.5
    for bad in (math.nan, math.inf, -1.0, -math.inf):
        run = [_step(t + 0.5 * i, 2300 + i, rate=bad if i == 5 else 1000.0 + i % 3) for i in range(12)]
        _both(BASE, run)
        det = _fed(BASE)
        commit = det.quiet_steps(run)
        assert commit is not None
        commit()
        assert det._seen == _fed(BASE)._seen + 11
