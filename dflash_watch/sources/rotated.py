"""The rotated files a followed log left behind between two looks.

The tailer holds the descriptor of the file it reads, so the file that was
the log when it last looked is read to its end whatever happened to its
name. But a writer can roll over more than once between two polls
(RotatingFileHandler with a small ``maxBytes`` and a burst of records, a
log that appeared and rotated before the first poll found it): the files
in between were never opened. They are still there under the names
rotation gave them (``train.log.1``, ``train.log.2026-11-29``,
``train.log-20261129``), written since the last look. This module finds
them, oldest first, and tells when some were pruned before they could be
read (the only bytes the tailer can truly lose).

"Written since the last look" is judged on the files' own clock, never on
this machine's: file times come from the file server's clock (NFS: the
server's), which may be seconds or minutes off ``time.time()``. Compared
with it, a server 60 ms behind hid most of the copies a burst of rollovers
made between two looks, their lines lost without a word
(tests/shell/test_rotation_skew.py). Each look reads the files' clock
instead: the followed name's mtime at each look.
"""

from __future__ import annotations

import os
import stat
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, replace

from .lines import newline_count

# Rotated names: the followed name, one of these, then a number or a date
# (``.1``, ``.2026-11-29_10-00-00``, ``-20261129``); not ``train.log.lock``.
_SEPARATORS = ".-_"
# Compressed copies of a file we held (logrotate's ``compress``) repeat it;
# they are never read as text.
_PACKED = (".gz", ".bz2", ".xz", ".zst", ".zip", ".lz4", ".Z")
# How long before the watcher's first look a rotated copy may have been
# renamed (or last written) and still be the file a writer goes on writing.
RENAMED_WITHIN_NS = 60_000_000_000

Ident = tuple[int, int]
# A copy as a name's history knew it (``sibling_marks``): dev, inode, mtime, size.
Mark = tuple[int, int, int, int]
# What tells a file read before from a new one that got its inode number
# (soon reused) and, with records of one length, its size: its last bytes.
TAIL = 64


def tail_of(fd: int, size: int) -> bytes:
    try:
        start = max(0, size - TAIL)
        return os.pread(fd, size - start, start)
    except OSError:
        return b""


@dataclass(frozen=True, slots=True)
class Sibling:
    """A rotated file written since the last look: never read, or grown since it was."""

    path: str
    ident: Ident
    size: int
    mtime_ns: int
    ctime_ns: int
    suffix: str
    start: int = 0  # read from here: a file read before up to here that grew since
    lineno: int = 1  # the number of the line at ``start``


Read = dict[Ident, tuple[int, bytes, int]]  # inode -> (bytes read, their last bytes, next line number)


class FolderIndex:
    """One listing of a folder, sorted by name: the first looks of many
    logs in one folder (a glob of 200 ranks' logs among 50k files) share
    one pass, and each finds its copies by bisection, not by a pass of its
    own. What it says is checked as any listing is (``_stat_listing``: a
    name must still hold the listed inode)."""

    __slots__ = ("names",)

    def __init__(self, folder: str) -> None:
        try:
            with os.scandir(folder or ".") as entries:
                self.names = sorted((e.name, e.inode()) for e in entries)
        except OSError:
            self.names = []

    def copies_of(self, base: str) -> list[tuple[str, int]]:
        """``_snapshot(folder, base)`` as this listing saw it."""
        names = self.names
        out = []
        for k in range(bisect_left(names, (base,)), len(names)):
            name, ino = names[k]
            if not name.startswith(base):
                break
            if _text_copy(name, base):
                out.append((name, ino))
        return out


def sibling_marks(abspath: str, index: FolderIndex | None = None) -> set[Mark]:
    """The rotated copies of ``abspath`` there now, each by dev, inode,
    mtime and size (which a rename keeps): a name's history at its first
    look, never read as new (``fresh_siblings``), whatever their times say
    (the first reading is the name's mtime, or nothing while it is missing:
    a copy there then may be as new as that). ``index``: a listing of the
    folder just taken, shared with other logs there (its first try)."""
    listed = None if index is None else index.copies_of(os.path.basename(abspath))
    return {(*s.ident, s.mtime_ns, s.size) for s in _siblings(abspath, 0, set(), {}, listed=listed)}


def folder_marks(folder: str, keep: Callable[[str], bool]) -> set[Mark]:
    """The regular files in ``folder`` now whose names ``keep`` takes, by
    dev, inode, mtime and size (which a rename keeps): what was there at
    the watcher's first look, for names that a glob finds only later
    (``LogTailer``). Only those are stat'ed (a folder of shards)."""
    marks: set[Mark] = set()
    try:
        with os.scandir(folder) as entries:
            for e in entries:
                if not keep(e.name):
                    continue
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    marks.add((st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size))
    except OSError:
        pass
    return marks


def fresh_siblings(abspath: str, since_ns: int, skip: set[Ident], read: Read,
                   history: set[Mark] | None = None, missed: list[Ident] | None = None) -> list[Sibling]:
    """Rotated copies of ``abspath`` written since ``since_ns`` (a reading of
    the files' clock, the name's mtime, at the last look), oldest first.

    ``skip``: the files the tailer holds (the old and the new incarnation);
    ``read``: files it read before, how far, and the last bytes read (an
    inode number is soon reused for a new file; the same bytes in the same
    place tell a file that grew since from a new one).

    Copies rotated within one clock tick are ordered by their numbers, so
    the numbers must be from one moment: a rollover while the folder is
    listed shifts them (.2 read before, .3 after, for the same file). Each
    listing takes its names from one moment (``_siblings``); the folder is
    listed again until two listings agree (a few tries at most), for a
    folder too big for one ``getdents`` call.

    ``missed``: where given, the copies of the answer's listing that are
    still there but were passed over (renamed again and again while it was
    listed): the caller must list them again at its next look.
    """
    passed: list[Ident] = []
    found = _siblings(abspath, since_ns, skip, read, history, passed)
    for _ in range(4):
        passed_again: list[Ident] = []
        again = _siblings(abspath, since_ns, skip, read, history, passed_again)
        same = [(f.ident, f.suffix) for f in again] == [(f.ident, f.suffix) for f in found]
        found, passed = again, passed_again
        if same:
            break
    if missed is not None:
        missed.extend(passed)
    return found


def newest_from_its_end(abspath: str, skip: set[Ident], read: Read, chunk: int = 1 << 20, *,
                        watched_ns: int) -> Sibling | None:
    """The newest rotated copy of ``abspath``, renamed or written shortly
    before the watcher first looked (``watched_ns``, on the files' clock:
    a copy's ctime is the file server's), to be read from the start of its
    last line on (a live attach: its history is skipped).

    A watcher that attached between logrotate's rename and its create sees
    the renamed file with nothing written since it looked; the writer may
    still hold it until it is told to reopen. A rename and a write both set
    a file's ctime: a copy left by an earlier run (a rerun in the same
    folder, the common case) has an old one and is never taken for it.
    """
    found = [s for s in _siblings(abspath, 0, skip, read) if s.ctime_ns >= watched_ns - RENAMED_WITHIN_NS]
    if not found:
        return None
    newest = found[-1]
    fd = open_as(newest.path, newest.ident, newest.suffix)
    if fd is None:
        return None
    try:
        start, lineno = last_line_start(fd, chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return replace(newest, start=start, lineno=lineno)


def last_line_start(fd: int, chunk: int) -> tuple[int, int]:
    """(where the last line of the file open at ``fd`` starts, its line number).

    A live attach skips a file's history but keeps true line numbers and
    the line still being written: the name the tailer attaches to
    (``Follower.seek_to_last_line``) and a rotated copy its writer may still
    write to (``newest_from_its_end``). Read from the file's start (``pread``:
    the descriptor's offset is left alone), one ``chunk`` at a time."""
    lines = pos = start = 0
    while data := os.pread(fd, chunk, pos):
        lines += newline_count(data)
        last = data.rfind(b"\n")
        if last >= 0:
            start = pos + last + 1
        pos += len(data)
    return start, lines + 1


def open_as(path: str, ident: Ident, suffix: str = "") -> int | None:
    """The file ``ident``, listed as ``path``, opened for reading; None once
    it is gone (pruned) or its name holds another file. A rotated copy
    (``suffix``: what follows the log's name and a separator in ``path``)
    may have been renamed again since it was listed (a RotatingFileHandler
    shifts every copy at each rollover, several times between two polls in
    a burst): it is then opened under its new name among the log's rotated
    copies, so that the copies are still read in the listing's order (one
    passed over even so is listed again at the next look, its lines late:
    ``Leftovers.missed``)."""
    fd = _open_if(path, ident)
    if fd is not None or not suffix:
        return fd
    folder, name = os.path.split(path)
    base = name[: len(name) - len(suffix) - 1]
    for _ in range(3):  # renamed again while the folder was looked through
        try:
            with os.scandir(folder or ".") as entries:
                names = [e.path for e in entries if e.inode() == ident[1] and _rotated_name(e.name, base)]
        except OSError:
            return None
        if not names:
            return None
        for name in names:
            fd = _open_if(name, ident)
            if fd is not None:
                return fd
    return None


def renamed_on(sib: Sibling) -> bool:
    """Whether the copy ``sib`` is among its log's rotated copies under
    another name now: renamed again as it was opened (not pruned, and not
    a file that cannot be opened where it is: a permission)."""
    folder, name = os.path.split(sib.path)
    names = _snapshot(folder, name[: len(name) - len(sib.suffix) - 1]) if sib.suffix else None
    return names is not None and any(ino == sib.ident[1] and listed != name for listed, ino in names)


def holds(sib: Sibling) -> bool:
    """Whether ``sib``'s name still holds it (not pruned, not renamed)."""
    try:
        st = os.stat(sib.path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == sib.ident


def _open_if(path: str, ident: Ident) -> int | None:
    """``path`` opened for reading if it is the file ``ident``, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
    except OSError:
        st = None
    if st is None or (st.st_dev, st.st_ino) != ident:
        os.close(fd)
        return None
    return fd


def _rotated_name(name: str, base: str) -> bool:
    """Whether ``name`` is a rotated copy of the log named ``base``: the
    name, a separator, then what starts with a digit (``train.log.3``,
    ``train.log.2026-12-01``)."""
    return (len(name) > len(base) + 1 and name.startswith(base) and name[len(base)] in _SEPARATORS
            and name[len(base) + 1].isdigit())


def _text_copy(name: str, base: str) -> bool:
    """A rotated copy of ``base`` read as text (not compressed)."""
    return _rotated_name(name, base) and not name.endswith(_PACKED)


def _siblings(abspath: str, since_ns: int, skip: set[Ident], read: Read,
              history: set[Mark] | None = None, missed: list[Ident] | None = None, *,
              listed: list[tuple[str, int]] | None = None) -> list[Sibling]:
    """The rotated copies of ``abspath`` by the names of one moment.

    Names and their inodes come from one ``scandir`` pass: one
    ``getdents`` call for a folder of up to several hundred entries, which
    no rename in the folder can interleave with (the kernel holds the
    folder's lock across it). A name then stat'ed may hold another file by
    then (a RotatingFileHandler shifts every copy at each rollover, many
    times a second in a burst): its suffix would order another file. So a
    name is stat'ed only if it still holds the listing's inode; else the
    folder is listed anew, and after a few tries each copy is stat'ed
    under its current name, found by its inode, keeping the listing's name
    (``open_as`` follows it) and the listing's order. ``listed``: the
    first try's names, from a listing just taken (``FolderIndex``).
    """
    folder, base = os.path.split(abspath)
    for last in (False, False, False, True):
        names, listed = (_snapshot(folder, base) if listed is None else listed), None
        if names is None:
            return []
        found = _stat_listing(folder, base, names, since_ns, skip, read, last, history or _NONE, missed)
        if found is not None:
            found.sort(key=_age)
            return found
    return []  # (unreached: the last try always answers)


_NONE: set[Mark] = set()


def _snapshot(folder: str, base: str) -> list[tuple[str, int]] | None:
    """(name, inode) of each rotated copy of ``base`` in ``folder``, read in one pass."""
    try:
        with os.scandir(folder or ".") as entries:
            listed = [(e.name, e.inode()) for e in entries]
    except OSError:
        return None
    return [(name, ino) for name, ino in listed if _text_copy(name, base)]


def _stat_listing(folder: str, base: str, names: list[tuple[str, int]], since_ns: int, skip: set[Ident],
                  read: Read, last: bool, history: set[Mark],
                  missed: list[Ident] | None = None) -> list[Sibling] | None:
    """The siblings of one listing; None when a name holds another file by
    now (renamed since) and this is not the ``last`` try, which finds such a
    file under its current name instead (none: pruned since, skipped).

    A file listed twice (under two names: a folder read in several
    ``getdents`` calls across a rename, or hard links) is taken once. Where
    the folder's listing numbers files otherwise than ``stat`` does (FUSE
    without ``use_ino``: sshfs, s3fs) a name that still lists the same
    number is its file, and a renamed one is taken under its new name."""
    found = []
    taken: set[Ident] = set()
    now: dict[int, str] | None = None  # listed inode -> its current name (the last try)
    other_numbers = False  # the listing's inode numbers are not stat's
    for name, ino in names:
        path = os.path.join(folder, name)
        try:
            st: os.stat_result | None = os.stat(path)
        except OSError:
            st = None
        if st is None or st.st_ino != ino:
            if not last:
                return None
            if now is None:
                now = {i: n for n, i in _snapshot(folder, base) or []}
            current = now.get(ino)
            if current is None:
                continue  # pruned since it was listed
            if current == name and st is not None:
                other_numbers = True  # not renamed: the numbers differ
            else:
                path = os.path.join(folder, current)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                if st.st_ino != ino and not other_numbers:
                    if missed is not None:  # renamed yet again: the next look lists it again
                        missed.append((st.st_dev, ino))
                    continue
        ident = (st.st_dev, st.st_ino)
        # A file read before that grew since (a writer that still held it,
        # let go when quiet) is new whatever its time: the name may have
        # been written after it.
        grew = ident in read and read[ident][0] < st.st_size
        if (not stat.S_ISREG(st.st_mode) or ident in skip or ident in taken
                or (st.st_mtime_ns < since_ns and not grew)
                or (*ident, st.st_mtime_ns, st.st_size) in history):
            continue
        taken.add(ident)
        start, lineno = 0, 1
        if ident in read:
            done, tail, next_line = read[ident]
            if done <= st.st_size and _same_tail(path, ident, done, tail):
                if done == st.st_size:
                    continue  # read to its end before
                start, lineno = done, next_line
        # The listing's name and suffix: its place in the order (``_age``).
        found.append(Sibling(os.path.join(folder, name), ident, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                             name[len(base) + 1 :], start, lineno))
    return found


def _same_tail(path: str, ident: Ident, size: int, tail: bytes) -> bool:
    fd = _open_if(path, ident)
    if fd is None:
        return True  # gone or renamed since listed: a later look reads it
    try:
        return tail_of(fd, size) == tail
    finally:
        os.close(fd)


def _age(s: Sibling) -> tuple[int, int, str]:
    # Written last = rotated last. Files written within one clock tick tie:
    # a numbered suffix counts up with age (RotatingFileHandler, logrotate),
    # a dated one counts up with time (TimedRotatingFileHandler, dateext).
    counter = s.suffix.isdigit() and len(s.suffix) < 6  # .1 .. .99999, not -20261129
    return (s.mtime_ns, -int(s.suffix) if counter else 0, s.suffix)


def pruned_unread(old: os.stat_result | None, found: list[Sibling]) -> bool:
    """True when rotation pruned files that were never read.

    The file the tailer held was deleted by rotation (not by a person: the
    rotated files around it are fresh). Pruning removes the oldest backup
    first, and every rotation renames or creates a backup. So if a backup
    changed name after the held file was pruned (its ctime is later), a
    further rotation pruned the one that came after the held file: its
    bytes are gone. Best effort: rotations within one clock tick look alike.
    """
    if old is None or old.st_nlink or not found:
        return False
    return old.st_ctime_ns < max(s.ctime_ns for s in found)
