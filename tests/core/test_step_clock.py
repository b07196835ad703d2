"""The clock of unstamped step lines that say how long a step took (nanochat's ``dt:``)."""

from __future__ import annotations

from dflash_watch.parsers.events import Crash, Progress
from dflash_watch.parsers.step_clock import StepClock


def _steps(stamp: float, first: int, n: int, dt: float) -> list:
    return [Progress(stamp, f"l:{first + i}", step=first + i, step_seconds=dt, clocked=False) for i in range(n)]


def test_steps_run_on_by_their_durations_across_checkpoint_stamps_without_a_gap() -> None:
    """nanochat: a stamp every 500 steps, each a few minutes ahead of the steps'
    own sum (evaluation, checkpoint). Times rise by each step's dt: no jump at
    a stamp that a stall detector would read as silence."""
    clock = StepClock()
    dt = 13.8
    times: list[float] = []
    stamp = 1000.0
    for block in range(5):
        events = clock.apply(_steps(stamp, block * 500 + 1, 500, dt))
        times += [e.time for e in events]
        assert all(e.clocked for e in events)
        stamp += 500 * dt + 300.0  # the next checkpoint stamp: 5 min of drift
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert min(gaps) > 0 and max(gaps) < 2 * dt


def test_a_stamp_far_ahead_or_steps_going_back_is_a_new_start() -> None:
    """A relaunch between two runs (stamped lines in between, steps back to 0):
    the steps after it are dated from its stamp, not run on from the old run."""
    clock = StepClock()
    clock.apply(_steps(1000.0, 1, 3, 5.5))
    later = clock.apply(_steps(1000.0 + 180.0, 1, 2, 5.5))  # 3 min later, steps from 1 again
    assert [e.time for e in later] == [1185.5, 1191.0]
    crash = clock.apply([Crash(1180.0, "l:9", "crash", "cuda_oom", "torch.OutOfMemoryError", "m", "s")])
    assert crash[0].time == 1191.0  # it carries the stale stamp: it follows the steps before it


def test_stamped_progress_stops_the_step_clock() -> None:
    clock = StepClock()
    clock.apply(_steps(1000.0, 1, 3, 10.0))
    stamped = Progress(2000.0, "l:5", step=4, step_seconds=10.0)
    assert clock.apply([stamped])[0].time == 2000.0
    crash = Crash(2000.0, "l:6", "crash", "exception", "ValueError", "m", "s")
    assert clock.apply([crash])[0].time == 2000.0


def test_a_chunk_read_live_ends_its_unstamped_steps_at_its_read_time() -> None:
    """Live, a chunk is read after it was written: its unstamped steps run
    back from the read time, their durations kept, and the traceback after
    them takes the time of the last one. In replay (and a catch-up) they
    run on from the fallback time, as before."""
    from dflash_watch.parsers.stream import LogStream

    bar = "".join(f"\r{n}/100 [00:{2 * n:02d}<03:00, 2.00s/it]" for n in range(1, 6))
    text = bar + "Traceback (most recent call last):\n  File \"t.py\", line 3, in <module>\nRuntimeError: boom\n"

    def dated(read_live: bool) -> list[tuple[str, int | None, float]]:
        stream = LogStream("t.log")
        events = stream.feed(text, 1, 1000.0, read_live=read_live) + stream.flush(1001.0)
        return [(type(e).__name__, getattr(e, "step", None), e.time) for e in events]

    live = dated(True)
    assert [t for kind, _, t in live if kind == "Progress"] == [992.0, 994.0, 996.0, 998.0, 1000.0]
    assert [t for kind, _, t in live if kind == "Crash"] == [1000.0]
    ran_on = dated(False)
    assert [t for kind, _, t in ran_on if kind == "Progress"] == [1002.0, 1004.0, 1006.0, 1008.0, 1010.0]
    assert [t for kind, _, t in ran_on if kind == "Crash"] == [1010.0]


def test_a_live_chunk_moves_none_of_what_an_earlier_chunk_dated() -> None:
    """Only the chunk's own events run back: the steps of an earlier look
    keep their times, and a chunk whose steps end before its read time
    moves nothing."""
    from dflash_watch.parsers.stream import LogStream

    stream = LogStream("t.log")
    first = stream.feed("1/100 [00:02<03:00, 2.00s/it]\n", 1, 1000.0, read_live=True)
    assert [e.time for e in first] == [1000.0]
    later = stream.feed("2/100 [00:04<03:00, 2.00s/it]\n", 2, 1005.0, read_live=True)
    assert [e.time for e in later] == [1002.0]  # run on from the last step, short of the read time
