"""crash and fx_tracing: a fatal traceback or error, one alert per crash.

Design of the rank dedupe: eight ranks of a torchrun job print the same
traceback within a second or two. The first copy opens an episode; the
alert is held for ``crash_hold_s`` of data time (a deadline, so a live tick
or a replay tick releases it) and then sent once, stamped with the FIRST
copy's time (the traceback's last line), with every rank and the count
seen so far in its evidence. At the end of the data ``flush()`` sends what
is still held, so a log that ends with the crash (the usual case) keeps its
most important alert. Copies that arrive later, within ``crash_dedupe_s``
of the first, only update the episode record (``episodes()``, for the TUI's
"on 8 ranks"). A copy is the same signature, or the same exception type and
message up to its numbers: interleaved ranks garble signatures.

One instance watches one detector name (``crash`` or ``fx_tracing``).
"""

from __future__ import annotations

import re
from collections import OrderedDict, deque
from dataclasses import dataclass

from parsers.events import Crash, Event, Tick

from .base import Alert
from .config import DetectorConfig

KIND_LABELS = {
    "cuda_oom": "CUDA out of memory",
    "nccl_timeout": "NCCL timeout",
    "missing_module": "missing Python module",
    "cuda_error": "CUDA error",
    "compile_error": "torch.compile failed",
    "killed": "training killed from outside",
    "exception": "",
}

_REMEDY = None


def _remedy(detector: str, kind: str | None, cause: str | None) -> str:
    """parsers.remedies is optional: a crash alert must never fail on it."""
    global _REMEDY
    if _REMEDY is None:
        try:
            from parsers.remedies import remedy as fn
        except Exception:
            fn = False
        _REMEDY = fn
    if not _REMEDY:
        return ""
    try:
        return _REMEDY(detector, kind, cause) or ""
    except Exception:
        return ""


@dataclass(frozen=True, slots=True)
class CrashEpisode:
    """One crash as seen across ranks: what ``episodes()`` returns."""

    detector: str
    kind: str
    signature: str
    first_time: float
    last_time: float
    ranks: tuple[int, ...]
    count: int
    alert: Alert


class _Record:
    __slots__ = ("first_time", "last_time", "ranks", "count", "alert", "crash", "sent")

    def __init__(self, first_time: float, crash: Crash) -> None:
        self.first_time = first_time
        self.last_time = first_time
        self.ranks: list[int] = []
        self.count = 0
        self.crash = crash
        self.alert: Alert | None = None
        self.sent = False

    def add(self, c: Crash) -> None:
        self.count += 1
        self.last_time = max(self.last_time, c.time)
        if c.rank is not None and c.rank not in self.ranks and len(self.ranks) < 1024:
            self.ranks.append(c.rank)

    def snapshot(self, detector: str, kind: str, signature: str) -> CrashEpisode:
        return CrashEpisode(
            detector, kind, signature, self.first_time, self.last_time, tuple(sorted(self.ranks)), self.count, self.alert
        )


def signature_of(c: Crash) -> str:
    return c.signature or f"{c.exc_type}:{c.message[:120]}"


_DIGITS = re.compile(r"\d+")


def message_key(c: Crash) -> str:
    """A second notion of "the same crash": ranks that print at once
    interleave their frames, so one crash can reach us under several
    signatures. The same exception type with the same message, up to the
    numbers in it (the rank's GPU, its free bytes), within the window, is a
    copy too."""
    exc = c.exc_type.rsplit(".", 1)[-1]
    return f"msg|{c.detector}|{c.kind}|{exc}|{_DIGITS.sub('#', ' '.join(c.message.split()))[:160]}"


def describe(c: Crash, detector: str) -> str:
    """One human line: what happened, where, in the log's own words."""
    where = f" on rank {c.rank}" if c.rank is not None else ""
    text = " ".join(c.message.split())
    if len(text) > 240:
        text = text[:237] + "..."
    if detector == "fx_tracing":
        head = f"FX symbolic tracing collided with torch.compile{where}: {c.exc_type}: {text}"
    elif c.kind == "cuda_oom":
        body = text
        for prefix in ("CUDA out of memory. ", "CUDA out of memory.", "CUDA out of memory"):
            if body.startswith(prefix):
                body = body[len(prefix) :].lstrip(" :")
                break
        if body[:1].isupper():
            body = body[0].lower() + body[1:]
        head = f"CUDA out of memory{where}: {body}" if body else f"CUDA out of memory{where}"
    elif c.kind == "killed":
        cause = f" ({c.cause.replace('_', ' ')})" if c.cause else ""
        head = f"training killed from outside{cause}{where}: {text}"
    else:
        label = KIND_LABELS.get(c.kind, "")
        head = f"{label}{where}: {c.exc_type}: {text}" if label else f"{c.exc_type}{where}: {text}"
    if c.frames:
        f = c.frames[-1]
        head += f" (in {f.function}, {f.file.rsplit('/', 1)[-1]}:{f.line})"
    return head


class CrashDetector:
    accepts = (Crash, Tick)

    def __init__(self, config: DetectorConfig | None = None, name: str = "crash") -> None:
        self.config = config or DetectorConfig()
        self.name = name
        self._open: OrderedDict[str, _Record] = OrderedDict()
        self._past: deque[tuple[str, str, _Record]] = deque(maxlen=32)
        self._held: list[tuple[str, _Record]] = []

    def deadline(self) -> float | None:
        if not self._held:
            return None
        return self._held[0][1].first_time + self.config.crash_hold_s

    def episodes(self) -> list[CrashEpisode]:
        """The recent crashes, oldest first, with every rank seen so far."""
        return [rec.snapshot(self.name, kind, sig) for kind, sig, rec in self._past if rec.alert is not None]

    def flush(self) -> list[Alert]:
        """The data ended: send every held alert now."""
        return self._release(float("inf"))

    def _release(self, now: float) -> list[Alert]:
        out: list[Alert] = []
        hold = self.config.crash_hold_s
        while self._held and now >= self._held[0][1].first_time + hold:
            sig, rec = self._held.pop(0)
            rec.alert = self._alert(rec, sig)
            rec.sent = True
            out.append(rec.alert)
        return out

    def update(self, event: Event) -> list[Alert]:
        if isinstance(event, Tick):
            return self._release(event.time) if self._held else []
        if not isinstance(event, Crash) or event.detector != self.name:
            return []
        t = event.time
        out = self._release(t) if self._held else []
        window = self.config.crash_dedupe_s
        while self._open:
            sig, rec = next(iter(self._open.items()))
            if t - rec.first_time <= window:
                break
            self._open.popitem(last=False)
        sig = signature_of(event)
        alias = message_key(event)
        rec = self._open.get(sig) or self._open.get(alias)
        if rec is not None:
            rec.add(event)
            return out
        rec = _Record(t, event)
        rec.add(event)
        self._open[sig] = rec
        self._open[alias] = rec
        while len(self._open) > 256:
            self._open.popitem(last=False)
        self._past.append((event.kind, sig, rec))
        self._held.append((sig, rec))
        return out + self._release(t) if self.config.crash_hold_s <= 0 else out

    def _alert(self, rec: _Record, sig: str) -> Alert:
        cfg = self.config
        c = rec.crash
        message = describe(c, self.name)
        remedy = _remedy(self.name, c.kind, c.cause)
        if self.name == "fx_tracing" and remedy:
            message += "\n" + remedy
        frames = [f"{f.file}:{f.line} in {f.function}" for f in c.frames[-cfg.crash_frames :]]
        evidence = {
            "exc_type": c.exc_type,
            "message": c.message[:2000],
            "signature": sig,
            "kind": c.kind,
            "cause": c.cause,
            "ranks": sorted(rec.ranks),
            "count": rec.count,
            "frames": frames,
            "traceback": "\n".join(c.text[-cfg.crash_traceback_lines :])[:8000],
            "thread": c.thread,
            "remedy": remedy or None,
        }
        return Alert(
            time=c.time,
            detector=self.name,
            state="firing",
            # Ctrl-C is the user's own hand: worth a line, not a red alarm.
            severity="warning" if c.cause == "keyboard_interrupt" else "critical",
            message=message,
            source=c.source,
            gpu=None,
            kind=c.kind if self.name == "crash" else None,
            evidence=evidence,
        )
