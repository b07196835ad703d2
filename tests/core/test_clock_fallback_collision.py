"""A stamped line whose stamp equals the fallback time keeps its stamp.

The event clock tells events the stream dated by a fallback time (no stamp
seen yet: the arrival time live, the file's mtime in replay) by their time.
A step line stamped in exactly that instant was taken for one: it got the
previous stamp's time and lost ``clocked``. Replay meets it with a log whose
whole-second mtime (a tar extraction, ``touch -d``) is the second of its
last, whole-second stamped line; live with a clock standing at the data.
"""

from __future__ import annotations

import calendar
import datetime
import os
from pathlib import Path

import pytest

from dflash_watch.parsers.events import Progress
from dflash_watch.parsers.stream import LogStream
from dflash_watch.replay import log_events

BASE = calendar.timegm((2026, 11, 29, 10, 0, 0))


def _text(n: int, us: bool) -> str:
    def clock(i: int) -> str:
        return f"10:{3 * i // 60:02d}:{3 * i % 60:02d}"

    if us:
        return "".join(f"11/29/2026 {clock(i)} - INFO - __main__ - step {i}/100 | loss 2.0 | 20.0 Ktok/s\n"
                       for i in range(n))
    return "".join(f"2026-11-29 {clock(i)},000 - INFO - step {i}/100 | loss 2.0 | 20.0 Ktok/s\n" for i in range(n))


@pytest.mark.parametrize("replay", [False, True])
@pytest.mark.parametrize("us", [False, True])
@pytest.mark.parametrize("n", [2, 3, 40])
def test_the_line_stamped_at_the_fallback_time_keeps_its_stamp(replay: bool, us: bool, n: int) -> None:
    stream = LogStream("x", tz=datetime.UTC, default_year=2026, replay=replay)
    fallback = BASE + 3 * (n - 1)  # the last line's stamp
    events = stream.feed(_text(n, us), 1, fallback) + stream.flush(fallback)
    steps = [e for e in events if isinstance(e, Progress)]
    assert [e.time - BASE for e in steps] == [3.0 * i for i in range(n)]
    assert all(e.clocked for e in steps)


def test_replay_of_a_log_whose_mtime_is_its_last_stamp(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(_text(5, us=True))
    os.utime(log, (BASE + 12, BASE + 12))  # as tar leaves it: the second of the last line
    steps = [e for e in log_events(str(log), tz=datetime.UTC) if isinstance(e, Progress)]
    assert [e.time - BASE for e in steps] == [0.0, 3.0, 6.0, 9.0, 12.0]
    assert all(e.clocked for e in steps)
