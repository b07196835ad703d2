"""What the dashboard shows of a log a real process writes, live.

A real writer process (PYTHONUNBUFFERED unset, flushing as tqdm and
``print(..., flush=True)`` do), the real tailer (``LiveSession``), the
dashboard drawn by Textual's pilot. Both were found by a review in a real
tmux pane:

* a log that holds only a tqdm bar (redrawn with '\\r', no newline until
  the epoch ends) said "no lines yet: check the path" for the whole epoch
  while the header read the bar from the same file;
* at a crash, ``RuntimeError: boom at step 10`` was read as a progress line
  of its own (a step, nothing else), which the header, following the
  training loop only, passed over: it stopped at step 8 while the log
  showed step 10.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from dflash_watch.live import LiveSession
from dflash_watch.monitor import Monitor
from dflash_watch.tui.app import DashboardApp

BAR = r"""
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

CRASH = r"""
import datetime, sys, time
for i in range(1, 11):
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    print(f"{stamp} step {i}/1000 | loss {2.31 - i * 0.001:.3f} | 21.5 Ktok/s", flush=True)
    if i == 10:
        raise RuntimeError("boom at step %d" % i)
    time.sleep(0.3)
"""

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # users' runs are not unbuffered


@asynccontextmanager
async def following(log: Path, size: tuple[int, int]) -> AsyncIterator[tuple[DashboardApp, Any, Monitor]]:
    """The dashboard on a Monitor whose live session follows ``log``."""
    log.touch()
    monitor = Monitor()
    app = DashboardApp(monitor)
    async with app.run_test(size=size) as pilot:
        session = LiveSession(monitor, logs=(str(log),), use_nvml=False, tail_poll_s=0.05, tick_s=0.2)
        session.start()
        try:
            yield app, pilot, monitor
        finally:
            session.stop()


async def shown_until(app: DashboardApp, pilot: Any, read: Callable[[], str], until: str, timeout: float) -> str:
    """``read()`` of the redrawn dashboard, again until it holds ``until`` (or ``timeout``)."""
    deadline = time.monotonic() + timeout
    shown = ""
    while time.monotonic() < deadline and until not in shown:
        await pilot.pause(0.2)
        app.redraw(force=True)
        await pilot.pause(0.05)
        shown = read()
    return shown


def log_text(app: DashboardApp) -> str:
    view = app.query_one("#log-view")
    return "\n".join(view.render_line(y).text for y in range(view.scrollable_content_region.height))


async def test_a_bar_without_a_newline_is_shown_and_its_newest_state_then_the_finished_line(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    async with following(log, (140, 44)) as (app, pilot, monitor):
        writer = subprocess.Popen([sys.executable, "-c", BAR, str(log)], env=ENV)
        try:
            shown = await shown_until(app, pilot, lambda: log_text(app), "20/400", 20)
            assert "20/400" in shown and "no lines yet" not in shown, shown
            assert b"\n" not in log.read_bytes() and "loss=2.20" in shown
            assert "19/400" not in shown  # the newest state only, as a terminal shows it
            assert writer.wait(20) == 0
            shown = await shown_until(app, pilot, lambda: log_text(app), "epoch done", 10)
            assert "40/400" in shown and "epoch done" in shown and "20/400" not in shown, shown
            assert monitor.partial_lines == {}
        finally:
            if writer.poll() is None:
                writer.kill()


async def test_the_header_shows_the_last_step_logged_before_the_crash(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    async with following(log, (200, 44)) as (app, pilot, monitor):
        with open(log, "ab") as out:
            assert subprocess.run([sys.executable, "-c", CRASH], stdout=out, stderr=out, env=ENV,
                                  timeout=60).returncode == 1
        header = app.query_one("#header")
        shown = await shown_until(app, pilot, lambda: header._shown.plain if header._shown else "", "1 firing", 10)
        assert "RuntimeError: boom at step 10" in log.read_text()
        assert "step 10/1,000" in shown, shown
        assert monitor.last_progress.total_steps == 1000
