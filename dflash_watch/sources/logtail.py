"""Follow training logs the way ``tail -F`` does, and read finished ones whole.

The name is the truth: every ``poll()`` stats each followed path by name and
compares what it finds with the descriptor it holds.  File-system events
(watchdog) only say *when* to look again; they never decide *what* happened,
because inotify misses writes on NFS/Lustre, coalesces events and can run out
of watches.  So a tailer without watchdog behaves exactly like one with it,
only with up to ``poll_interval`` more latency.

Rotation loses no byte the tailer could reach: the held descriptor is read
to its end before the name's new file, and on while its writer may still
write to it; files rotated in between two polls are read from their new
names (``rotated``). A name first seen after logrotate's ``create`` had
renamed it (the watcher started before the log existed, or attached
between the rename and the create) follows the newest rotated file too:
its writer writes there until it reopens. A rename is the same writer
going on, so its text stays one generation (one parser stream: a
traceback that ended the old file is closed by the next record);
truncation and deletion start a new generation, a new run perhaps.

Bytes are split at the last ``b'\\n'`` of each read and decoded once per
chunk, never per line: most lines of a training log say nothing, and a
per-line loop here would cost more than the rest of the pipeline together.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
import stat
import time
from collections.abc import Callable, Sequence

from .chunks import Chunk, TailNotice, emit, read_chunks
from .follower import Follower, same_tail
from .leftovers import GROWN_EVERY_S, GROWN_WATCH_S
from .lines import LineSplitter, Split
from .rotated import (
    FolderIndex,
    Ident,
    Mark,
    Sibling,
    folder_marks,
    fresh_siblings,
    newest_from_its_end,
    open_as,
    pruned_unread,
)
from .wakeups import Wakeups, is_glob

__all__ = ["Chunk", "LogTailer", "TailNotice", "read_chunks"]


# Chunks read per file per poll.  More data stays for the next poll (``wait``
# then returns at once), so a 10 GB backlog never lands in one list.
_POLL_CHUNKS = 8
# Looks in a row that may pass over a rotated copy still there (renamed
# again as it was opened) before its lines are given up for lost.
_MISSES_MAX = 3
# The share of a core that listing the copies for renamed files let go may
# take, all logs together (``LogTailer._grown_due``).
_GROWN_SHARE = 0.005
# Folders the globs' folder parts may match at the first look whose files
# are noted then (``LogTailer._start_marks``); past it, a name found later
# in one not noted goes by the files there when it is found.
_START_FOLDERS_MAX = 256


def _before(found: list[Sibling], ident: Ident) -> tuple[list[Sibling], bool]:
    """The copies in ``found`` older than the file ``ident`` if it is among
    them (renamed by a rollover since it was seen under the name), and
    whether it was; else all of them."""
    at = next((k for k, s in enumerate(found) if s.ident == ident), None)
    return (found, False) if at is None else (found[:at], True)


def _copy_names(pattern: str) -> Callable[[str], bool]:
    """Whether a name could be a rotated copy of a file the glob part
    ``pattern`` matches: such a name, a separator, then a digit. One regex
    for it all, tried in C (a folder may hold 100k shards)."""
    translated = fnmatch.translate(pattern)  # '(?s:...)\\Z'
    if not translated.endswith("\\Z"):
        return lambda name: True  # (another Python's form: note every file)
    regex = re.compile(translated[:-2] + r"[._-][0-9]")
    return lambda name: regex.match(name) is not None


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


class LogTailer:
    """Follows files and globs by name through appends, rotation, truncation and relaunch."""

    def __init__(
        self,
        patterns: Sequence[str],
        *,
        from_start: bool = True,
        chunk_bytes: int = 1 << 20,
        max_line_bytes: int = 1 << 20,
        poll_interval: float = 1.0,
        use_watchdog: bool = True,
        wake_on_writes: bool = True,
    ) -> None:
        self._from_start = from_start
        self._chunk = chunk_bytes
        self._max_line = max_line_bytes
        self._poll_interval = poll_interval
        # False: file events wake the tailer only when a file appears,
        # moves or goes (rotation, a relaunched run); appends are found by
        # the poll. A run flushing ten times a second then costs the
        # watchdog threads nothing: the kernel never sends those events.
        self._wake_on_writes = wake_on_writes
        self._followers: dict[str, Follower] = {}
        # Their absolute paths, kept as followers are added (none is ever
        # removed): a rotated copy is checked against it, not a set rebuilt per copy.
        self._abspaths: set[str] = set()
        self._globs: list[str] = []
        self._globs_noted: set[str] = set()
        self._first_poll = True
        # What the last listing for a renamed file let go took (``_grown_due``).
        self._grown_cost = 0.0
        self._watching = 0  # logs watching for one, at this poll
        self._cut_count = 0
        self._backlog = False
        self._closed = False
        self._notices: list[Chunk | TailNotice] = []
        self._wakeups = Wakeups(wake_on_writes=wake_on_writes, poll_interval=poll_interval, notice=self._notice)
        self._flag = self._wakeups.flag
        listings: dict[str, FolderIndex] | None = {} if len(patterns) > 1 else None
        for raw in patterns:
            pat = os.path.expanduser(raw)
            if is_glob(pat):
                self._globs.append(pat)
                self._wakeups.globs.append(os.path.abspath(pat))
            else:
                added = self._add(pat, attach_at_end=not from_start, announce=False, listings=listings)
                # Held from the first look (as ``tail -F`` holds it): a rollover
                # before the first poll is then one like any other (the held
                # file read to its end, the copies after it, the new name),
                # not the held text lost with the file renamed away; and
                # attached at the end, the lines after the first look are read.
                # (A name given twice is one follower, opened once.)
                if added is not None and os.path.isfile(added.abspath):
                    try:
                        self._open(added, self._notices, added.looked_ns)
                    except BaseException:
                        self.close()  # (no tailer to close comes back: its files closed here)
                        raise
        # The files in the globs' folders at the first look that could be a
        # rotated copy of a match: a name a glob finds later came after it,
        # and so did its rotated copies not among these (a log that appeared
        # and rotated before it was found). By dev, inode, mtime and size,
        # whatever folder they are in now (a folder may be renamed).
        self._start_folders: set[str] = set()
        self._start_marks: set[Mark] = set()
        self._start_complete = self._snapshot_glob_folders()
        if use_watchdog:
            self._wakeups.start(self._dirs())

    # ---- public face -------------------------------------------------

    @property
    def files(self) -> list[str]:
        """Every concrete path followed: named ones (even if not there yet) and glob matches."""
        return [f.path for f in self._followers.values()]

    def cut_lines(self) -> int:
        return self._cut_count

    def poll(self) -> list[Chunk | TailNotice]:
        self._flag.clear()
        self._backlog = False
        out, self._notices = self._notices, []
        self._discover(out)
        if self._wakeups.active:
            self._wakeups.sync(self._dirs())
        followers = list(self._followers.values())
        self._watching = sum(1 for f in followers if f.left.let_go_at is not None)
        for f in followers:
            self._poll_one(f, out)
        self._first_poll = False
        return out

    def wait(self, timeout: float) -> bool:
        """Blocks up to ``min(timeout, poll_interval)``; True if there is known news.

        Capped at ``poll_interval`` because inotify is blind to writes from
        other hosts (NFS, Lustre): the caller should poll after every return.
        """
        if self._backlog or self._closed:
            return True
        return self._flag.wait(max(0.0, min(timeout, self._poll_interval)))

    def close(self) -> None:
        self._closed = True
        self._wakeups.close()
        for f in self._followers.values():
            f.close_fd()
            f.left.close()

    def __enter__(self) -> LogTailer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _notice(self, message: str) -> None:
        self._notices.append(TailNotice("", "error", message))

    def _dirs(self) -> set[str]:
        """The directories of the files followed now (the wake-ups watch them)."""
        return {os.path.dirname(f.abspath) for f in self._followers.values()}

    # ---- discovery ---------------------------------------------------

    def _snapshot_glob_folders(self) -> bool:
        """``_start_marks`` of every folder the globs' folder parts match
        now; False when there were more than ``_START_FOLDERS_MAX`` (a name
        found later in one left out goes by the files there then)."""
        for pat in self._globs:
            head, base = os.path.split(pat)
            # (A pattern that ends with a separator matches folders only: a
            # '**' over a tree of shards lists no file.)
            folders = glob.glob(os.path.join(head, ""), recursive=True) if head else ["."]
            if head == "**" or head.endswith(os.sep + "**"):  # ('**' matches no folder as itself)
                folders.append(head[:-2] or ".")
            for folder in folders:
                key = os.path.abspath(folder)
                if key in self._start_folders or not os.path.isdir(key):
                    continue
                if len(self._start_folders) >= _START_FOLDERS_MAX:
                    return False
                self._start_folders.add(key)
                self._start_marks |= folder_marks(key, _copy_names(base))
        return True

    def _add(self, path: str, *, attach_at_end: bool, announce: bool, late: bool = False,
             listings: dict[str, FolderIndex] | None = None) -> Follower | None:
        """Follow ``path`` from now on: its follower, None where it is
        followed already. ``listings``: the folders listed in this pass,
        shared by the names added in it (their first looks)."""
        key = os.path.normpath(path)
        if key in self._followers:
            return None
        index = None
        if listings is not None:
            folder = os.path.dirname(os.path.abspath(path))
            index = listings.get(folder)
            if index is None:
                index = listings[folder] = FolderIndex(folder)
        f = Follower(path, self._max_line, self._chunk, attach_at_end, announce, index)
        if late:
            # Found by a glob after the first look: it came since, and so did
            # its rotated copies not there then (a burst of rollovers before
            # it was found). Its first open reads them, as for a named log
            # that appeared after the first look.
            # (Its folder not noted: past the cap, it goes by the files there
            # now; within it, the folder came after the first look too.)
            if self._start_complete or os.path.dirname(f.abspath) in self._start_folders:
                f.history &= self._start_marks
                f.looked_ns = 0
                f.waiting_noted = True
        self._followers[key] = f
        self._abspaths.add(f.abspath)
        self._wakeups.files.add(f.abspath)
        return f

    def _discover(self, out: list[Chunk | TailNotice]) -> None:
        for pat in self._globs:
            matches = sorted(glob.glob(pat, recursive=True))
            if not matches and pat not in self._globs_noted:
                self._globs_noted.add(pat)
                out.append(TailNotice(pat, "waiting", f"waiting for {pat} to match a file"))
            # New matches share one listing of each folder (a glob of many
            # ranks' logs in one folder: one pass, not one per log).
            listings: dict[str, FolderIndex] | None = {} if len(matches) > 1 else None
            for m in matches:
                self._globs_noted.add(pat)
                self._add(m, attach_at_end=self._first_poll and not self._from_start,
                          announce=not self._first_poll, late=not self._first_poll, listings=listings)

    # ---- one file ----------------------------------------------------

    def _poll_one(self, f: Follower, out: list[Chunk | TailNotice]) -> None:
        if f.left.renamed:
            f.left.read_renamed(self._feed(f, out), writer_moved=f.fd is not None and f.offset > 0)
        try:
            st: os.stat_result | None = os.stat(f.path)
        except (FileNotFoundError, NotADirectoryError):
            st = None
        except OSError as exc:
            self._error(f, out, f"cannot stat: {_reason(exc)}")
            if f.fd is not None:
                self._read(f, out, budget=_POLL_CHUNKS)
            return
        # The files' clock at this look, for the next: the name's mtime, on
        # the clock that stamps its rotated copies (the same writer's files;
        # never this machine's: NFS). This look goes by the last one's. Not
        # moved while the name is missing: a look that finds no file reads no
        # rotated copy (they wait for the name to come back, mid-rollover or
        # before a first file), so the copies there then must still be new
        # at the next. Never back.
        since = f.looked_ns
        if st is not None and st.st_mtime_ns > since:
            f.looked_ns = st.st_mtime_ns
        # A copy still there was passed over at the last look (renamed again
        # as it was opened or listed): this one lists the copies again, and
        # the last that may pass one over reads what it can.
        left = f.left
        relist, following = left.missed, left.following
        left.missed = left.following = False
        left.last_try = left.misses >= _MISSES_MAX
        try:
            self._look(f, out, st, since, relist, following)
        finally:
            if not left.missed:
                left.misses = 0
            else:
                # Passed over at this look: it is not taken, so that the next
                # lists that copy again among the new ones (late, not lost).
                left.misses += 1
                f.looked_ns = since

    def _look(self, f: Follower, out: list[Chunk | TailNotice], st: os.stat_result | None, since: int,
              relist: bool, following: bool) -> None:
        """``_poll_one`` once the name was stat'ed (``st``; None: missing),
        ``since`` the files' clock at the last look; ``relist``: list the
        rotated copies whatever happened to the name (one was passed over;
        ``following``: on the way to follow the newest, which it does too)."""
        if st is None:
            self._name_missing(f, out, since)
            return
        if stat.S_ISDIR(st.st_mode):
            self._error(f, out, "is a directory")
            return
        truncated = False
        if f.fd is not None and (st.st_dev, st.st_ino) != f.ident:
            self._replaced(f, out, since, (st.st_dev, st.st_ino))
        elif f.fd is not None and f.rewritten(st.st_size):
            self._copied(f, self._siblings(f, since, {f.ident}), out)
            # (A copy passed over here holds text read from the log itself:
            # listed again, by this look or a later one, it would be read twice.)
            f.left.missed = False
            truncated = True
            self._end_incarnation(f, out)
            os.lseek(f.fd, 0, os.SEEK_SET)
            f.restart()
            f.skip_nul = True
            out.append(TailNotice(f.path, "truncated", f"{f.path} truncated (copytruncate); reading from the start"))
        if f.fd is None and not self._open(f, out, since):
            return
        f.gone = False  # (it may have been renamed back)
        watch = not relist and f.left.let_go_at is not None and self._grown_due(f)
        if (relist or watch) and not truncated:
            # What was passed over (or grew since let go), before what the name holds now.
            began = time.perf_counter()
            # (The held file is among them if renamed since it was opened:
            # the copies after it wait for the next look, as in ``_open``.)
            found, _ = _before(self._siblings(f, since, set()), f.ident)
            self._read_siblings(f, found, out, follow_newest=following)
            if watch:
                self._grown_cost = time.perf_counter() - began
        if f.left.missed:
            return  # the name's lines wait for the copies passed over (the next look lists them first)
        self._read(f, out, budget=_POLL_CHUNKS)

    def _grown_due(self, f: Follower) -> bool:
        """Whether to list ``f``'s copies for a renamed file let go that grew
        since (another process still holding it): every ``GROWN_EVERY_S``
        for ``GROWN_WATCH_S`` after the last was let go; less often where a
        listing costs more (a folder of 50k files, many logs watching), so
        that all of them together stay under ``_GROWN_SHARE`` of a core."""
        left = f.left
        now = time.monotonic()
        assert left.let_go_at is not None
        if now - left.let_go_at > GROWN_WATCH_S:
            left.let_go_at = None
            return False
        if now - left.relisted_at < max(GROWN_EVERY_S, self._grown_cost * self._watching / _GROWN_SHARE):
            return False
        left.relisted_at = now
        return True

    def _copied(self, f: Follower, found: list[Sibling], out: list[Chunk | TailNotice]) -> None:
        """copytruncate: the copies made since the last look hold what was
        read from this file, never to be read again as rotated files. The
        newest is the copy of this truncation: what it holds past where this
        file was read (written after the last read, before the truncation)
        is read from it now, on this file's stream, before the file starts
        again. (A copy it is not, by its size or the byte before that
        place, is only taken as read.)"""
        if not found:
            return
        f.left.seen(found[:-1])
        copy = found[-1]
        fd = open_as(copy.path, copy.ident, copy.suffix)
        if fd is None:
            return
        try:
            at, tail = f.offset, f.tail
            if copy.size >= at and same_tail(tail, os.pread(fd, len(tail), at - len(tail))):
                while data := os.pread(fd, self._chunk, at):
                    at += len(data)
                    self._split(f, data, out)
            f.left.done(copy.ident, fd, max(at, copy.size), f.splitter.lineno)
        except OSError:
            pass
        finally:
            os.close(fd)

    def _name_missing(self, f: Follower, out: list[Chunk | TailNotice], since: int) -> None:
        if f.fd is not None:
            deleted = f.nlink() == 0
            # A renamed file may still get lines until its writer reopens the name: keep
            # following it.  A deleted one is drained and closed, or we would pin its disk space.
            self._read(f, out, budget=None if deleted else _POLL_CHUNKS)
            if deleted:
                old = f.fstat()
                found = self._siblings(f, since, {f.ident})
                if found or f.left.missed:  # rotated away and pruned by rotation, not deleted by a person
                    self._switch(f, out, old, found, keep_old=False)
                    out.append(TailNotice(f.path, "rotated", f"{f.path} rotated; waiting for the new file"))
                else:
                    message = f"{f.path} deleted; waiting for it to come back"
                    out.append(TailNotice(f.path, "deleted", message))
                    self._end_incarnation(f, out)
                    f.close_fd()
                f.gone = True
                return
            if not f.gone:
                out.append(TailNotice(f.path, "rotated", f"{f.path} rotated; waiting for the new file"))
            f.gone = True
        elif not f.ever_opened:
            f.attach_at_end = False  # it did not exist at attach: all of it is new
            if not f.waiting_noted:
                f.waiting_noted = True
                f.announce = True
                out.append(TailNotice(f.path, "waiting", f"waiting for {f.path} to appear"))

    def _replaced(self, f: Follower, out: list[Chunk | TailNotice], since: int, new: Ident) -> None:
        """The name now points at another inode: finish the old one, then switch.

        Renamed (rotation: RotatingFileHandler, logrotate's ``create``, ``mv``),
        the old file is the same writer's text going on: its tail, the files
        rotation made in between and the new file are one stream, of one
        generation, so a traceback that ended the old file is closed by the
        next record as if nothing had rotated. Deleted and created anew (a
        relaunch), the new file is a new generation.
        """
        self._read(f, out, budget=None)
        old = f.fstat()
        # The file the name held at the stat (``new``), renamed by a rollover
        # since (or linked under a copy's name, not yet unlinked), is among
        # the copies: those before it are read now; it and those after it
        # by the open's listing, which follows the newest (its writer may
        # still write to it: logrotate's ``create`` before the writer's HUP).
        listed = self._siblings(f, since, {f.ident})
        found, renamed = _before(listed, new)
        if (old is not None and old.st_nlink) or found or renamed or f.left.missed:
            self._switch(f, out, old, found, keep_old=old is not None and old.st_nlink > 0, listed=listed)
            out.append(TailNotice(f.path, "rotated", f"{f.path} rotated; following the new file"))
            return
        self._end_incarnation(f, out)
        f.close_fd()
        out.append(TailNotice(f.path, "recreated", f"{f.path} recreated; reading the new file"))

    def _switch(self, f: Follower, out: list[Chunk | TailNotice], old: os.stat_result | None,
                found: list[Sibling], *, keep_old: bool, listed: list[Sibling] | None = None) -> None:
        """Rotation: the held file (read to its end) is read on while it may grow,
        then the files rotated in between are read whole, oldest first; the next
        file opened for the name continues the stream, its lines counted from 1.
        ``listed``: every copy the listing found, when ``found`` is only the
        first of them (the rest read by the open's listing): what tells a
        copy pruned unread."""
        assert f.fd is not None
        if keep_old:
            f.left.keep(f.fd, f.ident, f.splitter, self._feed(f, out))
        else:
            self._out(f, f.splitter.finish(), out)
            f.left.done(f.ident, f.fd, f.offset, f.splitter.lineno)
            f.close_fd()
        f.fd = None
        f.splitter = LineSplitter(self._max_line)
        f.gone = True
        f.rotated_away = True
        self._read_siblings(f, found, out)
        if pruned_unread(old, found if listed is None else listed):  # one notice for all this rotation lost
            out.append(TailNotice(f.path, "lost", f"{f.path} rotated faster than it was read: "
                                  "rotation deleted some rotated files before they could be read"))

    def _siblings(self, f: Follower, since: int, skip: set[Ident]) -> list[Sibling]:
        left = f.left
        skip |= left.idents()
        missed: list[Ident] = []
        left.missed = False  # (what an earlier listing of this look passed over, this one lists)
        found = fresh_siblings(f.abspath, since, skip, left.read, f.history, missed)
        # Only a copy that would be read counts: not one held (the name's
        # file too, read through its descriptor), read before, or there at
        # the first look (a burst shifts those too).
        known = {(dev, ino) for dev, ino, _, _ in f.history}
        missed = [i for i in missed if i not in skip and i != f.ident and i not in left.read and i not in known]
        if missed and not left.last_try:
            # One passed over (renamed yet again as it was listed): none is
            # read now, so that none is read before an older one; the copies
            # wait for the listing again (this look's next, or the next look).
            left.missed = True
            return []
        if missed:
            out_of_reach = f"{f.path}: a rotated file was renamed again at {_MISSES_MAX + 1} looks in a row"
            self._notices.append(TailNotice(f.path, "lost", f"{out_of_reach}; its lines were not read"))
        return [s for s in found if not self._followed(s.path)]

    def _followed(self, path: str) -> bool:
        """Never read another followed file as a rotated copy (a glob may match both)."""
        return os.path.abspath(path) in self._abspaths

    def _read_siblings(self, f: Follower, found: list[Sibling], out: list[Chunk | TailNotice],
                       *, follow_newest: bool = False) -> None:
        """``follow_newest``: nothing of the name was held when it rotated (first
        seen after the rename): its writer may still write to the newest rotated file."""
        newest = found.pop() if follow_newest and found else None
        done, errors = f.left.read_whole(found, self._feed(f, out))
        if f.left.missed and follow_newest:
            f.left.following = True  # (the listing again follows the newest, as this one would have)
        out.extend(TailNotice(f.path, "rotated", f"{f.path}: read {p}, rotated in between") for p in done)
        if newest is not None and not f.left.missed:  # (else it waits with the one passed over)
            error = f.left.follow(newest, self._feed(f, out))
            if error is not None:
                errors.append(error)
            else:
                out.append(TailNotice(f.path, "rotated", f"{f.path}: following {newest.path}, rotated "
                                      "before it was seen (its writer may still write to it)"))
        for message in errors:
            self._error(f, out, message)

    def _feed(self, f: Follower, out: list[Chunk | TailNotice]) -> Callable[[Split | None], None]:
        return lambda res: self._out(f, res, out)

    def _end_incarnation(self, f: Follower, out: list[Chunk | TailNotice]) -> None:
        self._out(f, f.splitter.finish(), out)
        f.generation += 1
        f.splitter = LineSplitter(self._max_line)
        f.gone = False

    def _open(self, f: Follower, out: list[Chunk | TailNotice], since: int) -> bool:
        try:
            fd = os.open(f.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return False  # raced with a delete; next poll sees it
        except OSError as exc:
            self._error(f, out, f"cannot open: {_reason(exc)}")
            return False
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            self._error(f, out, "not a regular file")
            return False
        ident = (st.st_dev, st.st_ino)
        if f.gone or f.waiting_noted:
            # It came (back) while we were not holding it: it may have rotated
            # already, before we looked (a burst at the start of a run).
            # The file just opened, renamed since (a rollover between the
            # open and the listing), is read through its descriptor, and the
            # copies made after it wait for the next look (its ``_replaced``).
            found, renamed = _before(self._siblings(f, since, set()), ident)
            if not found and not renamed and not f.ever_opened:
                # Attached between a rename and the create: the renamed file
                # was written before we looked, and its writer may go on.
                # The first look on the files' clock (NFS: the server's), not
                # this machine's: the name, missing at the last poll, was made
                # since, so its last change tells that clock's offset (to
                # within a poll; the bound errs towards taking the copy).
                offset_ns = max(st.st_mtime_ns, st.st_ctime_ns) - time.time_ns()
                newest = newest_from_its_end(f.abspath, {ident} | f.left.idents(), f.left.read, self._chunk,
                                             watched_ns=f.watched_ns + offset_ns)
                found = [newest] if newest is not None and not self._followed(newest.path) else []
            self._read_siblings(f, found, out, follow_newest=True)
        f.fd = fd
        f.ident = ident
        f.restart()
        f.opened(st.st_size)
        f.error = None
        if f.ever_opened and f.gone and not f.rotated_away:
            out.append(TailNotice(f.path, "recreated", f"{f.path} recreated; reading the new file"))
        elif not f.ever_opened and f.announce:
            out.append(TailNotice(f.path, "appeared", f"{f.path} appeared"))
        f.ever_opened = True
        f.waiting_noted = f.rotated_away = False
        if f.attach_at_end:
            f.attach_at_end = False
            f.seek_to_last_line(self._chunk)
        return True

    def _read(self, f: Follower, out: list[Chunk | TailNotice], budget: int | None) -> None:
        assert f.fd is not None
        reads = 0
        while True:
            try:
                data = os.read(f.fd, self._chunk)
            except OSError as exc:
                self._error(f, out, f"read failed: {_reason(exc)}")
                return
            if not data:
                return
            got = len(data)
            f.read_on(data)
            self._split(f, data, out)
            reads += 1
            if got < self._chunk:
                redraw = f.splitter.latest_redraw()
                if redraw is not None:
                    out.append(Chunk(f.path, redraw + "\n", f.splitter.lineno, f.generation, partial=True))
                return  # a short read of a regular file is its current end
            if budget is not None and reads >= budget:
                self._backlog = True
                return

    def _split(self, f: Follower, data: bytes, out: list[Chunk | TailNotice]) -> None:
        """Bytes of ``f``'s stream into its lines (the NUL hole a writer
        without O_APPEND leaves after copytruncate skipped)."""
        if f.skip_nul:
            data = data.lstrip(b"\0")
            f.skip_nul = not data
        if data:
            self._out(f, f.splitter.feed(data), out)

    def _out(self, f: Follower, res: Split | None, out: list[Chunk | TailNotice]) -> None:
        if res is not None:
            self._cut_count += len(res[2])
            out.extend(emit(f.path, f.generation, res, self._max_line))

    def _error(self, f: Follower, out: list[Chunk | TailNotice], reason: str) -> None:
        if f.error != reason:
            f.error = reason
            out.append(TailNotice(f.path, "error", f"{f.path}: {reason}"))
