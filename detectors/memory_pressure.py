"""memory_pressure: a GPU is within a few percent of full, per GPU.

A job that sits at 97% for ten seconds is one fragmentation away from an
OOM; a brief touch (the allocator growing, then freeing) is not. Hysteresis
(fire at ``pressure_frac``, resolve below ``pressure_resolve_frac``) keeps a
job that hovers at the threshold from flapping. Pressure is judged on any
sample, warm-up or not (an OOM does not wait for the warm-up), but the
per-GPU bookkeeping is the shared ``memory.MemoryModel``'s, like the other
two memory detectors'.
"""

from __future__ import annotations

from typing import Any

from ..parsers.events import Event, GpuSample
from .base import Alert, Episode
from .config import DetectorConfig, fmt_bytes, fmt_duration, fmt_gib
from .memory import MemoryDetector, MemoryModel

NAME = "memory_pressure"


class _Gpu:
    __slots__ = ("episode", "above_since", "peak")

    def __init__(self, gpu: int) -> None:
        self.episode = Episode(NAME, gpu=gpu)
        self.above_since: float | None = None
        self.peak = 0.0


class MemoryPressure(MemoryDetector):
    name = NAME

    def __init__(self, config: DetectorConfig | None = None, memory: MemoryModel | None = None) -> None:
        super().__init__(config, memory)
        c = self.config
        self._hi = c.pressure_frac
        self._lo = c.pressure_resolve_frac
        self._sustain = c.pressure_sustain_s
        self._gpus: dict[int, _Gpu] = {}

    def update(self, event: Event) -> list[Alert]:
        if type(event) is not GpuSample:
            return []
        used = event.used_bytes
        total = event.total_bytes
        if used is None or not total:
            return []
        phase = self.memory.observe(event)
        g = self._gpus.get(event.gpu)
        if g is None:
            g = self._gpus[event.gpu] = _Gpu(event.gpu)
        frac = used / total
        t = event.time
        if g.episode.active:
            if frac > g.peak:
                g.peak = frac
            if frac < self._lo:
                g.above_since = None
                msg = (
                    f"GPU {event.gpu} memory back to {fmt_gib(used)} of {fmt_gib(total)} ({frac:.1%}); "
                    f"peak was {g.peak:.1%}"
                )
                return g.episode.resolve(t, msg, event.source, {"gpu": event.gpu, "used_bytes": used, "total_bytes": total, "fraction": frac})
            return []
        if frac < self._hi:
            g.above_since = None
            return []
        if g.above_since is None:
            g.above_since = t
        if t - g.above_since < self._sustain:
            return []
        g.peak = frac
        msg = (
            f"GPU {event.gpu} memory at {fmt_gib(used)} of {fmt_gib(total)} ({frac:.1%}) for "
            f"{fmt_duration(t - g.above_since)}; {fmt_bytes(total - used)} free: one larger batch from an OOM"
        )
        evidence: dict[str, Any] = {
            "gpu": event.gpu,
            "used_bytes": used,
            "total_bytes": total,
            "fraction": round(frac, 5),
            "free_bytes": total - used,
            "since": g.above_since,
            "threshold": self._hi,
            # Near full during the warm-up (compile's peak) reads differently
            # from near full in steady training: the shared model knows which.
            "warming_up": phase is not None and not phase.armed,
        }
        if event.processes:
            top = sorted(event.processes, key=lambda p: p.used_bytes, reverse=True)[:4]
            evidence["processes"] = [{"pid": p.pid, "used_bytes": p.used_bytes, "name": p.name} for p in top]
        return g.episode.fire(t, "warning", msg, event.source, evidence)
