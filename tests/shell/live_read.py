"""Read a log through the real tailer: the one home of the live-path reader
that the live-equals-replay tests share.

The log's bytes are either in place before the session starts (attaching to
a run whose log already holds its history) or appended while it runs in
bursts of random sizes (block-buffered output: bursts cut lines anywhere).
The live clock follows the data and is held still at it (``speed=0``), so
what is compared is what was read, not the silence a wall clock adds after
the data ends. When the log has gone quiet the session stops as headless
stops on SIGTERM: what is pending goes out.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from dflash_watch.detectors.base import Alert
from dflash_watch.live import LiveSession
from dflash_watch.monitor import Monitor
from tests.shell.polling import polled

ROOT = Path(__file__).resolve().parents[2]
REALWORLD = ROOT.parent / "shared" / "realworld"


def fixture_logs() -> list[Path]:
    """Every log the live-path tests read: the shared real-world logs (where
    present), the fixtures' logs and torch tracebacks, the examples."""
    logs = sorted(REALWORLD.glob("*.log"))
    logs += sorted((ROOT / "tests" / "fixtures").rglob("*.log"))
    logs += sorted((ROOT / "tests" / "fixtures" / "tracebacks").glob("*.txt"))
    logs += sorted((ROOT / "examples").glob("*.log"))
    return logs


def read_live(log: Path, target: Path, *, bursts: bool, seed: int = 0,
              burst_bytes: tuple[int, int] = (4096, 65536), pause_s: float = 0.03) -> list[Alert]:
    """Every alert of a live session tailing ``target`` while ``log``'s bytes
    reach it: whole before the start, or appended in bursts of
    ``burst_bytes`` (inclusive bounds) with pauses of up to ``pause_s``."""
    data = log.read_bytes()
    target.write_bytes(b"" if bursts else data)
    lines = data.count(b"\n")
    monitor = Monitor(keep_lines=0)
    got: list[Alert] = []
    monitor.subscribe(got.append)
    # Short rounds so that bursts land in separate reads, cut anywhere.
    session = LiveSession(monitor, logs=(str(target),), use_nvml=False, speed=0.0, tail_poll_s=0.02, tick_s=0.05)

    def read_all() -> bool:
        state = monitor._streams.get(str(target))
        return (state is not None and state.lines >= lines) or lines == 0

    with session:
        if bursts:
            rng = random.Random(seed)
            pos = 0
            with open(target, "ab", buffering=0) as fh:
                while pos < len(data):
                    size = rng.randint(*burst_bytes)
                    fh.write(data[pos : pos + size])
                    pos += size
                    time.sleep(rng.uniform(0.0, pause_s))
        assert polled(read_all, 60.0), "the live path did not read every line"
        assert polled(lambda: monitor.quiet_since is not None, 10.0), "the log was never found quiet"
    # As headless on SIGTERM: what is pending goes out.
    now = session.clock()
    monitor.quiet(now, now)
    monitor.finish()
    return got
