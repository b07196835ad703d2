"""A buffered log's first burst, met by a watcher started after the run (``dflash_watch.alignment``).

``python train.py > log &``, then the watcher: the first burst holds lines
written before the watch began, so its stamps span more than the watch
(as history appended at once does). What tells it apart is that it ends
as it arrives, on this machine's clock. The real-process check is
``test_live_clocks.test_a_watcher_started_after_a_buffered_run_learns_the_bursts_from_the_first``.

A watcher started later still finds that burst in the file at its first
look, read as catch-up (``Alignment.caught_up``): the file itself tells
that a buffer wrote it. The real-process checks are in test_buffered_attach.py.
"""

from __future__ import annotations

import datetime

from dflash_watch.alignment import Alignment, FileEnd
from dflash_watch.parsers.events import Delivery, Progress
from dflash_watch.parsers.stream import LogStream

WALL = 1_800_000_000.0


def _steps(first: int, count: int, t0: float, every: float, clocked: bool = True) -> list[Progress]:
    return [Progress(t0 + i * every, f"train.log:{first + i}", step=first + i, clocked=clocked) for i in range(count)]


def _chunk(
    align: Alignment, events: list[Progress], now: float, since: float, stamped: list[Progress] | None = None
) -> Delivery | None:
    """What ``Monitor.feed_text`` asks of a fresh chunk: ``prepare`` on its
    stamps (those of ``stamped``, else of every clocked step), then ``delivery``."""
    times = [e.time for e in (events if stamped is None else stamped) if e.clocked]
    align.prepare((min(times), max(times)) if times else None, now, since, [], arrived=now)
    return align.delivery(events, now, since, [], arrived=now)


def test_a_first_burst_that_ends_as_it_arrives_is_a_burst_however_soon_after_the_watch_began() -> None:
    # 40 lines over 10 s, the newest written a step before it came, 0.5 s into the watch.
    align = Alignment("train.log")
    burst = _steps(1, 40, WALL - 10.06, 0.25)
    got = _chunk(align, burst, WALL, WALL - 0.5)
    assert got is not None and got.burst_s == burst[-1].time - burst[0].time
    # Learnt from it too: the offset (none: on this machine's clock).
    assert align.offset == 0.0


def test_history_that_ended_long_ago_is_still_no_burst() -> None:
    align = Alignment("train.log")
    assert _chunk(align, _steps(1, 40, WALL - 3600.0, 0.25), WALL, WALL - 0.5) is None
    assert align.burst_s == 0.0 and align.offset is None


def test_a_step_dated_on_arrival_does_not_make_old_stamps_recent() -> None:
    """Steps without a stamp of their own, dated as they arrive, beside
    lines stamped a day ago (glog lines appended at once): only a stamp
    tells when the chunk was written."""
    align = Alignment("train.log")
    old = _steps(1, 30, WALL - 86400.0, 1.0)
    arrived = _steps(31, 3, WALL, 0.0)
    assert _chunk(align, old + arrived, WALL, WALL - 0.5, stamped=old) is None
    assert align.burst_s == 0.0


def test_a_first_burst_without_stamps_soon_after_the_watch_began_is_allowed_for() -> None:
    align = Alignment("train.log")
    got = _chunk(align, _steps(1, 50, WALL, 0.0, clocked=False), WALL, WALL - 0.3)
    assert got is not None and got.burst_s == 240.0


def test_a_delivery_is_dated_with_its_chunk_not_ahead_of_it() -> None:
    """The live clock may not be on the log's yet (its first chunk: history
    on its own clock): a Delivery dated ``now`` would run every detector's
    clock a day ahead of the data."""
    align = Alignment("train.log")
    history = _steps(1, 50, WALL - 86400.0, 0.0, clocked=False)
    got = align.delivery(history, WALL, WALL - 0.3, [])
    assert got is not None and got.time == WALL - 86400.0


# -- a buffered writer's burst read as catch-up (``Alignment.caught_up``) -------------


def _log(count: int, t0: float, every: float, pad: int = 120, whole_seconds: bool = False) -> str:
    """``count`` step lines stamped from ``t0`` (UTC) ``every`` s apart, ~``pad`` + 60 chars each."""
    lines = []
    for i in range(count):
        at = datetime.datetime.fromtimestamp(t0 + i * every, datetime.UTC)
        stamp = at.strftime("%Y-%m-%d %H:%M:%S") + ("" if whole_seconds else f",{at.microsecond // 1000:03d}")
        lines.append(f"{stamp} - INFO - train - step {i + 1}/100000 | loss 2.31 | {'x' * pad}\n")
    return "".join(lines)


def _caught_up(text: str, end: FileEnd | None, wall: float = WALL) -> tuple[Alignment, Delivery | None]:
    """What ``Monitor.feed_text`` does with a chunk of the catch-up read at ``wall``."""
    stream = LogStream("train.log", tz=datetime.UTC)
    events = stream.feed(text, 1, wall)
    align = Alignment("train.log", learn=False)
    return align, align.caught_up(stream, text, events, wall, end)


# 45 lines 0.06 s apart (~8 KiB: one buffer), the last stamped 1 s before the watcher read them.
_BURST = _log(45, WALL - 1.0 - 44 * 0.06, 0.06)
_LAST = WALL - 1.0


def test_a_file_written_a_step_after_its_last_stamp_was_a_buffer_and_is_allowed_its_interval() -> None:
    """Python's ``print`` writes the buffer out as the next line no longer
    fits: the file ends with a whole line, written a step after it was stamped."""
    align, got = _caught_up(_BURST, FileEnd(False, _LAST + 0.06))
    assert got is not None and got.time == _LAST
    # The time its last 8 KiB took to write: 44 steps of 0.06 s, over ~8 KiB.
    assert 2.5 <= got.burst_s <= 2.9, got
    assert align.burst_s == got.burst_s
    # Read 4 s after it was written: the next burst is at least that far.
    later = _caught_up(_BURST, FileEnd(False, _LAST + 0.06), WALL + 4.0)[1]
    assert later is not None and abs(later.burst_s - (4.0 + 1.0 - 0.06)) < 1e-3


def test_a_line_buffered_file_written_as_stamped_is_no_burst() -> None:
    assert _caught_up(_BURST, FileEnd(False, _LAST + 0.001))[1] is None
    # Nor one whose newest line is an hour old (history), however it ended.
    old = _log(45, WALL - 3600.0, 0.06)
    assert _caught_up(old, FileEnd(True, WALL - 3600.0 + 44 * 0.06 + 0.06))[1] is None
    # Nor one stamped on another clock (two hours behind this machine's):
    # how long after its last stamp it was written says nothing.
    skewed = _log(45, WALL - 7201.0 - 44 * 0.06, 0.06)
    assert _caught_up(skewed, FileEnd(False, WALL - 0.94))[1] is None
    # Nor one whose writer has been silent past the bursts a stall allows
    # (2.5 x its ~2.7 s, and a loaded machine's few seconds).
    silent = _log(45, WALL - 20.0 - 44 * 0.06, 0.06)
    assert _caught_up(silent, FileEnd(False, WALL - 20.0 + 0.06))[1] is None


def test_a_file_that_ends_mid_line_was_a_buffer_stamps_or_not() -> None:
    """C's stdio fills the buffer to its last byte. Without stamps the
    interval is unknown until the bursts that follow tell it."""
    assert _caught_up(_BURST, FileEnd(True, WALL - 0.5))[1] is not None
    unstamped = "".join(f"step {i}/100000 | loss 2.31 | {'x' * 120}\n" for i in range(1, 46))
    got = _caught_up(unstamped, FileEnd(True, WALL - 0.5))[1]
    assert got is not None and got.burst_s == 240.0
    assert _caught_up(unstamped, FileEnd(False, WALL - 0.5))[1] is None


def test_stamps_in_whole_seconds_allow_a_second_of_their_own() -> None:
    """Steps a second apart stamped to the second: a line-buffered file is
    written up to a second after its last stamp; a buffer, a step after."""
    text = _log(60, WALL - 61.0, 1.0, pad=40, whole_seconds=True)
    last = WALL - 2.0
    assert _caught_up(text, FileEnd(False, last + 0.95))[1] is None
    got = _caught_up(text, FileEnd(False, last + 1.8))[1]
    # 59 s of stamps over ~6 KiB: a buffer of 8 KiB takes over a minute.
    assert got is not None and 70.0 < got.burst_s < 90.0, got


def test_bursts_too_close_to_matter_are_not_said() -> None:
    fast = _log(45, WALL - 0.5, 0.01)
    assert _caught_up(fast, FileEnd(True, WALL - 0.05))[1] is None


def test_after_a_false_alarm_the_lines_that_come_one_by_one_end_the_allowance() -> None:
    """The file looked buffered (a line caught mid-write): the fresh chunks
    that follow, a line each poll, end the allowance as for a burst seen live."""
    align, got = _caught_up(_BURST, FileEnd(True, _LAST))
    assert got is not None
    ends = [align.delivery(_steps(46 + i, 1, WALL + 0.4 * i, 0.0), WALL + 0.4 * i, WALL, [], WALL + 0.4 * i)
            for i in range(1, 3)]
    assert ends[0] is None and ends[1] is not None and ends[1].burst_s == 0.0


def test_a_delivery_is_dated_with_its_last_line_not_steps_dated_on_the_wall_clock() -> None:
    """A chunk that holds a log's first stamp: the steps before it are dated
    on the wall clock (no stamp yet), the stamped lines after it 45 days
    behind. A Delivery dated with the chunk's latest time would run every
    detector's clock 45 days ahead (a recompile "resolved", a stall fired
    at once); with its last line, it is where the data is."""
    stamped = _steps(60, 10, WALL - 45 * 86400.0, 0.5)
    on_wall = _steps(1, 59, WALL, 0.0, clocked=False)
    align = Alignment("train.log", learn=False)
    align.burst_s = 240.0  # the catch-up took it for a buffer; lines one by one end that
    align.delivery(on_wall[:1], WALL, WALL - 1.0, [], arrived=WALL)
    got = align.delivery(on_wall + stamped, WALL + 0.3, WALL - 1.0, [], arrived=WALL + 0.3)
    assert got is not None and got.burst_s == 0.0
    assert got.time == stamped[-1].time
    # The catch-up's own: the same.
    text = "".join(f"step {i}/100000 | loss 2.31 | {'x' * 120}\n" for i in range(1, 46))
    stream = LogStream("train.log", tz=datetime.UTC)
    events = stream.feed(text, 1, WALL) + stamped
    late = Alignment("train.log", learn=False).caught_up(stream, text, events, WALL, FileEnd(True, WALL - 0.5))
    assert late is not None and late.time == stamped[-1].time
