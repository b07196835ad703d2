"""Xid errors from NVML's event set, waited on beside the sampler.

``nvmlEventSetWait`` blocks, so it lives in its own daemon thread and never
inside the sampler's tick: the sampler's one-second schedule stays exact
while an Xid arrives whenever the driver raises it. The wait is bounded
(``WAIT_MS``) so that ``stop()`` ends the thread within about a second.

Codes meet the samples in an ``XidInbox``: the thread (and the kernel log
reader) put (gpu, code) in, and the next ``sample()`` of that GPU takes the
codes since its previous sample into ``GpuSample.xid``. The same gpu+code
from the second source within ``DEDUPE_S`` is one Xid, not two.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from types import ModuleType

WAIT_MS = 500  # one bounded wait; stop() waits at most about this long
DEDUPE_S = 5.0  # NVML's and the kernel's copy of one Xid arrive this close
_TIMEOUT = 10  # NVML_ERROR_TIMEOUT: the wait ended without an event
_XID_CRITICAL = 8  # nvmlEventTypeXidCriticalError


class XidInbox:
    """Codes per GPU since that GPU's last sample; safe across threads."""

    def __init__(self, dedupe_s: float = DEDUPE_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._pending: dict[int, list[int]] = {}
        self._recent: list[tuple[float, int, int, str]] = []  # (when, gpu, code, source)
        self._dedupe_s = dedupe_s
        self._clock = clock
        self.received = 0
        self.duplicates = 0

    def put(self, gpu: int, code: int, source: str = "nvml") -> bool:
        """Add one Xid; False when the other source already reported it."""
        now = self._clock()
        with self._lock:
            horizon = now - self._dedupe_s
            self._recent = [r for r in self._recent if r[0] >= horizon]
            for _, g, c, src in self._recent:
                if g == gpu and c == code and src != source:
                    self.duplicates += 1
                    return False
            self._recent.append((now, gpu, code, source))
            self._pending.setdefault(gpu, []).append(code)
            self.received += 1
            return True

    def take(self, gpu: int) -> tuple[int, ...] | None:
        """The codes since the last take for ``gpu`` (None: none)."""
        if not self._pending:  # the usual case, without the lock
            return None
        with self._lock:
            codes = self._pending.pop(gpu, None)
        return tuple(codes) if codes else None


class XidEventThread:
    """Registers every GPU for critical Xid events and waits on them.

    ``start()`` returns False (and says why once through ``on_notice``) when
    the driver supports no event on any watched GPU; then there is no thread.
    """

    def __init__(
        self,
        nv: ModuleType,
        gpus: Sequence[tuple[int, object]],
        inbox: XidInbox,
        on_notice: Callable[[str], None] | None = None,
        wait_ms: int = WAIT_MS,
    ) -> None:
        self._nv = nv
        self._gpus = list(gpus)
        self._inbox = inbox
        self._on_notice = on_notice
        self._wait_ms = wait_ms
        self._stop = threading.Event()
        self._set: object | None = None
        self._thread: threading.Thread | None = None
        self.registered: list[int] = []
        self.events = 0

    def start(self) -> bool:
        nv = self._nv
        try:
            self._set = nv.nvmlEventSetCreate()
        except Exception as err:
            self._notice(f"NVML Xid events not available ({_why(err)}); Xid errors come from samples only")
            return False
        for index, handle in self._gpus:
            try:
                nv.nvmlDeviceRegisterEvents(handle, _XID_CRITICAL, self._set)
            except Exception:
                continue  # NotSupported on this card: the others still count
            self.registered.append(index)
        if not self.registered:
            self._free()
            self._notice("NVML Xid events are not supported by this driver/GPU; no Xid event wait")
            return False
        self._thread = threading.Thread(target=self._run, name="nvml-xid", daemon=True)
        self._thread.start()
        return True

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread.is_alive() and thread is not threading.current_thread():
            thread.join(timeout)
        if thread is None or not thread.is_alive():
            self._free()

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        nv = self._nv
        # _v2 (drivers >= 450) also reports the MIG instance; older bindings lack it.
        wait = getattr(nv, "nvmlEventSetWait_v2", None) or nv.nvmlEventSetWait
        failures = 0
        while not self._stop.is_set():
            try:
                data = wait(self._set, self._wait_ms)
            except nv.NVMLError as err:
                if getattr(err, "value", None) == _TIMEOUT:
                    failures = 0
                    continue
                failures += 1
                if failures >= 5:  # the set is broken (driver gone): stop quietly
                    self._notice(f"NVML Xid event wait failed ({_why(err)}); Xid events stopped")
                    return
                self._stop.wait(0.2)
                continue
            except Exception as err:  # a binding bug must not spin
                self._notice(f"NVML Xid event wait failed ({_why(err)}); Xid events stopped")
                return
            failures = 0
            if int(getattr(data, "eventType", 0)) & _XID_CRITICAL:
                index = self._index_of(data.device)
                if index is not None:
                    self.events += 1
                    self._inbox.put(index, int(data.eventData), "nvml")

    def _index_of(self, device: object) -> int | None:
        try:
            index = int(self._nv.nvmlDeviceGetIndex(device))
        except Exception:
            return None
        return index if index in self.registered else None

    def _free(self) -> None:
        event_set, self._set = self._set, None
        if event_set is not None:
            try:
                self._nv.nvmlEventSetFree(event_set)
            except Exception:
                pass

    def _notice(self, message: str) -> None:
        if self._on_notice is not None:
            try:
                self._on_notice(message)
            except Exception:
                pass


def _why(err: BaseException) -> str:
    return str(err).strip() or type(err).__name__
