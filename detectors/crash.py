"""crash and fx_tracing: a fatal traceback or error, one alert per crash.

Design of the rank dedupe: eight ranks of a torchrun job print the same
traceback within a second or two. The alert fires on the FIRST copy, at
once, stamped with that traceback's time (its last line): holding it back
to count the copies would need a tick after the end of the data, and a
replay of a log that ends with the crash (the usual case) would lose its
most important alert. Later copies with the same signature within
``crash_dedupe_s`` of the first (or the same exception type and message up
to its numbers: interleaved ranks garble signatures) are swallowed into the episode record,
which keeps the ranks and the count: ``episodes()`` returns them for the
Monitor and the TUI ("on 8 ranks"). The alert's own evidence says what was
known when it fired (one rank, count 1).

One instance watches one detector name (``crash`` or ``fx_tracing``).
"""

from __future__ import annotations

import re
from collections import OrderedDict, deque
from dataclasses import dataclass

from parsers.events import Crash, Event

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
    __slots__ = ("first_time", "last_time", "ranks", "count", "alert")

    def __init__(self, first_time: float, alert: Alert) -> None:
        self.first_time = first_time
        self.last_time = first_time
        self.ranks: list[int] = []
        self.count = 0
        self.alert = alert

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
    accepts = (Crash,)
    timed = False

    def __init__(self, config: DetectorConfig | None = None, name: str = "crash") -> None:
        self.config = config or DetectorConfig()
        self.name = name
        self._open: OrderedDict[str, _Record] = OrderedDict()
        self._past: deque[tuple[str, str, _Record]] = deque(maxlen=32)

    def deadline(self) -> float | None:
        return None

    def episodes(self) -> list[CrashEpisode]:
        """The recent crashes, oldest first, with every rank seen so far."""
        return [rec.snapshot(self.name, kind, sig) for kind, sig, rec in self._past]

    def update(self, event: Event) -> list[Alert]:
        if not isinstance(event, Crash) or event.detector != self.name:
            return []
        t = event.time
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
            return []
        alert = self._alert(event, sig)
        rec = _Record(t, alert)
        rec.add(event)
        self._open[sig] = rec
        self._open[alias] = rec
        while len(self._open) > 256:
            self._open.popitem(last=False)
        self._past.append((event.kind, sig, rec))
        return [alert]

    def _alert(self, c: Crash, sig: str) -> Alert:
        cfg = self.config
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
            "ranks": [c.rank] if c.rank is not None else [],
            "count": 1,
            "frames": frames,
            "traceback": "\n".join(c.text[-cfg.crash_traceback_lines :])[:8000],
            "thread": c.thread,
            "remedy": remedy or None,
        }
        return Alert(
            time=c.time,
            detector=self.name,
            state="firing",
            severity="critical",
            message=message,
            source=c.source,
            gpu=None,
            kind=c.kind if self.name == "crash" else None,
            evidence=evidence,
        )
