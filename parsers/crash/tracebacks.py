"""Crash events from log lines: the router of lines to per-rank readers.

A training log is not a clean stderr: eight ranks write into one file, each
with a ``[rankN]:`` prefix or none; tqdm bars glue a ``Traceback`` header to
their last redraw; torch elastic adds its ``ChildFailedError`` report; and
ranks that fail at the same instant interleave their tracebacks line by line,
sometimes mid-line. So the assembler keeps one small state machine per rank
(lines without a prefix are their own stream), tolerates foreign lines inside
a traceback, and never trusts a traceback to be well formed: whatever it
assembles is classified from every line it saw (parsers/signatures.py).

The readers live beside this file, one concept each: the traceback state
machine (parsers/traceback_state.py), an exception line another process
wrote into (parsers/crash/garbled.py), torch elastic's ChildFailedError
report (parsers/child_report.py), faulthandler's block after a segfault
(parsers/crash/fault_blocks.py), one-line fatal signals
(parsers/fatal_signals.py) and dynamo's recompile blocks
(parsers/torchlog.py). This file keeps one state per rank, routes each line
to what is open on its rank, and turns a finished traceback into a Crash.

A traceback's end is only known from what follows it (a chained exception,
a multi-line message, dynamo's footer), so a finished exception stays
*pending* until a line of its own stream that cannot continue it, until
enough lines of other streams went by, or until ``flush``. The Crash still
carries the time and ``file:line`` of its last exception line, so when it is
emitted does not change what it says. Callers that tail a live log should
call ``flush`` when the log goes quiet.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..events import Crash, Recompile
from ..ranks import split_rank
from . import fatal_signals, fault_blocks
from .child_report import report_message
from .fatal_signals import SignalReader
from .fault_blocks import FaultBlock
from .garbled import GARBLED_TYPE
from .signatures import ChildReport, classify, scan_markers, short_type, traceback_signature
from .torchlog import TRIGGERS as _RECOMPILE_TRIGGERS
from .torchlog import RecompileBlock, fatal_recompile, is_fail_on_limit
from .traceback_state import BARE, DONE, FILE, HEADER, MESSAGE_CHARS, OPEN, Trace

# Literal substrings: a line holding none of them cannot start anything, so
# a caller may skip it while ``is_open`` is False.
TRIGGERS: tuple[str, ...] = (
    "Traceback (most recent call last)",
    'File "',
    "Exception in thread",
    "Error",
    "BackendCompilerFailed",
) + fatal_signals.TRIGGERS + fault_blocks.TRIGGERS + _RECOMPILE_TRIGGERS

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]")
_THREAD = re.compile(r"Exception in thread (.+?):\s*$")

_FOREIGN_PENDING = 25     # other streams' lines before a finished exception is emitted
_FOREIGN_OPEN = 500       # ... before an unfinished traceback is given up
_STREAMS_MAX = 64


@dataclass(slots=True)
class _Stream:
    """Per-rank state: lines of one rank never join another rank's crash."""

    rank: int | None
    trace: Trace | None = None
    # A multi-line block other than a traceback: dynamo's recompile message
    # or faulthandler's dump (one at a time: each ends where the other starts).
    block: RecompileBlock | FaultBlock | None = None
    thread: str | None = None
    thread_ttl: int = 0
    last_recompile: Recompile | None = None
    foreign: int = 0

    @property
    def busy(self) -> bool:
        return self.trace is not None or self.block is not None or self.thread_ttl > 0


class CrashAssembler:
    """Feed log lines in order; get Crash and Recompile events back."""

    def __init__(self, name: str = "log") -> None:
        # Sources read ``name:lineno``; with ``name=""`` just ``lineno``, for a
        # caller that adds its own file name.
        self._name = name
        self._streams: dict[int | None, _Stream] = {}
        self._signals = SignalReader(self._source)
        # ``is_open`` is asked before every candidate line of a log and the
        # state only changes in feed/flush: keep the answer, not the question.
        self._open = False

    def _source(self, lineno: int) -> str:
        return f"{self._name}:{lineno}" if self._name else str(lineno)

    @property
    def is_open(self) -> bool:
        """True while some stream is inside a traceback, report or block."""
        return self._open

    def feed(self, line: str, lineno: int, time: float) -> list[Crash | Recompile]:
        """``feed_split`` of a whole line, for a caller that holds lines (a
        test, a captured stderr): its rank prefix is split here."""
        if "\x1b" in line:
            line = _ANSI.sub("", line)
        if "\x00" in line:
            line = line.replace("\x00", "")
        rank, text = split_rank(line)
        return self.feed_split(rank, text, lineno, time)

    def feed_split(self, rank: int | None, text: str, lineno: int, time: float) -> list[Crash | Recompile]:
        """The line ``text`` said by ``rank``: the stream's one split of its
        rank prefix (``parsers.ranks``), the text after it and its rank."""
        out = self._feed(rank, text, lineno, time)
        self._open = any(s.busy for s in self._streams.values())
        return out

    def _feed(self, rank: int | None, text: str, lineno: int, time: float) -> list[Crash | Recompile]:
        if "\x1b" in text:
            text = _ANSI.sub("", text)
        if "\x00" in text:
            text = text.replace("\x00", "")
        out: list[Crash | Recompile] = []
        self._age_others(rank, out)
        stream = self._streams.get(rank)
        if stream is None:
            stream = _Stream(rank)
            self._streams[rank] = stream
        stream.foreign = 0
        block = stream.block
        if block is not None:
            if block.feed(text):
                if block.finished:
                    self._end_block(stream, out)
                return out
            self._end_block(stream, out)
        if stream.trace is not None:
            verdict = stream.trace.feed(text, lineno, time)
            if verdict == OPEN:
                return out
            self._finish(stream, out)
            if verdict == DONE:
                return out
        self._idle(stream, text, lineno, time, out)
        if not stream.busy and rank in self._streams and len(self._streams) > _STREAMS_MAX:
            del self._streams[rank]
        return out

    def flush(self, time: float) -> list[Crash | Recompile]:
        """End of input (or a quiet log): emit whatever is pending."""
        out: list[Crash | Recompile] = []
        for stream in list(self._streams.values()):
            if stream.block is not None:
                self._end_block(stream, out)
            if stream.trace is not None:
                self._finish(stream, out)
            stream.thread_ttl = 0
        self._open = any(s.busy for s in self._streams.values())
        return out

    # -- streams -----------------------------------------------------------

    def _age_others(self, rank: int | None, out: list[Crash | Recompile]) -> None:
        for other in self._streams.values():
            if other.rank == rank or not other.busy:
                continue
            other.foreign += 1
            if other.block is not None and other.foreign > _FOREIGN_PENDING:
                self._end_block(other, out)
            trace = other.trace
            if trace is not None:
                limit = _FOREIGN_OPEN if trace.state == "frames" or trace.state == "report" else _FOREIGN_PENDING
                if other.foreign > limit:
                    self._finish(other, out)
            if other.thread_ttl > 0 and other.foreign > _FOREIGN_PENDING:
                other.thread_ttl = 0

    def _end_block(self, stream: _Stream, out: list[Crash | Recompile]) -> None:
        block = stream.block
        stream.block = None
        if isinstance(block, RecompileBlock):
            event = block.event()
            stream.last_recompile = event
            out.append(event)
        elif block is not None:
            out.append(block.crash(self._source(block.lineno), stream.rank))

    # -- idle: what can start here ------------------------------------------

    def _idle(self, stream: _Stream, text: str, lineno: int, time: float, out: list[Crash | Recompile]) -> None:
        if stream.thread_ttl > 0:
            stream.thread_ttl -= 1
        if HEADER in text:
            self._start(stream, text, lineno, time)
            return
        file_match = FILE.search(text)
        if file_match is not None and text[: file_match.start()].strip() == "":
            # A traceback whose header was cut off (pasted tails, garbling).
            trace = self._start(stream, text, lineno, time)
            trace.frame(file_match)
            return
        thread = _THREAD.search(text)
        if thread is not None:
            stream.thread = thread.group(1).strip()
            stream.thread_ttl = 3
            return
        if BARE.match(text) is not None:
            trace = self._start(stream, text, lineno, time)
            trace.exception_line(text, lineno, time)
            return
        if "Fatal Python error" in text:
            fault = FaultBlock.start(text, lineno, time)
            if fault is not None:
                stream.block = fault
                return
        signal = self._signals.read(text, stream.rank, lineno, time)
        if signal is not None:
            if signal is not True:
                out.append(signal)
            return
        block = RecompileBlock.start(text, self._source(lineno), time, stream.rank)
        if block is not None:
            stream.block = block

    def _start(self, stream: _Stream, text: str, lineno: int, time: float) -> Trace:
        trace = Trace(state="frames")
        if stream.thread_ttl > 0:
            trace.thread = stream.thread
        stream.thread_ttl = 0
        stream.thread = None
        stream.trace = trace
        trace.add(text, lineno, time)
        return trace

    # -- emitting ----------------------------------------------------------

    def _finish(self, stream: _Stream, out: list[Crash | Recompile]) -> None:
        trace = stream.trace
        stream.trace = None
        if trace is None:
            return
        trace.close_exception()
        report = None
        if trace.child:
            report = trace.report.report() if trace.report is not None else ChildReport()
        frames = tuple(trace.frames)
        all_frames = tuple(trace.earlier_frames) + frames
        chain = tuple(trace.chain)
        markers = frozenset(trace.markers)
        verdict = classify(chain, all_frames, markers, report)
        if not chain and trace.unread is not None:
            # Its exception line is there but another process wrote into it
            # beyond reading (parsers/crash/garbled.py): a crash all the same.
            exc_type = GARBLED_TYPE
            message, lineno, time = trace.unread
        elif not chain:
            # Headless garble that never reached an exception line: only worth
            # an alert when its text alone names a specific failure.
            if verdict.detector == "crash" and verdict.kind == "exception":
                return
            exc_type, message = "", _first_marked(trace.text())
            lineno, time = trace.last_lineno, trace.last_time
        else:
            exc_type, message = chain[-1].exc_type, chain[-1].message
            lineno, time = trace.exc_lineno, trace.exc_time
        if report is not None:
            message = report_message(report, message)
        rank = stream.rank
        if rank is None and report is not None:
            rank = report.root_rank
        source = self._source(lineno)
        if any(short_type(e.exc_type) == "FailOnRecompileLimitHit" for e in chain) or (
            not chain and is_fail_on_limit(message)
        ):
            out.append(fatal_recompile(time, source, stream.rank, stream.last_recompile))
        out.append(
            Crash(
                time=time,
                source=source,
                detector=verdict.detector,
                kind=verdict.kind,
                exc_type=exc_type,
                message=message,
                signature=traceback_signature(exc_type, message, frames, report),
                rank=rank,
                cause=verdict.cause,
                frames=frames,
                text=trace.text(),
                thread=trace.thread,
            )
        )


def _first_marked(lines: tuple[str, ...]) -> str:
    for line in lines:
        if scan_markers(line):
            return line.strip()[:MESSAGE_CHARS]
    return lines[-1].strip()[:MESSAGE_CHARS] if lines else ""


__all__ = ["TRIGGERS", "CrashAssembler"]
