"""Rank prefixes that distributed launchers put in front of every line.

torchrun ``--tee``/``--log-line-prefix`` writes ``[rank5]:`` or
``[default5]:``, Open MPI ``--tag-output`` writes ``[1,5]<stdout>:``. The
prefix tells which rank spoke (a crash on one rank is not the same as a crash
on all) and hides the text a parser expects at the start of the line, so the
rank is split off once and the rest is parsed as if it stood alone.

Once means once: the stream splits every event line (``split_line``) and
its readers (crash, health, progress, padding, the line's own stamp) take
its ``(rank, text)`` (``split_line``). Only faces that are handed a whole line by someone
else split it here themselves: ``TimeParser.parse`` (the lines between
events, read lazily backwards for a stamp), ``CrashAssembler.feed`` (a
caller with whole lines) and ``redraw_values`` (the live tailer's partial
line).
"""

from __future__ import annotations

import re

# One prefix; a line may carry two (``[default0]:[rank0]: ...``).
_PREFIX = re.compile(
    r"\[(?:(?:rank|default)(\d{1,6})\]|\d{1,9},(\d{1,6})\](?:<std(?:out|err)>)?):[ ]?"
)


def split_rank(line: str) -> tuple[int | None, str]:
    """Return ``(rank, rest)``; ``rank`` is None when the line has no prefix.

    The rank of the first prefix wins; later prefixes are stripped too.
    """
    if not line.startswith("["):
        return None, line
    rank: int | None = None
    match = _PREFIX.match(line)
    while match is not None:
        if rank is None:
            rank = int(match.group(1) or match.group(2))
        line = line[match.end():]
        if not line.startswith("["):
            break
        match = _PREFIX.match(line)
    return rank, line


def rank_span(line: str) -> tuple[int, int, int] | None:
    """Where ``split_rank`` finds the rank of ``line`` and where its text
    starts: ``(rank start, rank end, text start)``, or None without a
    prefix. Lines of one shape (``parsers.progress.line_shape``) with an
    ASCII prefix share these, so a column reading splits a shape once."""
    match = _PREFIX.match(line) if line.startswith("[") else None
    if match is None:
        return None
    group = 1 if match.group(1) is not None else 2
    rest = len(split_rank(line)[1])
    return match.start(group), match.end(group), len(line) - rest


def split_line(line: str) -> tuple[int | None, str]:
    """The stream's one split of a line's rank prefix:
    ``(rank, text after the prefixes)``, else ``(None, line)``. Every reader
    of an event line takes these. The prefix may follow blanks (as the
    TimeParser and the progress plans read it); one space after it is its
    own, the rest is the text's (a traceback's indentation)."""
    text = line
    c = line[:1]
    if c == " " or c == "\t":
        text = line.lstrip(" \t")
    elif c != "[":
        return None, line
    if text[:1] != "[":
        return None, line
    rank, body = split_rank(text)
    return (None, line) if rank is None else (rank, body)


_DIGITS = re.compile(r"\d{1,6}")


def rank_digits(line: str, at: int) -> int:
    """The rank whose digits start at ``line[at]``: where ``rank_span``
    put them for every line of a shape (a plan keeps it), read without
    splitting the line again."""
    found = _DIGITS.match(line, at)
    assert found is not None, "a plan's rank digits"
    return int(found.group())


def has_rank_prefix(line: str) -> bool:
    """True when the line starts with a recognised rank prefix."""
    return line.startswith("[") and _PREFIX.match(line) is not None
