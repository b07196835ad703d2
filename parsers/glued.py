"""A log line glued to a tqdm bar's redraws: where it starts on their line.

tqdm never ends a redraw with a newline, so whatever the program writes next
to the same stream lands on the bar's physical line. Two layouts, both the
usual setup of a training script that logs to stderr beside its bar:

- without ``logging_redirect_tqdm`` the record follows the bar's last
  redraw at once (``... 9/40 [00:00<00:01, 19.83it/s]2026-12-02 21:25:53,887
  INFO step 10 | loss 2.31``);
- with it (``tqdm.write``) tqdm first clears the bar with ``'\\r'``, blanks,
  ``'\\r'``, and the record is the line's last ``'\\r'`` segment.

Either way the record is a line of its own, with its own stamp: read as part
of the bar it is lost (the bar's plan reads the bar) or dated by the lines
before the bar. ``glued_at`` says where it starts, so that the stream reads
the bar's redraws up to there and the record after them as its own line.

A dict right after the bar is no such line: HF Trainer prints its log dict
there, and its step is the bar's count (``progress.plans`` reads the two
together). Nor is text before the last ``'\\r'``: a record ends its line.
A line with a rank prefix (``[rank0]:``) is said by that rank as a whole:
nothing is split off it (the record would lose its rank).

>>> line = "\\r 22%|##   | 9/40 [00:00<00:01, 19.83it/s]2026-12-02 21:25:53,887 INFO step 10"
>>> line[glued_at(line):]
'2026-12-02 21:25:53,887 INFO step 10'
>>> line = "\\r 22%|##   | 9/40 [00:00<00:01, 19.83it/s]\\r                \\r2026-12-02 INFO step 10"
>>> line[glued_at(line):]
'2026-12-02 INFO step 10'
>>> glued_at("\\r 22%|##   | 9/40 [00:00<00:01, 19.83it/s]   "), glued_at("\\r 9/40 [00:00, 9.8it/s]{'loss': 2.3}")
(0, 0)
"""

from __future__ import annotations

from .progress.tqdm_bar import BAR
from .ranks import split_line

__all__ = ["glued_at"]


def glued_at(line: str) -> int:
    """Where a line glued to the tqdm redraws of ``line`` (one physical line,
    without its newline) starts: after the last redraw's closing bracket, or
    the last ``'\\r'`` segment when the one before it is blank (tqdm's
    clear) and it is no bar; blanks before it skipped. 0 when there is none
    (no ``'\\r'``, nothing but blanks after the bar, a dict, a rank prefix)."""
    last = line.rfind("\r")
    if last < 0:
        return 0
    m = BAR.search(line, last + 1)
    if m is not None:
        at = m.end()
    else:
        before = line.rfind("\r", 0, last)  # -1: the segment from the line's start
        if line[before + 1 : last].strip(" \t"):
            return 0  # a redraw, not tqdm's clear: the last segment is a state of it
        at = last + 1
    n = len(line)
    while at < n and (line[at] == " " or line[at] == "\t"):
        at += 1
    if at == n or line[at] == "{":
        return 0
    # (asked last: a bar redrawn to the line's end, the common case, needs no look for a prefix)
    if split_line(line)[0] is not None:
        return 0
    return at
