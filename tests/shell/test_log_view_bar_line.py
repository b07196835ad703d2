"""A log that holds only a tqdm bar (redrawn with '\\r', no newline until
the epoch ends) shows the bar in the log view, live.

A real writer process draws the bar into the file with PYTHONUNBUFFERED
unset (it flushes each state, as tqdm does), the real tailer reads it, and
the dashboard's log panel is drawn by Textual's pilot. It used to say "no
lines yet: check the path" for the whole epoch while the header read the
bar from the same file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from dflash_watch.live import LiveSession
from dflash_watch.monitor import Monitor
from dflash_watch.tui.app import DashboardApp

WRITER = r"""
import sys, time
out = open(sys.argv[1], "a")
for i in range(1, 41):
    out.write(f"\rTraining:  {i * 100 // 400:2d}%| {i}/400 [00:{i:02d}<01:00, 1.00it/s, loss=2.{i:02d}]")
    out.flush()
    time.sleep(0.1)
    if i == 20:
        time.sleep(2.5)  # a look at the bar half-way
out.write("\nepoch done\n")
out.flush()
"""


def _log_text(app: DashboardApp) -> str:
    view = app.query_one("#log-view")
    return "\n".join(view.render_line(y).text for y in range(view.scrollable_content_region.height))


async def test_a_bar_without_a_newline_is_shown_and_its_newest_state_then_the_finished_line(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.touch()
    monitor = Monitor()
    app = DashboardApp(monitor)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    async with app.run_test(size=(140, 44)) as pilot:
        session = LiveSession(monitor, logs=(str(log),), use_nvml=False, tail_poll_s=0.05, tick_s=0.2)
        session.start()
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(log)], env=env)
        try:
            deadline = time.monotonic() + 20
            shown = ""
            while time.monotonic() < deadline and "20/400" not in shown:
                await pilot.pause(0.2)
                app.redraw(force=True)
                await pilot.pause(0.05)
                shown = _log_text(app)
            assert "20/400" in shown and "no lines yet" not in shown, shown
            assert b"\n" not in log.read_bytes() and "loss=2.20" in shown
            assert "19/400" not in shown  # the newest state only, as a terminal shows it
            assert writer.wait(20) == 0
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and "epoch done" not in shown:
                await pilot.pause(0.2)
                app.redraw(force=True)
                await pilot.pause(0.05)
                shown = _log_text(app)
            assert "40/400" in shown and "epoch done" in shown and "20/400" not in shown, shown
            assert monitor.partial_lines == {}
        finally:
            if writer.poll() is None:
                writer.kill()
            session.stop()
