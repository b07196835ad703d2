"""What the three memory detectors share: the warm-up / flat-run tracker.

A training job's memory rises to its working level at start (weights,
optimizer state, compile), then stays flat while the caching allocator
reuses its blocks. Only after that warm-up does "not flat" or "climbing"
mean something, and a relaunch (memory falls to idle, then ramps again) is
a new warm-up. ``GpuPhase`` tracks exactly that per GPU in O(1) per sample,
so the detectors stay cheap at 8 GPUs x 1 Hz for days.

The three detectors themselves live in ``memory_volatility``,
``memory_growth`` and ``memory_pressure``.
"""

from __future__ import annotations

from .config import GIB, DetectorConfig

# What GpuPhase.observe reports besides "nothing new".
ARMED = 1
RELAUNCH = 2


class GpuPhase:
    """Warm-up, flat runs and relaunches of one GPU's memory.

    A *flat run* is the longest recent stretch whose values all fit in the
    flat band; it restarts at the first value that leaves the band. The
    phase is *armed* (warm-up over) once a flat run reached ``settle_s`` at
    a working level, or ``warmup_max_s`` after the job appeared.
    """

    __slots__ = (
        "band",
        "idle",
        "settle_s",
        "warmup_max_s",
        "armed",
        "job_start",
        "run_lo",
        "run_hi",
        "run_start",
        "flat_level",
        "flat_spread",
        "flat_end",
        "total",
    )

    def __init__(self, config: DetectorConfig, total_bytes: float) -> None:
        self.total = total_bytes
        self.band = max(config.mem_flat_band_gib * GIB, config.mem_flat_band_frac * total_bytes)
        self.idle = config.mem_idle_gib * GIB
        self.settle_s = config.mem_settle_s
        self.warmup_max_s = config.mem_warmup_max_s
        self.armed = False
        self.job_start: float | None = None
        self.run_lo = self.run_hi = 0.0
        self.run_start: float | None = None
        # The last flat stretch that lasted at least settle_s: "was flat at".
        self.flat_level: float | None = None
        self.flat_spread = 0.0
        self.flat_end: float | None = None

    def observe(self, t: float, x: float) -> int:
        """Feed one sample; returns ARMED, RELAUNCH or 0."""
        run_start = self.run_start
        if run_start is None:
            self.run_lo = self.run_hi = x
            self.run_start = t
        else:
            lo = self.run_lo if x >= self.run_lo else x
            hi = self.run_hi if x <= self.run_hi else x
            if hi - lo <= self.band:
                self.run_lo = lo
                self.run_hi = hi
            else:
                if t - run_start >= self.settle_s and self.run_lo > self.idle:
                    self.flat_level = 0.5 * (self.run_lo + self.run_hi)
                    self.flat_spread = 0.5 * (self.run_hi - self.run_lo)
                    self.flat_end = t
                self.run_lo = self.run_hi = x
                self.run_start = t
        if x <= self.idle:
            self.job_start = None
            if self.armed:
                self.armed = False
                return RELAUNCH
            return 0
        if self.armed:
            return 0
        if self.job_start is None:
            self.job_start = t
        if (t - self.run_start >= self.settle_s) or (t - self.job_start >= self.warmup_max_s):
            self.armed = True
            return ARMED
        return 0

    def flat_run_s(self, t: float) -> float:
        return 0.0 if self.run_start is None else t - self.run_start

    def was_flat(self, t: float) -> tuple[float, float] | None:
        """(level, spread) of the current long flat run, else the last one."""
        if self.run_start is not None and t - self.run_start >= self.settle_s and self.run_lo > self.idle:
            return 0.5 * (self.run_lo + self.run_hi), 0.5 * (self.run_hi - self.run_lo)
        if self.flat_level is None:
            return None
        return self.flat_level, self.flat_spread


def gpu_total(used: float, total: float | None) -> float:
    """A missing total must not turn every ratio into a crash."""
    return float(total) if total else max(float(used), 1.0)
