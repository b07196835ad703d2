"""One table of detector expectations on real-telemetry shapes (STYLE habit 2).

Each row: a seeded synthetic stream (tests/core/synthetic.py), the
detectors it is driven through, and every alert those detectors must
raise: (detector, gpu, state, earliest, latest) with times in seconds after
``T0`` on the stream's own stamps. Nothing else may fire. Invariants run
over every row with the whole ``build_detectors()`` set: each episode
fires before it resolves and fires once.

The rows are what real runs showed the detectors getting wrong: cadences of
150 and 300 s, epochs, rank-interleaved stamps, clock jumps, a slow start,
it/s and samples/s runs, swings from the first minutes, drops to near zero
between steps, noisy small cards and bounded sawtooths.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from dflash_watch.detectors.alloc_thrash import AllocThrash
from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.memory import MemoryModel
from dflash_watch.detectors.memory_growth import MemoryGrowth
from dflash_watch.detectors.memory_pressure import MemoryPressure
from dflash_watch.detectors.memory_volatility import MemoryVolatility
from dflash_watch.detectors.padding import PaddingDetector
from dflash_watch.detectors.recompile import RecompileDetector
from dflash_watch.detectors.registry import DetectorSet, build_detectors
from dflash_watch.detectors.stall import Stall
from dflash_watch.detectors.throughput import ThroughputDrop
from tests.core.probe_streams import ProbeProfile, probes
from tests.core.synthetic import T0, MemProfile, ProgressProfile, Scenario, drive, gpu_samples, merge, progress, replace

CFG = DetectorConfig(tz="UTC")
BASE = MemProfile()


def memory_set() -> list:
    """The three memory detectors sharing one model, as build_detectors should."""
    model = MemoryModel(CFG)
    return [MemoryVolatility(CFG, memory=model), MemoryGrowth(CFG, memory=model), MemoryPressure(CFG, memory=model)]


def progress_set(baseline: float | None = None) -> list:
    return [ThroughputDrop(CFG, baseline_tokens_per_s=baseline), Stall(CFG)]


def probe_set(padding: float | None = None, recompiles: float | None = None, retries: float | None = None) -> list:
    """The detectors that read probe lines, with the good run's figures."""
    return [
        PaddingDetector(CFG, baseline_efficiency=padding),
        RecompileDetector(CFG, baseline_per_hour=recompiles),
        AllocThrash(CFG, baseline_per_hour=retries),
    ]


@dataclass(frozen=True)
class Row:
    id: str
    stream: Callable[[], Scenario]
    detectors: Callable[[], list]
    # (detector, gpu, state, earliest_s, latest_s) after T0, in order per key.
    expect: tuple[tuple[str, int | None, str, float, float], ...]
    until_s: float | None = None  # tick the deadlines on to here after the data


def _cadence(interval: float) -> Scenario:
    return progress(ProgressProfile(interval_s=interval, dips=((30000.0, 6000.0, 0.3),)), 60000.0)


def _mem(profiles: dict[int, MemProfile], duration: float, progress_start_s: float | None = 30.0, **kw) -> Scenario:
    mem = gpu_samples(profiles, duration)
    if progress_start_s is None:
        return mem
    return merge(mem, progress(ProgressProfile(start_s=progress_start_s, **kw), duration))


TD, ST, MV, MG = "throughput_drop", "stall", "memory_volatility", "memory_growth"
PD, AT, RC = "padding", "alloc_thrash", "recompile"

ROWS = [
    # -- cadence: budgets follow the run's own reporting interval ---------------
    Row("cadence_150s", lambda: _cadence(150.0), progress_set,
        ((TD, None, "firing", 30000 + 150, 30000 + 4 * 150), (TD, None, "resolved", 36000, 36000 + 4 * 150))),
    Row("cadence_300s", lambda: _cadence(300.0), progress_set,
        ((TD, None, "firing", 30000 + 300, 30000 + 4 * 300), (TD, None, "resolved", 36000, 36000 + 4 * 300))),
    Row("cadence_300s_stall", lambda: progress(ProgressProfile(interval_s=300.0, stop_s=20000.0), 30000.0), progress_set,
        ((ST, None, "firing", 19800 + 5 * 300, 19800 + 5 * 300 + 300),), until_s=30000.0),
    # -- epochs: 100/100 then 1/100 is the next bar, not the end ----------------
    Row("epochs_healthy", lambda: progress(ProgressProfile(epoch_steps=100), 7200.0), progress_set, ()),
    # A 15-minute eval after each bar: the replay sees the next bar come.
    Row("epochs_eval_pause_between_bars", lambda: progress(ProgressProfile(epoch_steps=100, epoch_pause_s=900.0), 7200.0),
        progress_set, ()),
    # One bar that reached its total and then silence: a finished run.
    Row("single_bar_finished", lambda: progress(ProgressProfile(epoch_steps=100, stop_s=30 + 100 * 5 - 4), 7200.0),
        progress_set, (), until_s=7200.0),
    Row("epochs_hang_after_bar_end",
        lambda: progress(ProgressProfile(epoch_steps=100, stop_s=30 + 300 * 5 - 4), 7200.0), progress_set,
        ((ST, None, "firing", 1525 + 600, 1525 + 601),), until_s=7200.0),
    Row("epochs_hang_after_new_bar",
        lambda: progress(ProgressProfile(epoch_steps=100, stop_s=30 + 301 * 5 - 4), 7200.0), progress_set,
        ((ST, None, "firing", 1530 + 120, 1530 + 121),), until_s=7200.0),
    # -- clocks -------------------------------------------------------------------
    Row("ranks_jitter_ms", lambda: progress(ProgressProfile(ranks=8, rank_jitter_s=0.005, dips=((3600.0, 900.0, 0.2),)), 7200.0),
        progress_set, ((TD, None, "firing", 3690, 3720), (TD, None, "resolved", 4500, 4560))),
    # Fast steps from 8 ranks merged by stamps that jitter more than a step:
    # a step's first copy often comes after the next step's.
    Row("ranks_interleaved_by_stamp", lambda: progress(ProgressProfile(
        interval_s=0.2, ranks=8, rank_jitter_s=0.4, merged_by_time=True, dips=((900.0, 400.0, 0.2),)), 1500.0),
        progress_set, ((TD, None, "firing", 990, 1020), (TD, None, "resolved", 1300, 1360))),
    Row("clock_back_1h", lambda: progress(ProgressProfile(clock_jumps=((2000.0, -3600.0),), dips=((2500.0, 900.0, 0.2),)), 7200.0),
        progress_set, ((TD, None, "firing", 2500 - 3600 + 90, 2500 - 3600 + 120), (TD, None, "resolved", 3400 - 3600, 3460 - 3600))),
    Row("clock_forward_1h", lambda: progress(ProgressProfile(clock_jumps=((2000.0, 3600.0),)), 7200.0), progress_set, ()),
    Row("clock_forward_tqdm_elapsed", lambda: progress(ProgressProfile(clock_jumps=((2000.0, 1234.0),), elapsed=True), 7200.0),
        progress_set, ()),
    # Without a second clock a forward jump by 1234 s reads as a stall that ended.
    Row("clock_forward_no_evidence", lambda: progress(ProgressProfile(clock_jumps=((2000.0, 1234.0),)), 7200.0),
        progress_set, ((ST, None, "firing", 1995 + 120, 1995 + 121), (ST, None, "resolved", 2000 + 1234, 2000 + 1234))),
    # -- baselines and units -------------------------------------------------------
    Row("slow_start_then_steady", lambda: progress(ProgressProfile(
        tokens_per_s=22000.0, slow_start_s=360.0, slow_start_factor=8 / 22, dips=((3600.0, 1800.0, 14 / 22),)), 7200.0),
        progress_set, ((TD, None, "firing", 3690, 3720), (TD, None, "resolved", 5400, 5460))),
    Row("it_per_s", lambda: progress(ProgressProfile(tokens_per_s=3.1, unit="it/s", noise=0.0, dips=((3600.0, 900.0, 0.4),)), 7200.0),
        lambda: progress_set(baseline=21500.0), ((TD, None, "firing", 3690, 3720), (TD, None, "resolved", 4500, 4560))),
    Row("samples_per_s", lambda: progress(ProgressProfile(tokens_per_s=250.0, unit="samples/s", dips=((3600.0, 900.0, 0.3),)), 7200.0),
        progress_set, ((TD, None, "firing", 3690, 3720), (TD, None, "resolved", 4500, 4560))),
    Row("unit_change_at_relaunch", lambda: progress(ProgressProfile(
        relaunch_at_s=(3000.0,), unit_changes=((3000.0, "it/s", 3.1),), dips=((5000.0, 900.0, 0.3),)), 7200.0),
        progress_set, ((TD, None, "firing", 5090, 5120), (TD, None, "resolved", 5900, 5960))),
    # An eval bar in it/s every 10 min beside the tok/s step lines: another
    # source, not a unit change.
    Row("eval_bar_in_it_per_s_beside_tok_per_s", lambda: merge(
        progress(ProgressProfile(dips=((3600.0, 900.0, 0.2),)), 7200.0),
        progress(ProgressProfile(tokens_per_s=3.45, unit="it/s", interval_s=600.0, start_s=466.0, warmup_reports=0), 7200.0,
                 source="eval.log")),
        progress_set, ((TD, None, "firing", 3690, 3720), (TD, None, "resolved", 4500, 4560))),
    # -- memory ---------------------------------------------------------------------
    Row("swing_6s_from_launch", lambda: _mem(
        {0: replace(BASE, swing_start_s=100.0, ramp_s=100.0, swing_period_s=6.0, square=True)}, 3000.0, 200.0),
        memory_set, ((MV, 0, "firing", 200, 200 + 120),)),
    Row("swing_60s_from_launch", lambda: _mem(
        {0: replace(BASE, swing_start_s=100.0, ramp_s=100.0, swing_period_s=60.0, square=True)}, 3000.0, 200.0),
        memory_set, ((MV, 0, "firing", 200, 200 + 120),)),
    Row("swing_from_a_relaunch", lambda: _mem(
        {0: replace(BASE, relaunch_at_s=(1800.0,), swing_start_s=2000.0, swing_period_s=6.0, square=True)}, 3600.0,
        relaunch_at_s=(1800.0,)), memory_set, ((MV, 0, "firing", 2000, 2000 + 120),)),
    Row("square_2min_period", lambda: _mem(
        {0: replace(BASE, swing_start_s=1800.0, swing_period_s=120.0, swing_low_gib=30.0, square=True)}, 3600.0),
        memory_set, ((MV, 0, "firing", 1800, 1800 + 240),)),
    Row("drops_to_near_zero_same_pid", lambda: _mem(
        {0: replace(BASE, swing_start_s=1800.0, swing_low_gib=0.4, swing_period_s=20.0, square=True, pid=4242)}, 3600.0),
        memory_set, ((MV, 0, "firing", 1800, 1800 + 120),)),
    Row("drops_to_near_zero_no_process_list", lambda: _mem(
        {0: replace(BASE, swing_start_s=1800.0, swing_low_gib=0.4, swing_period_s=20.0, square=True)}, 3600.0),
        memory_set, ((MV, 0, "firing", 1800, 1800 + 120),)),
    Row("relaunch_new_pid", lambda: _mem({0: replace(BASE, relaunch_at_s=(1800.0,), pid=7)}, 3600.0, relaunch_at_s=(1800.0,)),
        memory_set, ()),
    Row("relaunch_no_process_list", lambda: _mem({0: replace(BASE, relaunch_at_s=(1800.0, 2400.0))}, 3600.0,
        relaunch_at_s=(1800.0, 2400.0)), memory_set, ()),
    Row("small_card_noisy_flat", lambda: _mem({0: replace(BASE, total_gib=16.0, level_gib=10.0, noise_mib=200.0)}, 7200.0),
        memory_set, ()),
    # A first tooth longer than the window looks like a leak until it falls
    # back; then it resolves, and no later tooth fires.
    Row("sawtooth_30min_4gib", lambda: _mem(
        {0: replace(BASE, leak_start_s=1200.0, sawtooth_period_s=1800.0, sawtooth_gib=4.0)}, 5 * 3600.0, None),
        memory_set, ((MG, 0, "firing", 1200, 3000), (MG, 0, "resolved", 3000, 3120))),
    Row("sawtooth_15min_3gib", lambda: _mem(
        {0: replace(BASE, leak_start_s=1200.0, sawtooth_period_s=900.0, sawtooth_gib=3.0)}, 5 * 3600.0, None),
        memory_set, ((MG, 0, "firing", 1200, 2100), (MG, 0, "resolved", 2100, 2220))),
    # -- probe lines: padding, allocator retries, recompile rate ------------------
    Row("probe_healthy_8_ranks", lambda: probes(ProbeProfile(ranks=8), 3 * 3600.0),
        lambda: probe_set(padding=0.93, recompiles=0.0, retries=0.0), ()),
    # Broken batching: 93% -> 41% for an hour on 8 ranks, against the good run.
    Row("probe_padding_broke", lambda: probes(ProbeProfile(ranks=8, padding_drops=((1800.0, 5400.0, 0.41),)), 7200.0),
        lambda: probe_set(padding=0.93), ((PD, None, "firing", 1800, 1860), (PD, None, "resolved", 5400, 5520))),
    # No baseline: a run padded to 62% throughout is below the 70% floor.
    Row("probe_padding_floor", lambda: probes(ProbeProfile(ranks=2, efficiency=0.62), 1800.0), probe_set,
        ((PD, None, "firing", 0, 60),)),
    # One rank of eight thrashes the allocator for half an hour.
    Row("probe_alloc_thrash_one_rank", lambda: probes(ProbeProfile(ranks=8, thrash=(2400.0, 4200.0), thrash_ranks=(5,)), 7200.0),
        probe_set, ((AT, None, "firing", 2400, 2460), (AT, None, "resolved", 4800 - 15, 4800 + 5))),
    # A relaunch resets every counter (retries 0 again): no negative rate, no alert.
    Row("probe_counters_reset_at_relaunch", lambda: probes(ProbeProfile(ranks=4, relaunch_at_s=(1800.0, 3600.0)), 5400.0),
        probe_set, ()),
    # A recompile a minute from hour 1 to hour 2: the rate kind, the limit kind untouched.
    Row("probe_recompiles_rising", lambda: probes(ProbeProfile(ranks=4, recompile=(3600.0, 7200.0)), 4 * 3600.0),
        lambda: probe_set(recompiles=2.0), ((RC, None, "firing", 3600, 3600 + 600), (RC, None, "resolved", 7200, 7200 + 1800))),
]


def _check(row: Row, alerts) -> None:
    shown = [(a.detector, a.gpu, a.kind, a.state, round(a.time - T0, 1), a.message) for a in alerts]
    assert len(alerts) == len(row.expect), (row.id, shown)
    for alert, (name, gpu, state, lo, hi) in zip(alerts, row.expect):
        assert (alert.detector, alert.gpu, alert.state) == (name, gpu, state), alert
        assert lo <= alert.time - T0 <= hi, (row.id, alert.detector, alert.state, alert.time - T0, alert.message)


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_table(row: Row) -> None:
    scenario = row.stream()
    alerts = drive(DetectorSet(row.detectors()), scenario.events, until=None if row.until_s is None else T0 + row.until_s)
    _check(row, alerts)


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_invariants_over_every_detector(row: Row) -> None:
    """The whole set: each episode fires, then resolves, never twice in a row."""
    scenario = row.stream()
    ds = DetectorSet(build_detectors(CFG))
    alerts = drive(ds, scenario.events, until=None if row.until_s is None else T0 + row.until_s)
    open_keys: set = set()
    for a in alerts:
        if a.state == "firing":
            assert a.key not in open_keys, a
            open_keys.add(a.key)
        else:
            assert a.key in open_keys, a
            open_keys.discard(a.key)
