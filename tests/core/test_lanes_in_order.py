"""The run reader's one pass in the file's order gives what the line-by-line reading gives.

``parsers.lanes.read_lanes`` reads a run without rank prefixes, whose every
lane of two lines or more has columns, line by line in the file's order
(``_read_in_order``): each lane's events come out of one ``map`` fed the
lines' times as they are read, a stamped stretch's first line dated from
the minute read last (``TimeParser.minute_for``), not parsed. Issue 20's
progress shape (stamped step lines, stamp-less tqdm bars, lines between)
is its case. Every test compares it with ``LogStream(fast=False)`` and with
the stretch-by-stretch reader (``_read_by_stretch``), on logs that hit its
edges: stamps that do not parse inside a stretch, a second of 60, a lane of
one line, bars redrawn with '\\r', glog lines between (their year follows
the stamps read before them), minutes and fraction lengths that change.
"""

from __future__ import annotations

import random
from datetime import UTC
from typing import Any

import pytest

import dflash_watch.parsers.lanes as lanes_module
from dflash_watch.parsers.stream import LogStream
from dflash_watch.parsers.timestamps import TimeParser


def _stamp(rnd: random.Random, t: list[int], us: bool, frac: int) -> str:
    t[0] += rnd.choice([0, 0, 0, 1, 1, 7, 61])
    s = t[0]
    hh, mm, ss = s // 3600 % 24, s // 60 % 60, s % 60
    day = 29 + s // 86400
    if rnd.random() < 0.01:
        ss = 60  # no such second: the stamp does not parse
    if rnd.random() < 0.01:
        day = 31  # 11/31: no such day
    fraction = ("," + "".join(rnd.choice("0123456789") for _ in range(frac))) if frac else ""
    if us:
        return f"11/{day:02d}/2026 {hh:02d}:{mm:02d}:{ss:02d}{fraction}"
    return f"2026-11-{day:02d} {hh:02d}:{mm:02d}:{ss:02d}{fraction}"


def make_progress_log(seed: int, n: int) -> str:
    """Issue 20's progress shape, with the reader's edges mixed in."""
    rnd = random.Random(seed)
    t = [36000]
    us = rnd.random() < 0.7
    fracs = rnd.choice([[0], [3], [0, 3], [3, 6]])
    out: list[str] = []
    step = 0
    for _ in range(n):
        r = rnd.random()
        frac = rnd.choice(fracs)
        if r < 0.3:
            step += 1
            loss = rnd.choice(["3.0638", "2.4079", "nan"])
            out.append(
                f"{_stamp(rnd, t, us, frac)} - INFO - __main__ - step {step}/500000 | loss {loss} | "
                f"grad_norm 0.{rnd.randrange(100, 999)} | 2{rnd.randrange(10)}.{rnd.randrange(10)} Ktok/s | lr 2.0e-04"
            )
        elif r < 0.5:
            bar = (
                f"Training:   0%|          | {step}/500000 [01:{rnd.randrange(10, 60)}<40:00, 2.9it/s, "
                f"loss=2.{rnd.randrange(100, 999)}, tok/s=2{rnd.randrange(1000, 9999)}]"
            )
            out.append(bar + ("\r" + bar if rnd.random() < 0.1 else ""))
        elif r < 0.7:
            out.append(f"{_stamp(rnd, t, us, frac)} - INFO - data.loader - loaded shard {rnd.randrange(10**6)}")
        elif r < 0.8:
            month = rnd.choice(["11", "11", "12", "01", "06"])
            out.append(f"W{month}29 10:00:0{rnd.randrange(10)}.467022 4246 dataloader.cc:738] slow worker 7")
        elif r < 0.82:
            # A shape of its own (a lane of one line in its run).
            out.append(f"{_stamp(rnd, t, us, frac)} - INFO - eval - step {step} | loss 1.{rnd.randrange(10**7)} | x 1")
        elif r < 0.85:
            out.append("NCCL INFO Channel 02/32 : 0[0] -> 1[1] via P2P/IPC")
        else:
            step += 1
            out.append(
                f"{_stamp(rnd, t, us, frac)} - INFO - __main__ - step {step}/500000 | loss 2.{rnd.randrange(1000, 9999)} | "
                f"grad_norm 0.{rnd.randrange(100, 999)} | 2{rnd.randrange(10)}.{rnd.randrange(10)} Ktok/s | lr 2.0e-04"
            )
    return "\n".join(out) + "\n"


def replay(text: str, fast: bool, cuts: list[int]) -> tuple[Any, ...]:
    stream = LogStream("train.log", tz=UTC, default_year=2025, fast=fast)
    events = []
    pos = 0
    lineno = 1
    for cut in sorted(cuts) + [len(text)]:
        end = text.rfind("\n", pos, cut) + 1 if cut < len(text) else len(text)
        if end <= pos:
            continue
        chunk = text[pos:end]
        events += stream.feed(chunk, lineno, 1000.0)
        lineno += chunk.count("\n")
        pos = end
    events += stream.flush(1000.0)
    # repr: NaN equals NaN there, and every field is compared.
    return [repr(e) for e in events], stream.lines, stream.last_time, stream._times.year


def _spy_in_order(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The run lengths the one-pass reader read."""
    taken: list[int] = []
    real = lanes_module._read_in_order

    def spy(cur: Any, dating: Any, pattern: Any, lanes: Any, groups: Any, numbers: Any) -> None:
        taken.append(len(lanes))
        real(cur, dating, pattern, lanes, groups, numbers)

    monkeypatch.setattr(lanes_module, "_read_in_order", spy)
    return taken


def _by_stretch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every run read stretch by stretch (the reader before the one pass)."""

    def by_stretch(cur: Any, dating: Any, pattern: Any, lanes: Any, groups: Any, numbers: Any) -> None:
        lanes_module._read_by_stretch(cur, dating, pattern, lanes, cur.run_lines, groups, numbers)

    monkeypatch.setattr(lanes_module, "_read_in_order", by_stretch)


@pytest.mark.parametrize("seed", range(12))
def test_the_one_pass_reads_the_progress_shape_as_line_by_line(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    text = make_progress_log(seed, 1500)
    rnd = random.Random(seed)
    cuts = [rnd.randrange(len(text)) for _ in range(rnd.randrange(4))]
    want = replay(text, False, cuts)
    with monkeypatch.context() as m:
        _by_stretch(m)
        assert replay(text, True, cuts) == want
    taken = _spy_in_order(monkeypatch)
    assert replay(text, True, cuts) == want
    # The one pass was taken, for most of the log's progress lines.
    assert sum(taken) > 600


def test_a_stretch_dated_from_the_minute_before_it_leaves_the_year_glog_lines_take(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stamped stretch whose first line repeats the minute read last is
    dated from it (``minute_for``) and, as parsing it would, sets the year
    and month a later glog line is dated in (``minute_entered``): a glog
    line of January after June stamps is June's year; after a December glog
    line it would roll over into the next."""
    step = "06/15/2025 10:00:0{s} - INFO - __main__ - step {n}/500 | loss 2.{n}5 | 21.3 Ktok/s"
    bar = "Training:  10%|#  | {n}/500 [00:0{n}<00:10, 2.9it/s]"
    lines = [
        step.format(s=1, n=1),
        step.format(s=2, n=2),
        "I1201 10:00:02.000000 42 x.cc:1] slow worker",  # glog: December, of 2025
        bar.format(n=3),
        step.format(s=3, n=4),  # the June minute again: dated from it, June's year and month
        "I0101 10:00:04.000000 42 x.cc:1] slow worker",  # January of 2025 (after June), not 2026
        bar.format(n=5),
        step.format(s=5, n=6),
    ]
    text = "\n".join(lines) + "\n"
    entered: list[int] = []
    real = TimeParser.minute_entered
    monkeypatch.setattr(TimeParser, "minute_entered", lambda self: entered.append(1) or real(self))
    taken = _spy_in_order(monkeypatch)
    fast = replay(text, True, [])
    assert fast == replay(text, False, [])
    assert taken == [len(lines) - 2] and entered
    assert fast[3] == 2025


def test_stamps_that_fail_inside_a_stretch_are_read_on_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stamp that does not parse (second 60, 11/31) and the rest of its
    stretch are read one at a time; the lane's next stretch is read in the
    one pass again, its columns where they were."""
    step = "{ts} - INFO - __main__ - step {n}/500 | loss 2.{n}5 | 21.3 Ktok/s"
    stamps = ["11/29/2026 10:00:01", "11/29/2026 10:00:60", "11/29/2026 10:00:02", "11/31/2026 10:00:03",
              "11/29/2026 10:00:04"]
    lines = [step.format(ts=ts, n=n) for n, ts in enumerate(stamps, 1)]
    lines.insert(3, "Training:  10%|#  | 3/500 [00:03<00:10, 2.9it/s]")
    lines.append("Training:  10%|#  | 6/500 [00:06<00:10, 2.9it/s]")
    lines.append(step.format(ts="11/29/2026 10:00:07", n=7))
    text = "\n".join(lines) + "\n"
    taken = _spy_in_order(monkeypatch)
    want = replay(text, False, [])
    assert replay(text, True, []) == want
    assert taken == [len(lines)]
    assert sum(e.startswith("Progress(") for e in want[0]) == len(lines)
