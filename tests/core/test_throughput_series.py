"""throughput_drop tells a log's step series apart (``throughput_limits.series_of``).

A log may keep two step counts in the same rate unit: a tqdm bar (it has
tqdm's elapsed counter, ``Progress.elapsed_s``) beside stamped ``step N``
lines (they have none). The bar may lag the lines, or count micro-batches
while the lines count optimizer steps (gradient accumulation). Read as one
count, every line below the other series' last step more than the clock
jitter later was "back", a relaunch: the detector restarted again and
again (227 restarts in 3,040 rate lines of the quiet speed log) and judged
the run only in warm-ups, so a real drop went unalerted.

Here: no restart on either interleaving and a sustained drop in such a log
fires within the budget; a real relaunch still restarts exactly once
(both series going back count as one), a bar-only or line-only log
relaunched still restarts; the next epoch's bar, another loop's bar and
ranks interleaving within the jitter keep their behaviour. Every stream is
also fed in offered runs (``quiet_steps``) and must match one at a time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from dflash_watch.detectors.base import Alert
from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.registry import DetectorSet
from dflash_watch.detectors.throughput import ThroughputDrop
from dflash_watch.detectors.throughput_limits import series_of
from dflash_watch.parsers.events import Event, ProcessExit, Progress
from dflash_watch.replay import log_events
from tests.core.step_runs import compare_runs

T0 = 1_800_000_000.0
RATE = 20_000.0  # tok/s
DROP_AT = 2400.0  # seconds after T0, where the drop streams fall to a half


def _line(t: float, step: int, rate: float, *, total: int | None = 10_000, rank: int | None = None) -> Progress:
    """A stamped ``step N/total ... tok/s`` log line (no tqdm counter)."""
    return Progress(T0 + t, f"log:{t}", step=step, total_steps=total, rate=rate, rate_unit="tok/s", rank=rank)


def _bar(t: float, n: int, rate: float, *, total: int | None = 40_000) -> Progress:
    """A tqdm bar ``n/total [MM:SS<..., ...tok/s]``: it carries tqdm's elapsed counter."""
    return Progress(T0 + t, f"log:{t}b", step=n, total_steps=total, rate=rate, rate_unit="tok/s", elapsed_s=t)


def _rate(t: float, drop: bool) -> float:
    return RATE * (0.5 if drop and t >= DROP_AT else 1.0)


def lagging_bar(duration: float, *, drop: bool = False) -> list[Event]:
    """Step lines every 4 s; a bar of the same steps 2.5 s after each, 30 steps behind."""
    out: list[Event] = []
    for i in range(int(duration // 4)):
        t = 4.0 * i
        out.append(_line(t, 100 + i, _rate(t, drop)))
        out.append(_bar(t + 2.5, 70 + i, _rate(t + 2.5, drop), total=10_000))
    return out


def micro_batches(duration: float, *, drop: bool = False, accumulate: int = 4, redraw: int = 3) -> list[Event]:
    """Gradient accumulation: a micro-batch a second, the bar counting them
    and redrawn every ``redraw`` of them (tqdm's ``mininterval``), a stamped
    line every ``accumulate`` of them counting the optimizer step: each
    line's step is far below the bar's count, up to 2.3 s after its last
    redraw (beyond the clock jitter)."""
    out: list[Event] = []
    for i in range(int(duration)):
        t = float(i)
        if (i + 1) % redraw == 0:
            out.append(_bar(t, i + 1, _rate(t, drop)))
        if (i + 1) % accumulate == 0:
            out.append(_line(t + 0.3, (i + 1) // accumulate, _rate(t + 0.3, drop)))
    return out


def _feed(events: list[Event], det: ThroughputDrop | None = None) -> tuple[ThroughputDrop, list[Alert]]:
    det = det or ThroughputDrop(DetectorConfig(tz="UTC"))
    detectors = DetectorSet([det])
    alerts: list[Alert] = []
    for e in events:
        alerts += detectors.update(e)
    return det, alerts


def _make() -> ThroughputDrop:
    return ThroughputDrop(DetectorConfig(tz="UTC"))


# -- the shape names the series --------------------------------------------------

def test_a_tqdm_bar_and_a_logging_step_line_are_two_series(tmp_path) -> None:
    """The key is read from real parser output: a tqdm bar line carries its
    elapsed counter, a logging step line does not."""
    log = tmp_path / "two.log"
    log.write_text(
        "2026-12-02 10:00:00,100 - INFO - __main__ - step 12/500 | loss 2.31 | 21.5 Ktok/s\n"
        "Training:  10%|#         | 49/500 [00:12<01:50,  4.08it/s, loss=2.31, tok/s=21480]\n"
    )
    (line, bar) = [e for e in log_events(str(log), tz=None) if isinstance(e, Progress)]
    assert (line.step, bar.step) == (12, 49)
    assert (series_of(line), series_of(bar)) == (0, 1)
    assert line.rate_unit == bar.rate_unit == "tok/s"


# -- interleaved series: no restart, a real drop still fires ----------------------

@pytest.mark.parametrize("stream", [lagging_bar, micro_batches])
def test_interleaved_series_never_restart(stream) -> None:
    det, alerts = _feed(stream(3600.0))
    assert det.restarts == 1  # the first start only
    assert alerts == []
    assert det.baseline == pytest.approx(RATE)


@pytest.mark.parametrize("stream", [lagging_bar, micro_batches])
def test_a_sustained_drop_in_an_interleaved_log_fires_within_the_budget(stream) -> None:
    det, alerts = _feed(stream(3600.0, drop=True))
    assert det.restarts == 1
    assert [a.state for a in alerts] == ["firing"]
    delay = alerts[0].time - (T0 + DROP_AT)
    assert 90.0 <= delay <= 120.0, delay
    assert alerts[0].evidence["baseline_tokens_per_s"] == pytest.approx(RATE)


# -- relaunches --------------------------------------------------------------------

def _relaunched(stream: list[Event], after: float, gap: float) -> list[Event]:
    """``stream`` cut at ``after`` s, then the same run again from its start
    ``gap`` s later (a relaunch from scratch: every count starts anew)."""
    head = [e for e in stream if e.time < T0 + after]
    again = [e for e in stream if e.time < T0 + 1200.0]
    return head + [replace(e, time=e.time + after + gap) for e in again]


@pytest.mark.parametrize("stream", [lagging_bar, micro_batches])
@pytest.mark.parametrize("gap", [10.0, 600.0])  # quick (a step going back) or after a silence
def test_both_series_going_back_at_a_relaunch_restart_once(stream, gap) -> None:
    det, alerts = _feed(_relaunched(stream(3600.0), 1800.0, gap))
    assert det.restarts == 2
    assert alerts == []


@pytest.mark.parametrize("shape", ["bars", "lines"])
def test_a_one_series_log_relaunched_restarts_once(shape) -> None:
    stream = [e for e in lagging_bar(3600.0) if isinstance(e, Progress) and series_of(e) == (shape == "bars")]
    det, _ = _feed(_relaunched(stream, 1800.0, 10.0))
    assert det.restarts == 2


def _exited(stream: list[Event]) -> list[Event]:
    """``stream`` relaunched 30 s after its process exited at 1800 s."""
    head = [e for e in stream if e.time < T0 + 1800.0]
    tail = _relaunched(stream, 1800.0, 30.0)[len(head):]
    return [*head, ProcessExit(T0 + 1805.0, "exit", 1), *tail]


@pytest.mark.parametrize("stream", [lagging_bar, micro_batches])
def test_a_relaunch_after_the_process_exit_restarts_once(stream) -> None:
    det, _ = _feed(_exited(stream(3600.0)))
    assert det.restarts == 2


# -- what keeps its behaviour -------------------------------------------------------

def test_the_next_epochs_bar_beside_step_lines_is_no_relaunch() -> None:
    """The bar wraps 100/100 -> 0/100 each epoch while the lines' global
    step goes on: neither is a relaunch."""
    out: list[Event] = []
    for i in range(900):
        t = 4.0 * i
        out.append(_line(t, i + 1, RATE))
        out.append(_bar(t + 2.5, (i + 1) % 101, RATE, total=100))
    det, alerts = _feed(out)
    assert det.restarts == 1
    assert alerts == []


def test_another_loops_bar_beside_step_lines_is_learned_anew() -> None:
    """A bar of another length going back (predict after train) is another
    loop: one restart, and the learned baseline dropped."""
    out = lagging_bar(1800.0)
    for i in range(50):
        out.append(_bar(1800.0 + 4.0 * i, i, RATE / 3, total=64))
    det, _ = _feed(out)
    assert det.restarts == 2
    assert det.baseline is None


def test_ranks_interleaving_within_the_jitter_beside_a_bar_is_no_relaunch() -> None:
    """Eight ranks print each step a few ms apart, their stamps out of
    order, next to the lagging bar: copies, not relaunches."""
    out: list[Event] = []
    for i in range(900):
        t = 4.0 * i
        for rank in range(8):
            # rank 7's copy of the step before comes after rank 0's of this one
            out.append(_line(t + 0.001 * rank, 100 + i - (rank == 7), RATE, rank=rank))
        out.append(_bar(t + 2.5, 70 + i, RATE, total=10_000))
    det, alerts = _feed(out)
    assert det.restarts == 1
    assert alerts == []


# -- offered runs (quiet_steps) match one at a time ---------------------------------

def _streams() -> Iterator[tuple[str, list[Event]]]:
    for stream in (lagging_bar, micro_batches):
        yield stream.__name__, stream(3600.0)
        yield f"{stream.__name__} drop", stream(3600.0, drop=True)
        yield f"{stream.__name__} relaunched", _relaunched(stream(3600.0), 1800.0, 10.0)
        yield f"{stream.__name__} relaunched after silence", _relaunched(stream(3600.0), 1800.0, 600.0)
        yield f"{stream.__name__} relaunched after exit", _exited(stream(3600.0))


@pytest.mark.parametrize("name", [name for name, _ in _streams()])
def test_interleaved_series_batched_as_one_at_a_time(name: str) -> None:
    events = dict(_streams())[name]
    taken = 0
    for seed in (1, 2, 3):
        _, took = compare_runs(_make, events, seed=seed, label=f"{name} seed {seed}")
        taken += took
    assert taken > 0  # the steady reading of two series is used, not only refused
