"""memory_volatility: a GPU's memory stops being flat after warm-up.

Why turning points and not a rolling band: a rolling band (p95 - p5) is also
wide for the two shapes that must stay silent, the warm-up ramp and a single
step to a new level, and telling them apart needs a window scan per sample.
Swinging memory (a DFlash drafter whose batching broke allocates and frees
several GiB every few seconds) is memory that *turns around*: up by more
than the flat band, then down by more than the band, again and again. A
zigzag filter with the flat band as its hysteresis counts those turns in
O(1) per sample; leaving the flat level counts as the first turn, so a
step is one turn and a lone spike two, while the warm-up ramp comes before
arming and counts none. The
detector fires when ``min_turns`` turns fall within ``window_s``, and
resolves once memory has been flat for ``resolve_s``.

Warm-up, the flat band (which follows the run's own noise) and relaunches
are the shared ``memory.MemoryModel``'s: progress lines end the warm-up
(so the detector accepts them), and a drop to near zero while the job's
processes stay is a swing, not a relaunch.

Example: a square wave between 30 and 60 GiB with a 90 s period, after a
progress line, fires on its fourth turn.

>>> from dflash_watch.parsers.events import GpuSample, Progress
>>> det = MemoryVolatility()
>>> fired = []
>>> for i in range(400):
...     gib = 60 if (i // 45) % 2 == 0 else 30
...     fired += det.update(GpuSample(float(i), 0, gib << 30, 80 << 30))
...     if i == 10:
...         fired += det.update(Progress(float(i), "log:1", step=1))
>>> [(a.state, a.time) for a in fired]
[('firing', 180.0)]
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from functools import partial

from ..parsers.events import Event, GpuSample, Progress
from .base import Alert, Episode, Handler, StepCommit
from .config import DetectorConfig, fmt_bytes, fmt_clock, fmt_duration, fmt_gib
from .memory import ARMED, RELAUNCH, GpuPhase, MemoryDetector, MemoryModel

NAME = "memory_volatility"


class _Gpu:
    __slots__ = ("phase", "episode", "dir", "ext", "z_lo", "z_hi", "turns", "lo", "hi", "since", "source")

    def __init__(self, gpu: int, config: DetectorConfig, phase: GpuPhase) -> None:
        self.phase = phase
        self.episode = Episode(NAME, gpu=gpu)
        self.turns: deque[tuple[float, float]] = deque(maxlen=max(8, config.volatility_min_turns))
        self.reset(0.0)

    def reset(self, x: float) -> None:
        """Forget the zigzag: a new warm-up or a fresh start after arming."""
        self.dir = 0
        self.ext = x
        self.z_lo = self.z_hi = x
        self.turns.clear()
        self.lo = self.hi = x
        self.since: float | None = None


class MemoryVolatility(MemoryDetector):
    name = NAME
    # Progress feeds the shared memory model (warm-up over, a relaunch).
    accepts = (GpuSample, Progress)

    def __init__(self, config: DetectorConfig | None = None, memory: MemoryModel | None = None) -> None:
        super().__init__(config, memory)
        self._gpus: dict[int, _Gpu] = {}
        self._min_turns = self.config.volatility_min_turns
        self._window = self.config.volatility_window_s
        self._resolve_s = self.config.volatility_resolve_s

    def fast_routes(self) -> dict[type[Event], Handler]:
        return {Progress: self._on_progress}

    def _on_progress(self, p: Progress) -> list[Alert]:
        self.memory.progress(p)
        return []

    def quiet_steps(self, steps: Sequence[Progress], /) -> StepCommit:
        """Step lines only arm the memory model: never an alert, never a
        deadline (``base.StepCommit``)."""
        return partial(self.memory.progress_run, steps)

    def update(self, event: Event) -> list[Alert]:
        if type(event) is not GpuSample:
            if type(event) is Progress:
                self.memory.progress(event)
            return []
        phase = self.memory.observe(event)
        x = event.used_bytes
        if phase is None or x is None:  # (observe() is None without a reading)
            return []
        g = self._gpus.get(event.gpu)
        if g is None:
            g = self._gpus[event.gpu] = _Gpu(event.gpu, self.config, phase)
        t = event.time
        state = phase.state
        if not phase.armed:
            if state == RELAUNCH and g.episode.active:
                return g.episode.resolve(
                    t,
                    f"GPU {event.gpu} memory at {fmt_gib(x)}: the job restarted; watching its warm-up again",
                    event.source,
                    {"used_bytes": x, "reason": "relaunch"},
                )
            return []
        if state == ARMED:
            g.reset(x)
            return []

        # Zigzag with the flat band as hysteresis: a turn is confirmed when
        # memory moved back from its extreme by more than the band.
        band = phase.band
        d = g.dir
        if d > 0:
            if x > g.ext:
                g.ext = x
            elif g.ext - x > band:
                g.turns.append((t, g.ext))
                g.dir = -1
                g.ext = x
        elif d < 0:
            if x < g.ext:
                g.ext = x
            elif x - g.ext > band:
                g.turns.append((t, g.ext))
                g.dir = 1
                g.ext = x
        else:
            if x < g.z_lo:
                g.z_lo = x
            if x > g.z_hi:
                g.z_hi = x
            # Leaving the flat level counts as the first turn: the level was
            # an extreme too. A step is then one turn, a lone spike two.
            if x - g.z_lo > band:
                g.turns.append((t, g.z_lo))
                g.dir = 1
                g.ext = x
            elif g.z_hi - x > band:
                g.turns.append((t, g.z_hi))
                g.dir = -1
                g.ext = x

        ep = g.episode
        if ep.active:
            if x < g.lo:
                g.lo = x
            if x > g.hi:
                g.hi = x
            if phase.flat_run_s(t) >= self._resolve_s:
                return self._resolve(g, event, x)
            return []
        turns = g.turns
        n = self._min_turns
        if len(turns) >= n and t - turns[-n][0] <= self._window:
            return self._fire(g, event, x)
        return []

    def _fire(self, g: _Gpu, event: GpuSample, x: int) -> list[Alert]:
        t = event.time
        n = self._min_turns
        recent = [v for (tt, v) in g.turns if t - tt <= self._window]
        lo = min(min(recent), x)
        hi = max(max(recent), x)
        first_turn = g.turns[-n][0]
        flat_end = g.phase.flat_end
        since = flat_end if flat_end is not None and first_turn - flat_end <= self._window else first_turn
        g.lo, g.hi, g.since = lo, hi, since
        was = g.phase.was_flat(since)
        tz = self.config.tz
        msg = (
            f"GPU {event.gpu} memory swinging {lo / 2**30:.1f}-{hi / 2**30:.1f} GiB "
            f"(band {fmt_gib(hi - lo)}) since {fmt_clock(since, tz)}"
        )
        if was is not None:
            msg += f"; was flat at {fmt_gib(was[0])} +- {fmt_bytes(was[1])}"
        evidence = {
            "gpu": event.gpu,
            "low_bytes": lo,
            "high_bytes": hi,
            "band_bytes": hi - lo,
            "since": since,
            "turns": len(recent),
            "window_s": self._window,
            "flat_band_bytes": g.phase.band,
            "noise_band": g.phase.band > g.phase.band_floor,
            "was_flat_bytes": was[0] if was else None,
            "was_flat_spread_bytes": was[1] if was else None,
            "total_bytes": g.phase.total,
        }
        return g.episode.fire(t, "warning", msg, event.source, evidence)

    def _resolve(self, g: _Gpu, event: GpuSample, x: int) -> list[Alert]:
        t = event.time
        ph = g.phase
        level = 0.5 * (ph.run_lo + ph.run_hi)
        started = g.episode.since if g.episode.since is not None else t
        msg = (
            f"GPU {event.gpu} memory flat again at {fmt_gib(level)} +- {fmt_bytes(0.5 * (ph.run_hi - ph.run_lo))} "
            f"for {fmt_duration(ph.flat_run_s(t))}; it had swung {g.lo / 2**30:.1f}-{g.hi / 2**30:.1f} GiB "
            f"for {fmt_duration(t - started)}"
        )
        evidence = {"gpu": event.gpu, "level_bytes": level, "low_bytes": g.lo, "high_bytes": g.hi}
        g.reset(x)
        return g.episode.resolve(t, msg, event.source, evidence)
