"""Python tracebacks and one-line fatal signals, assembled from log lines.

A training log is not a clean stderr: eight ranks write into one file, each
with a ``[rankN]:`` prefix or none; tqdm bars glue a ``Traceback`` header to
their last redraw; torch elastic adds its ``ChildFailedError`` report; and
ranks that fail at the same instant interleave their tracebacks line by line,
sometimes mid-line. So the assembler keeps one small state machine per rank
(lines without a prefix are their own stream), tolerates foreign lines inside
a traceback, and never trusts a traceback to be well formed: whatever it
assembles is classified from every line it saw (parsers/signatures.py).

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
from collections import deque
from dataclasses import dataclass, field

from parsers.events import Crash, Frame, Recompile
from parsers.ranks import split_rank
from parsers.signatures import (
    ChildReport,
    ExcLine,
    classify,
    normalise,
    scan_markers,
    short_type,
    signal_signature,
    traceback_signature,
)
from parsers.torchlog import RecompileBlock, fatal_recompile, is_fail_on_limit
from parsers.torchlog import TRIGGERS as _RECOMPILE_TRIGGERS

# Literal substrings: a line holding none of them cannot start anything, so
# a caller may skip it while ``is_open`` is False.
TRIGGERS: tuple[str, ...] = (
    "Traceback (most recent call last)",
    'File "',
    "Exception in thread",
    "Error",
    "BackendCompilerFailed",
    "Watchdog caught collective operation timeout",
    "slurmstepd",
    "Signal 9",
    "Signal 15",
    "Killed",
) + _RECOMPILE_TRIGGERS

_HEADER = "Traceback (most recent call last)"
_CHAIN_MARKERS = (
    "The above exception was the direct cause of the following exception",
    "During handling of the above exception, another exception occurred",
)
# Lines dynamo/inductor append after a blank line at the end of their errors.
_FOOTERS = (
    "Set TORCHDYNAMO_VERBOSE", "Set TORCH_LOGS", "Set TORCHINDUCTOR", "You can suppress this exception",
    "For more information", "To execute this test", "Explanation:", "Hint:", "Developer debug context:",
    "For even more developer context",
)

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]")
_FILE = re.compile(r'File "([^"]+)", line (\d+)(?:, in (.+?))?\s*$')
_EXC = re.compile(
    r"^(?P<type>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?:\s*:(?:\s+(?P<msg>.*?)|)|)\s*$"
)
_CARET = re.compile(r"^\s*[\^~]+\s*$")
_THREAD = re.compile(r"Exception in thread (.+?):\s*$")
# Lines that clearly start a new record rather than continue a message.
_NEW_RECORD = re.compile(
    r"^(?:[IWEFV]\d{4} \d{2}:\d{2}|\[[IWEFV]\d{4} |\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:|\d{2}/\d{2}/\d{4} \d{2}:|"
    r"Exception in thread |\s+File \"|[a-z][\w.-]*: |\s*\d{1,3}%\|)"
)
# A message-less exception line (``KeyboardInterrupt``) must look like one.
_BARE_NAME_ENDINGS = ("Error", "Exception", "Interrupt", "Exit", "Iteration", "Hit", "Failed", "Timeout")
_RULE = re.compile(r"^\s*={8,}\s*$")
# Exception types worth a Crash even when printed without a traceback.
_BARE = re.compile(
    r"^(?:torch\.[\w.]*(?:Error|Failed|Hit)|[\w.]*ChildFailedError|[\w.]*FailOnRecompileLimitHit"
    r"|[\w.]*BackendCompilerFailed)\s*:"
)

# torch elastic's ChildFailedError report fields.
_FAILED = re.compile(r"^\s*(\S.*?) FAILED\s*$")
_R_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)(?:\s*\(local_rank:\s*(\d+)\))?")
_R_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)(?:\s*\(pid:\s*(\d+)\))?")
_R_TRACE = re.compile(r"^\s*traceback\s*:\s*(.*?)\s*$")

# One-line fatal signals.
_GLOG_CPP = re.compile(r"^\[[IWEF]\d{4} [\d:.]+ [^\]]*\]\s*")
_NCCL_RANK = re.compile(r"\[Rank (\d+)\]")
_SLURM = re.compile(
    r"slurmstepd(?:-[\w.-]+)?: error: \*\*\* (STEP|JOB) (\d+)(?:\.\w+)? ON \S+ CANCELLED AT \S+"
    r"(?: DUE TO ([A-Z ]+?))?\s*\*\*\*"
)
_SLURM_OOM = re.compile(r"slurmstepd(?:-[\w.-]+)?: error: Detected \d+ oom[-_ ]kill event\(s\) in StepId=(\d+)")
_SIGNAL9 = re.compile(r"Signal (9|15) \((SIGKILL|SIGTERM)\) received by PID (\d+)")
# The shell's report of a SIGKILLed child: bare ``Killed``, bash's
# ``script.sh: line 3: 1234 Killed   python train.py``, a job-table line.
_KILLED = re.compile(r"^\s*Killed\s*$|^\S.*: line \d+:\s+\d+ Killed\b|^\[\d+\][+-]?\s+Killed\s")
_OOM_KILLER = re.compile(r"Out of memory: Killed process (\d+)")

# Bounds: what one crash may hold.
_TEXT_HEAD = 100
_TEXT_TAIL = 100
_FRAMES_KEEP = 200
_MESSAGE_LINES = 50
_MESSAGE_CHARS = 4000
_CHAIN_KEEP = 20
_JUNK_LIMIT = 40          # consecutive lines inside a traceback that fit nowhere
_FOREIGN_PENDING = 25     # other streams' lines before a finished exception is emitted
_FOREIGN_OPEN = 500       # ... before an unfinished traceback is given up
_REPORT_LINES = 5000
_SIGNAL_WINDOW_S = 300.0  # one fatal signal per rank (or job) in this long


@dataclass(slots=True)
class _Trace:
    """A traceback (possibly a chain) being assembled; mutable while open."""

    state: str                        # frames | message | chain | report
    thread: str | None = None
    head: list[str] = field(default_factory=list)
    tail: deque = field(default_factory=lambda: deque(maxlen=_TEXT_TAIL))
    n_lines: int = 0
    frames: deque = field(default_factory=lambda: deque(maxlen=_FRAMES_KEEP))
    earlier_frames: deque = field(default_factory=lambda: deque(maxlen=_FRAMES_KEEP))
    chain: list[ExcLine] = field(default_factory=list)
    message: list[str] = field(default_factory=list)
    markers: set[str] = field(default_factory=set)
    blank_seen: bool = False
    has_message: bool = True          # "KeyboardInterrupt" alone: nothing can continue it
    user_code: bool = False
    junk_run: int = 0
    expect_code: bool = False
    exc_lineno: int = 0
    exc_time: float = 0.0
    last_lineno: int = 0
    last_time: float = 0.0
    # ChildFailedError report
    child: bool = False
    rules: int = 0
    report_lines: int = 0
    in_root: bool = False
    script: str | None = None
    section_rank: int | None = None
    section_local: int | None = None
    section_exit: int | None = None
    section_pid: int | None = None
    section_trace: str | None = None
    root: tuple | None = None
    failed_ranks: list[int] = field(default_factory=list)

    def add(self, text: str, lineno: int, time: float) -> None:
        self.n_lines += 1
        if len(self.head) < _TEXT_HEAD:
            self.head.append(text)
        else:
            self.tail.append(text)
        if text:
            self.markers.update(scan_markers(text))
        self.last_lineno = lineno
        self.last_time = time

    def text(self) -> tuple[str, ...]:
        cut = self.n_lines - len(self.head) - len(self.tail)
        middle = [f"... {cut} lines cut ..."] if cut > 0 else []
        return tuple(self.head) + tuple(middle) + tuple(self.tail)

    def close_exception(self) -> None:
        """Fold the message lines gathered so far into the last ExcLine."""
        if self.chain and self.message:
            last = self.chain[-1]
            joined = "\n".join([last.message, *self.message]) if last.message else "\n".join(self.message)
            self.chain[-1] = ExcLine(last.exc_type, joined[:_MESSAGE_CHARS])
        self.message = []

    def close_section(self) -> None:
        if self.section_rank is None and self.section_exit is None:
            return
        entry = (self.section_rank, self.section_local, self.section_exit, self.section_pid, self.section_trace)
        if self.in_root:
            if self.root is None:
                self.root = entry
        elif self.section_rank is not None:
            self.failed_ranks.append(self.section_rank)
        self.section_rank = self.section_local = self.section_exit = self.section_pid = None
        self.section_trace = None


@dataclass(slots=True)
class _Stream:
    """Per-rank state: lines of one rank never join another rank's crash."""

    rank: int | None
    trace: _Trace | None = None
    recompile: RecompileBlock | None = None
    thread: str | None = None
    thread_ttl: int = 0
    last_recompile: Recompile | None = None
    foreign: int = 0

    @property
    def busy(self) -> bool:
        return self.trace is not None or self.recompile is not None or self.thread_ttl > 0


class CrashAssembler:
    """Feed log lines in order; get Crash and Recompile events back."""

    def __init__(self, name: str = "log") -> None:
        # Sources read ``name:lineno``; with ``name=""`` just ``lineno``, for a
        # caller that adds its own file name.
        self._name = name
        self._streams: dict[int | None, _Stream] = {}
        self._signals: dict[tuple, float] = {}
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
        out = self._feed(line, lineno, time)
        self._open = any(s.busy for s in self._streams.values())
        return out

    def _feed(self, line: str, lineno: int, time: float) -> list[Crash | Recompile]:
        if "\x1b" in line:
            line = _ANSI.sub("", line)
        if "\x00" in line:
            line = line.replace("\x00", "")
        rank, text = split_rank(line)
        out: list[Crash | Recompile] = []
        self._age_others(rank, out)
        stream = self._streams.get(rank)
        if stream is None:
            stream = _Stream(rank)
            self._streams[rank] = stream
        stream.foreign = 0
        if stream.recompile is not None:
            if stream.recompile.feed(text):
                if stream.recompile.finished:
                    self._end_recompile(stream, out)
                return out
            self._end_recompile(stream, out)
        if stream.trace is not None and self._continue(stream, text, lineno, time, out):
            return out
        self._idle(stream, text, lineno, time, out)
        if not stream.busy and rank in self._streams and len(self._streams) > 64:
            del self._streams[rank]
        return out

    def flush(self, time: float) -> list[Crash | Recompile]:
        """End of input (or a quiet log): emit whatever is pending."""
        out: list[Crash | Recompile] = []
        for stream in list(self._streams.values()):
            if stream.recompile is not None:
                self._end_recompile(stream, out)
            if stream.trace is not None:
                self._finish(stream, out)
            stream.thread_ttl = 0
        self._open = any(s.busy for s in self._streams.values())
        return out

    # -- streams -----------------------------------------------------------

    def _age_others(self, rank: int | None, out: list) -> None:
        for other in self._streams.values():
            if other.rank == rank or not other.busy:
                continue
            other.foreign += 1
            if other.recompile is not None and other.foreign > _FOREIGN_PENDING:
                self._end_recompile(other, out)
            trace = other.trace
            if trace is not None:
                limit = _FOREIGN_OPEN if trace.state == "frames" or trace.state == "report" else _FOREIGN_PENDING
                if other.foreign > limit:
                    self._finish(other, out)
            if other.thread_ttl > 0 and other.foreign > _FOREIGN_PENDING:
                other.thread_ttl = 0

    def _end_recompile(self, stream: _Stream, out: list) -> None:
        block = stream.recompile
        stream.recompile = None
        if block is None:
            return
        event = block.event()
        stream.last_recompile = event
        out.append(event)

    # -- idle: what can start here ------------------------------------------

    def _idle(self, stream: _Stream, text: str, lineno: int, time: float, out: list) -> None:
        if stream.thread_ttl > 0:
            stream.thread_ttl -= 1
        if _HEADER in text:
            self._start(stream, "frames", text, lineno, time)
            return
        file_match = _FILE.search(text)
        if file_match is not None and text[: file_match.start()].strip() == "":
            # A traceback whose header was cut off (pasted tails, garbling).
            trace = self._start(stream, "frames", text, lineno, time)
            self._frame(trace, file_match)
            return
        thread = _THREAD.search(text)
        if thread is not None:
            stream.thread = thread.group(1).strip()
            stream.thread_ttl = 3
            return
        if _BARE.match(text) is not None:
            trace = self._start(stream, "frames", text, lineno, time)
            self._exception_line(trace, text, lineno, time)
            return
        if self._signal(stream, text, lineno, time, out):
            return
        block = RecompileBlock.start(text, self._source(lineno), time, stream.rank)
        if block is not None:
            stream.recompile = block

    def _start(self, stream: _Stream, state: str, text: str, lineno: int, time: float) -> _Trace:
        trace = _Trace(state=state)
        if stream.thread_ttl > 0:
            trace.thread = stream.thread
        stream.thread_ttl = 0
        stream.thread = None
        stream.trace = trace
        trace.add(text, lineno, time)
        return trace

    # -- inside a traceback ------------------------------------------------

    def _continue(self, stream: _Stream, text: str, lineno: int, time: float, out: list) -> bool:
        """Give the line to the open traceback; False when it ended it unclaimed."""
        trace = stream.trace
        assert trace is not None
        state = trace.state
        if state == "report":
            return self._report(stream, trace, text, lineno, time, out)
        if state == "frames":
            self._frames_line(stream, trace, text, lineno, time, out)
            return True
        stripped = text.strip()
        if state == "chain":
            if not stripped:
                trace.add(text, lineno, time)
                return True
            if _HEADER in text:
                trace.earlier_frames.extend(trace.frames)
                trace.frames.clear()
                trace.state = "frames"
                trace.add(text, lineno, time)
                return True
            if _EXC.match(text) is not None and self._plausible_exc(text):
                trace.add(text, lineno, time)
                self._exception_line(trace, text, lineno, time)
                return True
            self._finish(stream, out)
            return False
        # state == "message": the exception line was seen.
        if trace.child and _RULE.match(text) is not None:
            trace.state = "report"
            trace.rules = 1
            trace.add(text, lineno, time)
            return True
        if not stripped:
            trace.blank_seen = True
            trace.user_code = False
            trace.add(text, lineno, time)
            return True
        if stripped.startswith(_CHAIN_MARKERS):
            trace.close_exception()
            trace.state = "chain"
            trace.blank_seen = False
            trace.add(text, lineno, time)
            return True
        if _HEADER in text:
            self._finish(stream, out)
            return False
        if trace.blank_seen:
            if stripped.startswith("from user code:"):
                trace.user_code = True
                trace.add(text, lineno, time)
                return True
            if trace.user_code and (text[:1].isspace() or _FILE.search(text)):
                trace.add(text, lineno, time)
                return True
            if stripped.startswith(_FOOTERS):
                trace.add(text, lineno, time)
                return True
            self._finish(stream, out)
            return False
        if not trace.has_message or _NEW_RECORD.match(text) is not None or _FILE.search(text) is not None:
            self._finish(stream, out)
            return False
        if len(trace.message) < _MESSAGE_LINES:
            trace.message.append(text.rstrip())
        trace.add(text, lineno, time)
        return True

    def _frames_line(self, stream: _Stream, trace: _Trace, text: str, lineno: int, time: float, out: list) -> None:
        trace.add(text, lineno, time)
        file_match = _FILE.search(text)
        if file_match is not None:
            self._frame(trace, file_match)
            trace.junk_run = 0
            return
        if _HEADER in text:
            return  # interleaved tracebacks of the same stream: merged
        if text[:1].isspace() and text.strip():
            trace.junk_run = 0
            if _CARET.match(text) is None and trace.expect_code and trace.frames:
                last = trace.frames[-1]
                trace.frames[-1] = Frame(last.file, last.line, last.function, text.strip())
            trace.expect_code = False
            return
        trace.expect_code = False
        if text.strip() and self._plausible_exc(text):
            trace.junk_run = 0
            self._exception_line(trace, text, lineno, time)
            return
        trace.junk_run += 1
        if trace.junk_run > _JUNK_LIMIT:
            self._finish(stream, out)

    def _frame(self, trace: _Trace, match: re.Match) -> None:
        trace.frames.append(Frame(match.group(1), int(match.group(2)), (match.group(3) or "").strip()))
        trace.expect_code = True
        trace.junk_run = 0

    @staticmethod
    def _plausible_exc(text: str) -> bool:
        """An exception line, not a stray capitalised word from another logger."""
        match = _EXC.match(text)
        if match is None:
            return False
        name = match.group("type").rsplit(".", 1)[-1]
        if not (name[:1].isupper() and any(c.islower() for c in name)):
            return False
        if ":" not in text:
            return name.endswith(_BARE_NAME_ENDINGS)
        return True

    def _exception_line(self, trace: _Trace, text: str, lineno: int, time: float) -> None:
        trace.close_exception()
        match = _EXC.match(text)
        if match is None:  # a bare torch exception line: split on the first colon
            exc_type, _, message = text.partition(":")
            exc_type, message = exc_type.strip(), message.strip()
        else:
            exc_type, message = match.group("type"), (match.group("msg") or "").strip()
        if len(trace.chain) >= _CHAIN_KEEP:
            del trace.chain[1]
        trace.chain.append(ExcLine(exc_type, message))
        trace.state = "message"
        trace.blank_seen = False
        trace.user_code = False
        trace.child = short_type(exc_type) == "ChildFailedError"
        trace.has_message = ":" in text
        trace.exc_lineno = lineno
        trace.exc_time = time
        trace.markers.update(scan_markers(text))

    # -- torch elastic's report ------------------------------------------------

    def _report(self, stream: _Stream, trace: _Trace, text: str, lineno: int, time: float, out: list) -> bool:
        trace.add(text, lineno, time)
        trace.report_lines += 1
        if _RULE.match(text) is not None:
            trace.rules += 1
            if trace.rules >= 2:
                self._finish(stream, out)
            return True
        stripped = text.strip()
        failed = _FAILED.match(text)
        if failed is not None and trace.script is None:
            trace.script = failed.group(1).strip()
        elif stripped.startswith("Root Cause"):
            trace.close_section()
            trace.in_root = True
        elif stripped.startswith("Failures:"):
            trace.close_section()
            trace.in_root = False
        elif re.match(r"^\s*\[\d+\]:\s*$", text):
            trace.close_section()
        else:
            rank = _R_RANK.match(text)
            code = _R_EXIT.match(text)
            tb = _R_TRACE.match(text)
            if rank is not None:
                trace.section_rank = int(rank.group(1))
                trace.section_local = int(rank.group(2)) if rank.group(2) else None
            elif code is not None:
                trace.section_exit = int(code.group(1))
                trace.section_pid = int(code.group(2)) if code.group(2) else None
            elif tb is not None:
                trace.section_trace = tb.group(1)
        if trace.report_lines > _REPORT_LINES:
            self._finish(stream, out)
        return True

    # -- emitting ----------------------------------------------------------

    def _finish(self, stream: _Stream, out: list) -> None:
        trace = stream.trace
        stream.trace = None
        if trace is None:
            return
        trace.close_exception()
        report = None
        if trace.child:
            trace.close_section()
            report = self._child_report(trace)
        frames = tuple(trace.frames)
        all_frames = tuple(trace.earlier_frames) + frames
        chain = tuple(trace.chain)
        markers = frozenset(trace.markers)
        verdict = classify(chain, all_frames, markers, report)
        if not chain:
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
            message = _report_message(report, message)
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

    @staticmethod
    def _child_report(trace: _Trace) -> ChildReport:
        root = trace.root or (None, None, None, None, None)
        return ChildReport(
            script=trace.script,
            root_rank=root[0],
            root_local_rank=root[1],
            root_exitcode=root[2],
            root_pid=root[3],
            root_traceback=root[4],
            failed_ranks=tuple(trace.failed_ranks),
        )

    # -- one-line signals ------------------------------------------------------

    def _signal(self, stream: _Stream, text: str, lineno: int, time: float, out: list) -> bool:
        if "Watchdog caught collective operation timeout" in text:
            body = _GLOG_CPP.sub("", text).strip()
            found = _NCCL_RANK.search(body)
            rank = int(found.group(1)) if found else stream.rank
            self._emit_signal(out, ("nccl", rank), lineno, time, "nccl_timeout", None, body, rank,
                              "DistBackendError")
            return True
        if "slurmstepd" in text:
            slurm = _SLURM.search(text)
            if slurm is not None:
                reason = (slurm.group(3) or "").strip()
                cause = {
                    "": "slurm_cancelled", "TIME LIMIT": "slurm_time_limit",
                    "PREEMPTION": "slurm_preempted", "NODE FAILURE": "slurm_node_failure",
                }.get(reason, "slurm_cancelled")
                body = text[text.index("slurmstepd"):].strip()
                self._emit_signal(out, ("slurm", slurm.group(2)), lineno, time, "killed", cause, body,
                                  stream.rank, "slurmstepd")
                return True
            oom = _SLURM_OOM.search(text)
            if oom is not None:
                body = text[text.index("slurmstepd"):].strip()
                self._emit_signal(out, ("slurm-oom", oom.group(1)), lineno, time, "killed", "oom_killer",
                                  body, stream.rank, "slurmstepd")
                return True
            return False
        signal = _SIGNAL9.search(text)
        if signal is not None:
            cause = "sigkill" if signal.group(1) == "9" else "sigterm"
            self._emit_signal(out, ("signal", signal.group(3)), lineno, time, "killed", cause,
                              text.strip(), stream.rank, signal.group(2))
            return True
        if "Killed" in text:
            oom = _OOM_KILLER.search(text)
            if oom is not None:
                self._emit_signal(out, ("oom-killer", oom.group(1)), lineno, time, "killed", "oom_killer",
                                  text.strip(), stream.rank, "OOMKiller")
                return True
            if _KILLED.match(text) is not None:
                self._emit_signal(out, ("killed", stream.rank), lineno, time, "killed", "sigkill",
                                  text.strip(), stream.rank, "Killed")
                return True
        return False

    def _emit_signal(self, out: list, key: tuple, lineno: int, time: float, kind: str, cause: str | None,
                     body: str, rank: int | None, exc_type: str) -> None:
        seen = self._signals.get(key)
        if seen is not None and time - seen < _SIGNAL_WINDOW_S:
            return
        self._signals[key] = time
        if len(self._signals) > 4096:
            self._signals.clear()
        out.append(
            Crash(
                time=time,
                source=self._source(lineno),
                detector="crash",
                kind=kind,
                exc_type=exc_type,
                message=body[:_MESSAGE_CHARS],
                signature=signal_signature(kind, cause, _signal_core(kind, body)),
                rank=rank,
                cause=cause,
                text=(body,),
            )
        )


def _signal_core(kind: str, body: str) -> str:
    """The part of a signal line that names the failure (not host, job or rank)."""
    if kind == "nccl_timeout":
        op = re.search(r"OpType=(\w+)", body)
        return f"Watchdog caught collective operation timeout OpType={op.group(1) if op else '?'}"
    if "slurmstepd" in body:
        return re.sub(r"\*\*\* (STEP|JOB) \S+ ON \S+ CANCELLED AT \S+", "*** CANCELLED", body)
    return normalise(body)


def _first_marked(lines: tuple[str, ...]) -> str:
    for line in lines:
        if scan_markers(line):
            return line.strip()[:_MESSAGE_CHARS]
    return lines[-1].strip()[:_MESSAGE_CHARS] if lines else ""


def _report_message(report: ChildReport, message: str) -> str:
    parts = []
    if report.script:
        parts.append(f"{report.script} FAILED")
    if report.root_rank is not None or report.root_exitcode is not None:
        where = f"root cause rank {report.root_rank}"
        if report.root_local_rank is not None:
            where += f" (local_rank {report.root_local_rank})"
        if report.root_exitcode is not None:
            where += f" exitcode {report.root_exitcode}"
        if report.root_pid is not None:
            where += f" (pid {report.root_pid})"
        parts.append(where)
    if report.root_traceback and not report.root_traceback.startswith("To enable traceback"):
        parts.append(f"traceback: {report.root_traceback}")
    if report.failed_ranks:
        parts.append("also failed: ranks " + ",".join(str(r) for r in report.failed_ranks))
    summary = "; ".join(parts)
    if message.strip():
        summary = f"{message.strip()}; {summary}" if summary else message.strip()
    return summary or "ChildFailedError"


__all__ = ["TRIGGERS", "CrashAssembler"]
