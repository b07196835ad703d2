"""The demo's story through the real sources and the Monitor, headless and fast.

The simulator runs for real (as a subprocess, --fast: no sleeping), its
files are read with the real tailer and sample parser, incrementally, the
way a live watch reads them; a relaunch (the same command again) must
bring a healthy phase with no new alert.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dflash_watch.demo.story import DRAFTER_GPUS, STORY
from dflash_watch.monitor import Monitor
from dflash_watch.sources.logtail import Chunk, LogTailer
from dflash_watch.sources.samples import parse_sample_line

ROOT = Path(__file__).resolve().parents[2]


def simulate(out: Path, *extra: str) -> int:
    proc = subprocess.run(
        [sys.executable, "-m", "dflash_watch.demo.simulator", "--out", str(out), "--fast", "--seed", "7", "--quiet", *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    return proc.returncode


def drain(monitor: Monitor, tailer: LogTailer, samples: LogTailer) -> list:
    alerts = []
    for _ in range(100):
        got = False
        for item in tailer.poll():
            if isinstance(item, Chunk) and not item.partial:
                got = True
                alerts += monitor.feed_text(item.path, item.text, item.first_lineno, 0.0, item.generation)
        for item in samples.poll():
            if isinstance(item, Chunk) and not item.partial:
                got = True
                batch = [s for s in map(parse_sample_line, item.text.splitlines()) if s is not None]
                alerts += monitor.feed_samples(batch)
        if not got:
            return alerts
    return alerts


def test_alerts_come_in_the_story_order_and_a_relaunch_is_healthy(tmp_path: Path) -> None:
    assert simulate(tmp_path) == 1  # the FX-tracing crash ends the first launch
    monitor = Monitor()
    with LogTailer([str(tmp_path / "train.log")], use_watchdog=False) as log, LogTailer(
        [str(tmp_path / "gpu.jsonl")], use_watchdog=False
    ) as gpu:
        alerts = drain(monitor, log, gpu)
        # Live, the 1 Hz tick moves the clock on after the data stops.
        alerts += monitor.tick(monitor.now + 10.0)
        # The launch: the simulator's first GPU sample is at simulated second 0.
        with open(tmp_path / "gpu.jsonl", encoding="utf-8") as fh:
            start = parse_sample_line(fh.readline()).time
        fired = [a for a in alerts if a.state == "firing"]
        names = [a.detector for a in fired]
        # Batching breaks: drafter memory swings and throughput falls...
        swinging = {a.gpu for a in fired if a.detector == "memory_volatility"}
        assert swinging == set(DRAFTER_GPUS)
        drop = next(a for a in fired if a.detector == "throughput_drop")
        assert STORY.broken_at <= drop.time - start <= STORY.broken_at + 60 + 120
        for a in fired:
            if a.detector == "memory_volatility":
                assert STORY.broken_at <= a.time - start <= STORY.broken_at + 120
        # ...then the drafter thread dies with the FX-tracing traceback.
        fx = next(a for a in fired if a.detector == "fx_tracing")
        assert fx.time - start >= STORY.crash_at - 1 and "drafter-0" in str(fx.evidence.get("thread"))
        assert names.index("fx_tracing") > names.index("throughput_drop")
        assert not [a for a in fired if a.detector in ("crash", "stall", "memory_growth", "memory_pressure")]

        # The user presses r: the same command runs again in the same folder.
        monitor.job_relaunched(monitor.now)
        assert simulate(tmp_path, "--max-sim-seconds", "1200") == 0
        after = drain(monitor, log, gpu)
    new = [a for a in after if a.state == "firing"]
    assert new == [], [a.message for a in new]
    assert monitor.throughput.last_value > 20_000
    assert not [a for a in monitor.alerts.firing() if a.detector in ("fx_tracing", "crash", "process_exit")]
