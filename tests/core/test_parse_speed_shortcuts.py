"""The parse stage's shortcuts (issue 20) give what their plain forms give.

``events.new_progress`` builds a ``Progress`` without the frozen
dataclass's ``object.__setattr__`` per field; ``crlf.has_crlf`` answers
``"\\r\\n" in text`` without the slow two-character search;
``redraw_states`` does not read again a state drawn again unchanged;
``TimeParser.parse`` reads a line of the minute it holds at once. Each
is compared here with the plain form on the cases where they could part.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import pickle
import random

import pytest

from dflash_watch.parsers.clock import at_time
from dflash_watch.parsers.crlf import _CR_LOOKS, has_crlf
from dflash_watch.parsers.events import Progress, new_progress
from dflash_watch.parsers.progress import progress_values
from dflash_watch.parsers.progress.ops import Values
from dflash_watch.parsers.progress.redraws import redraw_states
from dflash_watch.parsers.timestamps import TimeParser

_FULL = (1.5, "a.log:7", 3, 100, 2.0, 1.25, 4, (("lr", 0.001),), 0.3, False, 3.0, "it/s", 61.0)


def _same(a: object, b: object) -> None:
    """Field by field, by type and value (NaN included), and as objects."""
    assert type(a) is type(b) is Progress
    for f in dataclasses.fields(Progress):
        x, y = getattr(a, f.name), getattr(b, f.name)
        assert type(x) is type(y), f.name
        assert x == y or (x != x and y != y), f.name


def test_new_progress_is_a_progress_in_every_way() -> None:
    made, plain = new_progress(*_FULL), Progress(*_FULL)
    _same(made, plain)
    assert made == plain and hash(made) == hash(plain) and repr(made) == repr(plain)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.time = 2.0  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(made)) == plain
    assert copy.copy(made) == plain and dataclasses.replace(made, time=9.0) == Progress(9.0, *_FULL[1:])
    assert dataclasses.asdict(made) == dataclasses.asdict(plain)
    assert made.metric("lr") == 0.001
    assert not hasattr(made, "__dict__")


def test_new_progress_takes_progress_arguments() -> None:
    """Defaults, keywords and their mistakes as ``Progress`` takes them."""
    _same(new_progress(1.0, "x:1"), Progress(1.0, "x:1"))
    _same(new_progress(1.0, "x:1", step=5, clocked=False), Progress(1.0, "x:1", step=5, clocked=False))
    _same(new_progress(time=math.nan, source="y", loss=-0.0), Progress(time=math.nan, source="y", loss=-0.0))
    for bad in ((1.0,), (*_FULL, None)):
        with pytest.raises(TypeError):
            Progress(*bad)
        with pytest.raises(TypeError):
            new_progress(*bad)
    with pytest.raises(TypeError):
        new_progress(1.0, "x", nope=1)  # type: ignore[call-arg]


def test_at_time_rebuilds_as_replace_does() -> None:
    event = new_progress(*_FULL)
    _same(at_time(event, 5.0), dataclasses.replace(event, time=5.0))
    _same(at_time(event, 5.0, True), dataclasses.replace(event, time=5.0, clocked=True))


def _crlf_cases() -> list[str]:
    many = "x\r" * (_CR_LOOKS + 3)
    cases = [
        "", "\r", "\n", "\r\n", "\n\r", "\r\r", "\r\r\n", "a\rb\rc\n", "a\rb\r\nc", "abc\r",
        "\n\r\r", "line\n" * 5 + "tail\r\n", many, many + "\r\n", many + "\n", many[:-1] + "\n",
        "\r" * _CR_LOOKS + "\n", "\r" * (_CR_LOOKS - 1) + "\n", "\r" * (_CR_LOOKS + 1) + "\n",
        "x\r" * (_CR_LOOKS - 1) + "\r\n", "é\r\n", "é\r",
    ]
    rng = random.Random(20)
    for _ in range(3000):
        cases.append("".join(rng.choice("\r\nab") for _ in range(rng.randrange(0, 12))))
    for n in (_CR_LOOKS - 2, _CR_LOOKS, _CR_LOOKS + 2):
        for k in range(n - 2, n + 3):
            crs = ["z\r"] * n
            if 0 <= k < n:
                crs[k] = "z\r\n"
            cases.append("".join(crs))
    return cases


def test_has_crlf_is_the_plain_search() -> None:
    for text in _crlf_cases():
        assert has_crlf(text) is ("\r\n" in text), repr(text[-40:])


def _every_state_read(line: str, rank: int | None) -> list[Values]:
    """``redraw_states`` as it was: every state read, the newer of one step winning."""
    out: list[Values] = []
    last: object = None
    for segment in line.split("\r"):
        if not segment.strip():
            continue
        found = progress_values(segment, rank, None)
        if found is None:
            continue
        key = found[0] if found[0] is not None else found
        if key == last:
            out[-1] = found
            continue
        last = key
        out.append(found)
    return out


_STATES = [
    "Training:   0%|          | 4/500000 [01:04<40:00, 2.9it/s, loss=2.796]",
    "Training:   0%|          | 5/500000 [01:05<40:00, 2.9it/s, loss=2.500]",
    "Training:   0%|          | 4/500000 [01:04<40:00, 2.9it/s, loss=nan]",
    "1.00ktok [00:01, 2.00ktok/s]",
    "loss nan | 22.2 Ktok/s",  # no step, a NaN: a fresh reading is a new state
    "{'loss': nan, 'learning_rate': 1e-05}",
    "step 3 | loss nan",
    "garbage",
    "",
    "   ",
]


def _as_text(states: list[Values]) -> str:
    return repr(states)  # NaN reads as nan: compared by value, not by ==


def test_redraw_states_skip_only_what_reads_the_same() -> None:
    rng = random.Random(7)
    lines = ["\r".join([s, s]) for s in _STATES] + ["\r".join([s, "", s, s]) for s in _STATES]
    for _ in range(3000):
        lines.append("\r".join(rng.choice(_STATES) for _ in range(rng.randrange(1, 7))))
    for line in lines:
        for rank in (None, 3):
            assert _as_text(redraw_states(line, rank)) == _as_text(_every_state_read(line, rank)), repr(line)
    # A stepless NaN state drawn twice is two states, as a fresh reading is.
    assert len(redraw_states("loss nan | 22.2 Ktok/s\rloss nan | 22.2 Ktok/s", None)) == 2


def _stamped_lines(rng: random.Random) -> list[str]:
    lines = []
    for _ in range(4000):
        minute = rng.choice(["10:00", "10:00", "10:00", "10:01", "23:59"])
        second = rng.choice(["00", "01", "59", "60", "7", "5x"])
        frac = rng.choice(["", "", ".123", ".1", ".123456", ",250", "."])
        tail = rng.choice([" - INFO - x", "Z x", "+01:00 x", "x", "", "1 x"])
        day = rng.choice(["29", "29", "30"])
        lines.append(rng.choice([
            f"2026-11-{day} {minute}:{second}{frac}{tail}",
            f"2026-11-{day}T{minute}:{second}{frac}{tail}",
            f"11/{day}/2026 {minute}:{second}{frac}{tail}",
            f" 11/{day}/2026 {minute}:{second}{frac}{tail}",
            f"[rank3]:2026-11-{day} {minute}:{second}{frac}{tail}",
            f"I1129 {minute}:{second}.123456 1 x.cc:1] x",
            f"2026-11-{day} {minute}",
            f"2026-11-{day} {minute}:",
            "no stamp",
            "",
        ]))
    return lines


def test_parse_of_the_held_minute_is_the_full_parse() -> None:
    """``parse`` and ``parse_dated`` against ``_parse`` (which every line
    took before), on twin parsers fed the same lines: same values, same state."""
    rng = random.Random(11)
    fast, full = TimeParser(), TimeParser()
    hits = 0
    for line in _stamped_lines(rng):
        dated = rng.random() < 0.5
        hits += line[:16] == fast._min_key != ""
        got = fast.parse_dated(line) if dated else fast.parse(line)
        want = full._parse(line, dated)
        assert repr(got) == repr(want), line
        assert [getattr(fast, n) for n in TimeParser.__slots__] == [getattr(full, n) for n in TimeParser.__slots__], line
    assert hits > 100  # the held minute's path was taken
