"""Live, a log without timestamps: nothing read is dated after it was read.

Unstamped step lines are dated by their step times (``parsers.step_clock``),
run on from the time the chunk that holds them was read. A chunk that holds
many of them (a tqdm bar's line completed by its newline, or by the
traceback written right after it; a burst) put its last states, and the
crash after them, as far ahead of the watcher's clock as the states span:
a bar of 59 redraws 0.2 s apart then a traceback fired a stall at the crash
(11 s "without a step" when the clock jumped). They now end at the read time
(``parsers.clock._run_back``); the durations between them are kept.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.live import LiveSession
from dflash_watch.monitor import Monitor
from dflash_watch.parsers.events import Crash, Progress

# A training script's tqdm bar on stderr (s/it, no newline: HF's bar ends
# its line only with the epoch), then an uncaught exception: the traceback
# is appended right after the bar's last redraw, as `python train.py >
# train.log 2>&1` writes it.
BAR_THEN_CRASH = textwrap.dedent(r"""
    import sys, time
    print("Starting training", flush=True)
    t0 = time.time()
    for n in range(1, {steps} + 1):
        el = time.time() - t0
        sys.stderr.write(f"\r  {{n}}%|#         | {{n}}/100 [00:{{int(el):02d}}<01:00, {{max(el, 1e-3) / n:.2f}}s/it]")
        sys.stderr.flush()
        time.sleep({pause})
    raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity)")
""")

# HF Trainer's shape: the bar cleared for a logging dict every 10 steps.
BAR_WITH_DICTS = textwrap.dedent(r"""
    import sys, time
    t0 = time.time()
    for n in range(1, {steps} + 1):
        el = time.time() - t0
        sys.stderr.write(f"\r  {{n}}%|#         | {{n}}/1000 [00:{{int(el):02d}}<10:00, {{n / max(el, 1e-3):.2f}}it/s]")
        sys.stderr.flush()
        if n % 10 == 0:
            sys.stderr.write("\r" + " " * 80 + "\r" + "{{'loss': 2.31, 'learning_rate': 5e-05, 'epoch': 0.%02d}}\n" % n)
            sys.stderr.flush()
        time.sleep({pause})
""")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)  # users run without it
    return env


class _Ahead:
    """How far ahead of this machine's clock the Monitor was handed events."""

    def __init__(self, monitor: Monitor) -> None:
        self.worst = 0.0
        self.events: list = []
        feed = monitor.feed_events

        def spy(events):  # noqa: ANN001, ANN202
            events = list(events)
            wall = time.time()
            for e in events:
                self.worst = max(self.worst, e.time - wall)
            self.events.extend(events)
            return feed(events)

        monitor.feed_events = spy  # type: ignore[method-assign]


def _watch(tmp_path: Path, script: str, stall_s: float) -> tuple[Monitor, _Ahead]:
    log = tmp_path / "train.log"
    log.write_text("")
    writer = tmp_path / "train.py"
    writer.write_text(script)
    monitor = Monitor(detector_config=DetectorConfig(stall_min_s=stall_s, stall_first_s=stall_s))
    ahead = _Ahead(monitor)
    with LiveSession(monitor, logs=(str(log),), use_nvml=False, tick_s=0.1):
        time.sleep(0.5)
        with open(log, "ab") as out:
            subprocess.run([sys.executable, str(writer)], stdout=out, stderr=subprocess.STDOUT, env=_env(),
                           timeout=120, check=False)
        time.sleep(2.0)
    return monitor, ahead


def test_a_bar_ended_by_a_traceback_is_one_crash_on_the_clock_and_no_stall(tmp_path: Path) -> None:
    """The bar's states are read live as redraws; the traceback completes
    its line with a state not read yet: that state and the crash are dated
    when they were read, not 8 s on, so no silence opens before the crash."""
    monitor, ahead = _watch(tmp_path, BAR_THEN_CRASH.format(steps=40, pause=0.2), stall_s=5.0)
    alerts = [(a.detector, a.state) for a in monitor.alerts.history]
    assert ("crash", "firing") in alerts, alerts
    assert [a for a in alerts if a[0] == "stall"] == [], alerts
    assert ahead.worst < 1.0, f"events dated {ahead.worst:.1f} s ahead of the clock"
    crashes = [e for e in ahead.events if type(e) is Crash]
    steps = [e for e in ahead.events if type(e) is Progress]
    assert crashes and steps and steps[-1].step == 40
    assert crashes[0].time - steps[-2].time < 2.0  # the last states 0.2 s apart, the crash right after


def test_hf_bars_between_logging_dicts_never_run_ahead_of_the_clock(tmp_path: Path) -> None:
    """Each dict line completes a bar line whose states since the last look
    were drawn over the last poll: they end at the read time (they ran 1.0
    to 1.4 s ahead)."""
    monitor, ahead = _watch(tmp_path, BAR_WITH_DICTS.format(steps=60, pause=0.1), stall_s=30.0)
    steps = [e.step for e in ahead.events if type(e) is Progress and e.step is not None]
    assert steps and max(steps) == 60
    assert ahead.worst < 0.5, f"events dated {ahead.worst:.2f} s ahead of the clock"
    assert [a.detector for a in monitor.alerts.history] == []
