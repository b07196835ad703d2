"""Replay's fast paths give the alerts of the plain per-event reading, on every log.

The fast paths (issue 20): the stream's column reading of progress lines
(``LogStream(fast=True)``), the step clock's and the event clock's
positional rebuild of a retimed Progress (``parsers.clock._at``) and the
event clock's in-order check in C (``parsers.clock._in_order``). The
reference is the same replay with each switched off: ``fast=False`` reads
every line on its own, ``dataclasses.replace`` retimes, and ``hold`` walks
every event in Python. Both must give the same alert JSON lines on every
fixture log, the 20 shared real-world logs (skipped where absent), and
seeded random logs that mix the shapes the fast paths take and the ones
that make them fall back.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import sys
from pathlib import Path

import pytest

from dflash_watch import ingest as ingest_module
from dflash_watch import replay as replay_module
from dflash_watch.parsers import clock as clock_module
from dflash_watch.parsers import step_clock as step_clock_module
from dflash_watch.parsers.stream import LogStream

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


def random_log(path: Path, seed: int, lines: int = 3000) -> Path:
    """A log of random stretches: US, ISO and glog stamps, tqdm bars (some
    redrawn with '\\r'), rank prefixes, unstamped step lines that carry
    their step time, stamps that step back, silences, a rate that drops,
    odd values (nan, inf, '3/0') and tracebacks."""
    rng = random.Random(seed)
    t = 1_764_410_400.0 + rng.randrange(86400)
    step = 0
    rate = 21.5
    out: list[str] = []

    def us(t: float) -> str:
        import time as _time

        return _time.strftime("%m/%d/%Y %H:%M:%S", _time.gmtime(t))

    def iso(t: float) -> str:
        import time as _time

        return _time.strftime("%Y-%m-%d %H:%M:%S", _time.gmtime(t)) + f",{int(t * 1000) % 1000:03d}"

    while len(out) < lines:
        kind = rng.random()
        n = rng.randrange(1, 60)
        if kind < 0.02:
            t += rng.choice((300, 900, -30, -1.5))  # a silence, or the clock stepped back
        elif kind < 0.04:
            rate = rng.choice((21.5, 9.0, 21.5, 30.0))  # a drop, or recovery
        for _ in range(n):
            t += rng.uniform(0.5, 6.0)
            step += 1
            r = rng.random()
            tps = rate * (1 + rng.uniform(-0.05, 0.05))
            loss = rng.choice(("nan", "inf")) if rng.random() < 0.01 else f"{2 + rng.random():.4f}"
            if kind < 0.3:
                out.append(f"{us(t)} - INFO - __main__ - step {step}/{rng.choice((5000, 0, 5000))} | loss {loss} | {tps:.1f} Ktok/s")
            elif kind < 0.45:
                out.append(f"{iso(t)} - INFO - train - step {step} | loss {loss} | tok/s {tps * 1000:.0f} | grad_norm 0.9")
            elif kind < 0.55:
                bar = f"Training: {step % 100:3d}%|{'#' * (step % 10):<10}| {step}/9000 [00:{step % 60:02d}<01:00, {tps / 10:.2f}it/s]"
                out.append(bar + ("\r" + bar if r < 0.3 else ""))
            elif kind < 0.65:
                out.append(f"step {step:05d}/09000 | loss: {loss} | dt: {rng.uniform(400, 600):.2f}ms | tok/sec: {tps * 1000:,.0f}")
            elif kind < 0.75:
                out.append(f"[rank{rng.randrange(4)}]:{us(t)} - INFO - train - step {step // 4} | loss {loss} | {tps:.1f} Ktok/s")
            elif kind < 0.8:
                out.append(f"W1129 10:{int(t) // 60 % 60:02d}:{int(t) % 60:02d}.123456 4242 loader.cc:12] slow worker")
            elif kind < 0.81:
                out.extend([
                    "Traceback (most recent call last):",
                    '  File "/opt/train.py", line 9, in <module>',
                    "    main()",
                    "RuntimeError: CUDA error: an illegal memory access was encountered",
                ])
                break
            else:
                out.append(f"{us(t)} - INFO - data - loaded shard {rng.randrange(10**6)}")
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


def check(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = alerts(path)
    with monkeypatch.context() as m:
        m.setattr(ingest_module, "LogStream", functools.partial(LogStream, fast=False))
        m.setattr(clock_module, "_at", _plain_at)
        m.setattr(step_clock_module, "_at", _plain_at)
        m.setattr(clock_module, "_in_order", lambda floor, events: False)
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


def stream_events(path: Path, seed: int) -> list[str]:
    """The events of one stream fed ``path`` in random chunks of whole lines
    (a chunk's first event may sit behind the clock the last one left)."""
    rng = random.Random(seed)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    stream = ingest_module.LogStream("log", replay=True)
    out: list[str] = []
    at = 0
    while at < len(lines):
        n = rng.randrange(1, 80)
        out.extend(map(repr, stream.feed("".join(lines[at : at + n]), at + 1, 1_700_000_000.0)))
        at += n
    out.extend(map(repr, stream.flush(1_700_000_000.0)))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_stream_events_in_random_chunks_are_the_per_event_ones(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Event by event (times, clocked, values), not only the alerts."""
    log = random_log(tmp_path / f"random-{seed}.log", seed + 100)
    fast = stream_events(log, seed)
    with monkeypatch.context() as m:
        m.setattr(ingest_module, "LogStream", functools.partial(LogStream, fast=False))
        m.setattr(clock_module, "_at", _plain_at)
        m.setattr(step_clock_module, "_at", _plain_at)
        m.setattr(clock_module, "_in_order", lambda floor, events: False)
        plain = stream_events(log, seed)
    assert fast == plain
