"""The alert history file: every alert as one JSON line (CONTRACTS section 2).

Appended as alerts happen so that `tail -f`, a log shipper or `jq` can
follow it. It is an output like the others, and an output never stalls the
watch: the lines are written by a thread of their own from a bounded queue,
never under the Monitor's lock. A FIFO that nobody reads, a full disk or a
hung NFS server cost the detectors, stdout, the sinks and /metrics nothing.

Durable per alert, when the disk keeps up: the Monitor calls ``write``
(the history subscribes first) and it waits until the line is ``fsync``ed
before the alert goes on to stdout and the sinks, so after a ``kill -9`` of
the watcher, or the machine losing power, every alert that was shown or
sent is in the file. That wait is bounded (``wait_s``): a write that has
not finished by then is said once and later alerts no longer wait for the
history until it has caught up; a write that fails (ENOSPC, a FIFO without
a reader) is said once and later alerts do not wait while it fails.

Lines that could not be written are kept (at most ``keep`` lines and
``KEEP_BYTES``; beyond that the newest are counted and not kept, so the
file stays in order) and written,
whole (``history_file``), when the file takes them again; that is said with
how many came late. At close, what is still unwritten gets one last try
and is counted in a notice. Alerts that the history already held when the
watcher started (a restart reads its logs again) are not written, printed
or sent again: see ``history_replay`` for what "the same episode" means.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from dflash_watch.detectors.base import Alert

from .history_file import LineAppender, reason
from .history_replay import RecordedAlerts

Listener = Callable[[Alert], None]
CLOSE_BOUND_S = 2.0
# Alerts with tracebacks in their evidence run to a few KB: 10,000 of them
# held for a full disk must not grow the watcher without bound either.
KEEP_BYTES = 32 << 20


def _alerts(n: int) -> str:
    return f"{n} alert{'' if n == 1 else 's'}"


class AlertHistory:
    """The Monitor listener that appends alerts to ``path``, on its own thread."""

    def __init__(self, path: str, on_notice: Callable[[str], None] | None = None, *, keep: int = 10_000,
                 wait_s: float = 1.0, retry_s: float = 2.0) -> None:
        self.path = Path(path).expanduser()
        self._on_notice = on_notice
        self.keep = keep
        self.wait_s = wait_s
        self.retry_s = retry_s
        self.written = 0  # lines written, late ones included
        self.lost = 0  # alerts never written: over ``keep``, or after close
        self.skipped = 0  # alerts already in the history at start
        self._file = LineAppender(self.path)
        self._recorded = RecordedAlerts.read(self.path)
        # The last alerts judged "already recorded?" by identity: every
        # listener of one alert asks about the same object, and a record
        # must be used up once, not once per listener.
        self._judged: deque[tuple[Alert, float | None]] = deque(maxlen=8)
        self._cond = threading.Condition()
        self._pending: deque[bytes] = deque()
        self._pending_bytes = 0
        self._queued = 0  # number of the last line queued
        self._settled = 0  # number of the last line tried (written or not)
        self._failing: str | None = None  # why the last write failed
        self._late = 0  # lines written since the writes began to fail
        self._behind = False  # a write outlasted ``wait_s``: alerts stop waiting
        self._closing = False
        self._said_full = False
        self._thread = threading.Thread(target=self._run, name="alert-history", daemon=True)
        self._thread.start()

    # -- the Monitor's side ---------------------------------------------------
    def write(self, alert: Alert) -> None:
        """Queue ``alert``'s line; wait (bounded) for it to be on disk."""
        if self.already_recorded(alert):
            return
        line = (alert.to_json() + "\n").encode("utf-8")
        say: str | None = None
        with self._cond:
            full = len(self._pending) >= self.keep or self._pending_bytes + len(line) > KEEP_BYTES
            if self._closing or full:
                self.lost += 1
                if not self._closing and not self._said_full:
                    self._said_full = True
                    say = (f"alert history {self.path}: {self.keep} alerts wait to be written; "
                           "newer ones are not kept (they will be counted)")
            else:
                self._pending.append(line)
                self._pending_bytes += len(line)
                self._queued += 1
                seq = self._queued
                self._cond.notify_all()
                waits = self._failing is None and not self._behind
                if waits and not self._cond.wait_for(lambda: self._settled >= seq, self.wait_s):
                    self._behind = True
                    say = (f"alert history {self.path}: a write has not finished after {self.wait_s:g} s "
                           "(a hung disk?); alerts go on without waiting for it")
        if say:
            self._say(say)

    def already_recorded(self, alert: Alert) -> bool:
        """Whether ``alert`` repeats one the history held when the watcher started."""
        return self.recorded_time(alert) is not None

    def recorded_time(self, alert: Alert) -> float | None:
        """The time the history recorded ``alert`` with, if it repeats a line of it."""
        for seen, when in self._judged:
            if seen is alert:
                return when
        when = self._recorded.take(alert)
        self._judged.append((alert, when))
        if when is not None:
            self.skipped += 1
            if self.skipped == 1:
                self._say(f"alert history {self.path}: alerts it already holds from before this start "
                          f"are not printed or sent again (first: {alert.detector} at {alert.source})")
        return when

    def gate(self, listener: Listener, skipped: Listener | None = None) -> Listener:
        """``listener``, called only for alerts not already in the history (a restart);
        ``skipped`` gets the others, with the time they were recorded with."""

        def fresh(alert: Alert) -> None:
            when = self.recorded_time(alert)
            if when is None:
                listener(alert)
            elif skipped is not None:
                skipped(replace(alert, time=when))

        return fresh

    # -- the writer thread ----------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                if self._failing is None:
                    self._cond.wait_for(lambda: self._pending or self._closing)
                else:  # retry later, or at once when closing
                    self._cond.wait_for(lambda: self._closing, self.retry_s)
                if not self._pending:
                    if self._closing:
                        return
                    continue
                batch, upto, last = list(self._pending), self._queued, self._closing
            written, error = self._file.append(batch)
            with self._cond:
                for _ in range(written):
                    self._pending_bytes -= len(self._pending.popleft())
                self.written += written
                self._settled = upto
                notes = self._account(written, error)
                self._cond.notify_all()
            for message in notes:
                self._say(message)
            if last and error is not None:
                return

    def _account(self, written: int, error: OSError | None) -> list[str]:
        """Under the lock: the state after a write, and what to say about it."""
        notes = []
        if error is not None:
            if self._failing is None:
                notes.append(f"alert history {self.path}: cannot write ({reason(error)}); alerts go on, "
                             f"and up to {self.keep} are kept to write when it can")
            self._failing = reason(error)
            self._late += written
            return notes
        if self._failing is not None:
            late = self._late + written
            lost = f"; {_alerts(self.lost)} were not kept" if self.lost else ""
            notes.append(f"alert history {self.path}: written again, {_alerts(late)} written late{lost}")
            self._failing, self._late, self._said_full = None, 0, False
        elif self._behind and not self._pending:
            notes.append(f"alert history {self.path}: caught up")
        if not self._pending:
            self._behind = False
        return notes

    def _say(self, message: str) -> None:
        if self._on_notice is not None:
            self._on_notice(message)

    # -- leaving ----------------------------------------------------------------
    def pending(self) -> int:
        with self._cond:
            return len(self._pending)

    def close(self, timeout: float = 2.0) -> None:
        """One last try for what is unwritten (within ``timeout``); say what was not."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        # Bounded on its own: a hung disk must not eat the sinks' time at exit.
        self._thread.join(max(0.0, min(timeout, CLOSE_BOUND_S)))
        if not self._thread.is_alive():
            self._file.close()
        with self._cond:
            left, why = len(self._pending), self._failing
        if left:
            cause = f" ({why})" if why else " (the write did not finish)"
            self._say(f"alert history {self.path}: {_alerts(left)} not written when the watcher stopped{cause}")
