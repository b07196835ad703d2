"""LogStream: line numbers, the data's clock, odd bytes, the assembler hand-off.

Most tests inject a small fake assembler so that they test the stream, not
the crash parser; one integration test and the real-world checks use the real
``parsers.tracebacks.CrashAssembler``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from dflash_watch.parsers.events import Crash, Progress, Recompile
from dflash_watch.parsers.progress import ProgressPattern
from dflash_watch.parsers.ranks import has_rank_prefix, split_rank
from dflash_watch.parsers.stream import LogStream
from dflash_watch.parsers.timestamps import TimeParser

UTC = UTC
REALWORLD = Path(__file__).resolve().parents[2].parent / "shared" / "realworld"


def utc(*args: int) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()


class FakeAssembler:
    """Opens on 'Traceback', closes (emitting a Crash) on a line with 'Error:'."""

    TRIGGERS = ("Traceback", "Killed")

    def __init__(self) -> None:
        self.fed: list[tuple[str, int, float]] = []
        self.open_since: tuple[int, float] | None = None

    @property
    def is_open(self) -> bool:
        return self.open_since is not None

    def feed(self, line: str, lineno: int, time: float) -> list[Crash | Recompile]:
        self.fed.append((line, lineno, time))
        if "Killed" in line:
            return [Crash(time, str(lineno), "crash", "killed", "Killed", line, "killed")]
        if "Traceback" in line:
            self.open_since = (lineno, time)
        elif self.open_since is not None and "Error:" in line:
            first, start = self.open_since
            self.open_since = None
            return [Crash(start, str(first), "crash", "exception", "E", line, "sig")]
        return []

    def flush(self, time: float) -> list[Crash | Recompile]:
        if self.open_since is None:
            return []
        first, _ = self.open_since
        self.open_since = None
        return [Crash(time, str(first), "crash", "exception", "E", "cut", "sig")]


def make(**kwargs) -> tuple[LogStream, FakeAssembler]:
    holder: list[FakeAssembler] = []

    def factory() -> FakeAssembler:
        holder.append(FakeAssembler())
        return holder[-1]

    factory.TRIGGERS = FakeAssembler.TRIGGERS  # type: ignore[attr-defined]
    stream = LogStream("train.log", tz=UTC, assembler_factory=factory, **kwargs)
    return stream, holder[0]


def progress(events) -> list[Progress]:
    return [e for e in events if isinstance(e, Progress)]


# -- ranks ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "line, rank, rest",
    [
        ("[rank5]: Traceback (most recent call last):", 5, "Traceback (most recent call last):"),
        ("[rank0]:W0531 18:55:20.328000 x", 0, "W0531 18:55:20.328000 x"),
        ("[rank12]:   File \"a.py\", line 3", 12, "  File \"a.py\", line 3"),
        ("[default5]:step 3", 5, "step 3"),
        ("[1,7]<stdout>:loss 2", 7, "loss 2"),
        ("[1,7]<stderr>: x", 7, "x"),
        ("[default0]:[rank0]: y", 0, "y"),
        ("[2026-11-29 10:00:00] x", None, "[2026-11-29 10:00:00] x"),
        ("[W911 14:08:52.5 x.cpp:1] w", None, "[W911 14:08:52.5 x.cpp:1] w"),
        ("plain", None, "plain"),
        ("[rank]: x", None, "[rank]: x"),
    ],
)
def test_split_rank(line: str, rank: int | None, rest: str) -> None:
    assert split_rank(line) == (rank, rest)
    assert has_rank_prefix(line) == (rank is not None)


# -- line numbers and sources --------------------------------------------------


def test_line_numbers_and_sources_across_feeds() -> None:
    stream, _ = make()
    first = stream.feed("noise\nstep 1 | loss 2.0\nnoise\n", 1, 0.0)
    second = stream.feed("step 2 | loss 1.9\n\nmore\nstep 3 | loss 1.8\n", 4, 0.0)
    assert [p.source for p in progress(first + second)] == ["train.log:2", "train.log:4", "train.log:7"]
    assert [p.step for p in progress(first + second)] == [1, 2, 3]
    assert stream.lines == 7


def test_lines_counts_a_last_line_without_newline() -> None:
    stream, _ = make()
    stream.feed("a\nb\nc", 1, 0.0)
    assert stream.lines == 3
    stream.feed("d\n", 4, 0.0)
    assert stream.lines == 4


def test_assembler_sources_get_the_stream_name() -> None:
    stream, fake = make()
    events = stream.feed("x\nTraceback (most recent call last):\n  File \"a\"\nValueError: bad\n", 1, 5.0)
    crash = [e for e in events if isinstance(e, Crash)]
    assert [(c.source, c.message) for c in crash] == [("train.log:2", "ValueError: bad")]
    # While open, every line goes to the assembler, not only trigger lines.
    assert [(line, n) for line, n, _ in fake.fed] == [
        ("Traceback (most recent call last):", 2), ('  File "a"', 3), ("ValueError: bad", 4)
    ]


def test_lines_without_triggers_are_not_fed_while_closed() -> None:
    stream, fake = make()
    stream.feed("a\nb Killed c\nd\ne\n", 1, 0.0)
    assert [(line, n) for line, n, _ in fake.fed] == [("b Killed c", 2)]


def test_flush_emits_what_the_assembler_holds() -> None:
    stream, _ = make()
    stream.feed("2026-01-01 00:00:00 Traceback (most recent call last):\n  File \"x\"\n", 1, 0.0)
    crash = stream.flush(99.0)
    assert [(c.source, c.time) for c in crash] == [("train.log:1", utc(2026, 1, 1, 0, 0, 0))]


# -- the clock -------------------------------------------------------------------


def test_event_time_is_own_timestamp_else_last_before_else_fallback() -> None:
    stream, _ = make()
    events = stream.feed(
        "step 1 | loss 3\n"
        "2026-11-29 10:00:00,000 - INFO - starting\n"
        "step 2 | loss 2\n"
        "noise\n"
        "2026-11-29 10:00:05,500 - INFO - step 3 | loss 1\n",
        1, 42.0,
    )
    assert [(p.step, p.time) for p in progress(events)] == [
        (1, 42.0), (2, utc(2026, 11, 29, 10, 0, 0)), (3, utc(2026, 11, 29, 10, 0, 5) + 0.5)
    ]
    assert stream.last_time == utc(2026, 11, 29, 10, 0, 5) + 0.5
    # The next feed starts from the clock the last one left.
    later = stream.feed("step 4 | loss 0.5\n", 6, 0.0)
    assert progress(later)[0].time == utc(2026, 11, 29, 10, 0, 5) + 0.5


def test_chunk_clock_is_its_last_timestamp_even_without_events() -> None:
    stream, _ = make()
    assert stream.last_time is None
    stream.feed("2026-11-29 10:00:00 a\n2026-11-29 10:00:07 b\nno time\nno time either\n", 1, 0.0)
    assert stream.last_time == utc(2026, 11, 29, 10, 0, 7)


def test_clock_found_far_back_in_a_long_chunk() -> None:
    stream, _ = make()
    text = "2026-11-29 10:00:09 start\n" + "NCCL INFO Channel 00/02 : 0 1\n" * 50000 + "step 5 | loss 1\n"
    events = stream.feed(text, 1, 0.0)
    assert progress(events)[0].time == utc(2026, 11, 29, 10, 0, 9)
    assert stream.last_time == utc(2026, 11, 29, 10, 0, 9)


def test_timestamps_are_parsed_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = TimeParser.parse

    def counting(self: TimeParser, line: str) -> float | None:
        calls.append(line)
        return real(self, line)

    monkeypatch.setattr(TimeParser, "parse", counting)
    stream, _ = make()
    noise = "".join(f"2026-11-29 10:{i // 60 % 60:02d}:{i % 60:02d} INFO data shard {i}\n" for i in range(5000))
    events = stream.feed(noise + "step 9 | loss 1\n" + noise, 1, 0.0)
    assert len(progress(events)) == 1
    assert progress(events)[0].time == utc(2026, 11, 29, 10, 23, 19)
    assert len(calls) <= 4  # the event line, the one before it, the chunk's last line


def test_glog_lines_use_default_year() -> None:
    stream, _ = make(default_year=2025)
    events = stream.feed("[rank0]:W0531 18:55:20.328000 1 x.py:1] hi\nstep:1/125 train_time:9.7s step_avg:9710.46ms\n",
                         1, 0.0)
    assert progress(events)[0].time == pytest.approx(utc(2025, 5, 31, 18, 55, 20) + 0.328)


def test_events_leave_in_file_order_and_never_back_in_time() -> None:
    """A crash is known where its traceback closes; it goes back among the
    events written while the traceback was open, to where its time is."""
    stream, _ = make()
    events = stream.feed(
        "2026-01-01 00:00:10 Traceback (most recent call last):\n"
        "2026-01-01 00:00:12 step 1 | loss 1\n"
        "2026-01-01 00:00:13 ValueError: x\n",
        1, 0.0,
    )
    assert [(type(e).__name__, e.time) for e in events] == [
        ("Crash", utc(2026, 1, 1, 0, 0, 10)), ("Progress", utc(2026, 1, 1, 0, 0, 12))
    ]


# -- odd bytes -----------------------------------------------------------------------


def test_crlf_lines() -> None:
    stream, fake = make()
    events = stream.feed("step 1 | loss 2\r\nTraceback (most recent call last):\r\nKeyError: k\r\n", 1, 0.0)
    assert [p.loss for p in progress(events)] == [2.0]
    assert [line for line, _, _ in fake.fed] == ["Traceback (most recent call last):", "KeyError: k"]
    assert stream.lines == 3


def test_tqdm_carriage_returns() -> None:
    stream, fake = make()
    bar = "".join(f"\r {i}%|█| {i}/100 [00:0{i % 10}<00:10, 2.00it/s]" for i in range(1, 6))
    events = stream.feed(f"before\n{bar}\r     \r{{'loss': 1.5, 'epoch': 0.1}}\n{bar}\nafter Killed\n", 1, 0.0)
    got = progress(events)
    # Every state of a redrawn bar is progress (HF Trainer's one bar spans the
    # whole run); the dict glued after it is read too.
    assert [(p.source, p.loss, p.step) for p in got] == (
        [("train.log:2", None, i) for i in range(1, 6)] + [("train.log:2", 1.5, None)]
        + [("train.log:3", None, i) for i in range(1, 6)]
    )
    assert got[-1].step_seconds == 0.5
    # A trigger inside a redrawn line: each segment reaches the assembler.
    stream2, fake2 = make()
    stream2.feed("\r 10%|█| 1/10 [00:01<00:09, 1.0it/s]Traceback (most recent call last):\r  File \"x\"\n", 1, 0.0)
    assert [line for line, _, _ in fake2.fed] == [
        " 10%|█| 1/10 [00:01<00:09, 1.0it/s]Traceback (most recent call last):", '  File "x"'
    ]


def test_nul_bytes_and_ansi_escapes() -> None:
    stream, fake = make()
    text = (
        "\x1b[32m\x1b[1mINFO\x1b[0m step 1 | loss 2.5 | tok/sec: 1,000\n"
        "tail of old run 12%|█| 12/100 [00:12<01:28, 1.0it/s]" + "\x00" * 60 + "nohup: ignoring input\n"
        "\x1b]0;title\x07Traceback (most recent call last):\n"
        "NameError: n\n"
    )
    events = stream.feed(text, 1, 0.0)
    assert [(p.source, p.step, p.tokens_per_s) for p in progress(events)] == [
        ("train.log:1", 1, 1000.0), ("train.log:2", 12, None)
    ]
    assert [line for line, _, _ in fake.fed] == ["Traceback (most recent call last):", "NameError: n"]
    assert [c.source for c in events if isinstance(c, Crash)] == ["train.log:3"]


def test_user_pattern_without_literals_sees_every_line() -> None:
    pattern = ProgressPattern(r"^(?P<step>\d+) (?P<loss>[\d.]+)$")
    stream, _ = make(progress_pattern=pattern)
    events = stream.feed("1 2.5\nstep 9 | loss 1\n2 2.25\n", 1, 0.0)
    assert [(p.source, p.step, p.loss) for p in progress(events)] == [("train.log:1", 1, 2.5), ("train.log:3", 2, 2.25)]
    with_literals, _ = make(progress_pattern=ProgressPattern(r"it=(?P<step>\d+)", literals=("it=",)))
    assert [p.step for p in progress(with_literals.feed("x\nit=4\n", 1, 0.0))] == [4]


# -- with the real CrashAssembler ------------------------------------------------------


def test_integration_with_real_crash_assembler() -> None:
    pytest.importorskip("dflash_watch.parsers.crash.tracebacks")
    stream = LogStream("run.log", tz=UTC, default_year=2026)
    text = (
        "2026-11-29 10:00:00,000 - INFO - step 10 | loss 2.0 | 20.0 Ktok/s\n"
        "[rank0]: Traceback (most recent call last):\n"
        '[rank0]:   File "/x/train.py", line 10, in <module>\n'
        "[rank0]:     main()\n"
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 12.00 MiB.\n"
        "2026-11-29 10:00:03,000 - INFO - shutting down\n"
    )
    events = stream.feed(text, 1, 0.0) + stream.flush(0.0)
    kinds = [(type(e).__name__, e.source) for e in events]
    assert ("Progress", "run.log:1") in kinds
    crashes = [e for e in events if isinstance(e, Crash)]
    assert crashes and crashes[0].kind == "cuda_oom" and crashes[0].rank == 0
    assert crashes[0].source.startswith("run.log:")
    assert crashes[0].time == utc(2026, 11, 29, 10, 0, 0)


# -- real-world logs ---------------------------------------------------------------------


def realworld(prefix: str) -> tuple[str, str]:
    if not REALWORLD.is_dir():
        pytest.skip(f"real-world corpus not found at {REALWORLD}")
    path = next(REALWORLD.glob(prefix + "_*.log"), None)
    if path is None:
        pytest.skip(f"{prefix}_*.log not in the corpus")
    return path.name, path.read_bytes().decode("utf-8", errors="replace")


def run_stream(name: str, text: str, pieces: int = 3) -> tuple[LogStream, list]:
    stream = LogStream(name, default_year=2025, tz=UTC)
    lines = text.split("\n")
    parts = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    step = len(parts) // pieces + 1
    events = []
    for i in range(0, len(parts), step):
        events += stream.feed("".join(parts[i:i + step]), i + 1, 0.0)
    return stream, events + stream.flush(0.0)


@pytest.mark.parametrize("prefix, count", [("17", 2370), ("18", 1957), ("20", 1159)])
def test_realworld_nanochat_tok_sec_lines(prefix: str, count: int) -> None:
    name, text = realworld(prefix)
    stream, events = run_stream(name, text)
    rated = [p for p in progress(events) if p.tokens_per_s is not None]
    assert len(rated) == count
    assert stream.lines == text.count("\n") + (0 if text.endswith("\n") else 1)
    assert all(p.step is not None and p.total_steps == 21400 for p in rated)


def test_realworld_nanochat_values() -> None:
    name, text = realworld("18")
    _, events = run_stream(name, text)
    first = progress(events)[0]
    assert (first.step, first.tokens_per_s, first.step_seconds) == (962, 1092168.0, pytest.approx(0.48004))
    assert first.source == f"{name}:1"


def test_realworld_torchtitan_tps_lines() -> None:
    name, text = realworld("07")
    _, events = run_stream(name, text)
    rated = [p for p in progress(events) if p.tokens_per_s is not None]
    assert len(rated) == 105
    assert (rated[0].step, rated[0].tokens_per_s, rated[1].tokens_per_s) == (1, 149.0, 6697.0)
    assert rated[-1].step == 105 and rated[-1].source == f"{name}:499"
    assert rated[0].time == pytest.approx(utc(2025, 9, 11, 14, 9, 46) + 0.954794)


def test_realworld_nanotron_si_suffix() -> None:
    name, text = realworld("16")
    _, events = run_stream(name, text, pieces=1)
    got = progress(events)
    assert [(p.step, p.total_steps, p.tokens_per_s) for p in got] == [
        (327281 + i, 378950, 22800.0) for i in range(4)
    ]
    assert got[0].time == utc(2025, 10, 17, 16, 31, 56)


def test_realworld_modded_nanogpt_step_lines() -> None:
    name, text = realworld("04")
    _, events = run_stream(name, text)
    steps = [p for p in progress(events) if p.step is not None]
    assert len(steps) == 217
    assert (steps[0].step, steps[0].total_steps, steps[0].source) == (125, 3040, f"{name}:18")
    assert steps[0].step_seconds == pytest.approx(0.61302)


@pytest.mark.parametrize("prefix, count", [("03", 62), ("06", 840)])
def test_realworld_hf_loss_dicts(prefix: str, count: int) -> None:
    name, text = realworld(prefix)
    _, events = run_stream(name, text)
    dicts = [p for p in progress(events) if p.loss is not None and p.metric("epoch") is not None]
    assert len(dicts) == count
    if prefix == "03":
        assert dicts[0].source == f"{name}:278" and dicts[0].loss == 22.0238
        assert all(p.metric("learning_rate") == 0 for p in dicts)
