"""Follow training logs the way ``tail -F`` does, and read finished ones whole.

The name is the truth: every ``poll()`` stats each followed path by name and
compares what it finds with the descriptor it holds.  File-system events
(watchdog) only say *when* to look again; they never decide *what* happened,
because inotify misses writes on NFS/Lustre, coalesces events and can run out
of watches.  So a tailer without watchdog behaves exactly like one with it,
only with up to ``poll_interval`` more latency.

Bytes are split at the last ``b'\\n'`` of each read and decoded once per
chunk, never per line: most lines of a training log say nothing, and a
per-line loop here would cost more than the rest of the pipeline together.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import stat
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

MiB = 1 << 20

# Chunks read per file per poll.  More data stays for the next poll (``wait``
# then returns at once), so a 10 GB backlog never lands in one list.
_POLL_CHUNKS = 8

# Our own open() and other readers (``less train.log``) produce these; they
# never mean new data.
_QUIET_EVENTS = frozenset({"opened", "closed_no_write"})


@dataclass(frozen=True, slots=True)
class Chunk:
    """Complete lines from one file; ``text`` ends in ``'\\n'``, CRLF and ``'\\r'`` kept.

    ``partial`` chunks are the exception: the latest ``'\\r'`` redraw of a
    line that has no newline yet (a tqdm bar that only ends with its
    epoch), so that a live watch sees progress during the epoch. They carry
    the line's number but are not lines: the complete line still comes
    later as an ordinary chunk.
    """

    path: str
    text: str
    first_lineno: int
    generation: int
    partial: bool = False


@dataclass(frozen=True, slots=True)
class TailNotice:
    """A state change worth telling a person about (not log content)."""

    path: str
    kind: str  # waiting | appeared | rotated | truncated | recreated | deleted | cut_line | error
    message: str


def _fmt_size(n: int) -> str:
    if n >= MiB:
        value, unit = n / MiB, "MiB"
    elif n >= 1024:
        value, unit = n / 1024, "KiB"
    else:
        return f"{n} B"
    text = f"{value:.1f}"
    return f"{text[:-2] if text.endswith('.0') else text} {unit}"


def _trim_utf8(head: bytes) -> bytes:
    """Drop a multi-byte character cut in half at the end, so a cut line ends cleanly."""
    end = len(head)
    back = 0
    while back < 3 and end - back > 0 and (head[end - back - 1] & 0xC0) == 0x80:
        back += 1
    if end - back > 0:
        lead = head[end - back - 1]
        need = 2 if 0xC0 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else 4 if lead >= 0xF0 else 1
        if back + 1 < need:
            return head[: end - back - 1]
    return head


class _LineSplitter:
    """Turns a byte stream into decoded runs of complete lines, bounded in memory.

    A partial last line is kept as bytes (so a UTF-8 character split across
    writes decodes whole).  A line longer than ``max_line`` keeps only its
    head; the rest is counted and dropped until its newline arrives.
    """

    __slots__ = ("max_line", "lineno", "pending", "cut_head", "cut_dropped", "tail", "tail_new")

    # How much of an unfinished line's end is kept for its latest redraw.
    TAIL = 4096

    def __init__(self, max_line: int, lineno: int = 1) -> None:
        self.max_line = max_line
        self.lineno = lineno
        self.pending = bytearray()
        self.cut_head: bytes | None = None
        self.cut_dropped = 0
        # The last bytes of the unfinished line, kept even when the line is
        # cut (an epoch-long tqdm line passes 1 MiB; its newest state is at
        # its end), and whether they changed since latest_redraw() last ran.
        self.tail = b""
        self.tail_new = False

    def latest_redraw(self) -> str | None:
        """The newest ``'\\r'``-separated state of the unfinished line, once per change."""
        if not self.tail_new or b"\r" not in self.tail:
            return None
        self.tail_new = False
        parts = [p for p in self.tail.split(b"\r") if p.strip()]
        if not parts:
            return None
        return str(parts[-1], "utf-8", "replace")

    @property
    def buffered(self) -> int:
        return len(self.pending) + (len(self.cut_head) if self.cut_head is not None else 0)

    def feed(self, data: bytes) -> tuple[str, int, list[tuple[int, int]]] | None:
        """Returns (text, first_lineno, [(lineno, full_length) of cut lines]) or None."""
        out: list[bytes] = []
        cuts: list[tuple[int, int]] = []
        if self.cut_head is not None:
            nl = data.find(b"\n")
            if nl < 0:
                self.cut_dropped += len(data)
                self._keep_tail(data)
                return None
            self.cut_dropped += nl
            out.append(self._finish_cut(self.lineno, cuts))
            data = data[nl + 1 :]
        last = data.rfind(b"\n")
        if last < 0:
            self._hold(data)
            return self._result(out, cuts)
        body = data[: last + 1]
        first_nl = body.find(b"\n")
        pending = self.pending
        if len(pending) + first_nl <= self.max_line and last - first_nl <= self.max_line:
            # No line can be over-long: the common case, no per-line work.
            out.append(pending + body if pending else body)
        else:
            out.extend(self._split_long(bytes(pending) + body, self.lineno + len(out), cuts))
        self.pending = bytearray()
        self._hold(data[last + 1 :])
        return self._result(out, cuts)

    def finish(self) -> tuple[str, int, list[tuple[int, int]]] | None:
        """Ends the stream: a last line without its newline is emitted with one."""
        cuts: list[tuple[int, int]] = []
        out: list[bytes] = []
        if self.cut_head is not None:
            out.append(self._finish_cut(self.lineno, cuts))
        elif self.pending:
            out.append(bytes(self.pending) + b"\n")
            self.pending = bytearray()
        return self._result(out, cuts)

    def _keep_tail(self, data: bytes, fresh: bool = False) -> None:
        self.tail = (data if fresh else self.tail + data)[-self.TAIL :]
        self.tail_new = True

    def _hold(self, rest: bytes) -> None:
        if not rest:
            if self.tail:
                self.tail, self.tail_new = b"", False
            return
        self._keep_tail(rest, fresh=not self.pending)
        self.pending += rest
        if len(self.pending) > self.max_line:
            self.cut_head = _trim_utf8(bytes(self.pending[: self.max_line]))
            self.cut_dropped = len(self.pending) - len(self.cut_head)
            self.pending = bytearray()

    def _finish_cut(self, lineno: int, cuts: list[tuple[int, int]]) -> bytes:
        head = self.cut_head or b""
        cuts.append((lineno, len(head) + self.cut_dropped))
        line = head + f" …[cut {_fmt_size(self.cut_dropped)}]\n".encode()
        self.cut_head = None
        self.cut_dropped = 0
        return line

    def _split_long(self, buf: bytes, lineno: int, cuts: list[tuple[int, int]]) -> list[bytes]:
        res: list[bytes] = []
        seg = start = 0
        n = len(buf)
        while start < n:
            nl = buf.find(b"\n", start)
            if nl - start > self.max_line:
                if seg < start:
                    res.append(buf[seg:start])
                head = _trim_utf8(buf[start : start + self.max_line])
                dropped = nl - start - len(head)
                cuts.append((lineno, nl - start))
                res.append(head + f" …[cut {_fmt_size(dropped)}]\n".encode())
                seg = nl + 1
            start = nl + 1
            lineno += 1
        if seg < n:
            res.append(buf[seg:])
        return res

    def _result(
        self, out: list[bytes], cuts: list[tuple[int, int]]
    ) -> tuple[str, int, list[tuple[int, int]]] | None:
        if not out:
            return None
        joined = out[0] if len(out) == 1 else b"".join(out)
        first = self.lineno
        self.lineno += joined.count(b"\n")
        return str(joined, "utf-8", "replace"), first, cuts


def _emit(
    path: str, generation: int, res: tuple[str, int, list[tuple[int, int]]] | None, max_line: int
) -> list[Chunk | TailNotice]:
    if res is None:
        return []
    text, first, cuts = res
    items: list[Chunk | TailNotice] = [Chunk(path, text, first, generation)]
    for lineno, length in cuts:
        msg = f"{path}: line {lineno} cut at {_fmt_size(max_line)} ({_fmt_size(length)} long)"
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
    splitter = _LineSplitter(max_line_bytes)
    with open(path, "rb", buffering=0) as fh:
        while data := fh.read(chunk_bytes):
            yield from _emit(path, 0, splitter.feed(data), max_line_bytes)
        yield from _emit(path, 0, splitter.finish(), max_line_bytes)


class _Follower:
    """One followed name and the incarnation (inode) currently open for it."""

    __slots__ = (
        "path", "abspath", "fd", "ident", "offset", "splitter", "generation",
        "attach_at_end", "announce", "ever_opened", "waiting_noted", "gone", "error", "skip_nul",
        "last_byte",
    )

    def __init__(self, path: str, max_line: int, attach_at_end: bool, announce: bool) -> None:
        self.path = path
        self.abspath = os.path.abspath(path)
        self.fd: int | None = None
        self.ident: tuple[int, int] = (0, 0)
        self.offset = 0
        self.splitter = _LineSplitter(max_line)
        self.generation = 0
        self.attach_at_end = attach_at_end
        self.announce = announce  # say 'appeared' when first opened
        self.ever_opened = False
        self.waiting_noted = False
        self.gone = False  # the name vanished while we still hold the old descriptor
        self.error: str | None = None  # last reported reason, to report each reason once
        self.skip_nul = False  # after copytruncate a non-O_APPEND writer leaves a NUL hole
        self.last_byte = b""  # the byte before ``offset`` as we read it: a changed one means rewritten


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _has_magic(text: str) -> bool:
    return any(c in text for c in "*?[")


def _static_dir(pattern: str) -> str:
    """The deepest directory of a pattern that holds no wildcard."""
    parts = os.path.abspath(pattern).split(os.sep)
    keep: list[str] = []
    for part in parts[:-1]:
        if _has_magic(part):
            break
        keep.append(part)
    return os.sep.join(keep) or os.sep


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
        self._event_filter: list[type] | None = None
        self._followers: dict[str, _Follower] = {}
        self._globs: list[str] = []
        self._globs_noted: set[str] = set()
        self._globs_abs: list[str] = []
        self._first_poll = True
        self._cut_count = 0
        self._backlog = False
        self._closed = False
        self._notices: list[Chunk | TailNotice] = []
        self._flag = threading.Event()
        self._observer: object | None = None
        self._watches: dict[str, object] = {}
        self._wake_dirs: set[str] = set()  # missing directories whose creation matters
        self._abs_files: set[str] = set()
        for raw in patterns:
            pat = os.path.expanduser(raw)
            if _has_magic(pat):
                self._globs.append(pat)
                self._globs_abs.append(os.path.abspath(pat))
            else:
                self._add(pat, attach_at_end=not from_start, announce=False)
        if use_watchdog:
            self._start_observer()

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
        if self._observer is not None:
            self._sync_watches(out)
        for f in list(self._followers.values()):
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
        observer, self._observer = self._observer, None
        if observer is not None:
            try:
                observer.stop()  # type: ignore[attr-defined]
                observer.join(timeout=5)  # type: ignore[attr-defined]
            except Exception:  # noqa: BLE001 - closing must not fail
                pass
        for f in self._followers.values():
            self._close_fd(f)
        self._flag.set()

    def __enter__(self) -> LogTailer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- discovery ---------------------------------------------------

    def _add(self, path: str, *, attach_at_end: bool, announce: bool) -> None:
        key = os.path.normpath(path)
        if key in self._followers:
            return
        f = _Follower(path, self._max_line, attach_at_end, announce)
        self._followers[key] = f
        self._abs_files.add(f.abspath)

    def _discover(self, out: list[Chunk | TailNotice]) -> None:
        for pat in self._globs:
            matches = sorted(glob.glob(pat, recursive=True))
            if not matches and pat not in self._globs_noted:
                self._globs_noted.add(pat)
                out.append(TailNotice(pat, "waiting", f"waiting for {pat} to match a file"))
            for m in matches:
                self._globs_noted.add(pat)
                self._add(m, attach_at_end=self._first_poll and not self._from_start,
                          announce=not self._first_poll)

    # ---- one file ----------------------------------------------------

    def _poll_one(self, f: _Follower, out: list[Chunk | TailNotice]) -> None:
        try:
            st: os.stat_result | None = os.stat(f.path)
        except (FileNotFoundError, NotADirectoryError):
            st = None
        except OSError as exc:
            self._error(f, out, f"cannot stat: {_reason(exc)}")
            if f.fd is not None:
                self._read(f, out, budget=_POLL_CHUNKS)
            return
        if st is None:
            self._name_missing(f, out)
            return
        if stat.S_ISDIR(st.st_mode):
            self._error(f, out, "is a directory")
            return
        if f.fd is not None and (st.st_dev, st.st_ino) != f.ident:
            self._replaced(f, out)
        elif f.fd is not None and self._rewritten(f, st.st_size):
            self._end_incarnation(f, out)
            os.lseek(f.fd, 0, os.SEEK_SET)
            f.offset = 0
            f.skip_nul = True
            out.append(TailNotice(f.path, "truncated", f"{f.path} truncated (copytruncate); reading from the start"))
        if f.fd is None and not self._open(f, out):
            return
        f.gone = False  # (it may have been renamed back)
        self._read(f, out, budget=_POLL_CHUNKS)

    def _rewritten(self, f: _Follower, size: int) -> bool:
        """copytruncate: the file shrank, or (a writer without O_APPEND refilled it past
        our offset before we looked) the byte we last read is no longer there."""
        if size < f.offset:
            return True
        if size == f.offset or f.offset == 0:
            return False
        try:
            return os.pread(f.fd, 1, f.offset - 1) != f.last_byte  # type: ignore[arg-type]
        except OSError:
            return False

    def _name_missing(self, f: _Follower, out: list[Chunk | TailNotice]) -> None:
        if f.fd is not None:
            deleted = self._nlink(f) == 0
            # A renamed file may still get lines until its writer reopens the name: keep
            # following it.  A deleted one is drained and closed, or we would pin its disk space.
            self._read(f, out, budget=None if deleted else _POLL_CHUNKS)
            if not f.gone:
                if deleted:
                    out.append(TailNotice(f.path, "deleted", f"{f.path} deleted; waiting for it to come back"))
                else:
                    out.append(TailNotice(f.path, "rotated", f"{f.path} rotated; waiting for the new file"))
            if deleted:
                self._end_incarnation(f, out)
                self._close_fd(f)
            f.gone = True
        elif not f.ever_opened:
            f.attach_at_end = False  # it did not exist at attach: all of it is new
            if not f.waiting_noted:
                f.waiting_noted = True
                f.announce = True
                out.append(TailNotice(f.path, "waiting", f"waiting for {f.path} to appear"))

    def _replaced(self, f: _Follower, out: list[Chunk | TailNotice]) -> None:
        """The name now points at another inode: finish the old one, then switch."""
        self._read(f, out, budget=None)
        deleted = self._nlink(f) == 0
        was_gone = f.gone
        self._end_incarnation(f, out)
        self._close_fd(f)
        if was_gone or deleted:
            out.append(TailNotice(f.path, "recreated", f"{f.path} recreated; reading the new file"))
        else:
            out.append(TailNotice(f.path, "rotated", f"{f.path} rotated; following the new file"))

    def _end_incarnation(self, f: _Follower, out: list[Chunk | TailNotice]) -> None:
        self._out(f, f.splitter.finish(), out)
        f.generation += 1
        f.splitter = _LineSplitter(self._max_line)
        f.gone = False

    def _open(self, f: _Follower, out: list[Chunk | TailNotice]) -> bool:
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
        f.fd = fd
        f.ident = (st.st_dev, st.st_ino)
        f.offset = 0
        f.error = None
        if f.ever_opened and f.gone:  # deleted earlier, back now (a relaunched run)
            out.append(TailNotice(f.path, "recreated", f"{f.path} recreated; reading the new file"))
        elif not f.ever_opened and f.announce:
            out.append(TailNotice(f.path, "appeared", f"{f.path} appeared"))
        f.ever_opened = True
        if f.attach_at_end:
            f.attach_at_end = False
            self._seek_to_last_line(f)
        return True

    def _seek_to_last_line(self, f: _Follower) -> None:
        """Live attach: skip history but keep true line numbers and the line being written."""
        assert f.fd is not None
        lines = pos = start = 0
        while data := os.read(f.fd, self._chunk):
            lines += data.count(b"\n")
            last = data.rfind(b"\n")
            if last >= 0:
                start = pos + last + 1
            pos += len(data)
        os.lseek(f.fd, start, os.SEEK_SET)
        f.offset = start
        f.last_byte = b"\n" if start else b""
        f.splitter.lineno = lines + 1

    def _read(self, f: _Follower, out: list[Chunk | TailNotice], budget: int | None) -> None:
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
            f.offset += got
            f.last_byte = data[-1:]
            if f.skip_nul:
                data = data.lstrip(b"\0")
                f.skip_nul = not data
            if data:
                self._out(f, f.splitter.feed(data), out)
            reads += 1
            if got < self._chunk:
                redraw = f.splitter.latest_redraw()
                if redraw is not None:
                    out.append(Chunk(f.path, redraw + "\n", f.splitter.lineno, f.generation, partial=True))
                return  # a short read of a regular file is its current end
            if budget is not None and reads >= budget:
                self._backlog = True
                return

    def _out(self, f: _Follower, res: tuple[str, int, list[tuple[int, int]]] | None,
             out: list[Chunk | TailNotice]) -> None:
        if res is not None:
            self._cut_count += len(res[2])
            out.extend(_emit(f.path, f.generation, res, self._max_line))

    def _nlink(self, f: _Follower) -> int:
        try:
            return os.fstat(f.fd).st_nlink if f.fd is not None else 0
        except OSError:
            return 0

    def _close_fd(self, f: _Follower) -> None:
        if f.fd is not None:
            try:
                os.close(f.fd)
            except OSError:
                pass
            f.fd = None

    def _error(self, f: _Follower, out: list[Chunk | TailNotice], reason: str) -> None:
        if f.error != reason:
            f.error = reason
            out.append(TailNotice(f.path, "error", f"{f.path}: {reason}"))

    # ---- wake-ups ----------------------------------------------------

    def _start_observer(self) -> None:
        try:
            from watchdog.events import (
                DirCreatedEvent,
                DirDeletedEvent,
                DirMovedEvent,
                FileClosedEvent,
                FileCreatedEvent,
                FileDeletedEvent,
                FileModifiedEvent,
                FileMovedEvent,
                FileSystemEventHandler,
            )
            from watchdog.observers import Observer

            # Asked of the kernel (the inotify mask): opens and reads, ours
            # included, never reach Python at all.
            events: list[type] = [
                FileCreatedEvent, FileDeletedEvent, FileMovedEvent, DirCreatedEvent, DirDeletedEvent, DirMovedEvent,
            ]
            if self._wake_on_writes:
                events += [FileModifiedEvent, FileClosedEvent]
            self._event_filter = events

            tailer = self

            class _Handler(FileSystemEventHandler):
                def on_any_event(self, event) -> None:  # type: ignore[no-untyped-def]
                    if event.event_type not in _QUIET_EVENTS:
                        tailer._on_event(os.fsdecode(event.src_path), os.fsdecode(event.dest_path or ""))

            self._handler = _Handler()
            observer = Observer()
            observer.start()
            self._observer = observer
        except Exception as exc:  # noqa: BLE001 - any failure means: poll instead
            self._fall_back(exc)
            return
        self._sync_watches(self._notices)

    def _on_event(self, src: str, dest: str) -> None:
        """Runs on the observer thread: only sets the flag, never touches follower state."""
        for p in (src, dest):
            if not p:
                continue
            if p in self._abs_files or p in self._wake_dirs or any(
                fnmatch.fnmatchcase(p, g) for g in self._globs_abs
            ):
                self._flag.set()
                return

    def _wanted_dirs(self) -> set[str]:
        dirs = {os.path.dirname(f.abspath) for f in self._followers.values()}
        dirs.update(_static_dir(g) for g in self._globs_abs)
        wanted = set()
        for d in dirs:
            while not os.path.isdir(d) and os.path.dirname(d) != d:
                self._wake_dirs.add(d)  # its creation should wake us
                d = os.path.dirname(d)
            wanted.add(d)
        return wanted

    def _sync_watches(self, out: list[Chunk | TailNotice]) -> None:
        observer = self._observer
        if observer is None:
            return
        try:
            wanted = self._wanted_dirs()
            for d in list(self._watches):
                if d not in wanted:
                    watch = self._watches.pop(d)
                    try:
                        observer.unschedule(watch)  # type: ignore[attr-defined]
                    except Exception:  # noqa: BLE001 - the emitter may have gone with its directory
                        pass
            for d in wanted - self._watches.keys():
                self._watches[d] = observer.schedule(  # type: ignore[attr-defined]
                    self._handler, d, recursive=False, event_filter=self._event_filter
                )
        except Exception as exc:  # noqa: BLE001 - e.g. inotify watch limit: poll instead
            self._fall_back(exc, out)

    def _fall_back(self, exc: BaseException, out: list[Chunk | TailNotice] | None = None) -> None:
        observer, self._observer = self._observer, None
        self._watches.clear()
        if observer is not None:
            try:
                observer.stop()  # type: ignore[attr-defined]
            except Exception:  # noqa: BLE001
                pass
        detail = str(exc) or type(exc).__name__
        msg = f"file-system events unavailable ({detail}); checking every {self._poll_interval:g} s"
        (self._notices if out is None else out).append(TailNotice("", "error", msg))
