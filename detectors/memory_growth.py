"""memory_growth: a GPU's memory climbs steadily (a leak), per GPU.

Samples are averaged into per-bucket means (a minute by default) so the
state is a bounded ring of ``window / bucket`` numbers whatever the run
length, and the per-sample cost is two additions. At each bucket boundary
the detector fits the last ``window_s``: a Theil-Sen slope (robust to one
odd minute), the least-squares R^2 (a leak is a line, swinging memory is
not), and the share of the rise carried by the largest bucket-to-bucket
jump (a single step to a new level carries all of it, a leak spreads it).
Only armed GPUs (warm-up over, see ``memory.GpuPhase``) are fitted, and a
relaunch empties the ring, so the warm-up ramp never looks like a leak.

A bounded sawtooth (memory climbs, then falls back to where it started,
net zero) is not a leak. A climb that falls back to its start resolves at
once, and the highest level memory reached before falling back becomes a
ceiling: a later climb that stays under it (the next tooth) never fires; a
leak breaks through it. A first tooth that climbs like a leak for longer
than the window is one until it falls back (nothing could tell it apart).

A rate below ``growth_rate_gib_per_h`` (less the tolerance) does not fire,
however clean: 1 GiB/h on an 80 GiB GPU is a day of headroom, and the
threshold is the user's to lower.
"""

from __future__ import annotations

from collections import deque

from ..parsers.events import Event, GpuSample, Progress
from .base import Alert, Episode
from .config import GIB, DetectorConfig, fmt_duration, fmt_gib
from .memory import RELAUNCH, GpuPhase, MemoryDetector, MemoryModel

NAME = "memory_growth"


class _Gpu:
    __slots__ = (
        "phase", "episode", "bucket", "acc", "n", "ring", "slope", "source", "peak", "ceiling", "base",
    )

    def __init__(self, gpu: int, phase: GpuPhase, size: int) -> None:
        self.phase = phase
        self.episode = Episode(NAME, gpu=gpu)
        self.bucket: int | None = None
        self.acc = 0.0
        self.n = 0
        self.ring: deque[tuple[float, float]] = deque(maxlen=size)
        self.slope = 0.0
        # The highest bucket since the last fall-back, and the highest one
        # before it: memory that went there and came back.
        self.peak: float | None = None
        self.ceiling: float | None = None
        self.base = 0.0  # where the open episode's climb started

    def clear(self) -> None:
        self.bucket = None
        self.acc = 0.0
        self.n = 0
        self.ring.clear()
        self.peak = self.ceiling = None

    def fell_back(self, mean: float) -> None:
        """Memory dropped from its peak: the peak is a ceiling it came back from."""
        if self.peak is not None and (self.ceiling is None or self.peak > self.ceiling):
            self.ceiling = self.peak
        self.peak = mean


class _Fit:
    __slots__ = ("slope", "r2", "step_share", "rise", "span")

    def __init__(self, slope: float, r2: float, step_share: float, rise: float, span: float) -> None:
        self.slope = slope  # bytes per second
        self.r2 = r2
        self.step_share = step_share
        self.rise = rise
        self.span = span


def fit(ring: deque[tuple[float, float]], robust_above: float = float("-inf")) -> _Fit:
    """Theil-Sen slope, least-squares R^2 and the largest jump's share.

    Plain Python on purpose: with ~20 points, numpy's per-call overhead
    costs more than the arithmetic. The O(n^2) Theil-Sen slope is only
    worth computing when the least-squares slope reaches ``robust_above``:
    flat memory (nearly always) costs one O(n) pass.
    """
    pts = list(ring)
    n = len(pts)
    tm = sum(p[0] for p in pts) / n
    ym = sum(p[1] for p in pts) / n
    sxx = sxy = syy = 0.0
    for t, y in pts:
        dt = t - tm
        dy = y - ym
        sxx += dt * dt
        sxy += dt * dy
        syy += dy * dy
    ls = sxy / sxx if sxx > 0 else 0.0
    r2 = (sxy * sxy / (sxx * syy)) if sxx > 0 and syy > 0 else 0.0
    up = 0.0
    biggest = 0.0
    for a in range(1, n):
        d = pts[a][1] - pts[a - 1][1]
        if d > 0:
            up += d
            if d > biggest:
                biggest = d
    rise = pts[-1][1] - pts[0][1]
    # The largest jump against the net rise: ~1/n for a leak, ~1 for a step.
    # A rise that is mostly undone by falls (swinging) scores above 1.
    share = biggest / rise if rise > 0 else 1.0
    if rise > 0 and up > 2.0 * rise:
        share = max(share, up / rise)
    slope = ls
    if ls >= robust_above:
        slopes = []
        for a in range(n - 1):
            ta, ya = pts[a]
            for b in range(a + 1, n):
                tb, yb = pts[b]
                if tb != ta:
                    slopes.append((yb - ya) / (tb - ta))
        slopes.sort()
        m = len(slopes)
        if m:
            slope = slopes[m // 2] if m % 2 else 0.5 * (slopes[m // 2 - 1] + slopes[m // 2])
    return _Fit(slope, r2, share, rise, pts[-1][0] - pts[0][0])


class MemoryGrowth(MemoryDetector):
    name = NAME
    # Progress reaches the shared model through memory_volatility; built
    # alone, this detector arms on flat memory or the warm-up cap.

    def __init__(self, config: DetectorConfig | None = None, memory: MemoryModel | None = None) -> None:
        super().__init__(config, memory)
        c = self.config
        self._bucket_s = c.growth_bucket_s
        self._size = max(4, int(round(c.growth_window_s / c.growth_bucket_s)))
        self._fire_rate = c.growth_rate_gib_per_h * (1.0 - c.growth_rate_tolerance) * GIB / 3600.0
        self._resolve_rate = c.growth_resolve_gib_per_h * GIB / 3600.0
        self._reset_jump = c.growth_reset_jump_gib * GIB
        self._gpus: dict[int, _Gpu] = {}

    def update(self, event: Event) -> list[Alert]:
        if type(event) is not GpuSample:
            if type(event) is Progress:
                self.memory.progress(event)  # when fed directly, not via a DetectorSet
            return []
        phase = self.memory.observe(event)
        x = event.used_bytes
        if phase is None or x is None:  # (observe() is None without a reading)
            return []
        g = self._gpus.get(event.gpu)
        if g is None:
            g = self._gpus[event.gpu] = _Gpu(event.gpu, phase, self._size)
        t = event.time
        state = phase.state
        if not phase.armed:
            if state == RELAUNCH:
                g.clear()
                if g.episode.active:
                    return g.episode.resolve(
                        t,
                        f"GPU {event.gpu} memory at {fmt_gib(x)}: the job restarted, the climb is gone",
                        event.source,
                        {"used_bytes": x, "reason": "relaunch"},
                    )
            return []
        b = int(t // self._bucket_s)
        if b == g.bucket:
            g.acc += x
            g.n += 1
            return []
        out: list[Alert] = []
        if g.bucket is not None and g.n:
            mean = g.acc / g.n
            ring = g.ring
            peak = g.peak if g.peak is not None else mean
            if g.episode.active and peak - mean > phase.band and mean <= g.base + 0.25 * (peak - g.base):
                # Back where the climb started: bounded, not a leak.
                g.fell_back(mean)
                ring.clear()
                ring.append(((g.bucket + 0.5) * self._bucket_s, mean))
                g.bucket = b
                g.acc = float(x)
                g.n = 1
                return self._fell_back(g, event, mean)
            if ring and abs(mean - ring[-1][1]) > self._reset_jump and not g.episode.active:
                # A jump this big in one bucket is a phase change (a warm-up
                # stair, an eval, a new level), never a leak's pace: the
                # climb has to prove itself on a fresh window.
                if mean < ring[-1][1]:
                    g.fell_back(mean)
                ring.clear()
            if g.peak is None or mean > g.peak:
                g.peak = mean
            ring.append(((g.bucket + 0.5) * self._bucket_s, mean))
            if len(ring) >= self._size:
                out = self._judge(g, event)
        g.bucket = b
        g.acc = float(x)
        g.n = 1
        return out

    def _fell_back(self, g: _Gpu, event: GpuSample, mean: float) -> list[Alert]:
        msg = (
            f"GPU {event.gpu} memory fell back to {fmt_gib(mean)} from {fmt_gib(g.ceiling or mean)}: "
            f"the climb was bounded (a sawtooth), not a leak"
        )
        evidence = {"gpu": event.gpu, "level_bytes": mean, "peak_bytes": g.ceiling, "reason": "fell back"}
        return g.episode.resolve(event.time, msg, event.source, evidence)

    def _judge(self, g: _Gpu, event: GpuSample) -> list[Alert]:
        ep = g.episode
        # Theil-Sen only where it can matter: a climb near the rate, or an
        # open episode deciding whether the climb stopped.
        f = fit(g.ring, -float("inf") if ep.active else 0.5 * self._fire_rate)
        g.slope = f.slope
        per_h = f.slope * 3600.0
        t = event.time
        if not ep.active:
            if f.slope >= self._fire_rate and f.r2 >= self.config.growth_min_r2 and f.step_share <= self.config.growth_max_step_share:
                level = g.ring[-1][1]
                if g.ceiling is not None and level <= g.ceiling + g.phase.band:
                    return []  # the next tooth of a sawtooth: memory was here and came back
                g.base = g.ring[0][1]
                free = g.phase.total - level
                hours_left = free / (f.slope * 3600.0) if f.slope > 0 else float("inf")
                msg = (
                    f"GPU {event.gpu} memory climbing {per_h / GIB:.1f} GiB/h over the last {fmt_duration(f.span)} "
                    f"({fmt_gib(g.ring[0][1])} -> {fmt_gib(level)}); full in about "
                    f"{fmt_duration(hours_left * 3600.0)} at this rate"
                )
                evidence = {
                    "gpu": event.gpu,
                    "slope_bytes_per_h": per_h,
                    "r2": round(f.r2, 4),
                    "rise_bytes": f.rise,
                    "window_s": f.span,
                    "level_bytes": level,
                    "total_bytes": g.phase.total,
                    "hours_to_full": hours_left,
                }
                return ep.fire(t, "warning", msg, event.source, evidence)
            return []
        if f.slope <= self._resolve_rate:
            msg = (
                f"GPU {event.gpu} memory stopped climbing: {per_h / GIB:+.2f} GiB/h over the last "
                f"{fmt_duration(f.span)}, at {fmt_gib(g.ring[-1][1])}"
            )
            return ep.resolve(t, msg, event.source, {"gpu": event.gpu, "slope_bytes_per_h": per_h})
        return []
