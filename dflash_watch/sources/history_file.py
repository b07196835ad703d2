"""Appending whole lines to the alert history file: never a torn line.

A full disk takes a write only in part: ``write`` stores what fits (up to a
page) and the next one fails with ENOSPC. Left alone, the file then ends in
half an alert, and the next alert written after space returns is glued to
it: two broken JSON lines. So a short write is cut back (``ftruncate``) to
the last whole line it wrote, and the caller keeps the lines that did not
go in, to try again later. The same holds for RLIMIT_FSIZE (EFBIG) and for
an ``fsync`` that fails (the lines of that write are cut back, not trusted).

A FIFO or a device is opened with ``O_NONBLOCK``: a FIFO that nobody reads
is ENXIO at ``open`` and a full pipe is EAGAIN, never a thread blocked for
good. A pipe cannot be cut back, so the part of a line it did not take is
kept and written first next time: its reader still sees whole lines (we
are its only writer). A FIFO stays open once opened (closing its last
writer would be EOF to its reader) until its reader leaves. A regular
file is opened per batch: a history that was rotated or deleted is simply
created again.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path

_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK


def reason(exc: OSError) -> str:
    """Why a write failed, in words for a notice."""
    if exc.errno == errno.ENXIO:
        return "it is a FIFO that no process reads"
    if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
        return "the pipe is full (its reader is not reading)"
    if exc.errno == errno.EPIPE:
        return "the process reading the pipe left"
    return exc.strerror or type(exc).__name__


class LineAppender:
    """Appends whole lines to one path; ``append`` says how many went in."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # The part of a line that a pipe took only in part: it goes first.
        self._rest = b""
        self._dir_synced = False
        # A FIFO or device, held open between batches.
        self._stream: int | None = None

    def append(self, lines: Sequence[bytes]) -> tuple[int, OSError | None]:
        """(how many of ``lines`` are now whole in the file, why the rest are not).

        Lines are written in order; the ones counted are a prefix of ``lines``."""
        if self._stream is not None:
            return self._to_stream(lines)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, _FLAGS, 0o644)
        except OSError as exc:
            return 0, exc
        try:
            regular = stat.S_ISREG(os.fstat(fd).st_mode)
        except OSError as exc:  # not expected, but never a dead writer thread
            os.close(fd)
            return 0, exc
        if not regular:
            # Kept open: closing the last writer of a FIFO is EOF to its reader.
            self._stream = fd
            return self._to_stream(lines)
        self._rest = b""  # a pipe's torn line cannot be finished in a file
        try:
            done, error = self._to_file(fd, lines)
        finally:
            os.close(fd)
        if done and not self._dir_synced:
            self._sync_dir()
        return done, error

    def close(self) -> None:
        if self._stream is not None:
            os.close(self._stream)
            self._stream = None

    def _to_file(self, fd: int, lines: Sequence[bytes]) -> tuple[int, OSError | None]:
        data = memoryview(b"".join(lines))
        wrote = 0
        try:
            while wrote < len(data):
                wrote += os.write(fd, data[wrote:])
            os.fsync(fd)
            return len(lines), None
        except OSError as exc:
            error = exc
        if not wrote:
            return 0, error
        # O_APPEND: the offset is just past our bytes, whoever wrote before them.
        begin = os.lseek(fd, 0, os.SEEK_CUR) - wrote
        whole, keep = 0, 0
        if wrote < len(data):  # a short write: keep the whole lines it holds
            for line in lines:
                if keep + len(line) > wrote:
                    break
                keep += len(line)
                whole += 1
        # else the fsync failed: nothing of this write is trusted
        try:
            if keep < wrote:
                os.ftruncate(fd, begin + keep)
            if whole:
                os.fsync(fd)
        except OSError:
            try:
                os.ftruncate(fd, begin)
            except OSError:
                pass
            return 0, error
        return whole, error

    def _to_stream(self, lines: Sequence[bytes]) -> tuple[int, OSError | None]:
        assert self._stream is not None
        fd = self._stream
        try:
            while self._rest:
                self._rest = self._rest[os.write(fd, self._rest):]
        except OSError as exc:
            return 0, self._stream_failed(exc)
        for i, line in enumerate(lines):
            try:
                wrote = os.write(fd, line)
            except OSError as exc:
                return i, self._stream_failed(exc)
            if wrote < len(line):
                # Committed: the rest of this line must follow before any other.
                self._rest = line[wrote:]
                return i + 1, BlockingIOError(errno.EAGAIN, "the pipe is full")
        return len(lines), None

    def _stream_failed(self, exc: OSError) -> OSError:
        """A full pipe waits on its reader; any other error reopens next time
        (the reader left: EPIPE; a FIFO without one is ENXIO at ``open``)."""
        if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
            self.close()
            self._rest = b""  # that reader is gone with its half line
        return exc

    def _sync_dir(self) -> None:
        """The file's directory entry, once: a new file survives a power cut too."""
        try:
            fd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return
        try:
            os.fsync(fd)
            self._dir_synced = True
        except OSError:
            pass
        finally:
            os.close(fd)
