"""The header's step at a crash is the last step the run logged.

A real writer process (PYTHONUNBUFFERED unset, flushing each line as
``print(..., flush=True)`` does) logs stamped steps and dies at step 10
with ``RuntimeError: boom at step 10``; the real tailer reads it; the
dashboard's header is drawn by Textual's pilot. The exception line was
read as a progress line of its own (a step, nothing else), which the
header, following the training loop only, passed over: it stopped at
step 8 while the log showed step 10 (a review in a real tmux pane).
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
import datetime, sys, time
for i in range(1, 11):
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    print(f"{stamp} step {i}/1000 | loss {2.31 - i * 0.001:.3f} | 21.5 Ktok/s", flush=True)
    if i == 10:
        raise RuntimeError("boom at step %d" % i)
    time.sleep(0.3)
"""


async def test_the_header_shows_the_last_step_logged_before_the_crash(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.touch()
    monitor = Monitor()
    app = DashboardApp(monitor)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    async with app.run_test(size=(200, 44)) as pilot:
        session = LiveSession(monitor, logs=(str(log),), use_nvml=False, tail_poll_s=0.05, tick_s=0.2)
        session.start()
        try:
            with open(log, "ab") as out:
                assert subprocess.run([sys.executable, "-c", WRITER], stdout=out, stderr=out, env=env,
                                      timeout=60).returncode == 1
            header = app.query_one("#header")
            deadline = time.monotonic() + 10
            shown = ""
            while time.monotonic() < deadline and "1 firing" not in shown:
                await pilot.pause(0.2)
                app.redraw(force=True)
                await pilot.pause(0.05)
                shown = header._shown.plain if header._shown is not None else ""
            assert "RuntimeError: boom at step 10" in log.read_text()
            assert "step 10/1,000" in shown, shown
            assert monitor.last_progress.total_steps == 1000
        finally:
            session.stop()
