"""A stream's events never depend on where its chunk boundaries fall.

The tailer hands the stream whatever complete lines a read brought (live: a
few lines; replay: a MiB), so the same text split anywhere between lines
must give exactly the events, line count and clock of the whole text fed at
once. The texts are stretches of the real logs of ../shared/realworld and
synthetic ones built to cross the stream's state at a boundary: tracebacks
(the assembler open across a boundary), tqdm bars redrawn with '\\r', ranks
whose stamps jitter, lines before the first stamp, a clock stepped back,
US and glog stamps, lane runs of one line shape.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dflash_watch.parsers.stream import LogStream

UTC = UTC
REALWORLD = Path(__file__).resolve().parents[2].parent / "shared" / "realworld"
T0 = datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC).timestamp()


def _realworld_lines() -> list[list[str]]:
    if not REALWORLD.is_dir():
        return []
    out = []
    for path in sorted(REALWORLD.glob("*.log")):
        text = path.read_bytes().decode("utf-8", errors="replace")
        out.append(text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"))
    return out


REAL = _realworld_lines()


def iso(t: float, style: str = "iso") -> str:
    d = datetime.fromtimestamp(t, UTC)
    if style == "us":
        return d.strftime("%m/%d/%Y %H:%M:%S")
    if style == "glog":
        return d.strftime("I%m%d %H:%M:%S") + f".{d.microsecond:06d} 77 train.py:12]"
    return d.strftime("%Y-%m-%d %H:%M:%S") + f",{d.microsecond // 1000:03d}"


def synthetic(rnd: random.Random, n: int) -> list[str]:
    """Blocks of the kinds of text that carry state from line to line."""
    t = T0 + rnd.randrange(3600)
    step = rnd.randrange(1000)
    style = rnd.choice(["iso", "iso", "us", "glog"])
    out: list[str] = []
    if rnd.random() < 0.3:  # lines before the first stamp
        out += [f"step {step + i} | loss 2.{i} | dt: 480ms" for i in range(rnd.randrange(1, 6))]
    while len(out) < n:
        kind = rnd.random()
        t += rnd.choice([0.0, 0.004, 0.5, 1.0, 7.0])
        if kind < 0.35:  # one step on several ranks, stamps jittered by ms
            step += 1
            for rank in rnd.sample(range(8), rnd.randrange(1, 5)):
                j = t + rnd.randint(-5, 5) / 1000
                out.append(f"[rank{rank}]:{iso(j)} - INFO - step {step}/9000 | loss 2.31 | 21.4 Ktok/s")
        elif kind < 0.55:  # a lane run of one shape
            for _ in range(rnd.randrange(1, 30)):
                step += 1
                t += 0.5
                out.append(f"{iso(t, style)} - INFO - step {step}/9000 | loss 2.3{step % 10} | {20 + step % 3}.5 Ktok/s")
        elif kind < 0.65:  # a tqdm bar redrawn with '\r' (one line)
            total = rnd.choice([50, 100])
            states = sorted(rnd.sample(range(1, total + 1), rnd.randrange(1, 6)))
            out.append("".join(f"\r{s * 100 // total:3d}%|##| {s}/{total} [00:{s % 60:02d}<00:10, 2.0it/s]" for s in states))
        elif kind < 0.75:  # a rank's traceback, interleaved with another rank's line
            r = rnd.randrange(8)
            out += [
                f"[rank{r}]: Traceback (most recent call last):",
                f'[rank{r}]:   File "/x/train.py", line {rnd.randrange(1, 99)}, in <module>',
            ]
            if rnd.random() < 0.5:
                out.append(f"[rank{(r + 1) % 8}]:{iso(t)} - INFO - step {step}/9000 | loss 2.3")
            out += [f"[rank{r}]:     main()", f"[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried {step}"]
        elif kind < 0.8:  # the clock stepped back (NTP)
            t -= rnd.choice([3.0, 90.0])
            out.append(f"{iso(t)} - INFO - clock adjusted")
        elif kind < 0.85:
            out.append(f"{iso(t)} - WARNING - torch._dynamo hit config.recompile_limit (8)")
        elif kind < 0.9:
            out.append("Killed")
        else:
            out.append(rnd.choice(["", "NCCL INFO Channel 00/32 :    0   1", "wandb: syncing", "  warnings.warn("]))
    return out


def lines_for(seed: int, n: int) -> list[str]:
    rnd = random.Random(seed)
    if REAL and rnd.random() < 0.5:
        lines = rnd.choice(REAL)
        start = rnd.randrange(max(1, len(lines) - n))
        picked = lines[start:start + n]
        if rnd.random() < 0.5:  # real lines with synthetic ones among them
            at = rnd.randrange(len(picked) + 1)
            picked[at:at] = synthetic(rnd, n // 4 + 1)
        return picked
    return synthetic(rnd, n)


def feed(text: str, cuts: list[int], replay: bool, fast: bool = True) -> tuple:
    stream = LogStream("t.log", tz=UTC, default_year=2026, replay=replay, fast=fast)
    events = []
    pos = 0
    lineno = 1
    for cut in sorted(set(cuts)) + [len(text)]:
        end = text.rfind("\n", pos, cut) + 1 if cut < len(text) else len(text)
        if end <= pos:
            continue
        chunk = text[pos:end]
        events += stream.feed(chunk, lineno, T0 + 86400)
        lineno += chunk.count("\n")
        pos = end
    events += stream.flush(T0 + 86400)
    return [repr(e) for e in events], stream.lines, stream.last_time


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 10**9),
    st.integers(1, 400),
    st.lists(st.floats(0, 1), min_size=1, max_size=12),
    st.booleans(),
)
def test_events_do_not_depend_on_chunk_boundaries(seed: int, n: int, cuts: list[float], replay: bool) -> None:
    text = "\n".join(lines_for(seed, n)) + "\n"
    whole = feed(text, [], replay)
    split = feed(text, [int(c * len(text)) for c in cuts], replay)
    assert split == whole


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**9), st.integers(1, 300), st.lists(st.floats(0, 1), max_size=8), st.booleans())
def test_fast_and_line_by_line_agree_on_the_same_texts(seed: int, n: int, cuts: list[float], replay: bool) -> None:
    text = "\n".join(lines_for(seed, n)) + "\n"
    at = [int(c * len(text)) for c in cuts]
    assert feed(text, at, replay, fast=True) == feed(text, at, replay, fast=False)


@pytest.mark.skipif(not REAL, reason=f"{REALWORLD} not present")
@pytest.mark.parametrize("index", range(20))
def test_each_real_log_line_by_line_equals_whole(index: int) -> None:
    """Every real log fed one line at a time (live, a quiet run) and whole."""
    if index >= len(REAL):
        pytest.skip("fewer real logs")
    text = "\n".join(REAL[index]) + "\n"
    cuts = [i + 1 for i, c in enumerate(text) if c == "\n"]
    for replay in (False, True):
        assert feed(text, cuts, replay) == feed(text, [], replay)


def test_a_glog_year_does_not_depend_on_where_the_chunk_was_cut() -> None:
    """Found by the property above: a full-dated 2025 line, then yearless glog
    stamps. The stream reads only the last stamp of a stretch of lines, so a
    cut after the 2025 line left the glog clock in the default year (2026),
    a year ahead of the events around it."""
    text = "\n".join(lines_for(309, 210)) + "\n"
    whole = feed(text, [], False)
    for frac in (0.25, 0.5, 0.75, 0.9):
        assert feed(text, [int(frac * len(text))], False) == whole, frac
