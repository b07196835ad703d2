"""Live stamps on the live clock, and bursts of a buffered log (``dflash_watch.alignment``).

The class is fed what ``Monitor.feed_text`` feeds it: a fresh chunk's
events, the stream's newest stamp and the arrival time. The real-process
checks are in test_live_clocks.py; these pin the rules one by one.
"""

from __future__ import annotations

from dflash_watch.alignment import Alignment
from dflash_watch.detectors.stall import Stall
from dflash_watch.parsers.events import Delivery, Progress, Tick

WALL = 1_800_000_000.0


def _steps(first: int, count: int, t0: float, every: float, clocked: bool = True) -> list[Progress]:
    return [Progress(t0 + i * every, f"train.log:{first + i}", step=first + i, clocked=clocked) for i in range(count)]


def test_a_log_two_hours_behind_is_moved_onto_the_clock_and_said_once() -> None:
    align, notes = Alignment("train.log"), []
    stamped = WALL - 7200.0
    assert align.prepare((stamped - 1.0, stamped), WALL, WALL - 2.0, notes) == 7200.0
    # The same offset for the next chunk: durations stay the stamps'.
    assert align.prepare((stamped + 1.0, stamped + 1.75), WALL + 2.0, WALL - 2.0, notes) == 7200.0
    assert len(notes) == 1 and "2 h 00 min behind" in notes[0] and "--tz" in notes[0]


def test_stamps_that_agree_with_the_clock_are_left_alone() -> None:
    align, notes = Alignment("train.log"), []
    assert align.prepare((WALL - 0.6, WALL - 0.2), WALL, WALL - 5.0, notes) == 0.0
    assert align.offset == 0.0 and not notes


def test_history_appended_at_once_is_not_an_offset() -> None:
    """Hours of stamps that arrive within a second are history, not a log
    running ahead: it keeps the data's own clock (as replay reads it)."""
    align, notes = Alignment("train.log"), []
    assert align.prepare((WALL + 10.0, WALL + 6000.0), WALL, WALL - 0.1, notes) == 0.0
    assert align.offset is None and not notes


def test_a_log_caught_up_on_its_own_clock_is_not_moved_but_its_skew_is_said() -> None:
    align, notes = Alignment("train.log", learn=False), []
    # The live clock follows the caught-up log (its ``now`` is the log's);
    # only the wall clock shows it runs two hours behind.
    for i in range(2):
        t = WALL - 7200.0 + i
        assert align.prepare((t - 0.2, t), t + 0.1, WALL - 60.0, notes, wall=WALL + i + 0.1) == 0.0
    assert len(notes) == 1 and "2 h 00 min behind" in notes[0]


def test_stamps_three_hours_ahead_are_said_as_three_hours() -> None:
    """Whole-second stamps, read a moment after they were written: the lag
    of stamps 3 h ahead is 3 h less a fraction of a second, which was said
    as "2 h 59 min"."""
    align, notes = Alignment("train.log", learn=False), []
    for i in range(2):
        t = WALL + 10800.0 + i
        align.prepare((t - 1.0, t), t + 0.1, WALL - 60.0, notes, wall=WALL + i + 0.6)
    assert len(notes) == 1 and "3 h 00 min ahead of" in notes[0], notes


def test_another_offset_only_when_three_chunks_agree() -> None:
    align, notes = Alignment("train.log"), []
    align.prepare((WALL, WALL), WALL, WALL - 5.0, notes)
    assert align.offset == 0.0
    # A relaunch under a clock an hour behind: three chunks in a row say so.
    for i in range(3):
        t = WALL + 10.0 * (i + 1)
        align.prepare((t - 3600.0, t - 3600.0), t, WALL - 5.0, notes)
    assert align.offset == 3600.0
    assert len(notes) == 1 and "1 h 00 min behind" in notes[0]


def test_bursts_of_a_buffered_log_give_their_interval_once_confirmed() -> None:
    align, notes = Alignment("train.log"), []
    since = WALL - 160.0
    out = []
    for n in range(3):
        arrival = WALL + 150.0 * n
        burst = _steps(1 + 60 * n, 60, arrival - 150.0, 2.5)
        out.append(align.delivery(burst, arrival, since, notes))
    assert isinstance(out[0], Delivery) and out[0].burst_s == 147.5  # the first burst's stamps
    assert out[1] is not None and out[1].burst_s == 148.75  # said with the second one
    assert out[2] is None
    assert len(notes) == 1 and "block-buffered" in notes[0] and "python -u" in notes[0]
    # Lines one by one again for a while: the allowance ends.
    got = [align.delivery(_steps(400 + i, 1, WALL + 500 + i, 1.0), WALL + 500.0 + i, since, notes) for i in range(7)]
    assert [d.burst_s for d in got if d is not None] == [0.0]


def test_history_appended_fast_is_no_burst() -> None:
    align, notes = Alignment("train.log"), []
    assert align.delivery(_steps(1, 200, WALL - 9000.0, 30.0), WALL, WALL - 0.05, notes) is None
    assert align.delivery(_steps(201, 200, WALL - 3000.0, 30.0), WALL + 0.03, WALL - 0.05, notes) is None
    assert align.burst_s == 0.0 and not notes


def test_a_log_without_stamps_is_allowed_a_long_silence_until_its_cadence_shows() -> None:
    align, notes = Alignment("train.log"), []
    since = WALL - 150.0
    first = align.delivery(_steps(1, 60, WALL, 0.0, clocked=False), WALL, since, notes)
    assert first is not None and first.burst_s == 240.0 and not notes
    second = align.delivery(_steps(61, 60, WALL + 150.0, 0.0, clocked=False), WALL + 150.0, since, notes)
    third = align.delivery(_steps(121, 60, WALL + 300.0, 0.0, clocked=False), WALL + 300.0, since, notes)
    assert second is not None and second.burst_s == 150.0
    assert third is not None and third.burst_s == 150.0 and len(notes) == 1


def test_stall_waits_for_a_few_bursts_and_says_late_lines_were_late() -> None:
    stall = Stall()
    for e in _steps(1, 60, 0.0, 2.5):
        stall.update(e)
    assert stall.deadline() == 147.5 + 120.0
    stall.update(Delivery(148.0, "train.log", 150.0))
    assert stall.deadline() == 147.5 + 375.0
    # Without the Delivery the stall fires at 267.5; a late burst then
    # brings lines stamped inside the silence.
    other = Stall()
    for e in _steps(1, 60, 0.0, 2.5):
        other.update(e)
    fired = other.update(Tick(300.0))
    assert [a.state for a in fired] == ["firing"]
    resolved = other.update(Progress(150.0, "train.log:61", step=61))
    assert [a.state for a in resolved] == ["resolved"]
    assert "arrived late" in resolved[0].message and "of silence" not in resolved[0].message

