"""The sink dispatcher: one worker thread and one bounded queue per sink.

The Monitor calls ``Dispatcher.offer`` under its lock on the ingest thread,
so ``offer`` only filters and enqueues (never a socket, never a wait):
a sink that hangs or refuses costs the detectors and the screen nothing.
Each sink has its own worker, so a hanging Slack never delays PagerDuty.
A worker sends in order (a PagerDuty resolve after its trigger), retries a
failure with exponential backoff, and says every failure as a Monitor
notice: headless prints notices on stderr, the dashboard shows them.
Nothing is dropped without a notice that counts it (a full queue, the
rate limit, a sink that cannot work here, what ``close`` could not send).

Leaving keeps the backoff: ``close`` gives an alert waiting out its backoff
one last try at once, and a sink that fails while the watcher is leaving
is not asked again (a webhook answering 500 gets one more request, not a
retry storm until the deadline). Every alert a sink accepted and never
delivered is counted exactly once (``SinkWorker.dropped_total``): for
``dflash_alerts_dropped_total{sink}`` while running, and in one line per
sink when the watcher stops.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable

from dflash_watch.detectors.base import Alert

from .senders import DeliveryError, Sender, build_sender, secret_names
from .settings import SinkConfig

Note = Callable[[str], None]
RATE_WINDOW_S = 60.0


def _what(alert: Alert) -> str:
    gpu = f" gpu{alert.gpu}" if alert.gpu is not None else ""
    return f"the {alert.detector}{gpu} alert ({alert.state})"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


class SinkWorker:
    """One sink: its filters, its rate limit, its queue and its thread."""

    def __init__(self, sink: SinkConfig, sender: Sender, note: Note,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.sink = sink
        self.sender = sender
        self.where = sink.where()
        self._note = note
        self._clock = clock
        self.queue: queue.Queue[Alert] = queue.Queue(maxsize=sink.queue_size)
        self.delivered = 0
        self.failed = 0
        self.dropped = 0  # the queue was full
        self.limited = 0  # over max_per_minute
        self.unsent = 0  # the sender cannot work here
        self.at_exit = 0  # still queued or in flight when ``close`` ended
        self.last_error: str | None = None
        # The sink failed while the watcher was leaving: it is not asked again.
        self._down = False
        self._limited_run = 0
        self._dropped_run = 0
        self._limited_keys: set[tuple] = set()
        self._sent_at: deque[float] = deque()
        self._inflight: Alert | None = None
        self._closing = threading.Event()
        self._deadline = float("inf")
        self._counted = False
        self.thread = threading.Thread(target=self._run, name=f"sink-{sink.name}", daemon=True)

    # -- the Monitor's side: never blocks ------------------------------------
    def offer(self, alert: Alert) -> None:
        if not self.sink.wants(alert.detector, alert.severity, alert.state):
            return
        if self._counted:  # after ``close``: nobody will send it
            self.at_exit += 1
            return
        if self.sender.unavailable:
            self.unsent += 1
            return
        if not self._within_rate(alert):
            return
        try:
            self.queue.put_nowait(alert)
        except queue.Full:
            self.dropped += 1
            self._dropped_run += 1
            if self._dropped_run == 1:
                self._note(f"{self.where}: {self.sink.queue_size} deliveries pending, queue full: "
                           f"{_what(alert)} dropped (more will be counted)")
            return
        if self._dropped_run > 1:
            self._note(f"{self.where}: queue full, {_plural(self._dropped_run, 'alert')} dropped in all")
        self._dropped_run = 0

    def _within_rate(self, alert: Alert) -> bool:
        """``max_per_minute`` over firing alerts; a resolve goes where its firing went."""
        limit = self.sink.max_per_minute
        if limit is None:
            return True
        if alert.state == "resolved":
            if alert.key in self._limited_keys:
                self._limited_keys.discard(alert.key)
                self.limited += 1
                return False
            return True
        now = self._clock()
        while self._sent_at and now - self._sent_at[0] >= RATE_WINDOW_S:
            self._sent_at.popleft()
        if len(self._sent_at) >= limit:
            self.limited += 1
            self._limited_run += 1
            self._limited_keys.add(alert.key)
            if self._limited_run == 1:
                self._note(f"{self.where}: rate limit max_per_minute = {limit} reached: "
                           f"{_what(alert)} not sent (more will be counted)")
            return False
        if self._limited_run:
            self._note(f"{self.where}: {_plural(self._limited_run, 'alert')} over the rate limit not sent")
            self._limited_run = 0
        self._sent_at.append(now)
        return True

    # -- the worker thread ---------------------------------------------------
    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                alert = self.queue.get(timeout=0.1)
            except queue.Empty:
                if self._closing.is_set():
                    return
                continue
            self._inflight = alert
            done = self._deliver(alert)
            if done:
                self._inflight = None
            if not done or self._down or self._clock() >= self._deadline:
                return

    def _deliver(self, alert: Alert) -> bool:
        """Send with retries; False only when ``close``'s deadline cut it short."""
        sink = self.sink
        attempt = 0
        while True:
            timeout = sink.timeout_s
            leaving = self._closing.is_set()
            if leaving:
                left = self._deadline - self._clock()
                if left <= 0:
                    return False
                timeout = min(timeout, left)
            try:
                self.sender.send(alert, timeout)
            except DeliveryError as exc:
                reason, retry = exc.reason, exc.retry
            except Exception as exc:  # noqa: BLE001 - a sender bug must not end the worker
                reason, retry = f"{type(exc).__name__}", False
            else:
                self.delivered += 1
                if attempt:
                    self._note(f"{self.where}: delivered {_what(alert)} on retry {attempt}")
                return True
            self.last_error = reason
            if leaving:
                # Leaving: its backoff would outlast us, and retrying at once
                # is a storm. This alert and those queued behind it are not
                # delivered (``close`` counts them), the sink is not asked again.
                self._down = True
                return False
            if not retry or attempt >= sink.retries:
                self.failed += 1
                tries = _plural(attempt + 1, "attempt")
                self._note(f"{self.where}: could not deliver {_what(alert)}: {reason} "
                           f"(gave up after {tries})")
                return True
            delay = sink.backoff_s * (2 ** attempt)
            attempt += 1
            self._note(f"{self.where}: delivery of {_what(alert)} failed: {reason}; "
                       f"retry {attempt}/{sink.retries} in {delay:g} s")
            # ``close`` cuts the wait short: the last chance comes at once.
            self._closing.wait(delay)

    def begin_close(self, deadline: float) -> None:
        self._deadline = deadline
        self._closing.set()

    def pending(self) -> int:
        """Alerts accepted but not (yet) delivered or given up on."""
        return self.queue.qsize() + (1 if self._inflight is not None else 0)

    @property
    def dropped_total(self) -> int:
        """Alerts this sink accepted (past its filters) and will never deliver."""
        return self.failed + self.dropped + self.limited + self.unsent + self.at_exit

    def count_at_exit(self) -> None:
        """After the worker stopped: what it still held is dropped, counted once."""
        self.at_exit += self.pending()
        while True:
            try:
                self.queue.get_nowait()
            except queue.Empty:
                break
        self._inflight = None
        self._counted = True

    def dropped_line(self) -> str | None:
        """The exit line of this sink: how many it dropped and why; None if none."""
        total = self.dropped_total
        if not total:
            return None
        parts = [f"{n} {why}" for n, why in (
            (self.failed, "failed after retries"), (self.dropped, "queue full"),
            (self.limited, "over the rate limit"), (self.unsent, f"unsent: {self.sender.unavailable}"),
            (self.at_exit, "not delivered when the watcher stopped")) if n]
        error = f"; last error: {self.last_error}" if self.last_error else ""
        return f"{self.where}: {_plural(total, 'alert')} dropped ({', '.join(parts)}{error})"


class Dispatcher:
    """All sinks of a session. ``offer`` is the Monitor's listener."""

    def __init__(self, sinks: Iterable[SinkConfig], note: Note,
                 senders: dict[str, Sender] | None = None) -> None:
        self._note = note
        sinks = tuple(sinks)
        hidden = secret_names(sinks)
        self.workers = [SinkWorker(s, (senders or {}).get(s.name) or build_sender(s, hidden), note)
                        for s in sinks]
        self._closed = False

    def start(self) -> Dispatcher:
        for worker in self.workers:
            if worker.sender.unavailable:
                self._note(f"{worker.where}: off: {worker.sender.unavailable}")
            worker.start()
        return self

    def offer(self, alert: Alert) -> None:
        for worker in self.workers:
            worker.offer(alert)

    def recall(self, alert: Alert) -> None:
        """An alert sent before a restart (the history holds it): not sent again,
        but a sender that keeps episodes (PagerDuty) learns it, so the resolve
        that comes after the restart closes the incident its firing opened."""
        for worker in self.workers:
            recall = getattr(worker.sender, "recall", None)
            if recall is not None and worker.sink.wants(alert.detector, alert.severity, alert.state):
                recall(alert)

    def dropped(self) -> dict[str, int]:
        """Per sink name, the alerts it will never deliver (for /metrics; exact)."""
        return {w.sink.name: w.dropped_total for w in self.workers}

    def close(self, timeout: float = 5.0) -> dict[str, int]:
        """Give what is pending a last chance within ``timeout``; say what was not delivered.

        Returns, per sink name, how many alerts it never delivered (given up
        on, cut off at the deadline, dropped, over the rate limit, or unsent),
        and says so in one line per sink that dropped any.
        """
        if self._closed:
            return {}
        self._closed = True
        deadline = time.monotonic() + max(0.0, timeout)
        for worker in self.workers:
            worker.begin_close(deadline)
        for worker in self.workers:
            # A send in flight is bounded by the deadline; a little grace lets
            # its answer land so that the count is exact.
            worker.thread.join(max(0.0, deadline - time.monotonic()) + 1.0)
        lost: dict[str, int] = {}
        for worker in self.workers:
            worker.count_at_exit()
            line = worker.dropped_line()
            if line:
                self._note(line)
                lost[worker.sink.name] = worker.dropped_total
        return lost
