"""File-system events that tell the tailer *when* to look again (watchdog).

They never decide *what* happened: the tailer's stat by name does. inotify
misses writes on NFS/Lustre, coalesces events and can run out of watches,
so any failure here only means polling instead (with a notice), never a
different reading. Appends are found by the poll unless ``wake_on_writes``:
a run flushing ten times a second then costs the observer threads nothing,
since the kernel is never asked for those events.
"""

from __future__ import annotations

import fnmatch
import os
import threading
from collections.abc import Callable, Iterable

# Our own open() and other readers (``less train.log``) produce these; they
# never mean new data.
_QUIET_EVENTS = frozenset({"opened", "closed_no_write"})


def has_magic(text: str) -> bool:
    return any(c in text for c in "*?[")


def is_glob(name: str) -> bool:
    """Whether a log's name is a glob: it has wildcards and no file is
    called that. A sweep names its runs ``exp[lr=1e-4].log``; as a glob its
    ``[...]`` is a set of characters and matches no file (or another), and
    the watcher waited forever for the file the user named. The one rule
    for every reader of a name (the tailer, ``expand_logs``, the probes)."""
    return has_magic(name) and not os.path.lexists(os.path.expanduser(name))


def static_dir(pattern: str) -> str:
    """The deepest directory of a pattern that holds no wildcard."""
    parts = os.path.abspath(pattern).split(os.sep)
    keep: list[str] = []
    for part in parts[:-1]:
        if has_magic(part):
            break
        keep.append(part)
    return os.sep.join(keep) or os.sep


class Wakeups:
    """Watches the directories of followed names and globs; sets ``flag`` on news."""

    def __init__(self, *, wake_on_writes: bool, poll_interval: float, notice: Callable[[str], None]) -> None:
        self.flag = threading.Event()
        self.files: set[str] = set()  # absolute paths followed by name
        self.globs: list[str] = []  # absolute glob patterns
        self._wake_on_writes = wake_on_writes
        self._poll_interval = poll_interval
        self._notice = notice
        self._wake_dirs: set[str] = set()  # missing directories whose creation matters
        self._watches: dict[str, object] = {}
        self._observer: object | None = None
        self._event_filter: list[type] | None = None
        self._handler: object | None = None

    @property
    def active(self) -> bool:
        return self._observer is not None

    def start(self, dirs: Iterable[str]) -> None:
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

            wakeups = self

            class _Handler(FileSystemEventHandler):
                def on_any_event(self, event) -> None:  # type: ignore[no-untyped-def]
                    if event.event_type not in _QUIET_EVENTS:
                        wakeups.on_event(os.fsdecode(event.src_path), os.fsdecode(event.dest_path or ""))

            self._handler = _Handler()
            observer = Observer()
            observer.start()
            self._observer = observer
        except Exception as exc:  # noqa: BLE001 - any failure means: poll instead
            self._fall_back(exc)
            return
        self.sync(dirs)

    def on_event(self, src: str, dest: str) -> None:
        """Runs on the observer thread: only sets the flag, never touches tailer state."""
        for p in (src, dest):
            if not p:
                continue
            if p in self.files or p in self._wake_dirs or any(fnmatch.fnmatchcase(p, g) for g in self.globs):
                self.flag.set()
                return

    def _wanted(self, dirs: Iterable[str]) -> set[str]:
        wanted = set()
        for d in {*dirs, *(static_dir(g) for g in self.globs)}:
            while not os.path.isdir(d) and os.path.dirname(d) != d:
                self._wake_dirs.add(d)  # its creation should wake us
                d = os.path.dirname(d)
            wanted.add(d)
        return wanted

    def sync(self, dirs: Iterable[str]) -> None:
        """Watch exactly the directories that matter now (``dirs``: of followed files)."""
        observer = self._observer
        if observer is None:
            return
        try:
            wanted = self._wanted(dirs)
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
            self._fall_back(exc)

    def close(self) -> None:
        observer, self._observer = self._observer, None
        if observer is not None:
            try:
                observer.stop()  # type: ignore[attr-defined]
                observer.join(timeout=5)  # type: ignore[attr-defined]
            except Exception:  # noqa: BLE001 - closing must not fail
                pass
        self.flag.set()

    def _fall_back(self, exc: BaseException) -> None:
        observer, self._observer = self._observer, None
        self._watches.clear()
        if observer is not None:
            try:
                observer.stop()  # type: ignore[attr-defined]
            except Exception:  # noqa: BLE001
                pass
        detail = str(exc) or type(exc).__name__
        self._notice(f"file-system events unavailable ({detail}); checking every {self._poll_interval:g} s")
