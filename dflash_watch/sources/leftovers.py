"""What rotation left behind for one followed name, and what of it was read.

``rotated`` finds the copies a log left behind (by the names of one moment,
on the files' own clock); this holds what the tailer does with them: the
renamed files it still reads while a writer may hold them, the copies it
read to their end (never read twice), and the copies passed over at a look
(renamed again as they were opened) that the next listing must find.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from .lines import LineSplitter, Split
from .rotated import Ident, Read, Sibling, holds, open_as, renamed_on, tail_of

# A renamed file is read on after the switch while its writer may still
# hold it (logrotate's ``create`` before the writer reopens on SIGHUP, or a
# writer never told to): it is let go once the writer writes to the new
# file and the old one has not grown for this long (its unfinished last
# line then ends), or at once when rotation deletes it. One let go is not
# lost while it is there: a listing finds it grown, whatever its time
# (``_stat_listing``), and the tailer lists the copies every
# ``GROWN_EVERY_S`` for ``GROWN_WATCH_S`` after it let one go.
RENAMED_QUIET_S = 2.0
GROWN_EVERY_S = 5.0
GROWN_WATCH_S = 3600.0
_MAX_RENAMED = 8
# Files read to their end, remembered so that a rotated copy is never read twice.
_READ_MEMORY = 64

Feed = Callable[[Split | None], None]


class _Renamed:
    """An old incarnation of a followed name, renamed away, still read to its end."""

    __slots__ = ("fd", "grew_at", "ident", "splitter")

    def __init__(self, fd: int, ident: Ident, splitter: LineSplitter) -> None:
        self.fd = fd
        self.ident = ident
        self.splitter = splitter
        self.grew_at = time.monotonic()


class Leftovers:
    """What rotation left behind for one followed name: the renamed files still
    read (their writer may still hold them), and the files read to their end.

    Everything read here goes to ``feed``, the followed name's own stream:
    the same generation as the file that follows, so that a parser sees one
    writer's text as one text whatever the names did.
    """

    __slots__ = ("chunk", "following", "last_try", "let_go_at", "max_line", "missed", "misses", "read", "relisted_at",
                 "renamed")

    def __init__(self, chunk: int, max_line: int) -> None:
        self.renamed: list[_Renamed] = []
        # A copy still there was passed over at this look (renamed again as
        # it was opened): the tailer keeps its reading of the files' clock,
        # so that the next look finds it among the new copies again.
        self.missed = False
        self.misses = 0  # looks in a row that passed one over
        # The copies passed over were read to follow the newest (its writer
        # may still write to it): the listing again follows it too.
        self.following = False
        # The last look that may pass one over: it reads what it can.
        self.last_try = False
        # When a renamed file still there was last let go, and the copies
        # last listed for one grown since (monotonic; ``read_renamed``).
        self.let_go_at: float | None = None
        self.relisted_at = 0.0
        self.read: Read = {}  # files read: how far, their last bytes, the next line number
        self.chunk = chunk
        self.max_line = max_line

    def idents(self) -> set[Ident]:
        return {r.ident for r in self.renamed}

    def keep(self, fd: int, ident: Ident, splitter: LineSplitter, feed: Feed) -> None:
        """The file rotation renamed, read to its current end: read on what comes later."""
        self.renamed.append(_Renamed(fd, ident, splitter))
        if len(self.renamed) > _MAX_RENAMED:
            self._let_go(self.renamed[0], feed)

    def done(self, ident: Ident, fd: int, size: int, lineno: int) -> None:
        self.read.pop(ident, None)  # (re-inserted last: the memory forgets the oldest)
        self.read[ident] = (size, tail_of(fd, size), lineno)
        if len(self.read) > _READ_MEMORY:
            del self.read[next(iter(self.read))]

    def seen(self, found: list[Sibling]) -> None:
        """``found`` taken as read to their end without reading them: copies
        of text read from the followed file itself (logrotate's
        ``copytruncate``). Their line numbers are not counted (a copy does
        not grow)."""
        for sib in found:
            fd = open_as(sib.path, sib.ident, sib.suffix)
            if fd is None:
                continue
            try:
                self.done(sib.ident, fd, sib.size, 1)
            finally:
                os.close(fd)

    def read_renamed(self, feed: Feed, writer_moved: bool) -> None:
        """Late lines of the renamed files; each let go once deleted, or once
        quiet while the writer writes to the new file (``writer_moved``).
        One let go may still be written by another process that holds it
        (ranks logging to one file, one told to reopen): the tailer lists
        the copies again for a while (``let_go_at``) and reads it grown."""
        for r in list(self.renamed):
            grew = False
            try:
                while data := os.read(r.fd, self.chunk):
                    grew = True
                    feed(r.splitter.feed(data))
                nlink = os.fstat(r.fd).st_nlink
            except OSError:
                nlink = 0
            now = time.monotonic()
            if grew:
                r.grew_at = now
            elif not nlink or (writer_moved and now - r.grew_at >= RENAMED_QUIET_S):
                if nlink:
                    self.let_go_at = now
                self._let_go(r, feed)

    def read_whole(self, found: list[Sibling], feed: Feed) -> tuple[list[str], list[str]]:
        """Reads the rotated files found, oldest first, each from its line 1,
        up to one passed over (``missed``). Returns the paths read and the
        errors met (one line each)."""
        done: list[str] = []
        errors: list[str] = []
        for sib in found:
            fd = open_as(sib.path, sib.ident, sib.suffix)
            if fd is None:
                if renamed_on(sib):
                    if not self.last_try:
                        # Renamed again as it was opened: it and the newer copies
                        # wait for the listing again (this look's or the next), so
                        # that none is read before an older one.
                        self.missed = True
                        break
                    errors.append(f"{sib.path}: renamed again as it was opened, look after look; not read")
                elif holds(sib):
                    errors.append(f"{sib.path}: cannot be opened; its lines were not read")
                continue  # (else pruned since it was listed)
            try:
                splitter, size = self._read_to_end(fd, sib, feed)
                feed(splitter.finish())
                self.done(sib.ident, fd, size, splitter.lineno)
                done.append(sib.path)
            except OSError as exc:
                errors.append(_read_failed(sib, exc))
            finally:
                os.close(fd)
        return done, errors

    def follow(self, sib: Sibling, feed: Feed) -> str | None:
        """The newest rotated file, found when the name came (back) unheld: read it
        to its end, then on, as a renamed file (``keep``). logrotate's ``create``
        renames the log and makes a new one; the writer goes on writing to the
        renamed file until it reopens (SIGHUP), and a watcher that first saw the
        name after the rename must follow those lines too, not read them once.
        Returns an error line, or None."""
        fd = open_as(sib.path, sib.ident, sib.suffix)
        if fd is None:
            if not self.last_try and renamed_on(sib):
                self.missed = self.following = True  # (the next listing follows it)
            return None
        try:
            splitter, _ = self._read_to_end(fd, sib, feed)
        except OSError as exc:
            os.close(fd)
            return _read_failed(sib, exc)
        self.keep(fd, sib.ident, splitter, feed)
        return None

    def _read_to_end(self, fd: int, sib: Sibling, feed: Feed) -> tuple[LineSplitter, int]:
        """``sib`` from its ``start`` (line ``lineno``) to its current end, its
        last unfinished line kept in the splitter: (the splitter, bytes read to)."""
        splitter = LineSplitter(self.max_line, sib.lineno)
        size = os.lseek(fd, sib.start, os.SEEK_SET)
        while data := os.read(fd, self.chunk):
            size += len(data)
            feed(splitter.feed(data))
        return splitter, size

    def close(self) -> None:
        for r in self.renamed:
            try:
                os.close(r.fd)
            except OSError:
                pass
        self.renamed.clear()

    def _let_go(self, r: _Renamed, feed: Feed) -> None:
        feed(r.splitter.finish())  # its unfinished last line is complete for good now
        try:
            self.done(r.ident, r.fd, os.lseek(r.fd, 0, os.SEEK_CUR), r.splitter.lineno)
        except OSError:
            pass
        try:
            os.close(r.fd)
        except OSError:
            pass
        self.renamed.remove(r)


def _read_failed(sib: Sibling, exc: OSError) -> str:
    return f"{sib.path}: read failed: {exc.strerror or type(exc).__name__}"
