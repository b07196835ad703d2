"""A crash whose exception line another process wrote into is still a crash.

Two ranks share one log file; one raises while the other prints, and the
other's text lands inside the traceback's exception line. The fixtures in
tests/fixtures/crash_interleaved/ are real captures: ``*_python3.11.log``
from ``interleave.py`` there (two processes, one O_APPEND file, the real
traceback printer), ``torchrun_max_restarts_garbled_exception_line.log``
from torchrun --max-restarts=1 (the crash loop whose second crash was lost).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.registry import DetectorSet, build_detectors
from dflash_watch.parsers.crash.garbled import GARBLED_TYPE, garbled_line, recover
from dflash_watch.parsers.crash.tracebacks import CrashAssembler
from dflash_watch.parsers.stream import LogStream
from tests.core.synthetic import T0, drive

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "crash_interleaved"
TYPE, SAID = "RuntimeError", "bad config: drafter has 4 layers, checkpoint has 5"
TORCHRUN = "torchrun_max_restarts_garbled_exception_line.log"
# shape -> the line the alert cites (the exception line, garbled or not).
SHAPES = {
    "unbuffered_glued_python3.11.log": f"{TYPE}attempt 1 rank 0: {SAID}",
    "unbuffered_split_python3.11.log": f"{TYPE}attempt 1 rank 0",
    "buffered_glued_python3.11.log": f"attempt 1 rank 0{TYPE}: {SAID}",
    "buffered_line_python3.11.log": f"{TYPE}: {SAID}",
}


def lines_of(name: str) -> list[str]:
    return (HERE / name).read_text(encoding="utf-8").splitlines()


def alerts_of(text: str, name: str, chunk_lines: int | None = None) -> list:
    """``text`` through a LogStream (whole or in chunks) and the detectors."""
    stream = LogStream(name)
    lines = text.splitlines(keepends=True)
    step = chunk_lines or len(lines) or 1
    events: list = []
    for first in range(0, len(lines), step):
        events += stream.feed("".join(lines[first : first + step]), first + 1, T0)
    events += stream.flush(max([T0] + [e.time for e in events]))
    ds = DetectorSet(build_detectors(DetectorConfig()))
    return [a for a in drive(ds, events) + ds.flush() if a.detector in ("crash", "fx_tracing")]


def cited(alert, lines: list[str]) -> str:  # noqa: ANN001
    return lines[int(alert.source.rsplit(":", 1)[1]) - 1]


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("chunk", [None, 1, 3])
def test_each_interleave_shape_is_one_crash_with_type_and_message_recovered(name: str, chunk: int | None) -> None:
    lines = lines_of(name)
    (alert,) = alerts_of("\n".join(lines) + "\n", name, chunk)
    assert (alert.detector, alert.kind, alert.severity) == ("crash", "exception", "critical")
    assert (alert.evidence["exc_type"], alert.evidence["message"]) == (TYPE, SAID)
    assert alert.message == f"{TYPE}: {SAID} (in rank1, interleave.py:63)"
    assert cited(alert, lines) == SHAPES[name]
    if name.startswith("buffered_line"):
        assert "garbled" not in alert.evidence  # a whole foreign line: nothing was written into it
    else:
        assert alert.evidence["garbled"] == SHAPES[name]


def test_an_unreadable_exception_line_is_still_a_crash_saying_it_was_garbled() -> None:
    """A dict lookup raised: no ``raise`` line names the type, so nothing is
    guessed, but the traceback is a crash with the line as its evidence."""
    name = "unbuffered_glued_lookup_python3.11.log"
    lines = lines_of(name)
    (alert,) = alerts_of("\n".join(lines) + "\n", name)
    line = "KeyErrorattempt 1 rank 0: 'num_layers'"
    assert (alert.kind, alert.severity, cited(alert, lines)) == ("exception", "critical", line)
    assert (alert.evidence["exc_type"], alert.evidence["message"], alert.evidence["garbled"]) == (
        GARBLED_TYPE, line, line)
    assert alert.message == f"{GARBLED_TYPE}: {line} (in rank1, interleave.py:62)"


def test_a_torchrun_crash_loop_with_a_garbled_second_crash_is_two_alerts() -> None:
    lines = lines_of(TORCHRUN)
    first, second = alerts_of("\n".join(lines) + "\n", TORCHRUN)
    assert [cited(a, lines) for a in (first, second)] == [f"{TYPE}: {SAID}", f"{TYPE}attempt 1 rank 0: {SAID}"]
    for alert in (first, second):
        assert (alert.kind, alert.severity, alert.evidence["exc_type"], alert.evidence["message"]) == (
            "exception", "critical", TYPE, SAID)
    assert "garbled" not in first.evidence and second.evidence["garbled"] == lines[12]
    # Each attempt's torch elastic lines are its own, though word for word alike.
    assert [c["source"] for c in first.evidence["collateral"]] == [f"{TORCHRUN}:7", f"{TORCHRUN}:8"]
    assert [c["source"] for c in second.evidence["collateral"]] == [f"{TORCHRUN}:15", f"{TORCHRUN}:16"]


def test_the_agents_exit_line_ends_a_traceback_whose_exception_line_was_unreadable() -> None:
    """The torchrun capture with the second attempt failing in a dict lookup
    instead (its lines from the lookup capture): the agent's ``failed
    (exitcode: 1)`` says the worker is gone, so the traceback ends there and
    that line is the second incident's, not swallowed into the traceback.
    (Its ``closing signal SIGTERM`` line before is: the agent prints it while
    the other workers still run, and their lines may go on.)"""
    lines = lines_of(TORCHRUN)
    lookup = lines_of("unbuffered_glued_lookup_python3.11.log")
    assert lines[11].startswith("    raise") and lines[12].startswith("RuntimeErrorattempt")
    lines[11:13] = lookup[6:9]  # the source line, its carets, the garbled KeyError line
    first, second = alerts_of("\n".join(lines) + "\n", TORCHRUN)
    assert second.evidence["exc_type"] == GARBLED_TYPE
    assert cited(second, lines) == "KeyErrorattempt 1 rank 0: 'num_layers'"
    assert [c["source"] for c in second.evidence["collateral"]] == [f"{TORCHRUN}:{len(lines)}"]
    assert second.evidence["collateral"][0]["cause"] == "child_exit"


@pytest.mark.parametrize(("text", "code", "expected"), [
    # The message as the source line's literal says it, though the foreign text holds ": ".
    ("RuntimeError[rank0]: step 5: bad config: x", 'raise RuntimeError("bad config: x")',
     (TYPE, "bad config: x", False)),
    # Without a literal: the text after the first ": " past the type, the best there is.
    ("RuntimeErrorstep 5: cfg has 4", "raise RuntimeError(f'cfg has {n}')", (TYPE, "cfg has 4", False)),
    ("ValueErrorstep 5", "raise ValueError(msg)", ("ValueError", "", True)),
    ("step 5torch._dynamo.exc.Unsupported: call_function", "raise exc.Unsupported(msg)",
     ("torch._dynamo.exc.Unsupported", "call_function", False)),
    ("torch._dynamo.exc.Unsupportedstep 5: call_function", "raise Unsupported(msg) from e",
     ("torch._dynamo.exc.Unsupported", "call_function", False)),
])
def test_recover_reads_the_type_the_source_line_raises(text: str, code: str, expected: tuple) -> None:
    found = recover(text, code)
    assert found is not None
    assert (found[0].exc_type, found[0].message, found[1]) == expected


@pytest.mark.parametrize(("text", "code"), [
    ("KeyErrorattempt 1 rank 0: 'k'", "print(config[key])"),  # no raise: nothing guessed
    ("attempt 1 rank 0", 'raise RuntimeError("x")'),           # no type in the line
    ("ValueErrorattempt 1: x", 'raise RuntimeError("x")'),     # another type than the raise
    ("RuntimeError", "raise"),                                  # a bare re-raise names nothing
])
def test_recover_guesses_nothing_the_traceback_does_not_say(text: str, code: str) -> None:
    assert recover(text, code) is None


def test_a_plain_traceback_is_not_called_garbled() -> None:
    text = ("Traceback (most recent call last):", '  File "a.py", line 1, in <module>', "    raise KeyboardInterrupt",
            "KeyboardInterrupt")
    assert garbled_line("KeyboardInterrupt", text) is None
    assert garbled_line("RuntimeError", (*text[:3], "RuntimeError : spaced")) is None
    assert garbled_line("RuntimeError", (*text[:3], "xRuntimeError: y")) == "xRuntimeError: y"
    # A traceback too long to keep whole: its exception line may be in the cut.
    assert garbled_line("RuntimeError", (*text[:3], "... 120 lines cut ...", "see RuntimeError above")) is None


def test_a_foreign_line_between_frames_does_not_end_the_traceback() -> None:
    """Whole foreign lines between frames stay tolerated: only the line in
    the exception's place after the innermost ``raise`` is read as one."""
    text = [
        "Traceback (most recent call last):",
        '  File "/tmp/job.py", line 9, in <module>',
        "    main()",
        "attempt 1 rank 0",
        '  File "/tmp/job.py", line 5, in main',
        '    raise RuntimeError("bad config: x")',
        "RuntimeError: bad config: x",
    ]
    assembler = CrashAssembler("t.log")
    out = [e for n, line in enumerate(text, 1) for e in assembler.feed(line, n, T0)] + assembler.flush(T0)
    (crash,) = out
    assert (crash.exc_type, crash.message, crash.source, len(crash.frames)) == (TYPE, "bad config: x", "t.log:7", 2)
