"""throughput_drop drops rank copies within a step series, never across them.

``tests/fixtures/throughput_series/micro_steps_tqdm.log`` is the unedited
output of ``micro_steps_tqdm.py`` beside it (run once, PYTHONUNBUFFERED
unset): a tqdm bar counting micro-batches of 0.1 s and ``logging`` lines
counting optimizer steps of four, both in tok/s. The bar passes each
number four times sooner than the lines, so for the first ~100 steps the
bar's redraw at N and the line of step N are seconds apart, within
``duplicate_step_s`` (30 s). With one deduper for both series each such
line was taken for a rank's copy of the bar's step and dropped (10 of the
log's 150 lines; one in ``grad_accum_tqdm.log``). A copy is the same step
of the same series (``steps.SeriesDeduper``): every line counts, and the
rank copies of one series are still dropped. Offered runs (``quiet_steps``,
which peek each series' deduper apart) match one at a time.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.registry import DetectorSet
from dflash_watch.detectors.throughput import ThroughputDrop
from dflash_watch.detectors.throughput_limits import series_of
from dflash_watch.parsers.events import Event, Progress
from dflash_watch.replay import log_events
from tests.core.step_runs import compare_runs

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "tests" / "fixtures" / "throughput_series"
LOGS = ("micro_steps_tqdm.log", "grad_accum_tqdm.log")
T0 = 1_800_000_000.0


def _events(name: str) -> list[Event]:
    return list(log_events(str(FOLDER / name), tz=datetime.UTC))


def _rated(events: list[Event]) -> list[Progress]:
    """The step lines the detector counts: a finite rate and a stamp of their own."""
    return [e for e in events if isinstance(e, Progress) and e.clocked
            and (e.rate if e.rate is not None else e.tokens_per_s) is not None]


def _make() -> ThroughputDrop:
    return ThroughputDrop(DetectorConfig(tz="UTC"))


def _feed(events: list[Event]) -> ThroughputDrop:
    det = _make()
    detectors = DetectorSet([det])
    for e in events:
        detectors.update(e)
    return det


def test_the_real_logs_two_counts_meet_within_the_copy_window() -> None:
    """The fixture's point, read from its parsed lines: the bar's redraw at N
    and the optimizer step N line come less than 30 s apart, again and again."""
    lines = _rated(_events("micro_steps_tqdm.log"))
    bars = {p.step: p.time for p in lines if series_of(p) == 1}
    steps = {p.step: p.time for p in lines if series_of(p) == 0}
    window = DetectorConfig().duplicate_step_s
    met = [n for n, t in steps.items() if n in bars and 0.0 <= t - bars[n] <= window]
    assert len(met) >= 8, met
    assert len(steps) > 140 and len(bars) > 100


@pytest.mark.parametrize("name", LOGS)
def test_every_line_of_both_series_counts(name: str) -> None:
    """One (re)start, and every rated line counted: no line of one series
    dropped as a copy of the other's step."""
    events = _events(name)
    det = _feed(events)
    assert det.restarts == 1
    assert det._seen == len(_rated(events))


def _ranked_copies(events: list[Event]) -> list[Event]:
    """Each step line printed by four ranks a few ms apart (rank 0 last)."""
    out: list[Event] = []
    for e in events:
        if isinstance(e, Progress) and series_of(e) == 0:
            out += [Progress(e.time + 0.001 * (3 - r), e.source, step=e.step, total_steps=e.total_steps,
                             rate=e.rate, rate_unit=e.rate_unit, tokens_per_s=e.tokens_per_s, rank=r)
                    for r in (3, 1, 2, 0)]
        else:
            out.append(e)
    return out


def test_rank_copies_within_a_series_are_still_dropped() -> None:
    events = _ranked_copies(_events("micro_steps_tqdm.log"))
    det = _feed(events)
    assert det.restarts == 1
    assert det._seen == len(_rated(_events("micro_steps_tqdm.log")))


def _coinciding(duration: float) -> list[Event]:
    """Synthetic, long enough to learn and judge: a bar redrawn every 2
    micro-batches of 0.25 s, step lines (from two ranks) every 4; the same
    numbers meet within 30 s for the first 40 steps; the rate drops at 900 s."""
    out: list[Event] = []
    for i in range(int(duration / 0.25)):
        t = 0.25 * i
        rate = 20_000.0 * (0.5 if t >= 900.0 else 1.0)
        if (i + 1) % 2 == 0:
            out.append(Progress(T0 + t, f"log:{i}b", step=i + 1, total_steps=100_000, rate=rate,
                                rate_unit="tok/s", elapsed_s=t))
        if (i + 1) % 4 == 0:
            for rank in (1, 0):
                out.append(Progress(T0 + t + 0.1 + 0.002 * rank, f"log:{i}r{rank}", step=(i + 1) // 4,
                                    total_steps=25_000, rate=rate, rate_unit="tok/s", rank=rank))
    return out


@pytest.mark.parametrize("name", LOGS)
def test_offered_runs_of_the_real_logs_match_one_at_a_time(name: str) -> None:
    taken = 0
    for events in (_events(name), _ranked_copies(_events(name))):
        for seed in (1, 2, 3):
            _, took = compare_runs(_make, events, seed=seed, label=f"{name} seed {seed}")
            taken += took
    assert taken > 0


def test_offered_runs_of_coinciding_series_with_ranks_match_one_at_a_time() -> None:
    events = _coinciding(1500.0)
    det = _feed(events)
    assert det.restarts == 1
    assert det._seen == len(_rated(events)) - len([e for e in events if isinstance(e, Progress) and e.rank == 1])
    taken = 0
    for seed in range(6):
        _, took = compare_runs(_make, events, seed=seed, label=f"seed {seed}")
        taken += took
    assert taken > 0
