"""The per-GPU memory model the three memory detectors share.

A training job's memory rises to its working level at start (weights,
optimizer state, compile), then stays flat while the caching allocator
reuses its blocks. Only after that warm-up does "not flat" or "climbing"
mean something, and a relaunch (the job's processes go, memory falls to
idle, a new job ramps again) is a new warm-up. ``GpuPhase`` tracks exactly
that per GPU in O(1) per sample; ``MemoryModel`` holds one per GPU and is
fed each sample once however many detectors read it, so memory_volatility,
memory_growth and memory_pressure agree on what phase a GPU is in.

What the model decides, and why:

* **Warm-up ends** once memory stayed flat for ``mem_settle_s`` at a working
  level, once training logs progress (steps being logged means the job is
  past start-up: a GPU that swings from its first minutes must not wait
  ``mem_warmup_max_s``), or ``mem_warmup_max_s`` after the job appeared.
* **Flat** is a band: the larger of a fixed floor (``mem_flat_band_gib``,
  ``mem_flat_band_frac`` of the card) and ``mem_noise_band_factor`` times
  the run's own sample-to-sample noise, so a small card with a noisy
  driver reading is flat while a drafter's swings of GiB are not.
* **A relaunch** is the job's processes changing. Where samples list the
  processes (NVML), the pids tell: memory at idle while the same pids hold
  the GPU is a swing. Without a process list, a stretch at idle is a
  relaunch only if no progress line came during it (or memory alone is
  watched, no progress at all): a drafter whose memory drops to near zero
  between steps keeps logging steps.

Example: a GPU that swings between 20 and 60 GiB is armed as soon as a
progress line comes, long before the 15-minute warm-up cap.

>>> from dflash_watch.parsers.events import GpuSample, Progress
>>> m = MemoryModel(DetectorConfig())
>>> g = m.observe(GpuSample(0.0, 0, int(20 * GIB), int(80 * GIB)))
>>> (g.armed, g.state)
(False, 0)
>>> m.progress(Progress(1.0, "log:1", step=1))
>>> g = m.observe(GpuSample(2.0, 0, int(60 * GIB), int(80 * GIB)))
>>> (g.armed, g.state == ARMED)
(True, True)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from operator import is_not

from ..parsers.events import Event, GpuSample, Progress
from .base import DetectorBase
from .config import GIB, DetectorConfig

# What GpuPhase.state says about the last sample besides "nothing new".
ARMED = 1
RELAUNCH = 2

# The 25th percentile of |N(0, 2 sigma^2)| is 0.4506 sigma: a robust sigma of
# the noise from the differences of successive samples, which stays the
# noise's while swings (a change every few samples) move only a few of them.
_Q25_TO_SIGMA = 1.0 / 0.4506
_NOISE_KEPT = 128
_NOISE_EVERY = 32  # samples between re-estimates of the noise band


class GpuPhase:
    """Warm-up, flat runs, noise and relaunches of one GPU's memory.

    A *flat run* is the longest recent stretch whose values all fit in the
    flat band; it restarts at the first value that leaves the band.
    ``state`` is what the last sample changed: ``ARMED``, ``RELAUNCH`` or 0.
    """

    __slots__ = (
        "band",
        "band_floor",
        "noise_factor",
        "idle",
        "settle_s",
        "warmup_max_s",
        "relaunch_idle_s",
        "armed",
        "job_start",
        "job_progress",
        "run_lo",
        "run_hi",
        "run_start",
        "flat_level",
        "flat_spread",
        "flat_end",
        "total",
        "state",
        "sample",
        "last_x",
        "diffs",
        "since_noise",
        "pids",
        "idle_since",
        "idle_progress",
    )

    def __init__(self, config: DetectorConfig, total_bytes: float) -> None:
        self.total = total_bytes
        self.band_floor = max(config.mem_flat_band_gib * GIB, config.mem_flat_band_frac * total_bytes)
        self.band = self.band_floor
        self.noise_factor = config.mem_noise_band_factor
        self.idle = config.mem_idle_gib * GIB
        self.settle_s = config.mem_settle_s
        self.warmup_max_s = config.mem_warmup_max_s
        self.relaunch_idle_s = config.mem_relaunch_idle_s
        self.armed = False
        self.job_start: float | None = None
        self.job_progress = 0  # the model's progress count when the job appeared
        self.run_lo = self.run_hi = 0.0
        self.run_start: float | None = None
        # The last flat stretch that lasted at least settle_s: "was flat at".
        self.flat_level: float | None = None
        self.flat_spread = 0.0
        self.flat_end: float | None = None
        self.state = 0
        self.sample: GpuSample | None = None  # the sample ``state`` is about
        self.last_x: float | None = None
        self.diffs: deque[float] = deque(maxlen=_NOISE_KEPT)
        self.since_noise = 0
        self.pids: frozenset[int] = frozenset()  # the job's pids at a working level
        self.idle_since: float | None = None
        self.idle_progress = 0

    # -- the pieces of observe ------------------------------------------------
    def _noise(self, x: float) -> None:
        last = self.last_x
        self.last_x = x
        if last is None or self.noise_factor <= 0:
            return
        self.diffs.append(abs(x - last))
        self.since_noise += 1
        if self.since_noise >= _NOISE_EVERY:
            self.since_noise = 0
            ordered = sorted(self.diffs)
            sigma = ordered[len(ordered) // 4] * _Q25_TO_SIGMA
            band = self.noise_factor * sigma
            self.band = band if band > self.band_floor else self.band_floor

    def _flat(self, t: float, x: float) -> None:
        run_start = self.run_start
        if run_start is None:
            self.run_lo = self.run_hi = x
            self.run_start = t
            return
        lo = self.run_lo if x >= self.run_lo else x
        hi = self.run_hi if x <= self.run_hi else x
        if hi - lo <= self.band:
            self.run_lo = lo
            self.run_hi = hi
            return
        if t - run_start >= self.settle_s and self.run_lo > self.idle:
            self.flat_level = 0.5 * (self.run_lo + self.run_hi)
            self.flat_spread = 0.5 * (self.run_hi - self.run_lo)
            self.flat_end = t
        self.run_lo = self.run_hi = x
        self.run_start = t

    def _relaunch(self) -> int:
        was = self.armed
        self.armed = False
        self.job_start = None
        self.pids = frozenset()
        return RELAUNCH if was else 0

    def observe(self, t: float, x: float, pids: frozenset[int] | None, progress: int) -> int:
        """Feed one sample; returns ARMED, RELAUNCH or 0.

        ``pids`` is the job's processes on this GPU (None: not sampled),
        ``progress`` the count of progress lines the model has seen.
        """
        self._noise(x)
        self._flat(t, x)
        if x <= self.idle:
            if self.idle_since is None:
                self.idle_since = t
                self.idle_progress = progress
            if self.job_start is None and not self.armed:
                return 0
            if self.pids:
                # The pids tell: the job's processes are gone, or still there.
                if pids is not None and not (pids & self.pids):
                    return self._relaunch()
                return 0
            if progress == 0:
                return self._relaunch()  # memory alone: idle is a relaunch
            if progress == self.idle_progress and t - self.idle_since >= self.relaunch_idle_s:
                return self._relaunch()
            return 0
        # A working level.
        out = 0
        if self.idle_since is not None:
            if (
                (self.job_start is not None or self.armed)
                and not self.pids
                and progress == self.idle_progress
            ):
                out = self._relaunch()  # no step came while it sat at idle
            self.idle_since = None
        if pids:
            if self.pids and not (pids & self.pids):
                out = self._relaunch()  # other processes: a new job
            self.pids = pids
        if self.armed:
            return out
        if self.job_start is None:
            self.job_start = t
            self.job_progress = progress
        if out:
            return out  # the new job's warm-up starts here
        if (
            t - self.run_start >= self.settle_s  # type: ignore[operator]
            or t - self.job_start >= self.warmup_max_s
            or progress > self.job_progress
        ):
            self.armed = True
            return ARMED
        return out

    def flat_run_s(self, t: float) -> float:
        return 0.0 if self.run_start is None else t - self.run_start

    def was_flat(self, t: float) -> tuple[float, float] | None:
        """(level, spread) of the current long flat run, else the last one."""
        if self.run_start is not None and t - self.run_start >= self.settle_s and self.run_lo > self.idle:
            return 0.5 * (self.run_lo + self.run_hi), 0.5 * (self.run_hi - self.run_lo)
        if self.flat_level is None:
            return None
        return self.flat_level, self.flat_spread


def job_pids(sample: GpuSample) -> frozenset[int] | None:
    """The job's pids in a sample: those marked ``job``, else all; None unsampled."""
    procs = sample.processes
    if procs is None:
        return None
    mine = frozenset(p.pid for p in procs if p.job)
    return mine or frozenset(p.pid for p in procs)


class MemoryModel:
    """One ``GpuPhase`` per GPU, fed each sample once.

    Detectors that share a model (``build_detectors`` gives the three memory
    detectors one) each call ``observe`` with the same sample; only the
    first call does the work, the others read its result. A detector built
    alone makes a model of its own.
    """

    __slots__ = ("config", "gpus", "progress_seen", "_last_progress")

    def __init__(self, config: DetectorConfig | None = None) -> None:
        self.config = config or DetectorConfig()
        self.gpus: dict[int, GpuPhase] = {}
        self.progress_seen = 0
        self._last_progress: Progress | None = None

    def progress(self, event: Progress) -> None:
        """A progress line: training is logging steps (arms, tells relaunches)."""
        if event is not self._last_progress:
            self._last_progress = event
            self.progress_seen += 1

    def progress_run(self, events: Sequence[Progress]) -> None:
        """``progress`` of each of ``events`` in turn (a run of step lines),
        each compared with the one before it in C."""
        if events:
            self.progress_seen += sum(map(is_not, events, [self._last_progress, *events[:-1]]))
            self._last_progress = events[-1]

    def observe(self, sample: GpuSample) -> GpuPhase | None:
        """The GPU's phase after ``sample`` (its ``state`` says what changed)."""
        x = sample.used_bytes
        if x is None:
            return None
        g = self.gpus.get(sample.gpu)
        if g is None:
            g = self.gpus[sample.gpu] = GpuPhase(self.config, gpu_total(x, sample.total_bytes))
        elif g.sample is sample:
            return g
        g.sample = sample
        g.state = g.observe(sample.time, x, job_pids(sample), self.progress_seen)
        return g


def gpu_total(used: float, total: float | None) -> float:
    """A missing total must not turn every ratio into a crash."""
    return float(total) if total else max(float(used), 1.0)


class MemoryDetector(DetectorBase):
    """What the three memory detectors share: one config, one per-GPU
    ``MemoryModel`` (``build_detectors`` hands the same one to all three, so
    each sample is worked out once), GPU samples in, and no deadline.
    Built alone, a detector gets a model of its own."""

    accepts: tuple[type[Event], ...] = (GpuSample,)
    timed = False

    def __init__(self, config: DetectorConfig | None = None, memory: MemoryModel | None = None) -> None:
        self.config = config or DetectorConfig()
        self.memory = memory or MemoryModel(self.config)
