"""faulthandler's block: a Python process that died in native code.

A segfault, an abort or a bus error in a CUDA extension, a compiled kernel
or the interpreter leaves no Python traceback; with ``faulthandler`` enabled
(``python -X faulthandler``, ``PYTHONFAULTHANDLER=1``, or the program's own
``faulthandler.enable()``) the dying process writes, straight to fd 2::

    Fatal Python error: Segmentation fault

    Thread 0x00007f0936c0f6c0 (most recent call first):
      File "<string>", line 3 in bg
    ...
    Current thread 0x00007f093788cb80 (most recent call first):
      File "/w/ext.py", line 519 in string_at
      File "/w/train.py", line 5 in step

    Extension modules: numpy._core._multiarray_umath, torch._C, ... (total: 20)

Frames come innermost first and without the comma of a traceback's
``line N, in f``. Only the current thread's frames say where it died; the
other threads' are skipped. Python 3.14 adds a C stack section, skipped too.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..events import Crash, Frame
from .signatures import traceback_signature

TRIGGERS: tuple[str, ...] = ("Fatal Python error",)

_START = re.compile(r"Fatal Python error: (.+?)\s*$")
_THREAD = re.compile(r"^(Current thread|Thread) 0x[0-9a-fA-F]+ \(most recent call first\):\s*$")
_FRAME = re.compile(r'^\s+File "([^"]+)", line (\d+) in (.+?)\s*$')
# Lines of the block that carry nothing to keep.
_SKIP = (
    "Extension modules:", "Python runtime state:", "<no Python frame>", "Garbage-collecting",
    "Current thread's C stack trace", "Binary file", "Stack (most recent call first):", "...",
)

# Fatal errors raised by a signal: kind ``segfault``, cause the signal.
_SIGNALS = {
    "Segmentation fault": "sigsegv",
    "Aborted": "sigabrt",
    "Bus error": "sigbus",
    "Floating point exception": "sigfpe",
    "Illegal instruction": "sigill",
}
_LINES_MAX = 400
_FRAMES_KEEP = 200


@dataclass(slots=True)
class FaultBlock:
    """One faulthandler block being read; mutable while it is open."""

    error: str
    lineno: int
    time: float
    text: list[str] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)
    current: bool = False
    finished: bool = False

    @classmethod
    def start(cls, text: str, lineno: int, time: float) -> FaultBlock | None:
        """A block begins on this (rank-stripped) line, or None."""
        if "Fatal Python error" not in text:
            return None
        match = _START.search(text)
        if match is None:
            return None
        return cls(match.group(1), lineno, time, [text.strip()])

    def feed(self, text: str) -> bool:
        """Take a line of the block; False when the line is not part of it."""
        if self.finished or len(self.text) >= _LINES_MAX:
            return False
        stripped = text.strip()
        if not stripped:
            self.text.append("")
            return True
        thread = _THREAD.match(stripped)
        if thread is not None:
            self.current = thread.group(1) == "Current thread"
            self.text.append(stripped)
            return True
        frame = _FRAME.match(text)
        if frame is not None:
            if self.current and len(self.frames) < _FRAMES_KEEP:
                self.frames.append(Frame(frame.group(1), int(frame.group(2)), frame.group(3)))
            self.text.append(text.rstrip())
            return True
        if stripped.startswith(_SKIP):
            self.text.append(stripped[:300])
            if stripped.startswith("Extension modules:"):
                self.finished = True
            return True
        return False

    def crash(self, source: str, rank: int | None) -> Crash:
        cause = _SIGNALS.get(self.error)
        kind = "segfault" if cause is not None else "exception"
        frames = tuple(reversed(self.frames))  # outermost first, as in a traceback
        name = cause.upper() if cause is not None else "FatalPythonError"
        while self.text and not self.text[-1]:
            self.text.pop()
        return Crash(
            time=self.time,
            source=source,
            detector="crash",
            kind=kind,
            exc_type="Fatal Python error",
            message=self.error,
            signature=traceback_signature(name, self.error, frames),
            rank=rank,
            cause=cause or "fatal_python_error",
            frames=frames,
            text=tuple(self.text),
        )
