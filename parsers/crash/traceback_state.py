"""One Python traceback (possibly a chain) being read, line by line.

The state machine of a single traceback, apart from the routing of lines to
streams (parsers/tracebacks.py): ``frames`` (after the header), ``message``
(after the exception line), ``chain`` (after "The above exception was the
direct cause..."), and ``report`` (torch elastic's ChildFailedError table,
parsers/child_report.py). A traceback is never trusted to be well formed:
foreign lines inside it are tolerated up to a limit, and its end is only
known from a line that cannot continue it. Another rank's text written into
the exception line itself is read with the innermost frame's ``raise`` line
(parsers/crash/garbled.py); torch elastic's ``failed (exitcode: N)`` line
ends a traceback whose exception line never became readable.

``Trace.feed`` answers with one of three verdicts so that the assembler
alone decides what to emit: the line was taken and the traceback goes on
(``OPEN``), taken and it is complete (``DONE``), or not taken: the
traceback ended before it and the line must be read afresh (``ENDED``).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

from ..events import Frame
from .child_report import RULE, ReportReader
from .fatal_signals import worker_exited
from .garbled import recover, unread_line
from .signatures import ExcLine, scan_markers, short_type

OPEN, DONE, ENDED = 0, 1, 2

HEADER = "Traceback (most recent call last)"
_CHAIN_MARKERS = (
    "The above exception was the direct cause of the following exception",
    "During handling of the above exception, another exception occurred",
)
# Lines dynamo/inductor append after a blank line at the end of their errors.
_FOOTERS = (
    "Set TORCHDYNAMO_VERBOSE", "Set TORCH_LOGS", "Set TORCHINDUCTOR", "You can suppress this exception",
    "For more information", "To execute this test", "Explanation:", "Hint:", "Developer debug context:",
    "For even more developer context", "For more details about this graph break",
)

FILE = re.compile(r'File "([^"]+)", line (\d+)(?:, in (.+?))?\s*$')
_EXC = re.compile(
    r"^(?P<type>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?:\s*:(?:\s+(?P<msg>.*?)|)|)\s*$"
)
_CARET = re.compile(r"^\s*[\^~]+\s*$")
# Lines that clearly start a new record rather than continue a message: a
# stamp, a frame, a tqdm bar, a step line (``step 12 | loss ...``,
# ``Epoch 3 ...``, HF's ``{'loss': ...}``: a block-buffered stdout writes
# the steps from before a crash after its traceback, which went out unbuffered).
_NEW_RECORD = re.compile(
    r"^(?:[IWEFVC]\d{4} \d{2}:\d{2}|\[[IWEFVC]\d{4} |\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:|\d{2}/\d{2}/\d{4} \d{2}:|"
    r"Exception in thread |\s+File \"|[a-z][\w.-]*: |\s*\d{1,3}%\||"
    r"(?:[Ss]tep|[Ii]ter(?:ation)?|[Ee]poch)\s*[:=]?\s*\d+\b|\{'(?:loss|train_loss|eval_loss)')"
)
# A message-less exception line (``KeyboardInterrupt``) must look like one.
_BARE_NAME_ENDINGS = ("Error", "Exception", "Interrupt", "Exit", "Iteration", "Hit", "Failed", "Timeout")
# Exception types worth a Crash even when printed without a traceback.
BARE = re.compile(
    r"^(?:torch\.[\w.]*(?:Error|Failed|Hit)|[\w.]*ChildFailedError|[\w.]*FailOnRecompileLimitHit"
    r"|[\w.]*BackendCompilerFailed)\s*:"
)

# Bounds: what one crash may hold.
_TEXT_HEAD = 100
_TEXT_TAIL = 100
_FRAMES_KEEP = 200
_MESSAGE_LINES = 50
MESSAGE_CHARS = 4000
_CHAIN_KEEP = 20
_JUNK_LIMIT = 40  # consecutive lines inside a traceback that fit nowhere


def plausible_exc(text: str) -> bool:
    """An exception line, not a stray capitalised word from another logger."""
    match = _EXC.match(text)
    if match is None:
        return False
    # (``_ArrayMemoryError``: numpy's private classes start with "_".)
    name = match.group("type").rsplit(".", 1)[-1].lstrip("_")
    if not (name[:1].isupper() and any(c.islower() for c in name)):
        return False
    if ":" not in text:
        return name.endswith(_BARE_NAME_ENDINGS)
    return True


@dataclass(slots=True)
class Trace:
    """A traceback (possibly a chain) being assembled; mutable while open."""

    state: str                        # frames | message | chain | report
    thread: str | None = None
    head: list[str] = field(default_factory=list)
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=_TEXT_TAIL))
    n_lines: int = 0
    frames: deque[Frame] = field(default_factory=lambda: deque(maxlen=_FRAMES_KEEP))
    earlier_frames: deque[Frame] = field(default_factory=lambda: deque(maxlen=_FRAMES_KEEP))
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
    child: bool = False               # the exception is torch elastic's ChildFailedError
    report: ReportReader | None = None
    # Another process wrote into the exception line (parsers/crash/garbled.py):
    # its message follows on the next line (``: <message>``) ...
    await_colon: bool = False
    # ... and, where no exception could be read from it, the line in the
    # exception's place that names one, with its line number and time.
    code_seen: bool = False           # the line before was a frame's source line
    unread: tuple[str, int, float] | None = None

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
            self.chain[-1] = ExcLine(last.exc_type, joined[:MESSAGE_CHARS])
        self.message = []

    # -- the state machine ----------------------------------------------------

    def feed(self, text: str, lineno: int, time: float) -> int:
        """Take one line of this traceback's stream: OPEN, DONE or ENDED."""
        state = self.state
        if state == "report":
            self.add(text, lineno, time)
            assert self.report is not None
            return DONE if self.report.feed(text) else OPEN
        if state == "frames":
            return self._frames_line(text, lineno, time)
        stripped = text.strip()
        if state == "chain":
            if not stripped:
                self.add(text, lineno, time)
                return OPEN
            if HEADER in text:
                self.earlier_frames.extend(self.frames)
                self.frames.clear()
                self.state = "frames"
                self.add(text, lineno, time)
                return OPEN
            if _EXC.match(text) is not None and plausible_exc(text):
                self.add(text, lineno, time)
                self.exception_line(text, lineno, time)
                return OPEN
            return ENDED
        # state == "message": the exception line was seen.
        if self.await_colon:
            self.await_colon = False
            if stripped.startswith(":"):
                # ``RuntimeError<foreign text>`` / ``: <message>``: the rest of it.
                last = self.chain[-1]
                self.chain[-1] = ExcLine(last.exc_type, stripped[1:].strip()[:MESSAGE_CHARS])
                self.has_message = True
                self.add(text, lineno, time)
                return OPEN
        if self.child and RULE.match(text) is not None:
            self.state = "report"
            self.report = ReportReader()
            self.add(text, lineno, time)
            return OPEN
        if not stripped:
            self.blank_seen = True
            self.user_code = False
            self.add(text, lineno, time)
            return OPEN
        if stripped.startswith(_CHAIN_MARKERS):
            self.close_exception()
            self.state = "chain"
            self.blank_seen = False
            self.add(text, lineno, time)
            return OPEN
        if HEADER in text:
            return ENDED
        if self.blank_seen:
            if stripped.startswith("from user code:"):
                self.user_code = True
                self.add(text, lineno, time)
                return OPEN
            if self.user_code and (text[:1].isspace() or FILE.search(text)):
                self.add(text, lineno, time)
                return OPEN
            if stripped.startswith(_FOOTERS):
                self.add(text, lineno, time)
                return OPEN
            return ENDED
        if not self.has_message or _NEW_RECORD.match(text) is not None or FILE.search(text) is not None:
            return ENDED
        if len(self.message) < _MESSAGE_LINES:
            self.message.append(text.rstrip())
        self.add(text, lineno, time)
        return OPEN

    def _frames_line(self, text: str, lineno: int, time: float) -> int:
        if "failed (exitcode" in text and worker_exited(text):
            # torch elastic says the worker is gone: whatever it printed is
            # in, exception line or not (another process wrote into it).
            return ENDED
        self.add(text, lineno, time)
        after_code, self.code_seen = self.code_seen, False
        file_match = FILE.search(text)
        if file_match is not None:
            self.frame(file_match)
            return OPEN
        if HEADER in text:
            return OPEN  # interleaved tracebacks of the same stream: merged
        if text[:1].isspace() and text.strip():
            self.junk_run = 0
            if _CARET.match(text) is None and self.expect_code and self.frames:
                last = self.frames[-1]
                self.frames[-1] = Frame(last.file, last.line, last.function, text.strip())
                self.code_seen = True
            elif after_code and _CARET.match(text) is not None:
                self.code_seen = True  # the source line's carets: the exception line still comes next
            self.expect_code = False
            return OPEN
        self.expect_code = False
        if text.strip() and plausible_exc(text):
            self.junk_run = 0
            self.exception_line(text, lineno, time)
            return OPEN
        if after_code and text.strip():
            code = self.frames[-1].code if self.frames else None
            found = recover(text, code) if code else None
            if found is not None:
                self.junk_run = 0
                self.exception_line(text, lineno, time, found[0])
                self.has_message = not found[1]
                self.await_colon = found[1]
                return OPEN
            if self.unread is None and unread_line(text):
                self.unread = (text.strip()[:MESSAGE_CHARS], lineno, time)
        self.junk_run += 1
        return DONE if self.junk_run > _JUNK_LIMIT else OPEN

    def frame(self, match: re.Match[str]) -> None:
        self.frames.append(Frame(match.group(1), int(match.group(2)), (match.group(3) or "").strip()))
        self.expect_code = True
        self.junk_run = 0

    def exception_line(self, text: str, lineno: int, time: float, garbled: ExcLine | None = None) -> None:
        """``text`` is the exception line; ``garbled``: what was recovered
        from it when another process wrote into it (garbled.recover)."""
        self.close_exception()
        match = _EXC.match(text)
        if garbled is not None:
            exc_type, message = garbled.exc_type, garbled.message
        elif match is None:  # a bare torch exception line: split on the first colon
            exc_type, _, message = text.partition(":")
            exc_type, message = exc_type.strip(), message.strip()
        else:
            exc_type, message = match.group("type"), (match.group("msg") or "").strip()
        if len(self.chain) >= _CHAIN_KEEP:
            del self.chain[1]
        self.chain.append(ExcLine(exc_type, message))
        self.state = "message"
        self.blank_seen = False
        self.user_code = False
        self.child = short_type(exc_type) == "ChildFailedError"
        self.has_message = ":" in text
        self.exc_lineno = lineno
        self.exc_time = time
        self.markers.update(scan_markers(text))
