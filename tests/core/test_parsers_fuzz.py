"""The parsers never raise on arbitrary text: a log is untrusted input."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from dflash_watch.parsers.events import Progress
from dflash_watch.parsers.progress import parse_progress
from dflash_watch.parsers.stream import LogStream
from dflash_watch.parsers.timestamps import TimeParser

# Pieces that steer generated text into the parsers' interesting paths.
FRAGMENTS = [
    "step", "Step", "iteration", "loss", "Loss", "tok/s", "tok/sec", "Ktok/s", "tokens_per_sec", "tps",
    "it/s", "s/it", "%|", "|", ":", "=", "/", " ", "{", "}", "'", '"', "[", "]", ",", "\r", "\x00",
    "\x1b[32m", "\x1b]0;t\x07", "nan", "inf", "-inf", "1e999", "1e-999", "99999999999999999999999",
    "1,092,168", "22.8K", "85.8G", "480.04ms", "7.93m", "[rank3]:", "[default1]:", "[1,2]<stdout>:",
    "2026-11-29T10:00:00Z", "2026-11-29 10:00:00,123", "11/29/2026 10:00:00", "W1129 10:00:00.123456",
    "[W911 14:08:52.571468379", "I0229 00:00:00", '{"time": ', "1764410400.25", '"timestamp": "',
    "Traceback (most recent call last):", 'File "x.py", line 3, in f', "Error: boom", "Killed",
    "{'loss': ", "'1.234'", "train_runtime", "[00:01<00:02, ", "?it/s]", "\u2588", "\u00e9", "\U0001f600",
]

line_text = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(st.characters(exclude_categories=("Cs",)), max_size=12)),
    max_size=24,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(line_text)
def test_parse_progress_never_raises(line: str) -> None:
    found = parse_progress(line, 1.0, "f:1")
    if found is not None:
        assert isinstance(found, Progress)
        assert found.step is None or found.step >= 0
        assert found.tokens_per_s is None or (math.isfinite(found.tokens_per_s) and found.tokens_per_s >= 0)
        assert found.step_seconds is None or (math.isfinite(found.step_seconds) and found.step_seconds >= 0)


@settings(max_examples=300, deadline=None)
@given(st.lists(line_text, max_size=6), st.sampled_from([None, 1970, 2026, 9999]))
def test_time_parser_never_raises(lines: list[str], year: int | None) -> None:
    parser = TimeParser(default_year=year)
    for line in lines:
        value = parser.parse(line)
        assert value is None or math.isfinite(value)


@settings(max_examples=150, deadline=None)
@given(st.lists(line_text, max_size=12), st.integers(min_value=1, max_value=10**6), st.booleans())
def test_log_stream_feed_never_raises(lines: list[str], first: int, replay: bool) -> None:
    stream = LogStream("fuzz.log", default_year=2026, replay=replay)
    text = "".join(line.replace("\n", " ") + "\n" for line in lines)
    half = text.find("\n", len(text) // 2) + 1
    events = stream.feed(text[:half], first, 5.0)
    events += stream.feed(text[half:], first + text[:half].count("\n"), 6.0)
    events += stream.flush(7.0)
    for event in events:
        assert math.isfinite(event.time)
        name, _, number = event.source.rpartition(":")
        assert name == "fuzz.log" and first <= int(number) < first + max(1, len(lines))
    assert stream.lines == first - 1 + len(lines) or (not lines and stream.lines == 0)
