"""A watcher started after a run whose output is block-buffered (``dflash_watch.alignment``, ``caught_up``).

``python train.py > log &`` (PYTHONUNBUFFERED unset), the watcher a little
later: its first look finds the latest burst already in the file and reads
it as catch-up, so no fresh chunk showed a burst before the silence to the
next one. The file tells: it was written out a step after its last line
was stamped (Python's ``print`` writes the buffer before the line that
would overflow it; C's stdio leaves it mid-line), and just now. Real
processes (the writer and the helpers are ``test_live_clocks``'s), and
the default limits through ``Monitor.feed_text`` as the tailer calls it.
"""

from __future__ import annotations

import datetime
import os
import time
from pathlib import Path

import pytest
from headless_helpers import wait_for_notice
from test_live_clocks import (
    _FAST_STALL,
    _alerts,
    _await,
    _headless,
    _no_stall_between_bursts_and_the_hang_caught,
    _said_buffered_once,
    _stop,
    _writer,
)

from dflash_watch.ingest import file_end
from dflash_watch.monitor import Monitor

# The writer's lines (~185 bytes at 0.06 s): an 8 KiB buffer is written
# out every ~45 lines, ~2.7 s, well past the one-second stall limit.
_PACE = 0.06
_HOLD = 50  # burst 1 (~45 lines) is in the file, the next few in the buffer


@pytest.mark.slow
def test_a_buffered_burst_caught_up_at_attach_is_no_stall_until_the_next_and_a_hang_is_caught(tmp_path: Path) -> None:
    """The run writes its first burst, then holds (its next lines still in
    its buffer) until the watcher has read the file: the silence to its
    next burst starts at the watcher's first look, so with a one-second
    limit it would be a stall every time. It is none, nor between the
    bursts that follow, and when the run hangs the stall still comes
    within three burst intervals.

    Python's ``print`` writes its buffer out before the line that would
    overflow it: the file ends with a whole line, written a step after
    that line was stamped (a line-buffered log's, as it was stamped)."""
    log = tmp_path / "train.log"
    config = tmp_path / "dflash-watch.toml"
    config.write_text(_FAST_STALL)
    # Two more bursts after the hold, then a hang with lines unwritten.
    writer = _writer(tmp_path, log, 0, _HOLD + 90, _PACE, 1, 0, 0.0, _HOLD, unbuffered=False)
    headless = None
    err = ""
    try:
        _await(tmp_path / "writer.py.held", "held its first lines")
        assert log.stat().st_size, "no burst in the file before the watcher began"
        # ``ready.log`` never comes: its notice says the watcher follows
        # (and has read what train.log held).
        headless = _headless(tmp_path, log, "--config", str(config), "--log", str(tmp_path / "ready.log"))
        err = wait_for_notice(headless, "to appear")
        (tmp_path / "writer.py.go").touch()
        _no_stall_between_bursts_and_the_hang_caught(tmp_path, log, headless)
    finally:
        err += _stop(*(p for p in (writer, headless) if p is not None))
    _said_buffered_once(err)


@pytest.mark.slow
def test_a_line_buffered_log_caught_up_at_attach_then_silent_stalls_at_the_usual_time(tmp_path: Path) -> None:
    """The same run written line by line (``python -u``) that goes silent
    before the watcher began: its file ends with a newline, nothing says
    bursts, and the stall comes at the one-second limit (a buffered
    writer's allowance, 2.5 x the ~2.4 s its last 8 KiB took, would be 6 s)."""
    log = tmp_path / "train.log"
    config = tmp_path / "dflash-watch.toml"
    config.write_text(_FAST_STALL)
    writer = _writer(tmp_path, log, 0, 100, _PACE, 1, 0, 0.0, 40, unbuffered=True)
    headless = None
    try:
        _await(tmp_path / "writer.py.held", "held its first lines")
        assert log.read_bytes().endswith(b"\n")
        headless = _headless(tmp_path, log, "--config", str(config), "--log", str(tmp_path / "ready.log"))
        wait_for_notice(headless, "to appear")
        following = time.monotonic()
        alerts = _alerts(headless, following + 8.0, stop=lambda a: a["detector"] == "stall")
    finally:
        _stop(*(p for p in (writer, headless) if p is not None))
    stalls = [a for a in alerts if a["detector"] == "stall" and a["state"] == "firing"]
    assert stalls, alerts
    late = stalls[0]["_seen"] - following
    print(f"line-buffered, caught up then silent: stall {late:.1f} s after the watcher followed")
    assert late <= 4.0, f"the stall came {late:.1f} s after the watcher followed: a buffered writer's allowance"
    assert "bursts" not in stalls[0]["message"]


def _slow_steps(count: int, t0: float, every: float) -> str:
    """Slow steps (3 s) in short lines: an 8 KiB buffer holds minutes of them."""
    out = []
    for i in range(count):
        stamp = datetime.datetime.fromtimestamp(t0 + i * every, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
        out.append(f"{stamp} - INFO - train - step {i + 1}/100000 | loss 2.31\n")
    return "".join(out)


@pytest.mark.parametrize("late", [3.0, 0.0], ids=["buffered", "line-buffered"])
def test_with_the_default_limits_minutes_between_bursts_are_no_stall(tmp_path: Path, late: float) -> None:
    """The 3 a.m. case, through ``Monitor.feed_text`` as the tailer calls it
    at attach: steps every 3 s in lines of ~75 bytes, buffered, so a burst
    every ~5 min; the watcher reads the last one 10 s after it came. With
    the default limits (120 s, 5 x the step) the silence to the next one
    is no stall; the same file written line by line (as it was stamped)
    stalls at 2 min as ever."""
    wall = 1_800_000_000.0
    log = tmp_path / "train.log"
    text = _slow_steps(200, wall - 10.0 - 3.0 - 199 * 3.0, 3.0)
    log.write_text(text)
    last = wall - 10.0 - 3.0
    os.utime(log, (last + late, last + late))  # written a step after its last line was stamped: a buffer
    monitor = Monitor(tz=datetime.UTC)
    monitor.feed_text(str(log), text, 1, wall, fresh=False, arrived=wall, end=file_end(str(log), text))
    stalls = [a for t in range(1, 300, 5) for a in monitor.tick(last + t) if a.detector == "stall"]
    if late:
        assert not stalls, stalls
        # Its interval, by its stamps: 8 KiB of them take ~5 min.
        assert [a for a in monitor.tick(last + 2000.0) if a.detector == "stall"]
    else:
        assert stalls and 120.0 <= stalls[0].time - last <= 130.0, stalls


def test_a_line_written_after_the_catch_up_was_read_is_no_sign_of_a_buffer(tmp_path: Path) -> None:
    """The file's mtime counts only while the file still ends with what was
    read: a line-buffered writer that wrote one more line between the read
    and the look has an mtime a step after the last line read, exactly as a
    buffer's write-out would (its stall then waited ~19 s, not 1 s)."""
    log = tmp_path / "train.log"
    read = "2026-12-02 10:00:00,000 - INFO - step 1\n2026-12-02 10:00:00,100 - INFO - step 2\n"
    log.write_text(read)
    end = file_end(str(log), read)
    assert end is not None and not end.mid_line
    with log.open("a") as fh:
        fh.write("2026-12-02 10:00:00,200 - INFO - ste")  # a buffer written out mid-line
    end = file_end(str(log), read)
    assert end is not None and end.mid_line
    with log.open("a") as fh:
        fh.write("p 3\n")  # a whole line since the read: the mtime is that line's
    assert file_end(str(log), read) is None
