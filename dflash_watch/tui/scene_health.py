"""The ``health`` scene's additions to a healthy run: a NaN loss, a slow rank, a failing GPU.

Fed through the same real parsers and detectors as the other scenes
(``scenes.build``): the loss, straggler and gpu_health alerts on screen
are the ones the detectors raise for this data. Seeded and in fixed UTC
times, so the picture is the same every time.

- every GPU reports temperature and power; GPU 6 heats up in the second
  half, throttles (``thermal``) and at 80% of the run logs Xid 48 (a
  double-bit ECC error) with one uncorrected ECC error;
- three drafter ranks (0-2 on GPUs 5-7) write probe lines with their
  step split; rank 2 computes 1.6 s a step where the others compute 1.0 s
  and wait 0.6 s for it: the straggler;
- from 70% of the run on, the step lines log ``loss nan``.
"""

from __future__ import annotations

import random
from dataclasses import replace

from dflash_watch.parsers.events import GpuSample, ProbeSample

HOT_GPU = 6
SLOW_RANK = 2
RANK_GPUS = (5, 6, 7)
POWER_LIMIT_W = 700.0


def nan_step(k: int, span: int) -> bool:
    """Whether the step logged at second ``k`` of ``span`` has a NaN loss: every one from 70% on
    (a run that diverged stays NaN)."""
    return k >= int(span * 0.7)


def with_health(sample: GpuSample, k: int, span: int, rng: random.Random) -> GpuSample:
    """``sample`` with the health reads a driver gives: temperature, power, throttle, Xid."""
    gpu = sample.gpu
    temp = 62.0 + gpu + rng.random() * 2
    power = 560.0 + rng.random() * 40
    throttle: tuple[str, ...] = ()
    xid: tuple[int, ...] | None = None
    ecc = 0
    if gpu == HOT_GPU and k >= span // 2:
        heat = min(1.0, (k - span // 2) / max(1, span // 4))
        temp = 70.0 + 22.0 * heat + rng.random()
        if heat >= 0.6:
            throttle = ("thermal",)
            power = 430.0 + rng.random() * 20
        if k >= int(span * 0.8):
            ecc = 1
            if k == int(span * 0.8):
                xid = (48,)
    return replace(sample, temp_c=round(temp, 1), power_w=round(power, 1), power_limit_w=POWER_LIMIT_W,
                   throttle=throttle, xid=xid, ecc_uncorrected=ecc)


def rank_probes(t: float, step: int, loss: float) -> list[ProbeSample]:
    """One probe line per drafter rank for ``step``: rank 2 computes longest, the others wait on it."""
    out = []
    for rank in range(len(RANK_GPUS)):
        compute = 1.6 if rank == SLOW_RANK else 1.0
        out.append(ProbeSample(t, rank=rank, step=step, step_seconds=1.65, compute_seconds=compute,
                               wait_seconds=round(1.65 - compute, 2), loss=loss, source="dflash-probe"))
    return out
