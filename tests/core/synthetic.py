"""Labelled synthetic streams for the detector budgets (deterministic per seed).

Each generator returns a ``Scenario``: time-ordered events plus ``Label``s
saying which detector should fire, for which GPU, from when (the moment the
fault starts in the data) to when (it ends). Tests measure detection delays
as ``alert.time - label.start`` and count every alert no label explains.

The shapes imitate a DFlash run on 8 GPUs: memory ramps to a working level
at start and after each relaunch (with a pause at idle in between), then
sits flat with a few MiB of noise; throughput is ~21.5 Ktok/s +-5% with a
report every 5 s and checkpoint saves that cut it for 80 s every 30 min.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from dflash_watch.parsers.events import Crash, Event, Frame, GpuProcess, GpuSample, ProcessExit, Progress, Recompile

T0 = 1764410400.0  # 2025-11-29 10:00:00 UTC
GIB = float(1 << 30)
MIB = float(1 << 20)


@dataclass(frozen=True, slots=True)
class Label:
    detector: str
    start: float
    end: float | None = None
    gpu: int | None = None


@dataclass(slots=True)
class Scenario:
    events: list[Event] = field(default_factory=list)
    labels: list[Label] = field(default_factory=list)

    def __add__(self, other: Scenario) -> Scenario:
        return merge(self, other)


def merge(*scenarios: Scenario) -> Scenario:
    events = list(heapq.merge(*(s.events for s in scenarios), key=lambda e: e.time))
    labels = [label for s in scenarios for label in s.labels]
    return Scenario(events, labels)


# -- GPU memory -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemProfile:
    """One GPU's memory over a run; times are seconds after the stream start."""

    level_gib: float = 63.5
    total_gib: float = 80.0
    idle_gib: float = 0.45
    start_s: float = 0.0  # the job appears (idle before)
    ramp_s: float = 150.0  # warm-up: idle -> level, in uneven steps
    noise_mib: float = 6.0
    # Swinging (broken batching): from swing_start_s, every half period a new
    # value in [swing_low_gib, level].
    swing_start_s: float | None = None
    swing_end_s: float | None = None
    swing_low_gib: float = 41.2
    swing_period_s: float = 6.0
    # One step to a new flat level.
    step_at_s: float | None = None
    step_gib: float = 0.0
    # A steady climb.
    leak_start_s: float | None = None
    leak_end_s: float | None = None
    leak_gib_per_h: float = 0.0
    leak_staircase_mib: float = 0.0  # >0: the leak comes in allocator-sized steps
    # Relaunches: memory falls to idle at each time, stays there down_s, ramps again.
    relaunch_at_s: tuple[float, ...] = ()
    relaunch_down_s: float = 40.0
    # Exact square waves instead of random swings (swing_* times and levels).
    square: bool = False
    # A bounded sawtooth from leak_start_s: up sawtooth_gib over each
    # period, then back at once (net zero over every period).
    sawtooth_period_s: float | None = None
    sawtooth_gib: float = 0.0
    # The job's pid on this GPU (samples then list its processes); each
    # relaunch is a new pid, and idle stretches of a relaunch list none.
    pid: int | None = None


def _ramp(u: np.ndarray, level: float, idle: float) -> np.ndarray:
    """An uneven, non-decreasing warm-up: weights, then optimizer, then compile."""
    steps = np.array([0.0, 0.35, 0.55, 0.8, 0.93, 1.0])
    idx = np.clip((u * (len(steps) - 1)).astype(int), 0, len(steps) - 1)
    return idle + (level - idle) * steps[idx]


def memory_series(p: MemProfile, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Used GiB at relative times t (seconds)."""
    level = np.full_like(t, p.level_gib)
    if p.step_at_s is not None:
        level = level + np.where(t >= p.step_at_s, p.step_gib, 0.0)
    if p.leak_start_s is not None:
        end = p.leak_end_s if p.leak_end_s is not None else np.inf
        grown = np.clip(np.minimum(t, end) - p.leak_start_s, 0.0, None) * p.leak_gib_per_h / 3600.0
        if p.sawtooth_period_s is not None:
            grown = grown * 0.0
        if p.leak_staircase_mib > 0:
            q = p.leak_staircase_mib / 1024.0
            grown = np.floor(grown / q) * q
        level = level + grown
    if p.sawtooth_period_s is not None and p.leak_start_s is not None:
        u = np.clip(t - p.leak_start_s, 0.0, None) / p.sawtooth_period_s
        level = level + np.where(t >= p.leak_start_s, p.sawtooth_gib * (u - np.floor(u)), 0.0)
    y = level.copy()
    if p.swing_start_s is not None:
        end = p.swing_end_s if p.swing_end_s is not None else np.inf
        half = p.swing_period_s / 2.0
        k = np.floor((t - p.swing_start_s) / half).astype(np.int64)
        draws = rng.uniform(p.swing_low_gib, p.level_gib, size=max(int(k.max()), 0) + 2 if k.size else 1)
        # Alternate low and high halves so that memory really turns around.
        kk = np.clip(k, 0, None)
        lowhalf = (kk % 2) == 1
        mid = 0.5 * (p.swing_low_gib + p.level_gib)
        swung = np.where(lowhalf, np.minimum(draws[kk], mid), np.maximum(draws[kk], mid))
        if p.square:
            swung = np.where(lowhalf, p.swing_low_gib, level)
        on = (t >= p.swing_start_s) & (t < end)
        y = np.where(on, swung, y)
    # Warm-up ramps: the first start and every relaunch.
    starts = [(p.start_s, None)] + [(r + p.relaunch_down_s, r) for r in p.relaunch_at_s]
    for begin, down in starts:
        if down is not None:
            y = np.where((t >= down) & (t < begin), p.idle_gib, y)
        in_ramp = (t >= begin) & (t < begin + p.ramp_s)
        u = (t - begin) / p.ramp_s
        y = np.where(in_ramp, _ramp(u, level, p.idle_gib), y)
    y = np.where(t < p.start_s, p.idle_gib, y)
    y = y + rng.normal(0.0, p.noise_mib / 1024.0, size=t.shape)
    return np.clip(y, 0.0, p.total_gib)


def gpu_samples(
    profiles: dict[int, MemProfile],
    duration_s: float,
    *,
    seed: int = 0,
    t0: float = T0,
    interval_s: float = 1.0,
    none_every: int = 0,
) -> Scenario:
    """Samples of every GPU at each tick, GPU order within a tick."""
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, duration_s, interval_s)
    cols = []
    for gpu, p in sorted(profiles.items()):
        used = (memory_series(p, t, rng) * GIB).astype(np.int64)
        cols.append((gpu, used.tolist(), int(p.total_gib * GIB)))
    times = (t0 + t).tolist()
    procs: dict[int, list] = {}
    for gpu, p in profiles.items():
        if p.pid is None:
            continue
        k = np.searchsorted(np.asarray(p.relaunch_at_s, dtype=float), t, side="right")
        down = np.zeros_like(t, dtype=bool)
        for r in p.relaunch_at_s:
            down |= (t >= r) & (t < r + p.relaunch_down_s)
        procs[gpu] = [() if d else (GpuProcess(p.pid + int(n), 0, "python", job=True),) for n, d in zip(k, down)]
    events: list[Event] = []
    append = events.append
    for i, ti in enumerate(times):
        for gpu, used, total in cols:
            if none_every and i % none_every == gpu % none_every:
                append(GpuSample(ti, gpu, None, None))
            elif gpu in procs:
                append(GpuSample(ti, gpu, used[i], total, processes=procs[gpu][i]))
            else:
                append(GpuSample(ti, gpu, used[i], total))
    labels = []
    for gpu, p in profiles.items():
        if p.swing_start_s is not None:
            end = t0 + p.swing_end_s if p.swing_end_s is not None else None
            labels.append(Label("memory_volatility", t0 + p.swing_start_s, end, gpu))
        if p.leak_start_s is not None and p.leak_gib_per_h > 0 and p.sawtooth_period_s is None:
            end = t0 + p.leak_end_s if p.leak_end_s is not None else None
            labels.append(Label("memory_growth", t0 + p.leak_start_s, end, gpu))
    return Scenario(events, labels)


# -- progress / throughput --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProgressProfile:
    tokens_per_s: float = 21500.0
    noise: float = 0.05  # uniform +-
    interval_s: float = 5.0
    start_s: float = 30.0
    warmup_reports: int = 3  # the first reports after a (re)start are slow
    warmup_factor: float = 0.3
    checkpoint_every_s: float | None = None
    checkpoint_dip_s: float = 80.0
    checkpoint_factor: float = 0.25
    # (start_s, duration_s, factor): throughput x factor in that span.
    dips: tuple[tuple[float, float, float], ...] = ()
    # Relaunches: no reports for gap_s, then the step goes back and warms up.
    relaunch_at_s: tuple[float, ...] = ()
    relaunch_gap_s: float = 100.0
    stop_s: float | None = None  # no report after this (a stall or a crash)
    ranks: int = 1  # every rank prints each step
    step_seconds: float | None = None
    label_dips: bool = True  # dips >= 90 s are labelled throughput_drop
    # The unit the run logs its rate in ("tok/s", "it/s", "samples/s"):
    # other units go to Progress.rate / rate_unit, tokens_per_s stays None.
    unit: str = "tok/s"
    # (from_s, unit, rate): the run logs in another unit, at that rate, from
    # then on (a relaunch with another logger).
    unit_changes: tuple[tuple[float, str, float], ...] = ()
    # Ranks' stamps jitter uniformly by +- this and arrive shuffled.
    rank_jitter_s: float = 0.0
    # Events in stamp order, as a replay merges per-rank files: with fast
    # steps and jitter, a step's first copy can come after the next step's.
    merged_by_time: bool = False
    # (at_s, delta_s): from at_s on, the stamps are off by delta_s (a clock
    # jump: NTP, DST); times in the profile stay true time.
    clock_jumps: tuple[tuple[float, float], ...] = ()
    # Each epoch is a tqdm bar of this many steps (1..epoch_steps/epoch_steps).
    epoch_steps: int | None = None
    epoch_pause_s: float = 0.0  # silence after each epoch's last step (an eval)
    elapsed: bool = False  # carry tqdm's elapsed counter (true seconds since start_s)
    # The first slow_start_s after start_s run at this factor (a slow start).
    slow_start_s: float = 0.0
    slow_start_factor: float = 1.0


def progress(p: ProgressProfile, duration_s: float, *, seed: int = 0, t0: float = T0, source: str = "train.log") -> Scenario:
    rng = np.random.default_rng(seed + 1000)
    events: list[Event] = []
    labels: list[Label] = []
    for start, dur, _ in p.dips:
        if p.label_dips and dur >= 90.0:
            labels.append(Label("throughput_drop", t0 + start, t0 + start + dur))
    t = p.start_s
    step = 0
    since_start = 0
    relaunches = list(p.relaunch_at_s)
    line = 1
    while t < duration_s:
        if p.stop_s is not None and t >= p.stop_s:
            break
        if relaunches and t >= relaunches[0]:
            r = relaunches.pop(0)
            t = r + p.relaunch_gap_s
            step = max(0, step - 40)
            since_start = 0
            continue
        factor = 1.0 + rng.uniform(-p.noise, p.noise)
        if since_start < p.warmup_reports:
            factor *= p.warmup_factor
        if p.checkpoint_every_s:
            phase = t % p.checkpoint_every_s
            if t >= p.checkpoint_every_s and phase < p.checkpoint_dip_s:
                factor *= p.checkpoint_factor
        for start, dur, f in p.dips:
            if start <= t < start + dur:
                factor *= f
        if t < p.start_s + p.slow_start_s:
            factor *= p.slow_start_factor
        step += 1
        since_start += 1
        unit, rate = p.unit, p.tokens_per_s
        for at, u, r in p.unit_changes:
            if t >= at:
                unit, rate = u, r
        tps = rate * factor
        shift = sum(d for at, d in p.clock_jumps if t >= at)
        if p.epoch_steps:
            shown, total = (step - 1) % p.epoch_steps + 1, p.epoch_steps
        else:
            shown, total = step, 100000
        order = rng.permutation(p.ranks) if p.rank_jitter_s else range(p.ranks)
        for rank in order:
            rank = int(rank)
            jitter = rng.uniform(-p.rank_jitter_s, p.rank_jitter_s) if p.rank_jitter_s else 0.01 * rank
            value = tps * (1.0 + 0.002 * rank)
            events.append(
                Progress(
                    time=t0 + t + shift + jitter,
                    source=f"{source}:{line}",
                    step=shown,
                    total_steps=total,
                    tokens_per_s=value if unit == "tok/s" else None,
                    loss=2.0,
                    rank=rank if p.ranks > 1 else None,
                    step_seconds=p.step_seconds,
                    rate=None if unit == "tok/s" else value,
                    rate_unit=None if unit == "tok/s" else unit,
                    elapsed_s=(t - p.start_s) if p.elapsed else None,
                )
            )
            line += 1
        t += p.interval_s
        if p.epoch_steps and p.epoch_pause_s and shown == p.epoch_steps:
            t += p.epoch_pause_s
    if p.merged_by_time:
        events.sort(key=lambda e: e.time)
    # Otherwise jittered or jumped stamps stay in the log's order, which is the truth.
    return Scenario(events, labels)


# -- crashes, recompiles, exits -------------------------------------------------------


def oom_crash(time: float, ranks: Sequence[int] = tuple(range(8)), spread_s: float = 0.4) -> Scenario:
    """The same CUDA OOM traceback from several ranks, a few ms apart."""
    frames = (
        Frame("/workspace/train.py", 412, "train_step", "loss = model(batch)"),
        Frame("/usr/lib/python3/site-packages/torch/nn/modules/module.py", 1532, "_call_impl"),
        Frame("/workspace/dflash/drafter.py", 88, "forward", "h = self.proj(x)"),
    )
    events: list[Event] = []
    for i, rank in enumerate(ranks):
        msg = (
            "CUDA out of memory. Tried to allocate 160.00 MiB. GPU %d has a total capacity of 79.15 GiB "
            "of which 95.50 MiB is free." % rank
        )
        events.append(
            Crash(
                time=time + spread_s * i / max(1, len(ranks)),
                source=f"train.log:{5000 + 30 * i}",
                detector="crash",
                kind="cuda_oom",
                exc_type="torch.OutOfMemoryError",
                message=msg,
                signature="torch.OutOfMemoryError@drafter.py:forward<module.py:_call_impl<train.py:train_step",
                rank=rank,
                frames=frames,
                text=("Traceback (most recent call last):", '  File "/workspace/train.py", line 412, in train_step', msg),
            )
        )
    return Scenario(events, [Label("crash", time)])


def recompiles(
    times: Sequence[float], function: str = "forward", *, hit_limit: bool = False, fatal: bool = False, limit: int | None = None
) -> Scenario:
    events = [
        Recompile(
            time=t,
            source=f"train.log:{700 + i}",
            function=function,
            reason="tensor 'x' size mismatch at index 1. expected 2048, actual 1792",
            limit=limit,
            hit_limit=hit_limit,
            fatal=fatal,
        )
        for i, t in enumerate(times)
    ]
    return Scenario(events, [])


def process_exit(time: float, kind: str, code: int | None = None, signal: int | None = None) -> Scenario:
    return Scenario([ProcessExit(time=time, kind=kind, code=code, signal=signal)], [])


# -- the healthy reference run -------------------------------------------------------


def healthy_run(hours: float = 6.0, gpus: int = 8, *, seed: int = 0, relaunch_at_s: float | None = None) -> Scenario:
    """Many hours of a good run: flat memory, noisy throughput, checkpoint
    dips, and one relaunch in the middle. No detector may fire on it."""
    duration = hours * 3600.0
    relaunch = relaunch_at_s if relaunch_at_s is not None else round(duration / 2 / 5) * 5 + 2.5
    levels = [63.5, 63.2, 62.8, 63.9, 61.7, 63.4, 62.2, 63.0]
    profiles = {
        g: MemProfile(level_gib=levels[g % len(levels)], relaunch_at_s=(relaunch,), relaunch_down_s=40.0) for g in range(gpus)
    }
    mem = gpu_samples(profiles, duration, seed=seed)
    prog = progress(
        ProgressProfile(
            checkpoint_every_s=1800.0,
            checkpoint_dip_s=80.0,
            relaunch_at_s=(relaunch,),
            relaunch_gap_s=100.0,
        ),
        duration,
        seed=seed,
    )
    return merge(mem, prog)


def with_profile(p: MemProfile, **changes: object) -> MemProfile:
    return replace(p, **changes)


# -- driving detectors as the Monitor does ------------------------------------------


def drive(detectors, events, *, until: float | None = None):
    """Feed events in order, inserting a Tick at each deadline that falls
    before the next event (as Monitor.advance_to does); returns the alerts.
    ``until`` ticks the deadlines up to that time after the last event."""
    from dflash_watch.parsers.events import Tick

    alerts = []
    update = detectors.update
    deadline = detectors.deadline

    def advance(t: float) -> None:
        last = None
        while True:
            d = deadline()
            if d is None or d >= t or (last is not None and d <= last):
                return
            last = d
            alerts.extend(update(Tick(d)))

    for e in events:
        advance(e.time)
        alerts.extend(update(e))
    if until is not None:
        advance(until)
        alerts.extend(update(Tick(until)))
    return alerts
