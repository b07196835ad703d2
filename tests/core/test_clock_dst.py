"""Naive local stamps across a DST change (``--tz`` with a zone that has one).

When clocks fall back, an hour of wall times happens twice: a log stamped
in local time without an offset writes 01:30 twice. Read as the first one
each time, the clock would jump back an hour; the parser takes the reading
nearest the stamp before it, so the true times come out.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from dflash_watch.parsers.events import Progress
from dflash_watch.parsers.stream import LogStream
from dflash_watch.parsers.timestamps import TimeParser

UTC = UTC

# (zone, a UTC moment 90 minutes before its clocks fall back in 2026)
FALL_BACK = [
    ("America/New_York", datetime(2026, 11, 1, 4, 30, tzinfo=UTC)),  # 02:00 EDT -> 01:00 EST
    ("Europe/Berlin", datetime(2026, 10, 25, 0, 30, tzinfo=UTC)),  # 03:00 CEST -> 02:00 CET
]
STYLES = {
    "iso": lambda d: d.strftime("%Y-%m-%d %H:%M:%S") + f",{d.microsecond // 1000:03d} - INFO - step",
    "us": lambda d: d.strftime("%m/%d/%Y %H:%M:%S") + " - INFO - __main__ - step",
    "glog": lambda d: d.strftime("I%m%d %H:%M:%S") + f".{d.microsecond:06d} 1 train.py:9] step",
}


def moments(start: datetime, count: int, every_s: float) -> list[datetime]:
    return [start + timedelta(seconds=i * every_s) for i in range(count)]


@pytest.mark.parametrize("zone, start", FALL_BACK)
@pytest.mark.parametrize("style", sorted(STYLES))
def test_the_repeated_hour_reads_as_the_true_time(zone: str, start: datetime, style: str) -> None:
    tz = ZoneInfo(zone)
    truth = moments(start, 4 * 60, 45.0)  # three hours, across the change
    walls = [m.astimezone(tz).replace(tzinfo=None) for m in truth]
    assert walls != sorted(walls)  # the wall clock went back an hour
    lines = [STYLES[style](wall) for wall in walls]
    parser = TimeParser(tz=tz, default_year=2026)
    got = [parser.parse(line) for line in lines]
    assert got == pytest.approx([m.timestamp() for m in truth], abs=1e-3)


@pytest.mark.parametrize("zone, start", FALL_BACK)
@pytest.mark.parametrize("fast", [True, False])
def test_stream_steps_run_on_through_the_change(zone: str, start: datetime, fast: bool) -> None:
    tz = ZoneInfo(zone)
    truth = moments(start, 3 * 3600 // 5, 5.0)
    text = "".join(
        STYLES["iso"](m.astimezone(tz).replace(tzinfo=None)) + f" {i}/5000 | loss 2.0 | 20.0 Ktok/s\n"
        for i, m in enumerate(truth)
    )
    stream = LogStream("t.log", tz=tz, fast=fast)
    events = [e for e in stream.feed(text, 1, 0.0) + stream.flush(0.0) if isinstance(e, Progress)]
    assert [e.time for e in events] == pytest.approx([m.timestamp() for m in truth], abs=1e-3)
    assert all(e.clocked for e in events)


def test_the_first_hour_of_a_log_started_inside_the_repeat_is_the_first_reading() -> None:
    # Nothing before it: the earlier reading (as datetime's fold=0 says).
    tz = ZoneInfo("America/New_York")
    value = TimeParser(tz=tz).parse("2026-11-01 01:30:00 x")
    assert value == datetime(2026, 11, 1, 5, 30, tzinfo=UTC).timestamp()
