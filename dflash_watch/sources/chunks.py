"""What reading a log yields: chunks of complete lines and notices.

Both the tailer (live) and ``read_chunks`` (replay, a finished file read
whole) hand out the same two things, made by the same line splitter, so
replay and the live path cut and number lines alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from .lines import LineSplitter, Split, fmt_size


@dataclass(frozen=True, slots=True)
class Chunk:
    """Complete lines from one file; ``text`` ends in ``'\\n'``, CRLF and ``'\\r'`` kept.

    ``partial`` chunks are the exception: the latest ``'\\r'`` redraw of a
    line that has no newline yet (a tqdm bar that only ends with its
    epoch), so that a live watch sees progress during the epoch. They carry
    the line's number but are not lines: the complete line still comes
    later as an ordinary chunk.

    ``generation`` counts the incarnations of ``path`` whose text does not
    go on from the one before: a truncation or a file deleted and created
    anew. A renamed (rotated) file goes on in the next one, same generation,
    line numbers from 1 in each file.
    """

    path: str
    text: str
    first_lineno: int
    generation: int
    partial: bool = False
    # The lines ``text`` holds, where the reader counted them (None: count
    # them). Derived from ``text``: no part of a chunk's equality.
    lines: int | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class TailNotice:
    """A state change worth telling a person about (not log content)."""

    path: str
    kind: str  # waiting | appeared | rotated | truncated | recreated | deleted | lost | cut_line | error
    message: str


def emit(
    path: str, generation: int, res: Split | None, max_line: int
) -> list[Chunk | TailNotice]:
    if res is None:
        return []
    text, first, cuts, lines = res
    items: list[Chunk | TailNotice] = [Chunk(path, text, first, generation, lines=lines)]
    for lineno, length in cuts:
        msg = f"{path}: line {lineno} cut at {fmt_size(max_line)} ({fmt_size(length)} long)"
        items.append(TailNotice(path, "cut_line", msg))
    return items


def read_chunks(
    path: str, *, chunk_bytes: int = 1 << 20, max_line_bytes: int = 1 << 20
) -> Iterator[Chunk | TailNotice]:
    """Reads a whole finished file (replay) with the tailer's line rules.

    The last line is emitted even without its newline (one is added, so every
    Chunk keeps ending in ``'\\n'``).  Opening errors raise ``OSError``: for a
    replay a missing file is the caller's usage error, not a state to wait out.
    """
    splitter = LineSplitter(max_line_bytes)
    with open(path, "rb", buffering=0) as fh:
        while data := fh.read(chunk_bytes):
            yield from emit(path, 0, splitter.feed(data), max_line_bytes)
        yield from emit(path, 0, splitter.finish(), max_line_bytes)
