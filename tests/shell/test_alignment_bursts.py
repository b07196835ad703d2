"""A buffered log's first burst, met by a watcher started after the run (``dflash_watch.alignment``).

``python train.py > log &``, then the watcher: the first burst holds lines
written before the watch began, so its stamps span more than the watch
(as history appended at once does). What tells it apart is that it ends
as it arrives, on this machine's clock. The real-process check is
``test_live_clocks.test_a_watcher_started_after_a_buffered_run_learns_the_bursts_from_the_first``.
"""

from __future__ import annotations

from dflash_watch.alignment import Alignment
from dflash_watch.parsers.events import Delivery, Progress

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
