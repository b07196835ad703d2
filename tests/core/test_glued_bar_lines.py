"""A log line glued to a tqdm bar's redraws is read as the line it is.

tqdm never ends a redraw with a newline, so a ``logging`` record written to
the bar's stream lands on the bar's physical line: right after its last
redraw (no redirect), or after tqdm's clear ``'\\r'``, blanks, ``'\\r'``
(``logging_redirect_tqdm``). The record is a line of its own, with its own
stamp (``parsers.glued``); the bar's redraws keep their reading.
"""

from __future__ import annotations

from datetime import UTC

import pytest

from dflash_watch.parsers.events import Event, Progress
from dflash_watch.parsers.glued import glued_at
from dflash_watch.parsers.progress.redraws import redraw_values
from dflash_watch.parsers.stream import LogStream

STAMP = "2026-12-02 21:25:53,887"
T = 1796246753.887  # STAMP, UTC
RECORD = f"{STAMP} INFO step 10 | loss 2.31 | 21500 tok/s"
BEFORE = "2026-12-02 21:25:50,000 INFO starting\n"
AFTER = "2026-12-02 21:25:55,000 INFO step 11 | loss 2.29 | 21400 tok/s\n"

BLOCK = [f"\r{4 * n:3d}%|{'█' * (n // 3):<10}| {n}/25 [00:0{n // 10}<00:01, 19.8{n}it/s]" for n in range(7, 10)]
ASCII = [f"\r{4 * n:3d}%|{'#' * (n // 3):<10}| {n}/25 [00:0{n // 10}<00:01, 19.8{n}it/s]" for n in range(7, 10)]
POSTFIX = [f"\r{4 * n:3d}%|{'█' * (n // 3):<10}| {n}/25 [00:00<00:01, 19.8{n}it/s, loss=2.{n}]" for n in range(7, 10)]
CLEAR = "\r" + " " * 46 + "\r"


def _events(text: str, replay: bool = True) -> list[Event]:
    stream = LogStream("x", tz=UTC, replay=replay)
    return stream.feed(text, 1, 0.0) + stream.flush(0.0)


def _progress(events: list[Event]) -> list[Progress]:
    return [e for e in events if type(e) is Progress]


def _state(e: Progress) -> tuple[object, ...]:
    return (e.step, e.total_steps, e.loss, e.rate, e.rate_unit, e.tokens_per_s, e.elapsed_s, e.metrics, e.source)


@pytest.mark.parametrize("bar", [BLOCK, ASCII, POSTFIX], ids=["block", "ascii", "postfix"])
@pytest.mark.parametrize("clear", ["", CLEAR], ids=["plain", "redirect"])
@pytest.mark.parametrize("fast", [True, False], ids=["fast", "reference"])
def test_the_record_after_the_bar_is_its_own_line_with_its_own_stamp(bar: list[str], clear: str, fast: bool) -> None:
    redraws = "".join(bar)
    text = BEFORE + redraws + clear + RECORD + "\n" + AFTER
    stream = LogStream("x", tz=UTC, replay=True, fast=fast)
    got = _progress(stream.feed(text, 1, 0.0) + stream.flush(0.0))
    record = [e for e in got if e.tokens_per_s == 21500.0]
    assert len(record) == 1, "the glued step line is read once"
    (e,) = record
    assert (e.step, e.loss, e.time, e.clocked, e.source) == (10, 2.31, T, True, "x:2")
    # The bar's redraws read as they read with nothing glued to them.
    alone = _progress(_events(BEFORE + redraws + "\n" + AFTER))
    bar_states = [_state(p) for p in got if p.rate_unit == "it/s"]
    assert bar_states == [_state(p) for p in alone if p.rate_unit == "it/s"]
    assert [p.step for p in got if p.rate_unit == "it/s"] == [7, 8, 9]
    # ... at the time of the lines before them: the record's stamp is later.
    assert all(p.time < T for p in got if p.rate_unit == "it/s")
    assert [p.step for p in got if p.rate_unit == "tok/s"] == [10, 11]


def test_the_bar_states_keep_the_time_they_had() -> None:
    """Only the record's own time changes: the redraws before it are dated
    by the lines before them, as when nothing is glued to them."""
    text = BEFORE + "".join(BLOCK) + RECORD + "\n"
    got = _progress(_events(text))
    alone = _progress(_events(BEFORE + "".join(BLOCK) + "\n"))
    assert [(p.step, p.time, p.clocked) for p in got[:3]] == [(p.step, p.time, p.clocked) for p in alone]


def test_a_record_that_is_a_health_line_or_a_traceback_is_read_as_one() -> None:
    text = (
        BEFORE + "".join(BLOCK) + f"{STAMP} INFO Saving model checkpoint to out/checkpoint-10\n"
        + "".join(BLOCK) + "Traceback (most recent call last):\n"
        + '  File "train.py", line 3, in <module>\n    main()\nRuntimeError: CUDA error: an illegal memory access\n'
    )
    got = _events(text)
    phases = [e for e in got if type(e).__name__ == "Phase"]
    assert [(p.phase, p.time) for p in phases] == [("checkpoint", T)]
    crashes = [e for e in got if type(e).__name__ == "Crash"]
    assert len(crashes) == 1 and crashes[0].text[0] == "Traceback (most recent call last):"  # type: ignore[attr-defined]


@pytest.mark.parametrize("tail", ["Saving checkpoint to out/", "`Trainer.fit` stopped: `max_epochs=1` reached.", "   "])
def test_a_bar_followed_by_text_that_says_nothing_gives_nothing_more(tail: str) -> None:
    redraws = "".join(BLOCK)
    got = _events(BEFORE + redraws + tail + "\n" + AFTER)
    assert [(type(e), getattr(e, "step", None), e.time) for e in got] == [
        (type(e), getattr(e, "step", None), e.time) for e in _events(BEFORE + redraws + "\n" + AFTER)
    ]


def test_a_dict_after_the_bar_is_still_read_with_the_bars_step() -> None:
    """HF Trainer prints its log dict right after the bar: its step is the
    bar's count (``progress.plans``), not a line of its own."""
    got = _progress(_events("".join(BLOCK) + "{'loss': 1.7658, 'learning_rate': 0.001, 'epoch': 0.05}\n"))
    assert [(p.step, p.loss) for p in got] == [(7, None), (8, None), (9, 1.7658)]


def test_a_line_of_plain_redraws_has_no_glued_line() -> None:
    for line in ["".join(BLOCK), "".join(POSTFIX) + "   ", "".join(BLOCK) + CLEAR, "".join(BLOCK) + "\r" + BLOCK[0][1:]]:
        assert glued_at(line) == 0
    assert glued_at("no bar at all") == 0
    # A redraw of a non-tqdm format: its last state is no glued line.
    assert glued_at("\rstep 1 | loss 2.3\rstep 2 | loss 2.2") == 0


@pytest.mark.parametrize("clear", ["", CLEAR], ids=["plain", "redirect"])
def test_wherever_a_chunk_ends_the_events_are_the_same(clear: str) -> None:
    """The glued line split across two reads at every offset: the tailer
    hands the complete lines before the cut to the stream and the unfinished
    line to the partial reader (``redraw_values``), which reads only the bar's
    states from it, never the record (its newline is still to come); the
    stream, fed the rest, gives what one feed gives."""
    head = BEFORE + "".join(BLOCK[:2])
    text = head + BLOCK[2] + clear + RECORD + "\n" + AFTER
    whole = [repr(e) for e in _events(text)]
    line_start = len(BEFORE)
    line_end = len(text) - len(AFTER)
    for cut in range(line_start, line_end + 1):
        done = text.rfind("\n", 0, cut) + 1
        partial = text[done:cut]
        for values in redraw_values(partial):
            assert values[3] is None and values[8] == "it/s", (cut, values)  # a bar state, no record
        stream = LogStream("x", tz=UTC, replay=True)
        events = stream.feed(text[:done], 1, 0.0) if done else []
        events += stream.feed(text[done:], text.count("\n", 0, done) + 1, 0.0) + stream.flush(0.0)
        assert [repr(e) for e in events] == whole, cut


def test_live_the_record_is_dated_by_its_own_stamp_too() -> None:
    got = _progress(_events(BEFORE + "".join(BLOCK) + CLEAR + RECORD + "\n", replay=False))
    (e,) = [p for p in got if p.tokens_per_s]
    assert (e.time, e.clocked, e.loss) == (T, True, 2.31)


def test_peek_stamps_sees_the_records_stamp() -> None:
    stream = LogStream("x", tz=UTC)
    assert stream.peek_stamps("".join(BLOCK) + RECORD + "\n") == (T, T)


@pytest.mark.parametrize("clear", ["", CLEAR], ids=["plain", "redirect"])
def test_a_glued_record_that_is_no_event_still_moves_the_clock(clear: str) -> None:
    """A line without a stamp after a glued record that makes no event (a
    plain message) is dated by the record's stamp, as after a line of its own."""
    after = "Saving model checkpoint to out/checkpoint-10\n"
    got = _events(BEFORE + "".join(BLOCK) + clear + f"{STAMP} INFO all is well\n" + after)
    alone = _events(BEFORE + "".join(BLOCK) + "\n" + f"{STAMP} INFO all is well\n" + after)
    assert [(type(e).__name__, e.time) for e in got][-1] == ("Phase", T)
    assert [(type(e).__name__, e.time) for e in alone][-1] == ("Phase", T)
    # A bar that is not the training loop's makes no event either: the
    # record's stamp is found looking back over the whole physical line.
    loading = "\rLoading checkpoint shards: 100%|##########| 3/3 [00:01<00:00,  2.90it/s]"
    got = _events(BEFORE + loading + clear + f"{STAMP} INFO all is well\n" + after)
    assert [(type(e).__name__, e.time) for e in got] == [("Phase", T)]


def test_a_ranked_line_keeps_its_rank_on_every_event() -> None:
    """A rank prefix (``[rank0]:``) says the whole physical line: the record
    is not split off it (it would lose its rank), so no event goes rankless."""
    got = _progress(_events("[rank0]:" + "".join(BLOCK) + RECORD + "\n"))
    assert got and {p.rank for p in got} == {0}
