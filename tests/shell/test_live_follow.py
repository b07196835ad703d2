"""Live: a log written about as fast as it is read is followed, not left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from dflash_watch import live
from dflash_watch.live import LiveSession
from dflash_watch.monitor import Monitor

# A training job: 10 step lines every 50 ms for ~2.5 s, flushed each time.
WRITER = """
import sys, time
with open(sys.argv[1], "a", encoding="utf-8") as fh:
    for n in range(50):
        fh.write("".join(f"11/29/2026 10:00:{n % 60:02d} - INFO - train - step {10 * n + i}/9000 | loss 2.3 | "
                         "21.5 Ktok/s\\n" for i in range(10)))
        fh.flush()
        time.sleep(0.05)
"""


def test_a_round_that_read_longer_than_the_pause_is_followed_by_the_next_at_once(tmp_path: Path, monkeypatch) -> None:
    """Rounds start a pause apart, not a pause after the last one ended: when
    reading a round's lines takes longer than the pause (a log growing at
    50k lines/s), the next round starts at once instead of idling the whole
    pause on top, which let such a log fall far behind."""
    log = tmp_path / "train.log"
    log.write_text("")
    monitor = Monitor(keep_lines=0, keep_history=False)
    real_feed = monitor.feed_text
    feeds: list[float] = []

    def slow_feed(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        feeds.append(time.monotonic())
        time.sleep(0.6)  # longer than the 0.4 s pause between rounds while data flows
        return real_feed(*args, **kwargs)

    monkeypatch.setattr(monitor, "feed_text", slow_feed)
    sleeps: list[tuple[float, float]] = []
    real_sleep = live.Rounds.sleep

    def recorded_sleep(self, timeout: float) -> None:  # noqa: ANN001
        sleeps.append((time.monotonic(), timeout))
        real_sleep(self, timeout)

    monkeypatch.setattr(live.Rounds, "sleep", recorded_sleep)
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)
    session = LiveSession(monitor, logs=(str(log),), use_nvml=False, tick_s=0.5)
    with session:
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(log)], env=env)
        assert writer.wait(20) == 0
        wrote = time.monotonic()
        deadline = wrote + 10
        while time.monotonic() < deadline:
            state = monitor._streams.get(str(log))
            if state is not None and state.lines >= 500:
                break
            time.sleep(0.05)
        assert state is not None and state.lines == 500
    assert len(feeds) >= 2, feeds
    # Every round between the first lines read and the writer's last write
    # found new lines and read them for 0.6 s: none idled after it.
    idle = [t for at, t in sleeps if feeds[0] <= at <= wrote - 0.7]
    assert idle == [], idle
