"""Progress lines read as columns give exactly what reading them one by one gives.

The stream defers progress lines of a "lane" shape (built-in format, ISO
stamp, nothing else on the line) and reads a run of them at once
(``parsers.lanes.read_lanes``). Every test here compares it with
``LogStream(fast=False)``, the per-line reading of the chunk's own text
(no ASCII view of wide chunks either), on logs built to hit the
edges: minute and fraction-length changes, invalid dates, a second of 60,
values that fail the fast checks (NaN, inf, fractional steps), lines that
are not lanes in between (tracebacks, tqdm redraws, rank prefixes, lines
without stamps), and chunk borders anywhere. Runs of stamp-less tqdm bars
(``Bare`` lanes: dated by the lines before them) between stamped lines,
glog lines and unstamped noise are among them.
"""

from __future__ import annotations

import importlib.util
import random
from datetime import UTC
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dflash_watch.parsers.lanes as lanes_module
import dflash_watch.parsers.stream as stream_module
from dflash_watch.parsers.progress import _PLANS, _run_fast, column_plan, line_shape, progress_columns
from dflash_watch.parsers.stream import LogStream
from dflash_watch.parsers.timestamps import TimeParser

UTC = UTC
ROOT = Path(__file__).resolve().parents[2]

PROGRESS_FORMATS = [
    "{ts} - INFO - dflash.train - step {step}/500000 | loss {loss} | acc_len 3.4 | {tps} Ktok/s | pad_eff 0.93 | lr 2.0e-04",
    "{ts} INFO step {step} | loss {loss} | tokens/s: {tps} | dt: {ms}ms",
    "{ts} | iter {step} | loss {loss} | tokens_per_s: {tps} | step_time: {sec}",
    "{ts} - step {stepf} - loss {loss}",
]
NOISE = [
    "{ts} - INFO - dflash.data - loaded shard 123 with 4567 samples",
    "[rank3]: {ts} step {step} | loss {loss} | {tps} Ktok/s",
    "step {step} | loss {loss} | {tps} Ktok/s",
    "\rEvaluating:  20%|##        | 20/100 [00:01<00:05, 9.8it/s]\rEvaluating: 100%|##########| 100/100 [00:10<00:00, 9.8it/s]",
    "Traceback (most recent call last):\n  File \"/x/train.py\", line 3, in <module>\n    main()\nRuntimeError: boom {step}",
    "{ts} - WARNING - torch._dynamo hit config.recompile_limit (8)",
    "[W1129 10:00:00.000000000 ProcessGroupNCCL.cpp:4561] NCCL INFO Channel 00/32",
    # Wide characters make the chunk a wide str (the stream's ASCII view has
    # a '?' for each), next to lines with a real '?'.
    "\r 40%|████      | 40/100 [00:04<00:06, 9.8it/s]\r100%|██████████| 100/100 [00:10<00:00, 9.8it/s]",
    "{ts} - INFO - naïve step {step} | loss {loss} | {tps} Ktok/s",
    "{ts} - INFO - step {step}? | loss {loss} | {tps} Ktok/s | why?",
    "Traceback (most recent call last):\n  File \"/x/é.py\", line 3, in <module>\nValueError: bad ☃ {step}",
    # Colours, NUL padding and CRLF: the stream edits the text before reading it.
    "\x1b[32m{ts} - INFO - step {step} | loss {loss} | {tps} Ktok/s\x1b[0m\r",
    "\x00\x00{ts} - INFO - step {step} | loss {loss} | {tps} Ktok/s ✓",
]
# tqdm bars without a stamp (HF Trainer, Lightning, the progress
# log): each is dated by the stamp on the lines before it.
TQDM = [
    "Training: {pct}%|          | {step}/500000 [01:{ss}<40:00, {rate}it/s, loss={loss}, tok/s={tps}]",
    " {pct}%|██▌       | {step}/500 [{hh}:{ss}:{ss}<00:10, {rate}s/it]",
    "Epoch 1: {pct}%|##        | {step}/{step} [00:{ss}<?, ?it/s]",
    "Epoch 2: {pct}%|##  | {step}/0 [00:{ss}<00:09, {rate}kit/s, loss={loss}, v_num=1]",
    "Training: {pct}%|          | {step}/500000 [01:{ss}<40:00, {rate}it/s, loss={loss}, tok/s={tps}]",
]
# Stamps of other styles, and none, in the gaps before a bar.
GAPS = [
    "W1129 10:00:0{d}.123456 4242 dataloader.cc:7] slow worker 3: queue depth 0",
    "I0101 00:00:0{d} 4242 rendezvous.cc:1] restart",
    "NCCL INFO Channel 0{d}/32 : 0[0] -> 1[1] via P2P/IPC",
    '{{"time": "2025-11-29T10:00:0{d}", "msg": "ok"}}',
    # A step line stamped the glog way: its own stamp, no Bare lane.
    "I1129 10:00:0{d}.5 4242 train.py:9] step 1{d} | loss 2.{d} | 2{d}.5 Ktok/s",
]
VALUES = {
    "loss": ["2.7512", "nan", "0.0000", "12.5", "inf"],
    "tps": ["21.7", "0", "nan", "inf", "1e400", "3.25"],
    "step": ["7", "1234", "99999", "0", "000012"],
    "stepf": ["7.0", "7.5", "12"],
    "ms": ["250", "0", "nan"],
    "sec": ["1.5", "inf", "0.25"],
    "pct": ["  0", " 45", "100"],
    "rate": ["2.9", "0.00", "12.25", "0", "1" + "0" * 400],
    "ss": ["01", "59", "61"],
    "hh": ["0", "12", "123456789"],
    "d": ["0", "5"],
}


def stamp(rnd: random.Random, t: list[int]) -> str:
    t[0] += rnd.choice([0, 0, 1, 7, 59, 61, 3600])
    s = t[0]
    day, rest = divmod(s, 86400)
    hh, rest = divmod(rest, 3600)
    mm, ss = divmod(rest, 60)
    kind = rnd.random()
    if kind < 0.03:
        sec = "60"  # no such second: the stamp does not parse
    else:
        sec = f"{ss:02d}"
    date = f"2025-11-{(day % 28) + 1:02d}" if rnd.random() > 0.02 else "2025-02-30"
    sep = "T" if rnd.random() < 0.05 else " "
    frac = rnd.choice([",123", ",123", ".5", ",123456", ""]) if rnd.random() < 0.2 else f",{rnd.randrange(1000):03d}"
    return f"{date}{sep}{hh:02d}:{mm:02d}:{sec}{frac}"


def us_stamp(iso: str) -> str:
    """The ISO stamp as Python logging's ``%m/%d/%Y %H:%M:%S`` writes it
    (with the same fraction, as a format with ``,%(msecs)03d`` would)."""
    return f"{iso[5:7]}/{iso[8:10]}/{iso[0:4]} {iso[11:]}"


def redigit(value: str, rnd: random.Random) -> str:
    """``value`` with every digit drawn anew: the same line shape, other values."""
    return "".join(rnd.choice("0123456789") if c.isdigit() else c for c in value)


def make_log(seed: int, n: int) -> str:
    rnd = random.Random(seed)
    again = random.Random(seed + 1)  # which bars are drawn twice
    t = [1_764_410_400 % 86400]
    us = rnd.random()  # the share of lines stamped the US way (HF scripts)
    out = []
    bars = rnd.random() < 0.6  # a log with tqdm bars between its lines
    # Each bar format keeps a few shapes per log (its values' lengths), with
    # new digits on every line: the column reading has lanes to take.
    shapes = {fmt: [{k: rnd.choice(v) for k, v in VALUES.items()} for _ in range(2)] for fmt in TQDM}
    for _ in range(n):
        r = rnd.random()
        if bars and r < 0.35:
            # A run of one bar shape, sometimes right after another's.
            fmt = rnd.choice(TQDM)
            for _ in range(rnd.choice([1, 1, 2, 5])):
                values = {k: redigit(v, rnd) for k, v in rnd.choice(shapes[fmt]).items()}
                bar = fmt.format(**values)
                redraw = again.random()  # its own draws: the log is otherwise the same
                if redraw < 0.15:  # drawn again unchanged (a ``Redrawn`` lane), once or twice
                    bar = "\r".join([bar] * again.choice([2, 2, 3]))
                elif redraw < 0.2:  # the same shape drawn again with other digits: read whole
                    bar = bar + "\r" + redigit(bar, again)
                out.append(bar)
            continue
        if bars and r < 0.45:
            out.append(rnd.choice(GAPS).format(d=rnd.randrange(10)))
            continue
        fmt = rnd.choice(PROGRESS_FORMATS) if rnd.random() < 0.75 else rnd.choice(NOISE)
        values = {k: rnd.choice(v) for k, v in VALUES.items()}
        ts = stamp(rnd, t)
        if rnd.random() < us:
            ts = us_stamp(ts)
        out.append(fmt.format(ts=ts, **values))
    return "\n".join(out) + "\n"


def replay(text: str, fast: bool, cuts: list[int]) -> tuple:
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


def replay_both(
    text: str, cuts: list[int], monkeypatch: pytest.MonkeyPatch, lanes: bool = False
) -> tuple[list[str], list[str]]:
    """The per-line reading's events, once the column reading gave the same;
    and the lines the column reading still read one by one (so a test can
    tell the column path was really taken, not only that it agrees): by the
    stream, and with ``lanes`` by the run reader too."""
    want = replay(text, False, cuts)
    calls: list[str] = []
    for module in (stream_module, lanes_module) if lanes else (stream_module,):
        real = module.read_progress
        monkeypatch.setattr(
            module, "read_progress", lambda *a, _real=real, **k: calls.append(a[3]) or _real(*a, **k)
        )
    assert replay(text, True, cuts) == want
    return want[0], calls


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10**9), st.integers(1, 120), st.lists(st.integers(0, 20000), max_size=6))
def test_columns_answer_as_line_by_line(seed: int, n: int, cuts: list[int]) -> None:
    text = make_log(seed, n)
    assert replay(text, True, cuts) == replay(text, False, cuts)


def test_the_generated_logs_take_the_bare_column_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Else the differential above would compare the per-line reading of
    tqdm bars with itself: most generated bars are read as columns (built
    from a lane's columns in ``lanes``, a bar's ``elapsed_s`` its last:
    stretches of one bar are dated inline, longer ones by ``bare_times``)."""
    taken: list[int] = []
    real = lanes_module.new_progress

    def counted(*args: object) -> object:
        if args[-1] is not None:  # elapsed_s: a tqdm bar's
            taken.append(1)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(lanes_module, "new_progress", counted)
    bars = 0
    for seed in range(40):
        text = make_log(seed, 120)
        bars += sum(line.split(": ", 1)[0] in ("Training", "Epoch 1", "Epoch 2") for line in text.split("\n"))
        assert replay(text, True, [3000]) == replay(text, False, [3000])
    assert sum(taken) > bars // 2 > 100


def test_a_progress_log_reads_its_tqdm_bars_as_columns_and_agrees(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 20's progress log: stamped step lines, stamp-less tqdm bars
    between them, data-loader and glog lines in the gaps. The bars take the
    column reading (a ``Bare`` lane), dated as the per-line reading dates
    them; so do the bars redrawn unchanged with '\\r' (``X\\rX``: a
    ``Redrawn`` lane), and none is read one at a time."""
    spec = importlib.util.spec_from_file_location("speed_logs", ROOT / "benchmarks" / "speed_logs.py")
    assert spec is not None and spec.loader is not None
    speed_logs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(speed_logs)
    path = tmp_path / "progress.log"
    speed_logs.write_log(path, 6000, "progress")
    text = path.read_bytes().decode("utf-8")  # its '\\r' kept
    events, calls = replay_both(text, [100_000, 400_000], monkeypatch, lanes=True)
    bars = [e for e in events if "elapsed_s=None" not in e and e.startswith("Progress(")]
    assert len(bars) > 500
    assert "\r" in text and calls == []


def test_bars_redrawn_unchanged_take_the_columns_and_others_are_read_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bar drawn again as it was (``X\\rX``, ``X\\rX\\rX``) is its one
    state, read in its lane; a line of that shape whose states differ
    (``X\\rY``: two steps), or whose values fail the columns' checks (a
    NaN loss, a rate of 400 digits), is read whole, as the per-line reading
    reads it. Same events, every chunk border."""
    rnd = random.Random(11)
    lines = []
    for i in range(400):
        lines.append(f"2025-11-29 10:{i // 60 % 60:02d}:{i % 60:02d},000 - INFO - dflash.data - loaded shard {i}")
        loss = "nan" if i % 37 == 0 else f"{2 + rnd.random():.3f}"
        rate = "1" + "0" * 400 if i % 53 == 0 else f"{rnd.uniform(1, 9):.2f}"
        bar = f"Training: {i % 90 + 10:3d}%|          | {1000 + i}/500000 [01:{i % 60:02d}<40:00, {rate}it/s, loss={loss}, tok/s={20000 + i}]"
        kind = i % 5
        if kind == 1:
            bar = f"{bar}\r{bar}"
        elif kind == 2:
            bar = "\r".join([bar] * 3)
        elif kind == 3:
            bar = f"{bar}\r{bar.replace(f'{1000 + i}/', f'{1001 + i}/')}"
        lines.append(bar)
    text = "\n".join(lines) + "\n"
    for cuts in ([], [5_000, 40_000], [rnd.randrange(len(text)) for _ in range(6)]):
        events, calls = replay_both(text, cuts, monkeypatch, lanes=True)
        monkeypatch.undo()
        states = [e for e in events if e.startswith("Progress(")]
        assert len(states) == 400 + 80  # one each, two where the states differ
        # Read whole: only the lines whose states differ, or whose values fail the checks.
        odd = [c for c in calls if "\r" not in c and "0" * 400 not in c and "loss=nan" not in c]
        assert calls and not odd, odd[:3]
        differ = [c for c in calls if len(set(c.split("\r"))) > 1]
        assert len(differ) == 80
        # A bar drawn again unchanged is read whole only where a plain bar
        # of its values would be read on its own too.
        same = [c for c in calls if "\r" in c and len(set(c.split("\r"))) == 1]
        assert all("loss=nan" in c or "0" * 400 in c for c in same), same[:3]


def test_a_realistic_log_is_read_as_columns_and_agrees(monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(5)
    lines = []
    for i in range(3000):
        ts = f"2025-11-29 10:{i // 600:02d}:{i // 10 % 60:02d},{rnd.randrange(1000):03d}"
        if i % 10 == 9:
            lines.append(f"{ts} - INFO - dflash.data - loaded shard {i} with 4567 samples")
        else:
            lines.append(
                f"{ts} - INFO - dflash.train - step {1000 + i}/500000 | loss {2 + rnd.random():.4f} | "
                f"acc_len 3.4 | {21 + rnd.random():.1f} Ktok/s | pad_eff 0.93 | lr 2.0e-04"
            )
        if i == 1500:
            lines.append('Traceback (most recent call last):\n  File "/x/t.py", line 1, in <module>\nValueError: x')
    text = "\n".join(lines) + "\n"
    events, calls = replay_both(text, [10_000, 150_000], monkeypatch)
    assert sum(1 for e in events if e.startswith("Progress(")) == 2700
    # Only the line that closes the traceback is read on its own: the crash
    # assembler sees it first.
    assert len(calls) == 1 and "step 2501/" in calls[0]


def test_a_log_stamped_the_us_way_is_read_as_columns_and_agrees(monkeypatch: pytest.MonkeyPatch) -> None:
    """HF and SpecForge scripts stamp ``11/29/2026 10:00:00``: their step
    lines take the column reading too, with the per-line reading's values."""
    rnd = random.Random(7)
    lines = [
        f"11/29/2026 10:{i // 600:02d}:{i // 10 % 60:02d} - INFO - __main__ - step {i}/5000 | loss {2 + rnd.random():.4f}"
        f" | {21 + rnd.random():.1f} Ktok/s"
        for i in range(3000)
    ]
    text = "\n".join(lines) + "\n"
    events, calls = replay_both(text, [50_000], monkeypatch)
    assert sum(1 for e in events if e.startswith("Progress(")) == 3000
    assert calls == []  # every line was read as columns


def test_rank_prefixed_lines_of_every_rank_width_are_read_as_columns_and_agree(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """torchrun's ``[rank5]:`` before each step line (issue 20's many-ranks
    log): ranks of one and two digits share the lane of the text after the
    prefix, so the lines are read as columns together, with the per-line
    reading's ranks, times and values; a value the columns cannot take
    (nan steps, a bad stamp) falls back to the per-line reading."""
    rnd = random.Random(11)
    lines = []
    for i in range(3000):
        rank = rnd.choice([0, 3, 12, 63, 7])
        sep = " " if rank == 7 else ""
        step = "7.5" if i == 1200 else str(i // 8)
        day = "31" if i == 2000 else "29"  # 11/31: no such day, the stamp fails
        lines.append(
            f"[rank{rank}]:{sep}11/{day}/2026 10:{i // 600:02d}:{i // 10 % 60:02d},{rnd.randrange(1000):03d}"
            f" - INFO - train - step {step}/80000 | loss {2 + rnd.random():.4f} | {21 + rnd.random():.1f} Ktok/s"
        )
        if i % 7 == 3:
            lines.append(f"11/29/2026 10:{i // 600:02d}:{i // 10 % 60:02d} - INFO - data - loaded shard {i}")
    text = "\n".join(lines) + "\n"
    events, calls = replay_both(text, [40_000, 41_000], monkeypatch)
    assert sum(1 for e in events if e.startswith("Progress(")) >= 2999
    assert "rank=63" in "".join(events) and "rank=7," in "".join(events)
    assert calls == []  # no line was read on its own by the stream


def test_stampless_shapes_are_those_no_line_of_which_has_a_stamp() -> None:
    """A ``Bare`` lane's lines are dated by the lines before them: only
    shapes where ``parse`` reads None whatever the digits may be one."""
    bare = TimeParser.stampless
    assert bare(b"Training:   0%|          | 0/000000 [00:00<00:00, 0.0it/s]")
    assert bare(b"  00%|##| 00/000 [00:00<00:00, 0.00s/it]".replace(b"  00", b"  X0"))
    assert bare(b"Epoch 0: 00%|##| 0/00")
    assert bare(b"I am done: step 0")  # a level letter, but no digit after it
    for stamped in (
        b"0000-00-00 00:00:00 step 0", b"00/00/0000 00:00:00 step 0", b"  0000-00-00 00:00:00 step",
        b"I0000 00:00:00.000000 0000 x.cc:0] step 0", b"W000 00:00:00 x] step", b"\t[rank0]: step 0",
        b'{"time": 0, "step": 0}', b"[0000-00-00 00:00:00] step 0", b"", b"   ",
    ):
        assert not bare(stamped), stamped
    parser = TimeParser(tz=UTC, default_year=2025)
    for line in ("Training: 5%| 1/9 [00:01<00:09, 2.9it/s]", "I am done: step 3", "Epoch 1: 9%|#| 1/9"):
        assert bare(line_shape(line)) and parser.parse(line) is None and parser.parse_dated(line) is None


def test_us_layout_reads_the_stamp_from_the_shape() -> None:
    layout = TimeParser.us_layout
    assert layout(b"00/00/0000 00:00:00 - INFO - x") == 0
    assert layout(b"00/00/0000 00:00:00,000 - INFO - x") == 3
    assert layout(b"00/00/0000 00:00:00. x") == 0  # no digit after the mark: no fraction
    assert layout(b"00/00/0000 00:00:000 x") is None
    assert layout(b"00/00/0000 00:00:00,0000000000 x") is None
    assert layout(b"0/00/0000 00:00:00 x") is None  # one-digit month: read line by line
    assert layout(b"00/00/00 00:00:00 x") is None
    assert layout(b"0000-00-00 00:00:00 x") is None


def dated_until_none(parser: TimeParser, lines: list[str]) -> list[float]:
    """What ``parse_dated`` gives line by line, up to the first line it cannot
    date: what a run reader (``us_run``, ``iso_run``) must answer."""
    out: list[float] = []
    for line in lines:
        value = parser.parse_dated(line)
        if value is None:
            break
        out.append(value)
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 61), st.integers(0, 999), st.integers(1, 13)),
                min_size=1, max_size=40))
def test_us_run_answers_as_parse_dated_with_the_same_state_after(stamps: list) -> None:
    lines = [f"{mo:02d}/29/2025 10:{mm:02d}:{ss:02d},{ms:03d} - step 1" for mm, ss, ms, mo in stamps]
    one, many = TimeParser(tz=UTC), TimeParser(tz=UTC)
    want = dated_until_none(one, lines)
    got = many.us_run(lines, 3)
    assert got == want
    assert (many.year, many._month, many._us_key, many._us_val) == (one.year, one._month, one._us_key, one._us_val)


# -- the pieces -------------------------------------------------------------------


def test_iso_layout_reads_the_stamp_from_the_shape() -> None:
    layout = TimeParser.iso_layout
    assert layout(b"0000-00-00 00:00:00,000 - INFO - x") == 3
    assert layout(b"0000-00-00T00:00:00.000000 step") == 6
    assert layout(b"0000-00-00 00:00:00 step") == 0
    assert layout(b"0000-00-00 00:00:00,000Z step") is None  # a zone: not the minute cache's
    assert layout(b"0000-00-00 00:00:00+00:00 step") is None
    assert layout(b"0000-00-00 00:00:00. step") is None
    assert layout(b"0000-00-00 00:00:00,000") is None  # nothing after the stamp
    assert layout(b" 0000-00-00 00:00:00 step") is None
    assert layout(b"00/00/0000 00:00:00 step") is None
    assert layout(b"0000-00-00 00:00:00,0000000000 x") is None  # ten digits: not ISO's


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 61), st.integers(0, 999)), min_size=1, max_size=40))
def test_iso_run_answers_as_parse_dated_with_the_same_state_after(stamps: list) -> None:
    lines = [f"2025-11-29 10:{mm:02d}:{ss:02d},{ms:03d} - step 1" for mm, ss, ms in stamps]
    one, many = TimeParser(tz=UTC), TimeParser(tz=UTC)
    one.parse_dated("2025-11-29 10:00:00.5 warm")  # a fraction of another length before
    many.parse_dated("2025-11-29 10:00:00.5 warm")
    want = dated_until_none(one, lines)
    got = many.iso_run(lines, 3)
    assert got == want
    assert (many.year, many._month, many._min_key, many._min_val, many._frac_len) == (
        one.year, one._month, one._min_key, one._min_val, one._frac_len)


def test_progress_columns_answer_as_the_fast_plan_line_by_line() -> None:
    rnd = random.Random(3)
    base = "2025-11-29 10:00:05,123 step 12/900 | loss 2.0 | tokens/s: 100.5 | dt: 5ms | grad_norm 0.25 | lr 1.5e-04"
    shape = line_shape(base)
    fast = column_plan(base, shape)
    assert fast is not None
    rank_at, ops, _ = _PLANS[shape]
    lines = ["".join(rnd.choice("0123456789") if c.isdigit() else c for c in base) for _ in range(500)]
    steps, totals, tokens, losses, metrics, seconds = progress_columns(fast, lines)
    for i, line in enumerate(lines):
        want = _run_fast(fast, ops, line, None, rank_at)
        got = (steps[i], totals[i], tokens[i], losses[i], None, metrics[i], seconds[i])
        assert repr(got) == repr(want)


def test_progress_columns_give_way_when_a_value_check_fails() -> None:
    base = "2025-11-29 10:00:05,123 | step 1.5 | loss 2.0 | 21.5 Ktok/s"
    fast = column_plan(base, line_shape(base))
    assert fast is not None and not fast.step_is_int
    ok = "2025-11-29 10:00:05,123 | step 2.0 | loss 2.0 | 21.5 Ktok/s"
    assert progress_columns(fast, [ok, ok]) is not None
    assert progress_columns(fast, [ok, base]) is None  # step 1.5 is not a step


def test_a_literal_outside_ascii_is_found_in_a_wide_chunk() -> None:
    """The ASCII view would hide such a literal behind '?': the stream must
    read the text itself then (a user's pattern, an assembler's trigger)."""
    from dflash_watch.parsers.progress import ProgressPattern

    pattern = ProgressPattern(r"época (?P<step>\d+)", literals=("época",))
    for fast in (True, False):
        events = LogStream("t.log", progress_pattern=pattern, fast=fast).feed("x █\népoca 7\n", 1, 0.0)
        assert [(e.source, e.step) for e in events] == [("t.log:2", 7)], fast

    class Assembler:
        TRIGGERS = ("Ошибка",)
        is_open = False

        def __init__(self) -> None:
            self.seen: list[str] = []

        def feed(self, line: str, lineno: int, time: float) -> list:
            self.seen.append(line)
            return []

        def flush(self, time: float) -> list:
            return []

    stream = LogStream("t.log", assembler_factory=Assembler)
    stream.feed("█ noise\nОшибка: CUDA\n", 1, 0.0)
    assert stream._assembler.seen == ["Ошибка: CUDA"]


@pytest.mark.parametrize("ranked", [False, True], ids=["plain", "ranked"])
def test_a_lane_line_whose_values_fail_still_reads_its_padding(ranked: bool) -> None:
    """A step line with ``pad_eff`` whose step or rate fails the value check
    (a fractional step, tok/s nan) is no progress: read on its own it still
    reports its padding, and so must it when its lane's columns give it up."""
    prefix = "[rank1]:" if ranked else ""
    lines = []
    for i in range(300):
        ts = f"2025-11-29 10:{i // 60:02d}:{i % 60:02d},000"
        step = f"{i}.5" if i % 3 == 0 else str(i)
        rate = "nan" if i % 7 == 0 else ("1e400" if i % 5 == 0 else "21.5")
        lines.append(f"{prefix}{ts} - INFO - train - step {step}/500000 | {rate} Ktok/s | pad_eff 0.93")
    text = "\n".join(lines) + "\n"
    want = replay(text, False, [5_000, 20_000])
    got = replay(text, True, [5_000, 20_000])
    assert sum(e.startswith("PaddingReport(") for e in want[0]) > 20
    assert got == want
