"""``at_first_reading``: a live catch-up's opening events (before the log's
first stamp, dated by the wall clock) take the first clock reading after
them, unclocked; every later event is left as it is."""

from __future__ import annotations

from dflash_watch.parsers.clock import at_first_reading
from dflash_watch.parsers.events import Crash, Progress

WALL = 2_000_000_000.0


def _p(time: float, step: int, clocked: bool = True) -> Progress:
    return Progress(time=time, source=f"t.log:{step}", step=step, clocked=clocked)


def test_the_opening_events_take_the_first_reading_unclocked() -> None:
    events = [_p(WALL, 0), _p(WALL + 0.5, 10), _p(1000.0, 20), _p(1001.0, 30), _p(WALL + 9.0, 40)]
    out = at_first_reading(events, WALL)
    assert [(e.time, e.clocked) for e in out] == [
        (1000.0, False), (1000.0, False), (1000.0, True), (1001.0, True), (WALL + 9.0, True)]
    assert [e.step for e in out] == [0, 10, 20, 30, 40]


def test_nothing_moves_without_an_opening_or_without_a_reading() -> None:
    stamped = [_p(1000.0, 1), _p(WALL, 2)]
    assert at_first_reading(stamped, WALL) == stamped
    only_wall = [_p(WALL, 1), _p(WALL + 1.0, 2)]
    assert at_first_reading(only_wall, WALL) == only_wall


def test_a_crash_among_the_opening_events_moves_too() -> None:
    crash = Crash(time=WALL, source="t.log:2", detector="crash", kind="exception", exc_type="RuntimeError",
                  message="boom", signature="RuntimeError")
    out = at_first_reading([crash, _p(1000.0, 3)], WALL)
    assert out[0].time == 1000.0 and out[0].kind == "exception"
