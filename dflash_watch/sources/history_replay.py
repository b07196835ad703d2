"""Alerts a restarted watcher has already recorded: not printed or sent again.

A watcher that restarts (systemd, a crashed node agent, the user) reads its
logs from the start again, so every alert of the run so far fires a second
time. Those that the alert history already holds were shown and sent by the
watcher before: sending them again pages someone twice for one crash.

**The same episode.** An alert repeats one in the history when detector,
GPU, kind, rank, state and source are equal and, where the source names no
line (``gpu-samples``, ``probe``, ``job``), the time is too (to the
millisecond). A ``file:line`` source names the evidence itself: the same
line read again is the same episode, whatever time a live watcher gives it
(the wall clock at which it read the line). A source without a line is
only tied to its data by the data's time (a sample file read again).

Each record is matched at most once: a log that holds the same crash twice
(a crash loop writing to one file) is two records and two alerts, and a
crash that happens again after the restart has no record left to match,
so it is new. What this cannot tell apart: a log rewritten from its first
line while the watcher was down whose new crash lands on the very line of
an old one with the same kind and rank; the time (the log's stamps where
the alert carries them) settles it only for sources without a line.

Only the tail of the history is read (its last ``TAIL_LINES`` lines, at
most ``TAIL_BYTES``): what a restart re-reads is recent, and a history of
a year must not slow the start. A FIFO or device is never read.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections import deque
from pathlib import Path
from typing import Any

from dflash_watch.detectors.base import Alert

TAIL_BYTES = 8 << 20
TAIL_LINES = 20_000
_LINE_SOURCE = re.compile(r":\d+$")

EpisodeKey = tuple[Any, ...]


def episode_key(record: dict[str, Any]) -> EpisodeKey | None:
    """What makes an alert line the same episode as another (module doc); None if not an alert."""
    try:
        source = str(record.get("source") or "")
        evidence = record.get("evidence")
        evidence = evidence if isinstance(evidence, dict) else {}
        rank = record.get("rank")
        if rank is None:
            rank = evidence.get("rank")
        when = None if _LINE_SOURCE.search(source) else round(float(record["time"]), 3)
        return (record["detector"], record.get("gpu"), record.get("kind"), _plain(rank),
                record["state"], source, when)
    except (KeyError, TypeError, ValueError, OverflowError):
        return None


def _plain(value: Any) -> Any:
    """A hashable form of a JSON value (a rank is an int, but a file is data)."""
    return json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else value


class RecordedAlerts:
    """The alert lines at the end of a history file, to be matched once each."""

    def __init__(self, times: dict[EpisodeKey, deque[float]] | None = None) -> None:
        # Per episode key, the recorded times of its lines, oldest first.
        self._left: dict[EpisodeKey, deque[float]] = times if times is not None else {}
        self.total = sum(len(t) for t in self._left.values())

    @classmethod
    def read(cls, path: Path) -> RecordedAlerts:
        """The tail of ``path``; empty if it is missing, unreadable or not a regular file."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return cls()
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return cls()
            start = max(0, info.st_size - TAIL_BYTES)
            os.lseek(fd, start, os.SEEK_SET)
            chunks, size = [], 0
            while size < info.st_size - start:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        except OSError:
            return cls()
        finally:
            os.close(fd)
        lines = b"".join(chunks).split(b"\n")
        if start:
            lines = lines[1:]  # the first line was cut by the seek
        times: dict[EpisodeKey, deque[float]] = {}
        for raw in lines[-TAIL_LINES:]:
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except (ValueError, RecursionError):
                continue  # a torn or foreign line: nothing to match
            key = episode_key(record) if isinstance(record, dict) else None
            if key is not None:
                times.setdefault(key, deque()).append(float(record["time"]))
        return cls(times)

    def take(self, alert: Alert) -> float | None:
        """The recorded time of the line ``alert`` repeats (that record used up), else None.

        The recorded time is the episode's as the sinks saw it: a PagerDuty
        resolve after a restart must name the incident its firing opened."""
        if not self._left:
            return None
        key = episode_key(alert.to_dict())
        recorded = self._left.get(key) if key is not None else None
        if key is None or not recorded:
            return None
        when = recorded.popleft()
        if not recorded:
            del self._left[key]
        return when
