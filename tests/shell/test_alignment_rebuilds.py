"""The live clock's rebuilds of events keep every field (``alignment.shifted``,
``alignment.date_on_arrival``).

Both rebuild events positionally (issue 20: ``dataclasses.replace`` per
step was the largest cost that following a log adds to replay's); a
rebuild that dropped or swapped a field would change what every detector
reads, so each is checked against ``dataclasses.replace`` on events whose
every field differs from its default.
"""

from __future__ import annotations

from dataclasses import fields, replace

from dflash_watch.alignment import date_on_arrival, shifted
from dflash_watch.parsers.events import Crash, Event, Frame, GpuSample, Progress

WALL = 1_800_000_000.0


def _step(t: float, n: int, clocked: bool) -> Progress:
    """A step whose every field holds a value of its own (none at its default)."""
    return Progress(
        t, f"train.log:{n}", step=n, total_steps=80_000, tokens_per_s=21_500.0 + n, loss=2.5 - n / 100, rank=3,
        metrics=(("lr", 2e-4), ("grad_norm", 1.5)), step_seconds=0.4, clocked=clocked, rate=21.5,
        rate_unit="tok/s", elapsed_s=12.0 + n,
    )


def _crash(t: float) -> Crash:
    return Crash(t, "train.log:99", "crash", "cuda_oom", "OutOfMemoryError", "CUDA out of memory", "sig", rank=3,
                 cause="oom", frames=(Frame("train.py", 12, "main", "step()"),), text=("Traceback",), thread="main")


def _chunk() -> list[Event]:
    """A clocked step, unstamped steps around it (one dated behind it), a crash."""
    return [
        _step(WALL - 5.0, 1, clocked=False),
        _step(WALL + 2.0, 2, clocked=True),
        _step(WALL + 1.0, 3, clocked=False),
        _crash(WALL + 2.5),
        _step(WALL + 9.0, 4, clocked=False),
        GpuSample(WALL + 3.0, 0, 10, 80, util=0.9),
    ]


def test_every_field_of_a_step_is_set() -> None:
    """The fixture itself: a rebuild that lost a field could not pass as the default."""
    step = _step(WALL, 7, clocked=False)
    assert all(getattr(step, f.name) != f.default for f in fields(Progress))


def test_unstamped_steps_are_dated_on_arrival_keeping_every_other_field() -> None:
    events = _chunk()
    before = list(events)
    date_on_arrival(events, WALL)
    at = WALL
    expected: list[Event] = []
    for e in before:
        if isinstance(e, Progress) and e.clocked:
            at = e.time
        elif isinstance(e, Progress):
            e = replace(e, time=max(e.time, at), clocked=True)
        expected.append(e)
    assert events == expected
    assert [e.time for e in events] == [WALL, WALL + 2.0, WALL + 2.0, WALL + 2.5, WALL + 9.0, WALL + 3.0]
    assert all(e.clocked for e in events if isinstance(e, Progress))
    # Events that needed nothing are the very same objects.
    assert events[1] is before[1] and events[3] is before[3] and events[5] is before[5]


def test_a_shift_moves_every_kind_of_event_and_keeps_its_fields() -> None:
    events = _chunk()
    moved = shifted(events, 7200.0)
    assert moved == [replace(e, time=e.time + 7200.0) for e in events]
    assert [type(e) for e in moved] == [type(e) for e in events]
    assert shifted(events, 0.0) is events
