"""Replay's fast paths give the alerts of the plain per-event reading, on every log.

The fast paths (issue 20): the stream's column reading of progress lines
(``LogStream(fast=True)``) and of a redrawn bar's many states
(``redraws.COLUMNS_MIN``), the step clock's and the event clock's
positional rebuild of a retimed Progress (``parsers.clock.at_time``), the
event clock's in-order check in C (``parsers.clock._in_order``), runs of
step lines taken at once by the detectors (``Monitor.step_runs``) and the
compiled kernels where they were built (``parsers.native``). The
reference is the same replay with each switched off: ``fast=False`` reads
every line on its own, ``dataclasses.replace`` retimes, ``hold`` walks
every event in Python, every step line goes to the detectors alone, and
no kernel runs. Both must give the same alert JSON lines on every
fixture log, the 20 shared real-world logs (skipped where absent), and
seeded random logs that mix the shapes the fast paths take and the ones
that make them fall back.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from pathlib import Path

import pytest

from dflash_watch import ingest as ingest_module
from dflash_watch import replay as replay_module
from dflash_watch.monitor import Monitor
from dflash_watch.parsers import clock as clock_module
from dflash_watch.parsers import native as native_module
from dflash_watch.parsers import step_clock as step_clock_module
from dflash_watch.parsers.progress import redraws as redraws_module
from dflash_watch.parsers.stream import LogStream
from tests.random_logs import random_log, stream_events

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
REALWORLD = ROOT.parent / "shared" / "realworld"
sys.path.insert(0, str(ROOT / "benchmarks"))

from speed_logs import write_log  # noqa: E402


def _plain_at(event, time, clocked=None):  # type: ignore[no-untyped-def]
    if clocked is None or not isinstance(event, clock_module.Progress):
        return dataclasses.replace(event, time=time)
    return dataclasses.replace(event, time=time, clocked=clocked)


def alerts(path: Path) -> list[str]:
    return [a.to_json() for a in replay_module.replay([str(path)]).alerts]


def fixture_logs() -> list[Path]:
    return sorted(p for p in FIXTURES.rglob("*") if p.suffix in (".log", ".txt"))


def shared_logs() -> list[Path]:
    return sorted(REALWORLD.glob("*.log")) if REALWORLD.is_dir() else []


def pure(m: pytest.MonkeyPatch) -> None:
    """No compiled kernel runs (``parsers.native``): the Python loops.

    Every loaded module that holds the kernels (``from ..native import
    KERNELS``: the stream, the progress columns, the timestamps, the
    throughput and loss proofs, and any added later) is switched, not a
    list of them that a new caller would slip past."""
    switched = 0
    for name, module in list(sys.modules.items()):
        if name.startswith(("dflash_watch.", "parsers.", "detectors.")) and name != native_module.__name__:
            if getattr(module, "KERNELS", None) is not None:
                m.setattr(module, "KERNELS", None)
                switched += 1
    assert native_module.KERNELS is None or switched >= 5, "the callers of the kernels were not found"


def check(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = alerts(path)
    with monkeypatch.context() as m:
        pure(m)
        m.setattr(ingest_module, "LogStream", functools.partial(LogStream, fast=False))
        m.setattr(clock_module, "at_time", _plain_at)
        m.setattr(step_clock_module, "at_time", _plain_at)
        m.setattr(clock_module, "_in_order", lambda floor, events: False)
        m.setattr(Monitor, "step_runs", False)
        m.setattr(redraws_module, "COLUMNS_MIN", 10**9)  # each redrawn state read on its own
        plain = alerts(path)
    assert fast == plain, path.name


@pytest.mark.parametrize("path", fixture_logs(), ids=lambda p: p.name)
def test_every_fixture_gives_the_per_event_alerts(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    check(path, monkeypatch)


@pytest.mark.skipif(not shared_logs(), reason=f"{REALWORLD} not present")
@pytest.mark.parametrize("path", shared_logs(), ids=lambda p: p.name[:2])
def test_every_shared_log_gives_the_per_event_alerts(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    check(path, monkeypatch)


@pytest.mark.parametrize("seed", range(8))
def test_random_logs_give_the_per_event_alerts(seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    check(random_log(tmp_path / f"random-{seed}.log", seed), monkeypatch)


@pytest.mark.parametrize("shape", ["quiet", "progress", "ranks"])
def test_benchmark_shapes_give_the_per_event_alerts(shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / f"{shape}.log"
    write_log(log, 8_000, shape, seed=3)
    check(log, monkeypatch)


@pytest.mark.parametrize("seed", range(6))
def test_stream_events_in_random_chunks_are_the_per_event_ones(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Event by event (times, clocked, values), not only the alerts."""
    log = random_log(tmp_path / f"random-{seed}.log", seed + 100)
    fast = stream_events(log, seed)
    with monkeypatch.context() as m:
        pure(m)
        m.setattr(ingest_module, "LogStream", functools.partial(LogStream, fast=False))
        m.setattr(clock_module, "at_time", _plain_at)
        m.setattr(step_clock_module, "at_time", _plain_at)
        m.setattr(clock_module, "_in_order", lambda floor, events: False)
        m.setattr(redraws_module, "COLUMNS_MIN", 10**9)
        plain = stream_events(log, seed)
    assert fast == plain
