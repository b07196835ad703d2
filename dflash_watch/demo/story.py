"""The demo's story: what a simulated DFlash run does at each simulated second.

Pure: no clock, no files. Everything is a function of simulated seconds since
launch (``t``) plus seeded random streams, so the simulator can play it at any
speed (or instantly) and get the same bytes. The simulator only renders this
model into log text and GPU sample lines.

The first launch (incarnation 1) plays warm-up, healthy training, broken
length bucketing (padding, memory churn on the drafter GPUs, throughput
collapse) and then the FX-tracing crash of the drafter thread. A relaunch
(incarnation 2+) resumes from the last checkpoint and stays healthy, which is
what the dashboard's relaunch button should be seen to fix.
"""

from __future__ import annotations

import enum
import math
import random
from dataclasses import dataclass

GIB = 1024**3
MIB = 1024**2
N_GPUS = 8
TARGET_GPUS = (0, 1, 2, 3, 4)
DRAFTER_GPUS = (5, 6, 7)
TOTAL_BYTES = 96 * GIB  # 103079215104: a 96 GiB card


class Phase(str, enum.Enum):  # noqa: UP042 - str() of a member is part of the demo's text
    WARMUP = "warmup"
    HEALTHY = "healthy"
    BROKEN = "broken"
    CRASHED = "crashed"


def _smoothstep(x: float) -> float:
    x = min(1.0, max(0.0, x))
    return x * x * (3.0 - 2.0 * x)


@dataclass(frozen=True, slots=True)
class Story:
    """Durations (simulated seconds) and the levels of the healthy/broken run."""

    warmup_s: float = 180.0
    healthy_s: float = 660.0
    broken_s: float = 600.0
    load_done_s: float = 45.0  # weights on the GPUs
    first_step_s: float = 95.0  # torch.compile done, the first step ends
    break_ramp_s: float = 60.0  # how long the collapse takes once bucketing is off
    healthy_tokens_per_s: float = 22_600.0
    broken_tokens_per_s: float = 4_300.0
    throughput_noise: float = 0.045  # uniform +-fraction per step line
    healthy_pad_eff: float = 0.93
    broken_pad_eff: float = 0.45
    tokens_per_step: int = 65_536
    broken_step_s: float = 4.6
    total_steps: int = 50_000
    save_every: int = 200
    eval_every: int = 150
    save_s: float = 9.0
    eval_s: float = 12.0
    eval_batches: int = 40
    peak_lr: float = 2.0e-4
    lr_warmup_steps: int = 100
    idle_bytes: int = 530 * MIB  # what NVML reports on a GPU nobody uses
    context_bytes: int = 510 * MIB  # a CUDA context
    target_weights_bytes: int = 33 * GIB
    target_level_bytes: int = 71 * GIB
    drafter_weights_bytes: int = 21 * GIB
    drafter_level_bytes: int = 63 * GIB
    flat_noise_bytes: int = 20 * MIB  # uniform +-: a band of at most 40 MiB
    swing_low_bytes: int = -5 * GIB - 512 * MIB
    swing_high_bytes: int = 3 * GIB + 512 * MIB
    swing_hold_s: tuple[float, float] = (2.0, 5.0)

    @property
    def healthy_at(self) -> float:
        """Seconds after launch when warm-up ends (every launch)."""
        return self.warmup_s

    @property
    def broken_at(self) -> float:
        """Seconds after launch when length bucketing breaks (incarnation 1)."""
        return self.warmup_s + self.healthy_s

    @property
    def crash_at(self) -> float:
        """Seconds after launch when the drafter thread dies (incarnation 1)."""
        return self.broken_at + self.broken_s

    def phase_at(self, t: float, incarnation: int = 1) -> Phase:
        if t < self.warmup_s:
            return Phase.WARMUP
        if incarnation > 1 or t < self.broken_at:
            return Phase.HEALTHY
        if t < self.crash_at:
            return Phase.BROKEN
        return Phase.CRASHED

    def breakage(self, t: float, incarnation: int = 1) -> float:
        """0 while batching works, rising to 1 within ``break_ramp_s``."""
        if incarnation > 1 or t < self.broken_at:
            return 0.0
        return min(1.0, (t - self.broken_at) / self.break_ramp_s)

    def tokens_per_s_at(self, t: float, incarnation: int = 1) -> float:
        """Noise-free throughput: the climb after compile, the plateau, the collapse."""
        if t < self.first_step_s:
            return 0.0
        climb = _smoothstep((t - self.first_step_s) / (self.warmup_s - 5.0 - self.first_step_s))
        healthy = self.healthy_tokens_per_s * (0.22 + 0.78 * climb)
        if incarnation > 1 or t < self.broken_at:
            return healthy
        # Exponential collapse, as the padding and allocator churn bite: most
        # of the fall in the first ~20 s, exactly at the floor after the ramp.
        tau = self.break_ramp_s / 5.0
        floor = math.exp(-self.break_ramp_s / tau)
        decay = max(0.0, (math.exp(-(t - self.broken_at) / tau) - floor) / (1.0 - floor))
        return self.broken_tokens_per_s + (healthy - self.broken_tokens_per_s) * decay

    def pad_eff_at(self, t: float, incarnation: int = 1) -> float:
        b = self.breakage(t, incarnation)
        return self.healthy_pad_eff + (self.broken_pad_eff - self.healthy_pad_eff) * b

    def step_seconds_at(self, t: float, incarnation: int = 1) -> float:
        healthy = self.tokens_per_step / self.healthy_tokens_per_s
        tps = self.tokens_per_s_at(t, incarnation)
        if t < self.warmup_s:
            return self.tokens_per_step / max(tps, 1.0)
        b = self.breakage(t, incarnation)
        return healthy + (self.broken_step_s - healthy) * b

    def memory_level(self, gpu: int, t: float) -> int:
        """Noise-free used bytes of one GPU: idle, context, weights, activations."""
        if t < 3.0:
            return self.idle_bytes
        target = gpu in TARGET_GPUS
        weights = self.target_weights_bytes if target else self.drafter_weights_bytes
        level = self.target_level_bytes if target else self.drafter_level_bytes
        base = self.idle_bytes + self.context_bytes
        loaded = _smoothstep((t - 8.0) / (self.load_done_s - 8.0))
        working = _smoothstep((t - 60.0) / 90.0)
        return int(base + (weights - base) * loaded + (level - weights) * working)


STORY = Story()


def phase_at(sim_seconds: float, incarnation: int = 1) -> Phase:
    """The phase of the default story ``sim_seconds`` after launch."""
    return STORY.phase_at(sim_seconds, incarnation)


@dataclass(frozen=True, slots=True)
class Step:
    """One optimizer step as the progress line reports it."""

    index: int
    end: float  # seconds after launch
    tokens_per_s: float
    loss: float
    acc_len: float
    accept: float
    pad_eff: float
    lr: float
    eta_s: float
    evaluate: bool  # an eval pass runs right after this step
    save: bool  # then a checkpoint is saved


@dataclass(frozen=True, slots=True)
class Pause:
    """Time the training loop spends off the GPUs' hot path."""

    kind: str  # "eval" or "save"
    start: float
    end: float
    step: int


class Schedule:
    """The steps of one launch, generated lazily in time order.

    Lazily because a relaunch is healthy forever; in time order with one
    seeded stream so that the content never depends on who asks first (the log
    renderer or the GPU model asking whether a checkpoint is being written).
    """

    def __init__(self, story: Story, seed: int, incarnation: int, first_step: int = 1) -> None:
        self.story = story
        self.incarnation = incarnation
        self.steps: list[Step] = []
        self.pauses: list[Pause] = []
        self._rng = random.Random(f"steps:{seed}:{incarnation}")
        self._next_index = first_step
        self._clock = story.first_step_s
        self._end = story.crash_at if incarnation == 1 else math.inf
        self._save_pending = 0.0  # seconds of checkpoint write the next step absorbs

    def _extend(self) -> bool:
        s, rng = self.story, self._rng
        index = self._next_index
        t0 = self._clock
        step_s = s.step_seconds_at(t0, self.incarnation)
        end = t0 + step_s
        if not self.steps:
            end = s.first_step_s  # compile time is the first step
        if end >= self._end:
            return False
        paused, self._save_pending = self._save_pending, 0.0
        tps = s.tokens_per_s_at(end, self.incarnation)
        tps *= 1.0 + rng.uniform(-s.throughput_noise, s.throughput_noise)
        if paused:
            # The checkpoint is written inside the timed loop: its step shows the dip.
            tps = s.tokens_per_step / (step_s + paused)
        b = s.breakage(end, self.incarnation)
        pad_eff = s.pad_eff_at(end, self.incarnation) + rng.uniform(-0.01, 0.01) * (1 + 3 * b)
        loss = 2.25 + 4.1 * math.exp(-index / 60.0) + rng.gauss(0.0, 0.04 + 0.12 * b)
        acc_len = 1.0 + 2.45 * (1.0 - math.exp(-index / 80.0)) + rng.gauss(0.0, 0.03) - 0.5 * b
        accept = min(0.99, max(0.05, (acc_len - 1.0) / 3.45 + rng.gauss(0.0, 0.01)))
        if index <= s.lr_warmup_steps:
            lr = s.peak_lr * index / s.lr_warmup_steps
        else:
            lr = s.peak_lr * 0.5 * (1.0 + math.cos(math.pi * index / s.total_steps))
        step = Step(
            index=index,
            end=end,
            tokens_per_s=tps,
            loss=loss,
            acc_len=acc_len,
            accept=accept,
            pad_eff=min(0.99, pad_eff),
            lr=lr,
            eta_s=(s.total_steps - index) * step_s,
            evaluate=index % s.eval_every == 0,
            save=index % s.save_every == 0,
        )
        self.steps.append(step)
        clock = end
        if step.evaluate:
            self.pauses.append(Pause("eval", clock, clock + s.eval_s, index))
            clock += s.eval_s
        if step.save:
            self.pauses.append(Pause("save", clock, clock + s.save_s, index))
            clock += s.save_s
            self._save_pending = s.save_s
        self._clock = clock
        self._next_index = index + 1
        return True

    def until(self, t: float) -> None:
        """Make sure every step ending at or before ``t`` exists."""
        while self._clock <= t and self._extend():
            pass

    def __iter__(self):
        i = 0
        while True:
            while i >= len(self.steps):
                if not self._extend():
                    return
            yield self.steps[i]
            i += 1

    def activity_at(self, t: float) -> str:
        """``load``, ``compile``, ``train``, ``eval``, ``save`` or ``dead``."""
        if self.incarnation == 1 and t >= self.story.crash_at:
            return "dead"
        if t < self.story.load_done_s:
            return "load"
        if t < self.story.first_step_s:
            return "compile"
        self.until(t)
        for p in reversed(self.pauses[-4:]):
            if p.start <= t < p.end:
                return p.kind
        return "train"


class GpuModel:
    """Used bytes and utilisation of each GPU, one sample per call, in time order.

    Targets and healthy drafters are flat (uniform noise well under 50 MiB).
    Once bucketing breaks, each drafter GPU jumps to a new random level every
    few seconds, as each differently padded batch makes the caching allocator
    grow and release, scaled in over the break ramp.
    """

    def __init__(self, story: Story, schedule: Schedule, seed: int) -> None:
        self.story = story
        self.schedule = schedule
        self._rngs = [random.Random(f"gpu:{seed}:{schedule.incarnation}:{g}") for g in range(N_GPUS)]
        self._swing = [0.0] * N_GPUS
        self._swing_until = [0.0] * N_GPUS

    def sample(self, gpu: int, t: float) -> tuple[int, float]:
        s, rng = self.story, self._rngs[gpu]
        used = s.memory_level(gpu, t)
        if t >= 3.0:
            used += int(rng.uniform(-s.flat_noise_bytes, s.flat_noise_bytes))
        b = s.breakage(t, self.schedule.incarnation)
        if gpu in DRAFTER_GPUS and b > 0.0:
            if t >= self._swing_until[gpu]:
                self._swing[gpu] = rng.uniform(s.swing_low_bytes, s.swing_high_bytes)
                self._swing_until[gpu] = t + rng.uniform(*s.swing_hold_s)
            used += int(b * self._swing[gpu])
        used = min(used, s.idle_bytes + TOTAL_BYTES - GIB) // MIB * MIB
        return used, self._util(gpu, t, b, rng)

    def _util(self, gpu: int, t: float, b: float, rng: random.Random) -> float:
        activity = self.schedule.activity_at(t)
        if activity == "load":
            u = 0.0 if t < 3.0 else rng.uniform(0.02, 0.18)
        elif activity == "compile":
            u = rng.choice((0.0, 0.05, rng.uniform(0.3, 0.85)))
        elif activity == "save":
            u = rng.uniform(0.0, 0.04)
        elif activity == "eval":
            u = rng.uniform(0.55, 0.8)
        elif activity == "dead":
            u = 0.0
        elif gpu in TARGET_GPUS:
            u = (1 - b) * rng.uniform(0.95, 0.99) + b * rng.uniform(0.28, 0.45)
        else:
            u = (1 - b) * rng.uniform(0.9, 0.97) + b * rng.uniform(0.45, 0.95)
        return round(u, 2)
