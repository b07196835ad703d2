"""One followed name and the incarnation (inode) the tailer holds open for it.

``LogTailer`` decides what happened to a name (appended, rotated,
truncated, deleted, recreated) across all the files it follows; what can
be asked of the one descriptor held for a name, with no other file in
view, lives here: its inode's state (``fstat``, ``nlink``), whether its
bytes were rewritten under us (copytruncate), the live attach's seek to
the last line, and letting it go.
"""

from __future__ import annotations

import os
import time

from .leftovers import Leftovers
from .lines import LineSplitter
from .rotated import FolderIndex, last_line_start, sibling_marks

# How many bytes before the read offset tell a rewritten file (``rewritten``).
TAIL_BYTES = 64


def same_tail(tail: bytes, now: bytes) -> bool:
    """Whether the bytes before the read offset are still ``tail``, as read.
    NULs read there were a hole (a write that landed ahead of another: NFS,
    two writers without O_APPEND): one filled since is not a rewrite."""
    if now == tail:
        return True
    if len(now) != len(tail) or b"\0" not in tail:
        return False
    return all(a == 0 or a == b for a, b in zip(tail, now))


class Follower:
    """A followed name's state between polls; the tailer owns the policy."""

    __slots__ = (
        "path", "abspath", "fd", "ident", "offset", "opened_size", "opened_head", "splitter", "generation",
        "attach_at_end", "announce", "ever_opened", "waiting_noted", "gone", "error", "skip_nul",
        "tail", "left", "looked_ns", "history", "watched_ns", "rotated_away",
    )

    def __init__(self, path: str, max_line: int, chunk: int, attach_at_end: bool, announce: bool,
                 index: FolderIndex | None = None) -> None:
        self.path = path
        self.abspath = os.path.abspath(path)
        self.fd: int | None = None
        self.ident: tuple[int, int] = (0, 0)
        self.offset = 0
        # The file's size when opened, before a byte of it was read: less
        # than that later is a truncation (copytruncate) even at offset 0.
        self.opened_size = 0
        # Its first bytes then (up to ``TAIL_BYTES``): changed ones before a
        # byte was read mean it was truncated and refilled past that size.
        self.opened_head = b""
        self.splitter = LineSplitter(max_line)
        self.generation = 0
        self.attach_at_end = attach_at_end
        self.announce = announce  # say 'appeared' when first opened
        self.ever_opened = False
        self.waiting_noted = False
        self.gone = False  # the name vanished while we still hold the old descriptor
        self.error: str | None = None  # last reported reason, to report each reason once
        self.skip_nul = False  # after copytruncate a non-O_APPEND writer leaves a NUL hole
        # The bytes before ``offset`` as we read them (up to ``TAIL_BYTES``):
        # changed ones mean the file was rewritten under us (copytruncate).
        self.tail = b""
        self.left = Leftovers(chunk, max_line)  # renamed files still read, files read to their end
        # The files' clock at the last look (the name's mtime, never this
        # machine's: NFS): rotated files written since then are new.
        try:
            self.looked_ns = os.stat(self.abspath).st_mtime_ns
        except OSError:
            self.looked_ns = 0  # (the copies there now are history, below)
        # The copies there at the first look: history, never read as new.
        self.history = sibling_marks(self.abspath, index)
        self.watched_ns = time.time_ns()  # wall time of the first look
        self.rotated_away = False  # let go by rotation (not deletion): the next file goes on the stream

    def rewritten(self, size: int) -> bool:
        """copytruncate: the file shrank, or it was refilled to our offset or
        past it before we looked (a writer without O_APPEND, or a fast one:
        to the very same length too) and the bytes we read last are no
        longer there. One byte is not enough: lines end in '\\n', and a refill
        whose line ends where ours did kept it."""
        if size < self.offset or size < self.opened_size:
            return True
        if self.fd is None:
            return False
        # Nothing read yet: the first bytes as they were when opened.
        tail, at = (self.opened_head, 0) if self.offset == 0 else (self.tail, self.offset - len(self.tail))
        if not tail:
            return False
        try:
            return not same_tail(tail, os.pread(self.fd, len(tail), at))
        except OSError:
            return False

    def opened(self, size: int) -> None:
        """Just opened at offset 0, ``size`` bytes long: what ``rewritten``
        compares before a byte of it was read (a copytruncate between the
        open and the first read, refilled to that size or past it)."""
        self.opened_size = size
        try:
            self.opened_head = os.pread(self.fd, min(size, TAIL_BYTES), 0) if self.fd is not None and size else b""
        except OSError:
            self.opened_head = b""

    def read_on(self, data: bytes) -> None:
        """``data`` was read at ``offset``: move on past it."""
        self.offset += len(data)
        self.tail = data[-TAIL_BYTES:] if len(data) >= TAIL_BYTES else (self.tail + data)[-TAIL_BYTES:]

    def restart(self, offset: int = 0) -> None:
        """Read from ``offset`` on (0: a new file, or the same one truncated),
        the bytes before it as the file holds them now."""
        self.offset = offset
        self.tail = b""
        self.opened_size = 0
        self.opened_head = b""
        if offset and self.fd is not None:
            k = min(TAIL_BYTES, offset)
            self.tail = os.pread(self.fd, k, offset - k)

    def seek_to_last_line(self, chunk: int) -> None:
        """Live attach: skip history but keep true line numbers and the line being written."""
        assert self.fd is not None
        start, lineno = last_line_start(self.fd, chunk)
        os.lseek(self.fd, start, os.SEEK_SET)
        self.restart(start)
        self.splitter.lineno = lineno

    def fstat(self) -> os.stat_result | None:
        try:
            return os.fstat(self.fd) if self.fd is not None else None
        except OSError:
            return None

    def nlink(self) -> int:
        st = self.fstat()
        return st.st_nlink if st is not None else 0

    def close_fd(self) -> None:
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None
