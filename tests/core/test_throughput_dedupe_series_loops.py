"""The first tqdm bar after step lines only: another loop, or the run's own bar.

Before the step series were told apart (``throughput_limits.series_of``) a
bar of another length whose count was below the step lines' last step went
"back" and was read as another loop's bar (prediction after training): a
restart, and the learned rate dropped. In its own series that bar has no
last step, so it was judged against the training's baseline instead (a
predict loop a third as fast fired a "drop"). ``first_bar_is_new_loop``
names the case again, for the first bar of the detector's life only: a bar
beside the lines from the start counts micro-batches (above the lines'
step) or has their total, and after a relaunch the run's own per-epoch bar
comes back below the lines' global step without being another loop.
Offered runs (``quiet_steps``) match one at a time on each stream.
"""

from __future__ import annotations

import pytest

from dflash_watch.detectors.base import Alert
from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.registry import DetectorSet
from dflash_watch.detectors.throughput import ThroughputDrop
from dflash_watch.detectors.throughput_limits import first_bar_is_new_loop
from dflash_watch.parsers.events import Event, Progress
from tests.core.step_runs import compare_runs

T0 = 1_800_000_000.0
RATE = 20_000.0  # tok/s


def _line(t: float, step: int, rate: float = RATE, total: int = 10_000) -> Progress:
    """A stamped ``step N/total ... tok/s`` log line (no tqdm counter)."""
    return Progress(T0 + t, f"log:{t}", step=step, total_steps=total, rate=rate, rate_unit="tok/s")


def _bar(t: float, n: int, rate: float = RATE, total: int = 100) -> Progress:
    """A tqdm bar ``n/total [MM:SS<..., ...tok/s]``: it carries tqdm's elapsed counter."""
    return Progress(T0 + t, f"log:{t}b", step=n, total_steps=total, rate=rate, rate_unit="tok/s", elapsed_s=t % 600)


def lines_then_predict_bar(rate: float = RATE / 3) -> list[Event]:
    """Training logged by step lines only (30 min), then a predict loop's bar
    of 64 batches, in the same unit, a third as fast (10 min)."""
    out: list[Event] = [_line(4.0 * i, i + 1) for i in range(450)]
    out += [_bar(1800.0 + 10.0 * i, i % 65, rate, total=64) for i in range(60)]
    return out


def lines_then_as_fast_predict_bar() -> list[Event]:
    """The same, the predict loop as fast as training (runs of it are quiet)."""
    return lines_then_predict_bar(RATE)


def epoch_bar_relaunched() -> list[Event]:
    """Global step lines and a per-epoch bar beside them (100 steps an
    epoch), a relaunch after a 10 min silence resuming at step 451: the
    bar's count (1) is far below the lines' (451), with another total."""
    out: list[Event] = []
    for i in list(range(450)) + list(range(600, 900)):
        t = 4.0 * i
        step = i + 1 if i < 450 else i - 149
        out.append(_line(t, step))
        out.append(_bar(t + 2.5, step % 100 if i < 450 else i - 599, total=100))
    return out


def micro_batch_bar_after_lines() -> list[Event]:
    """Gradient accumulation whose bar's first redraw comes after a few step
    lines: its count (micro-batches) is above theirs."""
    out: list[Event] = []
    for i in range(1800):
        t = float(i)
        if i % 4 == 3:
            out.append(_line(t + 0.3, (i + 1) // 4, total=450))
        if i >= 20 and i % 3 == 2:
            out.append(_bar(t, i + 1, total=1800))
    return out


def _feed(events: list[Event]) -> tuple[ThroughputDrop, list[Alert]]:
    det = ThroughputDrop(DetectorConfig(tz="UTC"))
    detectors = DetectorSet([det])
    alerts: list[Alert] = []
    for e in events:
        alerts += detectors.update(e)
    return det, alerts


def test_a_predict_bar_after_step_lines_only_is_another_loop() -> None:
    det, alerts = _feed(lines_then_predict_bar())
    assert det.restarts == 2  # the start, and the other loop
    assert alerts == []  # its rate is not judged against the training's
    assert det.baseline == pytest.approx(RATE / 3)  # learned anew, from the predict loop


def test_the_runs_own_bar_after_a_relaunch_is_no_other_loop() -> None:
    det, alerts = _feed(epoch_bar_relaunched())
    assert det.restarts == 2  # the start, and the relaunch after the silence
    assert alerts == []
    assert det.baseline == pytest.approx(RATE)  # kept over the relaunch


def test_a_micro_batch_bar_starting_after_the_lines_is_no_other_loop() -> None:
    det, alerts = _feed(micro_batch_bar_after_lines())
    assert det.restarts == 1
    assert alerts == []
    assert det.baseline == pytest.approx(RATE)


def test_the_rule() -> None:
    assert first_bar_is_new_loop(3, 64, 450, 10_000)
    assert not first_bar_is_new_loop(3, 64, None, None)  # no step line before it
    assert not first_bar_is_new_loop(3, 64, 450, None)  # the lines name no total
    assert not first_bar_is_new_loop(3, None, 450, 10_000)  # nor does the bar
    assert not first_bar_is_new_loop(3, 10_000, 450, 10_000)  # the same total: the same loop, lagging
    assert not first_bar_is_new_loop(1800, 7200, 450, 1800)  # micro-batches: at or above the steps


@pytest.mark.parametrize("stream", [lines_then_predict_bar, lines_then_as_fast_predict_bar, epoch_bar_relaunched,
                                    micro_batch_bar_after_lines])
def test_offered_runs_match_one_at_a_time(stream) -> None:
    events = stream()
    taken = 0
    for seed in range(4):
        _, took = compare_runs(lambda: ThroughputDrop(DetectorConfig(tz="UTC")), events, seed=seed,
                               label=f"{stream.__name__} seed {seed}")
        taken += took
    assert taken > 0
