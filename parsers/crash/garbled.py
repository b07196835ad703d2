"""An exception line another process wrote into: what it still says.

Ranks of a torchrun job share one log file (``torchrun ... > train.log
2>&1``, ``| tee``), each write lands whole, and two processes' writes
interleave. Python writes a traceback line by line, an unbuffered one
(``python -u``, ``PYTHONUNBUFFERED=1``) the exception line in pieces (type,
``": "``, message, newline), so a line another rank prints at that moment
lands inside the exception line (tests/fixtures/crash_interleaved/ holds
real captures and the script that makes them):

* ``RuntimeError<foreign>: <message>`` (unbuffered; the foreign newline
  follows as a blank line);
* ``RuntimeError<foreign>`` then ``: <message>`` on the next line
  (unbuffered; the foreign text ended its line);
* ``<foreign>RuntimeError: <message>`` (a partial line of the other rank:
  a progress bar, ``print(end="")``, a block-buffered stdout cut mid-line).

Such a line is no exception line to the traceback reader, which then never
closes the traceback: the crash is lost. What makes a recovery honest is
the traceback itself: its innermost frame's source line ``raise
RuntimeError(...)`` names the type the line must hold, and a plain string
literal there names the message exactly where the foreign text would
otherwise make its start uncertain. Without such a source line nothing is
guessed (``unread_line``: the crash is still reported, as garbled).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re

from .signatures import ExcLine

# What a crash whose exception line could not be read is called.
GARBLED_TYPE = "garbled exception line"
_HEADER = "Traceback (most recent call last)"
_CUT = re.compile(r"^\.\.\. \d+ lines cut \.\.\.$")  # (traceback_state.Trace.text)

_RAISE = re.compile(r"^\s*raise\s+((?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*))\s*(?:\(|$|from\b)")
# The raise's first argument when it is one plain string literal (no
# f-string, no escapes: its text is then what the message prints).
_LITERAL = re.compile(r"""^\s*raise\s+[\w.]+\(\s*(?:[A-Za-z_][\w.]*\(\s*)?(["'])([^"'\\]*)\1""")
# An exception name, glued or not: the evidence that an unread line in the
# exception's place was one.
_NAME = re.compile(r"[A-Z]\w*?(?:Error|Exception|Interrupt|Exit|Failed|Timeout)")


def raised_type(code: str) -> str | None:
    """The class name ``raise X(...)`` names in a frame's source line."""
    match = _RAISE.match(code)
    if match is None:
        return None
    name = match.group(2).lstrip("_")
    return match.group(2) if name[:1].isupper() and any(c.islower() for c in name) else None


def recover(text: str, code: str) -> tuple[ExcLine, bool] | None:
    """The exception a garbled line still holds, given the innermost frame's
    source line ``code``; with True when its message is still to come on the
    next line (``: <message>``). None when the line does not hold the type
    the source line raises."""
    name = raised_type(code)
    if name is None:
        return None
    line = text.strip()
    literal = _LITERAL.match(code)
    said = literal.group(2) if literal is not None and literal.group(2) else None
    escaped = re.escape(name)
    head = re.match(rf"((?:[A-Za-z_]\w*\.)*?{escaped})(.+)$", line)
    if head is not None and not head.group(2).lstrip().startswith(":"):
        # ``RuntimeError<foreign>: <message>`` or ``RuntimeError<foreign>``.
        rest = head.group(2)
        if said is not None and line.endswith(": " + said):
            return ExcLine(head.group(1), said), False
        if ": " in rest:
            return ExcLine(head.group(1), rest.split(": ", 1)[1].strip()), False
        return ExcLine(head.group(1), ""), True
    glued = re.search(rf"((?:[A-Za-z_]\w*\.)*{escaped}):(?:\s+(.*))?$", line)
    if glued is not None and glued.start() > 0:
        # ``<foreign>RuntimeError: <message>``: the message is whole.
        return ExcLine(glued.group(1), (glued.group(2) or "").strip()), False
    return None


def unread_line(text: str) -> bool:
    """A line in the exception's place that names an exception but could
    not be read as one: the crash is reported with it, as garbled."""
    return _NAME.search(text) is not None


def garbled_line(exc_type: str, lines: tuple[str, ...]) -> str | None:
    """The garbled exception line of a Python traceback's ``lines`` whose
    last exception was read as ``exc_type``, for the alert's evidence: None
    when a line says it plainly (or ``lines`` hold no traceback)."""
    if exc_type == GARBLED_TYPE:
        return next((line.strip() for line in reversed(lines) if unread_line(line)), None)
    if not exc_type or not any(_HEADER in line for line in lines):
        return None
    plain = re.compile(rf"^{re.escape(exc_type)}\s*(?::|$)")
    found = None
    for line in reversed(lines):
        stripped = line.strip()
        if plain.match(stripped) is not None:
            return None
        if _CUT.match(stripped) is not None:
            return None  # the text kept is cut: the plain line may be in the cut
        if found is None and exc_type in stripped:
            found = stripped
    return found
