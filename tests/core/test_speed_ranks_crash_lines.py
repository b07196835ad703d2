"""The crash detectors' record of step lines (``crash_steps.StepLines``) for
logs of many ranks in one file (issue 20, speed): the lines of one file are
split all at once (``_one_file``), told apart by rank, and wait by the
hundred per stream (``PENDING_PER_STREAM``). The record must stay the one
of ``add`` one line at a time, split at once (``_Plain``), whatever the
sources look like: odd ones in the same file must not pass for ``file:N``.
"""

from __future__ import annotations

import random
import types

import pytest

from dflash_watch.detectors.crash_steps import (
    LINES_KEEP,
    PENDING_MAX,
    PENDING_MOST,
    STREAMS_MAX,
    StepLines,
    _one_file,
)
from dflash_watch.parsers.events import Progress
from tests.core.test_quiet_steps_crash import _Plain, _same

T0 = 1_764_410_400.0

# Sources that look like "ranks.log:N" and are not, or are of it but odd.
_ODD = ("ranks.log", "ranks.log:", "ranks.log:x7", "ranks.log:12:3", "ranks.log:\u0663",
        "ranks.log:+5", "ranks.log: 5", "ranks.log\nranks.log:4", "ranks.log:4\nranks.log",
        "other.log:5", ":5", "C:/x/ranks.log:5", "ranks.logx:5", "xranks.log:5", "ranks.log:1_000")


def _made(rng: random.Random, ranks: int, count: int, odd: float) -> list[Progress]:
    made = []
    for i in range(count):
        rank: int | None = rng.randrange(ranks)
        if rank is not None and rank % 13 == 12 and rng.random() < 0.7:
            continue  # a few rare ranks: their streams keep the newest-first search going
        if rng.random() < odd / 4:
            rank = None
        source = f"ranks.log:{i + 1}"
        if rng.random() < odd:
            source = rng.choice(_ODD)
        t = T0 + i * 0.1 + rng.uniform(-1.0, 1.0)
        made.append(Progress(t, source, step=i if rng.random() < 0.97 else None, rank=rank))
    return made


def _fed(made: list[Progress], rng: random.Random) -> tuple[StepLines, _Plain]:
    lines, plain = StepLines(), _Plain()
    i = 0
    while i < len(made):
        n = rng.choice((1, 8, 64, 256, PENDING_MAX + 7, 1000))
        run = made[i:i + n]
        i += n
        for p in run:
            plain.add(p)
        if len(run) >= 2:
            lines.add_run(run)
            lines.add_run(run)  # the other crash detector's hand-over
        else:
            lines.add(run[0])
        if rng.random() < 0.03:
            _same(lines, plain)  # a crash reads the record mid-way
    return lines, plain


@pytest.mark.parametrize(("ranks", "odd"), [(2, 0.0), (64, 0.0), (64, 0.01), (64, 0.2),
                                            (STREAMS_MAX + 40, 0.0), (STREAMS_MAX + 40, 0.01)])
def test_one_file_of_many_ranks_keeps_the_plain_record(ranks: int, odd: float) -> None:
    """Lines of one file from ``ranks`` ranks (some rare, some with no
    rank; ``odd``: that share of sources odd), in runs of every size, read
    now and then: the same record as one line at a time, split at once."""
    rng = random.Random(ranks * 1000 + int(odd * 100))
    made = _made(rng, ranks, PENDING_MOST * 3, odd)
    lines, plain = _fed(made, rng)
    _same(lines, plain)


@pytest.mark.parametrize("odd", _ODD)
def test_an_odd_source_is_not_read_as_the_file_s(odd: str) -> None:
    """One odd source among lines of ``ranks.log``: either no file (each line
    split on its own) or the one ``rpartition`` gives each, and the text
    after it as each source has it."""
    steps = [Progress(T0 + i, f"ranks.log:{i + 1}", step=i, rank=i % 3) for i in range(20)]
    steps[7] = Progress(T0 + 7, odd, step=7, rank=1)
    file = _one_file([p.source for p in steps])
    if file is not None:
        assert [(file, p.source[len(file) + 1:]) for p in steps] == [
            (p.source.rpartition(":")[0], p.source.rpartition(":")[2]) for p in steps]
    lines, plain = StepLines(), _Plain()
    for _ in range(PENDING_MAX // 10):
        for p in steps:
            plain.add(p)
        lines.add_run(list(steps))
        steps = [Progress(p.time + 20, p.source, step=p.step, rank=p.rank) for p in steps]
    _same(lines, plain)


def test_many_streams_wait_by_the_stream() -> None:
    """64 streams seen: up to ``LINES_KEEP * 4`` lines of each wait (three
    in four of a steady log's lines are never split), at most
    ``PENDING_MOST``: the record is worked in less often than every
    ``PENDING_MAX`` lines."""
    lines = StepLines()
    steps = [Progress(T0 + i, f"ranks.log:{i + 1}", step=i, rank=i % 64) for i in range(PENDING_MOST * 2)]
    lines.add_run(steps[:PENDING_MAX])
    assert len(lines.seen) == 64  # (worked in)
    lines.add_run(steps[PENDING_MAX:PENDING_MAX * 8])
    assert 0 < len(lines._pending) <= PENDING_MOST
    assert len(lines._pending) > PENDING_MAX
    assert all(len(v) == LINES_KEEP for v in lines.seen.values())


@pytest.mark.parametrize("read_seen", [False, True])
def test_the_clock_read_often_folds_every_waiting_line(read_seen: bool) -> None:
    """A crash reads the clock (``latest``) without working the waiting
    lines in: read after every hand-over, each new line now and then the
    latest, now and then not (or NaN), it is the plain one's every time,
    and so is the record when read (``read_seen``: now and then too)."""
    rng = random.Random(5)
    lines, plain = StepLines(), _Plain()
    t = T0
    for i in range(PENDING_MOST * 2):
        t += rng.choice((1.0, -0.5, 0.0, 2.0))
        time = float("nan") if rng.random() < 0.01 else t
        p = Progress(time, f"ranks.log:{i + 1}", step=i, rank=i % 64)
        plain.add(p)
        lines.add(p)
        assert lines.latest == plain.latest  # (never NaN: a NaN time is never the latest)
        if read_seen and rng.random() < 0.002:
            _same(lines, plain)
    _same(lines, plain)


@pytest.mark.parametrize("known", [STREAMS_MAX - 1, STREAMS_MAX])
def test_a_new_stream_of_one_rank_when_the_streams_are_full(known: int) -> None:
    """``known`` streams seen (each a log of its own), then many lines of
    one new one (one file, one rank): the record is the plain one, the
    oldest stream pushed out where the new one is one too many."""
    lines, plain = StepLines(), _Plain()
    first = [Progress(T0 + i, f"log{i}.log:1", step=i, rank=None) for i in range(known)]
    lines.add_run(first)
    for p in first:
        plain.add(p)
    _same(lines, plain)
    run = [Progress(T0 + 1000 + i, f"new.log:{i + 1}", step=i, rank=3) for i in range(PENDING_MAX * 2 + 5)]
    lines.add_run(run)
    for p in run:
        plain.add(p)
    _same(lines, plain)
    assert len(lines.seen) == min(known + 1, STREAMS_MAX)


@pytest.mark.parametrize("odd", ["", "ranks.log:\u0663", "ranks.log:12345678901234567890123", "ranks.log:007",
                                 "ranks.log:1/2", "ranks.log:9a"])
def test_many_streams_tails_in_c_are_the_plain_record(odd: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The many-streams tails in C (``stream_tails``): the plain record,
    with line numbers past 64 bits and leading zeros read as ``int`` reads
    them; a kept source outside ASCII (an Arabic-Indic digit, which
    ``isdigit`` and ``int`` take) left to Python whole; and the kernel
    took the common settles."""
    from dflash_watch.detectors import crash_steps
    from dflash_watch.parsers import native

    if native.KERNELS is None:
        pytest.skip(f"no compiled kernels: {native.status()}")
    real = native.KERNELS.stream_tails
    answers: list[object] = []

    def spied(*args: object) -> object:
        answers.append(real(*args))  # type: ignore[arg-type]
        return answers[-1]

    monkeypatch.setattr(crash_steps, "KERNELS", types.SimpleNamespace(stream_tails=spied))
    rng = random.Random(7)
    made = [Progress(T0 + i * 0.1, f"ranks.log:{i + 1}", step=i // 64, rank=rng.randrange(40))
            for i in range(PENDING_MOST * 3)]
    if odd:
        for i in range(PENDING_MOST - 30, len(made), 97):  # among the last lines of some settles
            made[i] = Progress(made[i].time, odd, step=made[i].step, rank=made[i].rank)
    lines, plain = _fed(made, random.Random(3))
    _same(lines, plain)
    assert True in answers
    if odd == "ranks.log:\u0663":
        assert None in answers
