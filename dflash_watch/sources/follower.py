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

from .lines import LineSplitter
from .rotated import Leftovers, last_line_start, sibling_marks


class Follower:
    """A followed name's state between polls; the tailer owns the policy."""

    __slots__ = (
        "path", "abspath", "fd", "ident", "offset", "splitter", "generation",
        "attach_at_end", "announce", "ever_opened", "waiting_noted", "gone", "error", "skip_nul",
        "last_byte", "left", "looked_ns", "history", "watched_ns", "rotated_away",
    )

    def __init__(self, path: str, max_line: int, chunk: int, attach_at_end: bool, announce: bool) -> None:
        self.path = path
        self.abspath = os.path.abspath(path)
        self.fd: int | None = None
        self.ident: tuple[int, int] = (0, 0)
        self.offset = 0
        self.splitter = LineSplitter(max_line)
        self.generation = 0
        self.attach_at_end = attach_at_end
        self.announce = announce  # say 'appeared' when first opened
        self.ever_opened = False
        self.waiting_noted = False
        self.gone = False  # the name vanished while we still hold the old descriptor
        self.error: str | None = None  # last reported reason, to report each reason once
        self.skip_nul = False  # after copytruncate a non-O_APPEND writer leaves a NUL hole
        self.last_byte = b""  # the byte before ``offset`` as we read it: a changed one means rewritten
        self.left = Leftovers(chunk, max_line)  # renamed files still read, files read to their end
        # The files' clock at the last look (the name's mtime, never this
        # machine's: NFS): rotated files written since then are new.
        try:
            self.looked_ns = os.stat(self.abspath).st_mtime_ns
        except OSError:
            self.looked_ns = 0  # (the copies there now are history, below)
        # The copies there at the first look: history, never read as new.
        self.history = sibling_marks(self.abspath)
        self.watched_ns = time.time_ns()  # wall time of the first look
        self.rotated_away = False  # let go by rotation (not deletion): the next file goes on the stream

    def rewritten(self, size: int) -> bool:
        """copytruncate: the file shrank, or (a writer without O_APPEND refilled it past
        our offset before we looked) the byte we last read is no longer there."""
        if size < self.offset:
            return True
        if size == self.offset or self.offset == 0 or self.fd is None:
            return False
        try:
            return os.pread(self.fd, 1, self.offset - 1) != self.last_byte
        except OSError:
            return False

    def seek_to_last_line(self, chunk: int) -> None:
        """Live attach: skip history but keep true line numbers and the line being written."""
        assert self.fd is not None
        start, lineno = last_line_start(self.fd, chunk)
        os.lseek(self.fd, start, os.SEEK_SET)
        self.offset = start
        self.last_byte = b"\n" if start else b""
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
