"""The stream splits a line's rank prefix once (issue 18, "one home per
concept"): the crash, health, progress and padding readers and the line's
own stamp take the stream's ``(rank, text)``, and the edge rules they once
each kept for themselves are one rule (``parsers.stream._split``):

* the prefix starts the line, one space after it belongs to it, and the
  text after it is read as if it stood alone: spaces before a stamp there
  are skipped, as before a line's own (``TimeParser.parse_split``);
* every ``'\\r'`` state of a line is said by the line's rank (as
  ``redraw_values`` always read them), crash lines too;
* a health line's rank is its prefix's, else the ``Rank N`` an overflow or
  heartbeat line names in words.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

import dflash_watch.parsers.progress as progress_module
import dflash_watch.parsers.progress.plans as plans_module
import dflash_watch.parsers.timestamps as timestamps_module
from dflash_watch.parsers.events import Crash, Event, Heartbeat, Overflow, Phase, Progress
from dflash_watch.parsers.progress import ProgressPattern
from dflash_watch.parsers.stream import LogStream
from dflash_watch.parsers.timestamps import TimeParser


def utc(year: int, month: int, day: int, hour: int, minute: int, second: int = 0) -> float:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp()


def _read(text: str) -> list[Event]:
    stream = LogStream("t.log", tz=UTC, replay=True)
    return stream.feed(text, 1, 0.0) + stream.flush(0.0)


# -- spaces after the prefix ----------------------------------------------------


def test_a_stamp_after_spaces_past_the_prefix_reads_as_the_text_alone() -> None:
    """``[rank0]:  2025-...``: the text after the prefix, read alone, is a
    stamped line, so the line is too: in the TimeParser and in the stream."""
    times = TimeParser(tz=UTC)
    want = utc(2025, 11, 29, 10, 0, 5)
    assert times.parse("  2025-11-29 10:00:05 step 5") == want
    assert times.parse("[rank0]:  2025-11-29 10:00:05 step 5") == want
    assert times.parse("[rank0]:\t2025-11-29 10:00:05 step 5") == want
    events = _read("[rank3]:   2025-11-29 10:00:05 - step 5 | loss 2.0 | 21.0 Ktok/s\n")
    [event] = [e for e in events if isinstance(e, Progress)]
    assert (event.time, event.rank, event.step, event.clocked) == (want, 3, 5, True)


def test_the_stamp_search_behind_an_event_finds_such_a_stamp_too() -> None:
    """An event line without a stamp takes the last one before it, found
    by a search in C past the first few lines (``line_times._TIME_HINT``):
    the search must know the same rule as the parser."""
    lines = ["[rank0]: starting", "[rank0]:  2025-11-29 10:00:07 INFO loading"]
    lines += [f"[rank0]: plain line {i}" for i in range(40)]
    lines.append("[rank0]: step 9 | loss 2.0")
    [event] = [e for e in _read("\n".join(lines) + "\n") if isinstance(e, Progress)]
    assert (event.time, event.rank, event.step) == (utc(2025, 11, 29, 10, 0, 7), 0, 9)


# -- '\r' states ---------------------------------------------------------------------


def test_a_traceback_that_starts_in_a_redrawn_state_is_the_lines_rank() -> None:
    """The bar's line and the traceback after its '\\r' are rank 3's: the
    frames that follow on rank 3's lines close the same traceback."""
    text = (
        "[rank3]:  50%|#####     | 5/10 [00:05<00:05, 1.00it/s]\rTraceback (most recent call last):\n"
        '[rank3]:   File "/x/train.py", line 10, in <module>\n'
        "[rank3]:     main()\n"
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 12.00 MiB.\n"
        "2026-11-29 10:00:03,000 - INFO - shutting down\n"
    )
    [crash] = [e for e in _read(text) if isinstance(e, Crash)]
    assert (crash.kind, crash.rank, crash.source) == ("cuda_oom", 3, "t.log:4")
    # Its header is rank 3's: the traceback is whole, not a headless one.
    assert crash.text[0] == "Traceback (most recent call last):" and len(crash.text) == 4


# -- health lines ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "line,kind,rank",
    [
        ("[rank5]: heartbeat: still at step 10, waiting in all_reduce", Heartbeat, 5),
        ("[rank2]:***** Running Evaluation *****", Phase, 2),
        ("[default4]:[rank6]: OVERFLOW! Skipping step. Attempted loss scale: 4, reducing to 2", Overflow, 4),
        ("[rank1]: [deepspeed] OVERFLOW! Rank 0 Skipping step.", Overflow, 1),  # the prefix wins
        ("[deepspeed] OVERFLOW! Rank 7 Skipping step.", Overflow, 7),  # no prefix: the words
        ("[INFO] ***** Running Evaluation ***** on rank 3", Phase, None),  # a phase has only its prefix's
    ],
)
def test_a_health_lines_rank_through_the_stream(line: str, kind: type, rank: int | None) -> None:
    [event] = [e for e in _read(line + "\n") if isinstance(e, kind)]
    assert event.rank == rank  # type: ignore[attr-defined]


# -- one plan per new shape --------------------------------------------------------------


def test_a_new_shape_is_planned_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stream asks whether a shape can be progress at all
    (``progress_possible``) and then reads its first line: one plan, kept in
    the plan cache, serves both."""
    calls: list[str] = []
    real = plans_module.plan

    def counting(line: str):  # type: ignore[no-untyped-def]
        calls.append(line)
        return real(line)

    monkeypatch.setattr(plans_module, "plan", counting)
    monkeypatch.setattr(progress_module, "plan", counting)
    word = "zqplanonce" + re.sub(r"\W", "", str(id(calls)))[-6:].translate(str.maketrans("0123456789", "abcdefghij"))
    events = _read(f"[rank1]: step 12 | loss 2.0 | {word} x\n")
    assert [e.step for e in events if isinstance(e, Progress)] == [12]
    assert len(calls) == 1, calls


# -- the minute just read -------------------------------------------------------------------


def test_a_us_stamp_in_the_minute_just_read_is_not_matched_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """US stamps reuse the minute just read as ISO stamps do (one home,
    ``TimeParser._same_minute``): the regex reads a minute's first stamp only."""
    matched: list[str] = []
    real = timestamps_module._US

    class Counting:
        def match(self, s: str):  # type: ignore[no-untyped-def]
            matched.append(s)
            return real.match(s)

    monkeypatch.setattr(timestamps_module, "_US", Counting())
    times = TimeParser(tz=UTC)
    base = utc(2026, 11, 29, 10, 0)
    assert times.parse_dated("11/29/2026 10:00:01,250 - INFO - a") == base + 1.25
    assert times.parse_dated("11/29/2026 10:00:02,500 - INFO - b") == base + 2.5
    assert times.parse_dated("11/29/2026 10:00:03 - INFO - c") == base + 3
    assert len(matched) == 1


# -- blanks before the prefix ----------------------------------------------------------------


def test_a_prefix_after_blanks_is_split_for_every_reader() -> None:
    """The TimeParser and the progress plans always read ``  [rank4]: ...``
    as rank 4's line; the crash and health readers and a user's pattern
    get the same split from the stream."""
    text = (
        "  [rank4]: Traceback (most recent call last):\n"
        '  [rank4]:   File "/x/train.py", line 10, in <module>\n'
        "  [rank4]: RuntimeError: boom\n"
        "\t[rank5]: heartbeat: still at step 10, waiting in all_reduce\n"
        "  [rank6]: step 7 | loss 2.0\n"
    )
    events = _read(text)
    others = sorted((type(e).__name__, e.rank) for e in events if isinstance(e, (Crash, Heartbeat)))
    assert others == [("Crash", 4), ("Heartbeat", 5)]
    assert [(e.step, e.rank) for e in events if isinstance(e, Progress)] == [(7, 6)]


def test_a_user_pattern_reads_the_text_after_the_prefix() -> None:
    pattern = ProgressPattern(r"^it=(?P<step>\d+)$", literals=("it=",))
    stream = LogStream("t.log", tz=UTC, replay=True, progress_pattern=pattern)
    events = stream.feed("[rank3]: it=7\n  [default2]:[rank2]: it=8\nit=9\n", 1, 0.0) + stream.flush(0.0)
    assert [(e.step, e.rank) for e in events if isinstance(e, Progress)] == [(7, 3), (8, 2), (9, None)]
