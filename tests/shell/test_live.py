"""Live wiring: the clock that follows the data, and progress seen mid-line."""

from __future__ import annotations

import time
from pathlib import Path

from dflash_watch.live import FollowClock, LiveSession
from dflash_watch.monitor import Monitor
from parsers.events import GpuSample


class Wall:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_follow_clock_runs_on_from_the_latest_data_and_follows_a_relaunch() -> None:
    monitor = Monitor(keep_lines=0)
    wall = Wall(1000.0)
    clock = FollowClock(monitor, speed=10.0, wall=wall)
    assert clock() == 1000.0  # no data yet: the wall clock
    monitor.feed_samples([GpuSample(5000.0, 0, 1, 2)])
    clock.observe()
    wall.t += 3
    assert clock() == 5030.0  # 3 wall seconds at 10x past the data
    # A relaunch whose data starts behind where the silence ran on to.
    monitor.feed_samples([GpuSample(5020.0, 0, 1, 2)])
    clock.observe()
    assert clock() == 5020.0


def test_a_tqdm_bar_without_newline_is_progress_live_and_no_stall(tmp_path: Path) -> None:
    """HF Trainer bars end their line only with the epoch: live, the watch
    must still see the steps (from the newest redraw) and not call it a stall."""
    log = tmp_path / "train.log"
    log.write_text("2026-11-29 10:00:00 - INFO - starting\n")
    monitor = Monitor()
    session = LiveSession(monitor, logs=(str(log),), use_nvml=False, tick_s=0.05)
    session.follow = FollowClock(monitor, speed=60.0)  # compress time: 3 s of wall = 3 min of data
    session.clock = session.follow
    with session:
        with open(log, "a", encoding="utf-8") as fh:
            for step in range(1, 31):
                fh.write(f"\r{step * 3}%|###       | {step}/100 [00:{step:02d}<01:00, 1.5it/s]")
                fh.flush()
                time.sleep(0.1)
        deadline = time.time() + 5
        while time.time() < deadline and (monitor.last_progress is None or monitor.last_progress.step < 30):
            time.sleep(0.05)
    assert monitor.last_progress is not None and monitor.last_progress.step == 30
    assert [a for a in monitor.alerts.history if a.detector == "stall"] == []
