"""The alert history file: every alert as one JSON line (CONTRACTS section 2).

Appended as alerts happen so that `tail -f`, a log shipper or `jq` can
follow it; a write that fails is said once and never stops the watch.

Durable per alert: each line is one ``write`` on a descriptor opened with
``O_APPEND`` (the line lands whole at the end, even beside another writer)
and is ``fsync``ed before the Monitor hands the alert to anyone else (the
history subscribes first), so after a ``kill -9`` of the watcher, or the
machine losing power, every alert that was shown or sent is in the file.
The file is opened per alert: alerts are rare, and a history file that
was rotated or deleted is simply created again.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from detectors.base import Alert


class AlertHistory:
    def __init__(self, path: str, on_notice: Callable[[str], None] | None = None) -> None:
        self.path = Path(path).expanduser()
        self._on_notice = on_notice
        self._failed = False
        self._dir_synced = False
        self.written = 0

    def write(self, alert: Alert) -> None:
        data = (alert.to_json() + "\n").encode("utf-8")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            if not self._dir_synced:
                self._sync_dir()
            self.written += 1
            self._failed = False
        except OSError as exc:
            if not self._failed and self._on_notice is not None:
                self._on_notice(f"cannot write the alert history {self.path}: {exc.strerror or exc}")
            self._failed = True

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
